"""Runs one Job in this process: `python -P -m pipebench.bench.launch.worker JOB.json OUT_DIR`; or, as one of a
worker group (`... worker --group PORT OUT_DIR`, bench.launch.sessions.WorkerGroup), the jobs its parent sends, one
after another (`serve`).

Started by bench/launch/spawn.py, alone for single-process strategies or by torch.distributed.run (one per
device) for the others; torchrun's RANK / WORLD_SIZE / LOCAL_RANK say which share is ours. Rank 0 writes
OUT_DIR/result.json, a WorkerResult (a loss that became NaN or infinite is a result too: its `diverged`
says when); a process that fails writes OUT_DIR/error-rank<r>.json and exits at once (both in
bench/launch/worker_report.py), so that torchrun ends the rest of the group. Every worker ends within a
second of losing the process that started it (pipebench.base.processes.exit_with_parent), so that none
outlives a killed run. CUDA_VISIBLE_DEVICES was set by the parent before this process started, so GPU i
here is the i-th chosen GPU.
"""
from __future__ import annotations

import contextlib
import gc
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from pipebench import models
from pipebench.bench.launch.job import Job
from pipebench.base.processes import exit_with_parent
from pipebench.bench.strategies import get_strategy
from pipebench.bench.strategies.trainers import hand_over
from pipebench.bench.strategies.micro_batches import to_device
from pipebench.base.fileio.files import write_json
from pipebench.bench.launch.worker_report import WorkerResult, exit_without_teardown, fail_and_exit, work_and_report
from pipebench.hardware.cpu import hold_memory
from pipebench.base.step_stats import StepStats
from pipebench.base.training import set_precision
from pipebench.base.time_limit import LIMIT_SECONDS, WEEK_SECONDS


COMMANDS = ("step", "trace", "stop")
"""What the parent's store may ask of rank 0 (bench.launch.sessions.Session)."""

CONNECT_TIMEOUT_S = 30
"""Reaching the parent's store, which listens before we start: longer means the parent is gone."""
COMMAND_TIMEOUT_S = LIMIT_SECONDS
"""Waiting for the parent's next command (the parent's own default timeout per case)."""
IDLE_TIMEOUT_S = WEEK_SECONDS
"""A worker group waiting for its next case: as long as the parent lives (exit_with_parent ends it then)."""




def process_devices(job: Job, local_rank: int) -> list[torch.device]:
    """The devices this process drives: its own one (a process per device), or all of the job's."""
    if get_strategy(job.strategy).process_per_device:
        return [torch.device("cuda", local_rank) if job.device_type == "cuda" else torch.device("cpu")]
    if job.device_type == "cuda":
        return [torch.device("cuda", i) for i in range(job.devices)]
    return [torch.device("cpu")] * job.devices


def cap_gpu_memory(limit: int, devices) -> None:
    """Let this process allocate at most `limit` bytes on each of its GPUs, for real: past it, torch's
    allocator raises out-of-memory as a card of that size would (a 10 GiB lab GPU on an H200)."""
    for device in devices:
        total = torch.cuda.get_device_properties(device).total_memory
        if limit > total:
            raise RuntimeError(f"--gpu-memory {limit / 2**30:.1f} GiB is more than {device}'s {total / 2**30:.1f} GiB")
        torch.cuda.set_per_process_memory_fraction(limit / total, device)


def build_trainer(job: Job, model, local_rank: int):
    """The strategy's Trainer for this process's share of the job, from the registry and the Job's Plan."""
    strategy = get_strategy(job.strategy)
    return strategy.trainer_class()(model, process_devices(job, local_rank), plan=job.the_plan, strategy=strategy,
                                    training=job.training)


def _synchronize(devices) -> None:
    """Wait for this process's own GPUs (touching another would open a CUDA context there)."""
    for device in devices:
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def run(job: Job, out_dir: Path, rank: int, world: int, local_rank: int, *, control=None,
        group_store=None) -> WorkerResult | None:
    """Build, warm up and run the timed steps; rank 0 returns the result, other ranks None (see _run).
    A compiled case compiles cold: its compile seconds are what a first run costs, not a hit in the cache
    that its own profile (which compiles the same graphs) has just filled."""
    with _compiling_cold() if job.training.compile is not None else contextlib.nullcontext():
        return _run(job, out_dir, rank, world, local_rank, control=control, group_store=group_store)


@contextlib.contextmanager
def _compiling_cold():
    """inductor's FX-graph and autotune caches and AOTAutograd's cache off, and back as they were after."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    with inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        yield


def _run(job: Job, out_dir: Path, rank: int, world: int, local_rank: int, *, control=None,
         group_store=None) -> WorkerResult | None:
    """Build, warm up and run the timed steps; rank 0 returns the result, other ranks None.

    Timed steps run on their own (job.steps of them), or one per go-ahead from the parent's store when
    `job.control_port` is set (see bench.launch.sessions.Session). The last timed step is traced (bench/launch/trace.py).
    control: rank 0's store of the parent's commands (default: a connection to job.control_port);
    group_store: the store the process group meets in (default: torchrun's, env://). A worker group
    gives each case keys of its own in both (`serve`).

    Every process takes the same collectives in the same order: the process group's start, two barriers a
    step, a command's broadcast before each step under the parent's control, then the gather of the
    measurements, a barrier and the group's end."""
    distributed = get_strategy(job.strategy).process_per_device
    set_up_devices(job, local_rank, distributed)
    if distributed:
        _join_process_group(job, rank, world, group_store)
    store = control if control is not None else _connect_to_parent(job, rank)
    steps = _Steps(job, out_dir, rank, distributed, *_build_case(job, rank, local_rank))
    if job.training.compile is not None:
        _forget_compilations()
    warmup_ms, step_ms = _take_steps(steps, job, store)
    measured = _measured(steps, job, warmup_ms, step_ms)
    if distributed:
        measured = _slowest_of_all(measured, world)
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return None
    return _result(job, world, distributed, steps.trainer, measured)


def set_up_devices(job: Job, local_rank: int, distributed: bool) -> None:
    """Give this process the devices it was profiled on: on the CPU one device's share of the cores,
    holding the memory it frees (glibc would hand a step's large buffers back and fault them in again the
    next step); on GPUs its own card current, the Training's precision, the Job's memory cap, and peak
    figures from zero (a worker group's earlier case's peak is not ours). `pipebench train`'s processes
    (bench/train/loop.py) set up theirs here too, so that both honour the same Job alike."""
    if job.device_type == "cpu":
        torch.set_num_threads(job.cpu_threads)
        hold_memory()
    if job.device_type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA GPU is visible in the worker")
        torch.cuda.set_device(local_rank if distributed else 0)
        set_precision(job.training)
        if job.gpu_memory is not None:
            cap_gpu_memory(job.gpu_memory, process_devices(job, local_rank))
        for device in process_devices(job, local_rank):
            torch.cuda.reset_peak_memory_stats(device)


def _join_process_group(job: Job, rank: int, world: int, group_store) -> None:
    """Meet the job's other processes (NCCL on GPUs, gloo on the CPU): in `group_store` when a worker
    group gives the case one of its own, else in torchrun's (env://), else, started without torchrun,
    in a group of one."""
    backend = "nccl" if job.device_type == "cuda" else "gloo"
    if group_store is None and "RANK" not in os.environ:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    elif group_store is None:
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, store=group_store, rank=rank, world_size=world)


def _connect_to_parent(job: Job, rank: int):
    """Rank 0's connection to the parent's store of commands, where the parent paces the steps
    (job.control_port); None elsewhere. The parent listens before we start, so a connection that takes
    long means the parent is gone; a command may take as long as the parent's own timeout per case."""
    if job.control_port is None or rank != 0:
        return None
    from datetime import timedelta

    store = dist.TCPStore("127.0.0.1", job.control_port, is_master=False, timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
    store.set_timeout(timedelta(seconds=COMMAND_TIMEOUT_S))
    return store


def _build_case(job: Job, rank: int, local_rank: int) -> tuple:
    """(trainer, inputs, targets, tracer) of this process's share of the case. The model is built on the
    CPU in every process from the same seed: the same weights everywhere (a CUDA build would draw from the
    device's generator and differ from the single-device run); the Trainer is built for it alone, so that
    it takes the model without a copy. A pipeline's tracer times its operations (bench/launch/trace.py)."""
    model = models.get_model(job.model, job.flavour, seed=job.seed, data_dir=job.data_dir, **job.overrides)
    inputs, targets = model.make_batch(job.batch, seed=job.seed + 1)
    trainer = build_trainer(job, hand_over(model), local_rank)
    if job.device_type == "cuda":
        inputs, targets = to_device(inputs, trainer.devices[0]), targets.to(trainer.devices[0])  # a tuple for T5
    tracer = None
    if hasattr(trainer, "pipeline_stages"):
        from pipebench.bench.launch.trace import OpTrace

        tracer = OpTrace(trainer.pipeline_stages, trainer.devices[0], rank)
    return trainer, inputs, targets, tracer


def _forget_compilations() -> None:
    """Count this case's compilations and graph breaks only: a worker group's process runs many cases."""
    from torch import _dynamo

    _dynamo.reset()
    _dynamo.utils.counters.clear()


class _Steps:
    """The case's steps, one at a time, and what they leave: how many were taken, the traced step's
    timeline and how the loss left the finite numbers, the first time it did ("" while it has not)."""

    def __init__(self, job: Job, out_dir: Path, rank: int, distributed: bool, trainer, inputs, targets, tracer):
        self.job, self.out_dir, self.rank, self.distributed = job, out_dir, rank, distributed
        self.trainer, self.inputs, self.targets, self.tracer = trainer, inputs, targets, tracer
        self.done = 0
        self.timeline: list[dict] = []
        self.diverged = ""

    def take(self, trace: bool) -> float:
        """One step, its milliseconds: it starts when every process's devices are idle and ends when every
        process is done with it (a barrier each side), so that each process times the same step. The
        first step's parameters are saved where the job asks (the tests compare strategies by them)."""
        if self.job.fail_on_rank == self.rank:
            raise RuntimeError(f"injected failure on rank {self.rank}")
        _synchronize(self.trainer.devices)
        if self.distributed:
            dist.barrier()
        if trace and self.tracer is not None:
            self.tracer.begin()
        start = time.perf_counter()
        loss = self.trainer.step(self.inputs, self.targets)
        _synchronize(self.trainer.devices)
        if not self.diverged and not math.isfinite(loss):
            self.diverged = f"the loss became {loss} at step {self.done + 1} (warm-up included)"
        elapsed = (time.perf_counter() - start) * 1e3
        if trace and self.tracer is not None:
            self.timeline = self.tracer.end()
        if self.distributed:
            dist.barrier()  # the step is over when every process is done with it
        if self.done == 0 and self.job.save_params:
            torch.save(self.trainer.state_dict(), self.out_dir / f"params-rank{self.rank}.pt")
        self.done += 1
        return elapsed


def _take_steps(steps: _Steps, job: Job, store) -> tuple[list[float], list[float]]:
    """(warm-up ms, timed ms): the warm-up steps (the compiling ones among them), then the timed steps'
    peak memory from zero (Trainer.peak_memory: the steady state's, not the first steps' autotuning),
    then the timed steps: job.steps of them, the last traced, or one per command of the parent's."""
    warmup_ms = [steps.take(trace=False) for _ in range(job.warmup)]
    if job.warmup:
        steps.trainer.reset_peak_memory()
    if job.control_port is None:
        return warmup_ms, [steps.take(trace=i == job.steps - 1) for i in range(job.steps)]
    return warmup_ms, _steps_on_command(steps, store)


def _steps_on_command(steps: _Steps, store) -> list[float]:
    """The timed steps the parent asks for (bench.launch.sessions.Session): rank 0 says it is ready, then
    takes command k from the store and answers each step's milliseconds, until the parent says stop. The
    other ranks hold no store: rank 0 passes each word on to them, a one-number broadcast, so that every
    process takes the same steps."""
    step_ms: list[float] = []
    if store is not None:
        store.set("ready", "1")
    for k in itertools.count():
        command = _next_command(store, k, steps)
        if command == "stop":
            break
        step_ms.append(steps.take(trace=command == "trace"))
        if store is not None:
            store.set(f"done{k}", str(step_ms[-1]))
    return step_ms


def _next_command(store, k: int, steps: _Steps) -> str:
    """The parent's k-th command (COMMANDS), read by rank 0 and broadcast to the others."""
    code = COMMANDS.index(store.get(f"cmd{k}").decode()) if store is not None else 0
    if steps.distributed:
        word = torch.tensor([code], device=steps.trainer.devices[0])
        dist.broadcast(word, src=0)
        code = int(word.item())
    return COMMANDS[code]


def _measured(steps: _Steps, job: Job, warmup_ms: list[float], step_ms: list[float]) -> dict:
    """What this process measured: its steps' times, its devices' peak bytes, its traced operations, how
    its loss diverged, and torch.compile's graph breaks (None uncompiled)."""
    return {"step_ms": step_ms, "peak": steps.trainer.peak_memory(), "timeline": steps.timeline,
            "diverged": steps.diverged, "warmup_ms": warmup_ms,
            "graph_breaks": graph_breaks() if job.training.compile is not None else None}


def _slowest_of_all(mine: dict, world: int) -> dict:
    """Every process's measurements gathered into the job's (a collective): a step ends when the slowest
    process ends it, so each step takes the longest of its times; the peaks are each device's and the
    timeline every process's operations; the first divergence any process saw."""
    shares = [None] * world
    dist.all_gather_object(shares, mine)
    return {"step_ms": [max(s["step_ms"][k] for s in shares) for k in range(len(mine["step_ms"]))],
            "warmup_ms": [max(s["warmup_ms"][k] for s in shares) for k in range(len(mine["warmup_ms"]))],
            "graph_breaks": None if mine["graph_breaks"] is None else max(s["graph_breaks"] for s in shares),
            "peak": [b for s in shares for b in s["peak"]],
            "timeline": [op for s in shares for op in s["timeline"]],
            "diverged": next((s["diverged"] for s in shares if s["diverged"]), "")}


def _result(job: Job, world: int, distributed: bool, trainer, measured: dict) -> WorkerResult:
    """Rank 0's result.json: the case's devices, its measured steps and their summary, its first loss
    (JSON holds no NaN: a loss that is not a number is `diverged`), memory, compile cost and timeline."""
    step_ms, warmup_ms = measured["step_ms"], measured["warmup_ms"]
    stats = StepStats.of(step_ms, job.batch)
    first_loss = trainer.first_loss if trainer.first_loss is not None and math.isfinite(trainer.first_loss) else None
    from pipebench.partition.profiling.measure import device_name

    return WorkerResult(
        strategy=job.strategy,
        world_size=world,
        devices=[str(d) for d in trainer.devices] if not distributed else [f"{job.device_type}:{r}" for r in range(world)],
        device_name=device_name(trainer.devices[0]),
        torch_version=torch.__version__,
        first_loss=first_loss,
        diverged=measured["diverged"],
        step_ms=step_ms,
        step_ms_mean=stats.mean_ms,
        step_ms_std=stats.std_ms,
        samples_per_s=stats.samples_per_s,
        peak_memory_bytes=measured["peak"],
        warmup_ms=warmup_ms,
        compile_s=compile_seconds(warmup_ms, step_ms) if job.training.compile is not None else None,
        graph_breaks=measured["graph_breaks"],
        timeline=sorted(measured["timeline"], key=lambda op: (op["start_ms"], op["device"])),
    )


def compile_seconds(warmup_ms: list[float], step_ms: list[float]) -> float | None:
    """What compiling cost: the time the warm-up steps took beyond as many of the fastest timed step
    (torch.compile compiles at the first call, recompiles where a shape changes, and cudagraphs records in
    the first steps). None without both."""
    if not warmup_ms or not step_ms:
        return None
    best = min(step_ms)
    return sum(max(0.0, w - best) for w in warmup_ms) / 1e3


def graph_breaks() -> int:
    """Graph breaks torch.compile took in this process since the case began (torch._dynamo's counters)."""
    from torch._dynamo.utils import counters

    return int(sum(counters["graph_break"].values()))


def serve(port: int, out_dir: Path) -> None:
    """One process of a worker group: run each case the parent sends (bench.launch.sessions.WorkerGroup), in turn.

    Rank 0 takes case n (its job file and folder) from the parent's store at `port` and passes it on
    through torchrun's store; every case meets in a process group of its own and takes its commands
    under keys of its own (PrefixStore "case<n>" in both stores). After each case its memory is freed
    (`_release`; `run` resets its own devices' peak figures). When every rank is done, rank 0 sets
    "case<n>/finished". A failure ends the whole group, as it ends a single case's workers: the parent
    starts a new group for the next case."""
    from datetime import timedelta

    rank, world, local_rank = (int(os.environ.get(name, default)) for name, default in
                               (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", 0)))
    shared = next(dist.rendezvous("env://"))[0] if world > 1 else None
    control = None
    if rank == 0:
        control = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
    idle, busy = timedelta(seconds=IDLE_TIMEOUT_S), timedelta(seconds=COMMAND_TIMEOUT_S)
    n, folder = 0, out_dir
    try:
        while True:
            key = f"case{n}"
            mine = control if rank == 0 else shared
            mine.set_timeout(idle)
            case = mine.get(key)
            mine.set_timeout(busy)
            if rank == 0 and shared is not None:
                shared.set(key, case)
            job_path, folder = json.loads(case)
            folder = Path(folder)
            result = run(Job.load(job_path), folder, rank, world, local_rank,
                         control=dist.PrefixStore(key, control) if control is not None else None,
                         group_store=dist.PrefixStore(key, shared) if shared is not None else None)
            if result is not None:
                write_json(folder / "result.json", result.to_record())
            _release()
            if shared is not None:
                shared.set(f"{key}/ended{rank}", "1")
            if rank == 0:
                if shared is not None:
                    shared.wait([f"{key}/ended{r}" for r in range(world)])
                control.set(f"{key}/finished", "1")
            n += 1
    except BaseException as exc:  # noqa: BLE001 - as main: the error as a file, then leave at once
        fail_and_exit(exc, rank, folder)


def _release() -> None:
    """Free what the case held (on the GPUs too), as its process's end would: an idle group holds nothing
    while other cases run, and the next case starts with the memory a fresh process would find."""
    gc.collect()
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    exit_with_parent()
    if argv[0] == "--group":
        serve(int(argv[1]), Path(argv[2]))
        return 0
    return work_and_report(argv, _result_record)


def _result_record(job: Job, out_dir: Path, rank: int, world: int, local_rank: int) -> dict | None:
    """`run`'s result as result.json holds it (work_and_report writes it): rank 0's, None elsewhere."""
    result = run(job, out_dir, rank, world, local_rank)
    return None if result is None else result.to_record()


if __name__ == "__main__":
    exit_without_teardown(main)
