"""What the parent process of `pipebench train` does: check, plan, start the workers and watch them.

`run_training` checks everything it can before any worker starts (the model built, the checkpoint --resume
continues, the data and whether it fits the model), chooses the strategy (`choose_strategy`: the one named,
or advise's recommendation), plans it as `pipebench run` plans a case (bench/cases/prepare.py's `prepare`,
from the cached profile: the same Plan the benchmark measured) and starts the workers through
bench/launch/spawn.py with loop.py as their module, or writes the job for torchrun to start (`write_job`).
It shows rank 0's progress (train_log.py) and on Ctrl-C asks the workers to checkpoint and leave. None of
this runs in a worker, which imports none of it.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pipebench.base.errors import UserError
from pipebench.bench.train.options import TrainOptions
from pipebench.bench.train.settings import TrainSettings
from pipebench.bench.train.train_log import Progress

__all__ = ["run_training", "choose_strategy", "write_job", "over_nodes"]


def over_nodes(machine, nodes: int):
    """The machine a job over `nodes` machines is planned for: every node's devices (and their caps),
    each node like this one."""
    if nodes <= 1:
        return machine
    from dataclasses import replace

    return replace(machine, devices=machine.devices * nodes, caps=machine.caps * nodes if machine.caps else None)


def choose_strategy(options: TrainOptions, machine, note: Callable[[str], None]) -> tuple[str, Any]:
    """The strategy to train with and its profile (None where none is needed): the one named, or under
    auto advise's recommendation from the (cached) profile (bench/predict/ranking.py pick_strategies), said
    in one line."""
    from pipebench.bench.strategies import get_strategy
    from pipebench.bench.cases.prepare import profile_model
    from pipebench.partition.profiling.cache import cache_enabled, cache_folder

    auto = options.strategy == "auto"
    if not auto and not get_strategy(options.strategy).needs_plan:
        return options.strategy, None
    folder = cache_folder() / "train-profiles" if cache_enabled() else Path(tempfile.mkdtemp(prefix="pipebench-profile-"))
    profiled = profile_model(options.model, options.batch, machine, folder, flavour=options.flavour,
                             overrides=options.overrides, training=options.training, note=note)
    if not auto:
        return options.strategy, profiled
    from pipebench.bench.predict.ranking import pick_strategies
    from pipebench.bench.report.advice_text import auto_choice

    advice, picked = pick_strategies(profiled.profiles, machine.request(options.training))
    if not picked:
        raise UserError(f"auto: no strategy is predicted to fit {options.model} at batch {options.batch} here")
    note(auto_choice(advice, picked, options.model, "training with", profiled.path))
    return picked[0], profiled


def run_training(options: TrainOptions, machine, note: Callable[[str], None] = print) -> dict:
    """Check, plan, launch and watch; returns rank 0's result (steps done, whether it was stopped)."""
    from pipebench.bench.train import checkpoint as ckpt

    dataset, described, saved = _check_data_and_model(options)  # before any worker
    known = {"batch": options.batch, "optimizer": options.training.optimizer, "precision": options.training.precision}
    if options.strategy != "auto":
        known["strategy"] = options.strategy
    total = options.steps or (options.epochs or 1) * (len(dataset) // options.batch)
    if options.resume:  # before the profile: what the workers would refuse (or, the precision, train on), refused now
        ckpt.check_resumed_settings(saved, known, options.save)
        length = f"--steps {options.steps}" if options.steps else f"--epochs {options.epochs or 1} ({total:,} steps)"
        ckpt.check_steps_left(options.save, saved["step"], total, length)
    name, profiled = choose_strategy(options, machine, note)
    if options.resume:  # auto's pick, known only now
        ckpt.check_resumed_settings(saved, {"strategy": name}, options.save)
    prepared = _prepare_job(options, machine, name, profiled)
    job, plan = prepared.job, prepared.plan
    where = f", {plan.micro_batches} micro-batches, stages {plan.balance}" if plan is not None and len(plan.stages) > 1 else ""
    note(f"train {options.model} with {name} on {job.processes} process(es){where}: {described}; {total:,} steps"
         + (f", checkpoint {options.save}" if options.save else ""))
    settings = _worker_settings(options)
    if options.write_job is not None:
        return write_job(job, settings, options, machine.devices // options.nodes, note)
    return _launch(job, settings, prepared.gpus, options, note)



def _check_data_and_model(options: TrainOptions) -> tuple[Any, str, dict]:
    """What can fail before any worker starts, checked now: the model built, the checkpoint --resume
    continues (its weights must fit the model), the data opened and fitting the model. Returns the
    dataset, its description, and the layout the checkpoint was saved in with its step ({} without
    --resume)."""
    from pipebench import models
    from pipebench.bench.train import checkpoint as ckpt
    from pipebench.bench.train.data import check_data_fits_model, open_dataset

    model = models.get_model(options.model, options.flavour, seed=options.seed, **options.overrides)
    saved: dict = {}
    if options.resume:
        record = ckpt.read_latest(options.save)
        ckpt.check_weights(ckpt.load_weights(options.save), model.module, options.save)
        saved = {**record.get("layout", {}), "step": record["step"]}
    dataset = open_dataset(options.data)
    described = check_data_fits_model(dataset, model, options.batch, 1, f"--data {options.data.label()}")
    del model
    return dataset, described, saved


def _prepare_job(options: TrainOptions, machine, name: str, profiled) -> Any:
    """The training planned as `pipebench run` plans a case (bench/cases/prepare.py prepare, from its
    profile) and its Job made; UserError where the strategy cannot train the model here (the batch not
    splitting over its replicas among the reasons: the Job refused it), or it is predicted not to fit. A
    profile kept only for this (the cache off) is removed."""
    from pipebench.bench.cases.case import CaseUnavailable, Case, overrides_key
    from pipebench.bench.cases.prepare import prepare
    case = Case(options.model, options.flavour, options.batch, name, overrides=overrides_key(options.overrides),
                training=options.training)
    try:
        prepared = prepare(case, machine, profiled, steps=1, warmup=0)
    except CaseUnavailable as exc:
        raise UserError(f"{name} cannot train {options.model} here: {exc}") from None
    if profiled is not None and profiled.path.parent.name.startswith("pipebench-profile-"):  # the cache is off
        import shutil

        shutil.rmtree(profiled.path.parent, ignore_errors=True)
    if prepared.job is None:
        raise UserError(f"{name}: {prepared.over_cap}")
    return prepared


def _worker_settings(options: TrainOptions) -> TrainSettings:
    """What every worker of bench/train/loop.py reads from train.json: the data, the length, the
    checkpoints and the log, with absolute paths (TrainOptions made them so)."""
    return TrainSettings(data=options.data, epochs=options.epochs or 1, steps=options.steps, lr=options.lr,
                         save=options.save, save_every=options.save_every, resume=options.resume, csv=options.csv,
                         loader_workers=options.loader_workers)


def write_job(job, settings: TrainSettings, options: TrainOptions, node_devices: int, note) -> dict:
    """The planned job and its training settings as files in `options.write_job`, and the command that
    starts them on each node: `pipebench.bench.train.loop` is an ordinary torchrun program, as the
    benchmark's worker is. Nobody watches its progress file there, so rank 0 prints the log lines."""
    from dataclasses import replace

    from pipebench.base.fileio.files import write_json
    from pipebench.hardware.cpu import threads_per_device

    nodes = options.nodes
    if job.processes % nodes:  # auto's pick, say, of one process
        raise UserError(f"--nodes {nodes}: {job.strategy} runs {job.processes} process(es), which do not "
                        f"spread evenly over {nodes} nodes; name a strategy with --strategy")
    per_node = job.processes // nodes
    if job.device_type == "cpu":  # each node's stand-in devices share its own cores
        job = replace(job, cpu_threads=threads_per_device(node_devices))
    folder = Path(options.write_job)
    folder.mkdir(parents=True, exist_ok=True)
    job.save(folder / "job.json")
    write_json(folder / "train.json", replace(settings, print_every=options.log_every).to_json())
    module = f"-m pipebench.bench.train.loop {folder / 'job.json'} {folder}"
    threads = f"OMP_NUM_THREADS={job.cpu_threads} " if job.device_type == "cpu" else ""
    if job.processes == 1:
        command = f"PYTHONSAFEPATH=1 {threads}python {module}"
    else:
        command = (f"PYTHONSAFEPATH=1 {threads}torchrun --nnodes {nodes} --nproc-per-node {per_node} "
                   f"--rdzv-backend c10d --rdzv-endpoint HOST:29500 {module}")
    note(f"wrote {folder / 'job.json'} and {folder / 'train.json'}; on each of the {nodes} node(s), with this "
         "folder at the same path (HOST: a node all reach):")
    note(f"  {command}")  # its own line: a note shows a newline as \\n (say escapes control characters)
    return {"written": str(folder), "command": command}


def _launch(job, settings: TrainSettings, gpus, options: TrainOptions, note) -> dict:
    """Start the workers, follow progress.jsonl until they end, pass a Ctrl-C on as a stop request."""
    from pipebench.bench.launch.spawn import collect_result, start_workers
    from pipebench.base.processes import kill_child
    from pipebench.base.fileio.files import write_json

    with tempfile.TemporaryDirectory(prefix="pipebench-train-") as tmp:
        out_dir = Path(tmp)
        write_json(out_dir / "train.json", settings.to_json())
        proc = start_workers(job, out_dir, out_dir, gpus, (), worker_module="pipebench.bench.train.loop")
        watcher = Progress(out_dir / "progress.jsonl", options.log_every, note)
        deadline = time.monotonic() + options.timeout
        stopping = None
        try:
            while proc.poll() is None:
                try:
                    watcher.poll()
                    time.sleep(0.2)
                    if time.monotonic() > deadline:
                        raise UserError(f"train: no end within {options.timeout:.0f} s; stopped")
                except KeyboardInterrupt:
                    if stopping is not None:
                        raise
                    note("pipebench: interrupted; the workers write a checkpoint and stop (Ctrl-C again ends them now)")
                    (out_dir / "stop").touch()
                    stopping = time.monotonic()
            watcher.poll()
            watcher.close()
            return collect_result(job, out_dir, proc.returncode)
        finally:
            watcher.close()
            kill_child(proc)

