"""The benchmark suite: which cases run, how one case goes from a Plan to a measured Row (the machine they
run on is bench/cases/machine.py).

`pipebench run` and the pytest-benchmark suite (bench/benchmarks/bench_suite.py) share everything here;
they differ only in who times the steps (this module's loop, or pytest-benchmark's `pedantic`), and both
time them in the parent process through `bench.launch.sessions.Session`.

A case is (model, flavour, batch, strategy, micro-batch count, training: precision, optimizer, checkpoint
mode). What a strategy needs comes from the registry (bench/strategies): each one that runs a Plan is
planned with the schedule it runs, on the devices it uses, so the report can set every measured step
beside its prediction; the Plan then travels whole to the workers inside the Job. A case predicted not to fit in the memory cap is not launched: its
row says "predicted-oom" (unless the run asks to try anyway, to test the prediction).
"""
from __future__ import annotations

import re
import socket
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from pipebench.bench.launch.job import Job
from pipebench.bench.cases.machine import Machine
from pipebench.hardware.cpu import threads_per_device
from pipebench.bench.store.row import Row, settings_text, timeline_from_ops
from pipebench.bench.strategies import BASELINE, STRATEGIES, get_strategy
from pipebench.errors import UserError
from pipebench.models.source import ModelSource
from pipebench.text.parse import is_user_model
from pipebench.partition.planning.plan import Plan
from pipebench.partition.profiling.profile_record import Profile, load_profiles, save_profiles
from pipebench.request import Request
from pipebench.training import DEFAULT_PRECISION, Training
from pipebench.text.units import format_bytes

DEFAULT_MODELS = {"gpt": 64, "resnet101": 256}
"""The default suite's models and global batches (the README's GPU figures are for these)."""
QUICK_BATCH = 8


class CaseUnavailable(Exception):
    """The case cannot run as asked (too few layers for the stages, a batch that does not split...)."""


@dataclass(frozen=True)
class Case:
    model: str
    flavour: str | None
    batch: int
    strategy: str
    micro_batches: int | None = None
    """None: the planner's choice (micro-batched strategies); always 1 for the others."""
    overrides: tuple[tuple[str, Any], ...] = ()
    training: Training = Training()
    """Precision, optimizer and checkpoint mode: rows of another training are another case."""
    data_dir: str | None = None
    """A local MNIST folder the model trains on (`--data-dir`; the convnet), None: synthetic batches."""

    @property
    def schedule(self) -> str:
        """The pipeline schedule of a micro-batched strategy, "" for the others (as rows record it)."""
        strategy = STRATEGIES.get(self.strategy)
        return strategy.schedule.name if strategy is not None and strategy.micro_batched else ""

    @property
    def virtual_stages(self) -> int:
        strategy = STRATEGIES.get(self.strategy)
        return strategy.stages_per_device if strategy is not None else 1

    def label(self) -> str:
        strategy = STRATEGIES.get(self.strategy)
        m = f" m={self.micro_batches or 'auto'}" if strategy is not None and strategy.micro_batched else ""
        flavour = "" if is_user_model(self.model) else f" {self.flavour or 'full'}"
        training = "" if self.training == Training() else f" ({self.training.label()})"
        return f"{self.model}{flavour} b{self.batch} {self.strategy}{m}{training}"


def make_cases(models: dict[str, int], strategies: Sequence[str], chunks: Sequence[int | None], *,
               flavour: str | None = None, overrides: dict[str, Any] | None = None,
               training: Training = Training(), data_dir: str | None = None) -> list[Case]:
    """Every model x strategy, and for micro-batched strategies every count in `chunks` (None = planner's)."""
    from pipebench import models as zoo

    defaults = {info.name: info.default_flavour for info in zoo.list_models()}
    extra = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (overrides or {}).items()))
    cases = []
    for model, batch in models.items():
        named = None if zoo.is_user_model(model) else flavour or defaults.get(model)  # e.g. "800m", not "full"
        for strategy in strategies:
            counts = chunks if get_strategy(strategy).micro_batched else [1]
            cases += [Case(model, named, batch, strategy, m, extra, training, data_dir) for m in counts]
    return cases


# ------------------------------------------------------------------------------------------- profiles

@dataclass
class Profiled:
    profiles: list[Profile]
    path: Path


def profile_case_model(case: Case, machine: Machine, folder: Path, *, repeats: int | None = None,
                       reuse: bool = True, note: Callable[[str], None] = print,
                       counts: Sequence[int] | None = None, strategies: Sequence[str] = (),
                       timeout: float | None = None) -> Profiled:
    """Profile the case's model at every micro-batch size with `pipebench.profile`, in a child process
    (so that this one never initialises CUDA), timing the link between the first two GPUs; saved under
    `folder` and reused when already there. counts: the micro-batch counts to profile (None: every power
    of two that splits the batch, for the planner to choose from). Profiled in the case's precision, its
    whole step with the case's optimizer, compiled as the case is; each names the file unless it is tf32,
    sgd or eager (so files from before they existed are reused). strategies: those the profile serves; under auto, the close choices
    of their predictions are measured (pipebench.profile's rank). timeout: the seconds the profiling may take
    (run's --timeout, which bounds each case too; None: no bound): a forward that hangs hung the run."""
    from pipebench.bench.launch.spawn import ChildTimeout, WorkerError, call_in_child

    model = ModelSource(case.model).label if is_user_model(case.model) else case.model
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", f"{model}-{case.flavour or 'full'}-b{case.batch}"
                  + "".join(f"-{k}{v}" for k, v in case.overrides) + ("-m" + "_".join(map(str, counts)) if counts else "")
                  + ("" if case.training.precision == DEFAULT_PRECISION else f"-{case.training.precision}")
                  + ("" if case.training.optimizer == "sgd" else f"-{case.training.optimizer}")
                  + ("-data" if case.data_dir else "")
                  + ("" if case.training.compile is None else f"-compiled-{case.training.compile}"))
    path = folder / f"{name}.profile.json"
    if not (reuse and path.exists()):
        devices = ([f"cuda:{i}" for i in range(min(2, machine.devices))] if machine.gpus is not None
                   else ["cpu"] * machine.devices)  # as many CPU processes as run the cases (--stages)
        start = time.monotonic()
        try:
            call_in_child(_profile_to_file, path, case, devices, repeats=repeats,
                          micro_batches=list(counts) if counts else "auto", fresh=not reuse,
                          strategies=tuple(strategies), ranked_on=machine.device_names, gpus=machine.gpus,
                          within=timeout)
        except ChildTimeout:
            raise CaseUnavailable(f"profiling {case.model} did not finish within --timeout {timeout:g} s (a forward "
                                  "that never returns, or give a longer --timeout)") from None
        except (UserError, WorkerError) as exc:
            raise CaseUnavailable(f"profiling {case.model} failed: {exc}") from None
        note(f"profile saved to {path} ({time.monotonic() - start:.0f} s in all)")
    return Profiled(load_profiles(path), path)


def _profile_to_file(path: Path, case: Case, devices: list[str], *, repeats: int | None, micro_batches="auto",
                     fresh: bool = False, strategies: tuple[str, ...] = (), ranked_on: Sequence[str] = ()) -> None:
    """In the child: profile the case's model (through the profile cache unless `fresh`) in its precision,
    optimizer and compile mode, and save (the parent reads the file; it stays for --resume and reuse).
    Under auto, the predictions of `strategies` on `ranked_on` (every device the cases use; else `devices`)
    rank the micro-batch counts (bench.predict.ranking.advice_ranking)."""
    from pipebench.api import profile
    from pipebench.bench.predict.ranking import advice_ranking
    from pipebench.text.progress import ProgressBar, say

    training = Training(precision=case.training.precision, optimizer=case.training.optimizer,
                        compile=case.training.compile)
    rank = advice_ranking(Request(devices=tuple(ranked_on or devices), training=training),
                          strategies=list(strategies) or None)
    with ProgressBar() as progress:
        profiles = profile(case.model, batch=case.batch, device=devices[0], devices=devices,
                           flavour=case.flavour, settings=dict(case.overrides), data_dir=case.data_dir,
                           repeats=repeats, micro_batches=micro_batches, precision=training.precision,
                           optimizer=training.optimizer, fresh=fresh, note=say,
                           compile=training.compile, progress=progress, rank=rank)
    save_profiles(profiles, path)


# ----------------------------------------------------------------------------------------------- cases

@dataclass
class Prepared:
    """A case made ready to launch: its Job, the Plan it follows (if any) and the GPUs it takes."""

    case: Case
    job: Job | None
    """None when the case is not to be launched (over_cap without --try-anyway)."""
    plan: Plan | None
    gpus: list[int] | None
    predicted_timeline: list[dict] = field(default_factory=list)
    prediction: Any = None
    """What bench.predict.ranking predicted for the case (a Prediction; None without a profile)."""
    over_cap: str = ""
    """Why the case is predicted not to fit in the machine's memory cap; "" when it fits (or no cap)."""


def prepare(case: Case, machine: Machine, profiled: Profiled | None, *, steps: int, warmup: int,
            try_anyway: bool = False) -> Prepared:
    """Plan the case as its registry entry says and make its Job; CaseUnavailable when it cannot run.

    A case predicted not to fit in `machine.caps` comes back with `over_cap` said and no Job, to become a
    "predicted-oom" row without launching anything; with `try_anyway` it gets its Job all the same (a
    pipeline then runs the plan cut without the cap), so that the run proves or disproves the prediction."""
    if case.strategy not in STRATEGIES:
        raise CaseUnavailable(f"unknown strategy {case.strategy!r}")
    strategy = get_strategy(case.strategy)
    p = strategy.devices_used(machine.devices)
    training = case.training
    settings = dict(model=case.model, flavour=case.flavour, overrides=dict(case.overrides), data_dir=case.data_dir,
                    strategy=case.strategy,
                    batch=case.batch, devices=p, steps=steps, warmup=warmup, device_type=machine.device_type,
                    cpu_threads=threads_per_device(machine.devices), gpu_memory=machine.gpu_memory,
                    training=training)
    gpus = machine.gpus[:p] if machine.gpus is not None else None
    plan = prediction = None
    over_cap = ""
    try:
        if profiled is not None:  # every strategy is predicted from the profile; the pipelines by their Plan
            from pipebench.bench.predict.ranking import predict

            def predicted(caps):
                return predict(strategy, profiled.profiles, machine.request(training, caps),
                               micro_batches=case.micro_batches if strategy.micro_batched else None)

            prediction = predicted(machine.caps)
            over_cap = over_cap_reason(prediction, machine.caps)
            if over_cap and not try_anyway:
                return Prepared(case, None, None, gpus, prediction=prediction, over_cap=over_cap)
            if over_cap and prediction.plan is None and strategy.needs_plan:
                prediction = predicted(None)  # the plan it runs anyway, cut without the cap
        if strategy.needs_plan:
            if prediction is None:
                raise CaseUnavailable(f"{case.strategy} needs a profile of {case.model}")
            if prediction.plan is None:
                raise CaseUnavailable(prediction.reason)
            plan = prediction.plan
        if training.checkpoint == "auto" and not strategy.needs_plan:  # a replica recomputes all layers or none
            recompute = prediction is not None and prediction.recompute
            settings["training"] = replace(training, checkpoint="always" if recompute else "never")
        job = Job(plan=plan.to_dict() if plan else None, **settings)
    except UserError as exc:  # InfeasibleError too
        raise CaseUnavailable(str(exc).splitlines()[0]) from None
    return Prepared(case, job, plan, gpus, timeline_from_ops(plan.simulate().ops) if plan else [], prediction,
                    over_cap)


def over_cap_reason(prediction: Any, caps: Sequence[int] | None) -> str:
    """Why `prediction` says the case will not fit in `caps`, one line; "" when it fits, or when it gives
    no memory figure (a batch that does not split, say: the case is then unavailable, not out of memory).
    The prediction's reason says it where it can (bench/predict/ranking.py over_cap, or the solver's line naming the
    stage that does not fit)."""
    needed = prediction.peak_memory_bytes
    if prediction.fits or not caps or not any(needed):
        return ""
    if prediction.reason:  # bench/predict/ranking.py over_cap's line, or the solver's naming the stage
        return prediction.reason
    worst = max(range(len(needed)), key=needed.__getitem__)
    return (f"predicted to need {format_bytes(needed[worst])} per GPU, cap "
            f"{format_bytes(caps[min(worst, len(caps) - 1)])}")


def make_row(prepared: Prepared, machine: Machine, *, status: str, reason: str = "", result: dict | None = None,
             step_ms: Sequence[float] = (), round_ms: Sequence[float] = (), started_at: str = "",
             duration_s: float = 0.0) -> Row:
    """The results row of a case: what it measured (step times: measure_round says whose clock; the mean
    step of each round, run_rounds) beside what its Plan said."""
    case, plan, result = prepared.case, prepared.plan, result or {}
    mean = statistics.fmean(step_ms) if step_ms else None
    job, strategy = prepared.job, get_strategy(case.strategy)
    return Row(
        model=case.model, flavour=case.flavour or ("" if is_user_model(case.model) else "full"), strategy=case.strategy,
        gpus=(",".join(map(str, prepared.gpus)) if prepared.gpus is not None else machine.gpus_label),
        world_size=job.processes if job else strategy.processes(machine.devices),
        batch=case.batch, micro_batches=job.micro_batches if job else prepared.prediction.micro_batches,
        schedule=case.schedule, virtual_stages=case.virtual_stages,
        status=status, reason=reason or (REPLICA_RECOMPUTES if case.training.checkpoint == "auto"
                                         and prepared.prediction is not None and prepared.prediction.recompute
                                         else ""),
        samples_per_s=case.batch / mean * 1e3 if mean else None, step_ms=mean,
        step_ms_std=statistics.stdev(step_ms) if len(step_ms) > 1 else None,
        step_ms_best=min(step_ms) if step_ms else None, round_ms=list(round_ms),
        same_work_as=same_work_as(case.strategy, machine),
        peak_memory_bytes=result.get("peak_memory_bytes", []), first_loss=result.get("first_loss"),
        compile_s=result.get("compile_s"), graph_breaks=result.get("graph_breaks"),
        predicted_step_ms=prepared.prediction.predicted_step_ms if prepared.prediction else None,
        predicted_step_spread=prepared.prediction.step_spread if prepared.prediction else None,
        predicted_own_spread=prepared.prediction.own_spread if prepared.prediction else None,
        predicted_memory_bytes=prepared.prediction.peak_memory_bytes if prepared.prediction else [],
        bubble_fraction=plan.bubble_fraction if plan else None, bounds=list(plan.bounds) if plan else [],
        plan_id=plan.plan_id if plan else "",
        # Only a plan cut across devices depends on the speeds (one GPU runs the whole model either way).
        speeds=(";".join(f"{v:.3g}" for v in machine.speeds[:plan.device_count])
                if plan and machine.speeds and plan.device_count > 1 else ""),
        max_memory=case_caps(case, machine, over=bool(prepared.over_cap)), settings=case_settings(case),
        **asdict(case.training),  # precision, optimizer, checkpoint, compile: the row's fields
        device_name=result.get("device_name", machine.name), torch_version=result.get("torch_version", ""),
        host=socket.gethostname(), started_at=started_at, duration_s=duration_s,
        timeline=result.get("timeline", []), predicted_timeline=prepared.predicted_timeline,
    )


def same_work_as(strategy: str, machine: Machine) -> str:
    """BASELINE when `strategy` does the same computation as it on `machine`: it computes on one device
    (Strategy.compute_devices; on the CPU, each one-process strategy), so whatever it measures apart
    from single is its own overhead or the machine's noise, never a gain; "" otherwise."""
    known = STRATEGIES.get(strategy)
    if known is None or strategy == BASELINE or known.compute_devices(machine.devices, machine.device_type) > 1:
        return ""
    return BASELINE


REPLICA_RECOMPUTES = "recomputes every layer: it does not fit otherwise (--checkpoint auto)"
"""The `reason` of a replica strategy's row (DDP, FSDP) that --checkpoint auto made recompute."""


def unavailable_row(case: Case, machine: Machine, reason: str) -> Row:
    return Row(model=case.model, flavour=case.flavour or ("" if is_user_model(case.model) else "full"),
               strategy=case.strategy, gpus=machine.gpus_label,
               world_size=1, batch=case.batch, micro_batches=case.micro_batches or 1, schedule=case.schedule,
               virtual_stages=case.virtual_stages, status="unavailable", reason=reason, device_name=machine.name,
               max_memory=case_caps(case, machine), settings=case_settings(case), **asdict(case.training),
               host=socket.gethostname(),
               started_at=now())


def case_settings(case: Case) -> str:
    """The row's `settings`: what changes the training itself, for every strategy alike (so rows of
    other settings are other cases for --resume and the report). A new setting is one entry here."""
    return settings_text({**dict(case.overrides), **({"data_dir": case.data_dir} if case.data_dir else {})})


def case_caps(case: Case, machine: Machine, *, over: bool = False) -> str:
    """The row's `max_memory`: the caps (GiB) the case's Plan is cut under; "" for a strategy without a
    Plan, which runs the whole model whatever the cap, unless --gpu-memory caps every worker for real or
    the case is predicted to go `over` the cap (its row then names the cap it was judged against)."""
    strategy = STRATEGIES.get(case.strategy)
    if strategy is None or not machine.caps or not (strategy.needs_plan or machine.gpu_memory or over):
        return ""
    devices = strategy.devices_used(machine.devices)
    return ";".join(f"{c / 2**30:.3g}" for c in machine.caps[:devices])


MAX_TIMED_STEPS = 10_000
"""--min-seconds times no more steps than this, however short they are."""


def run_prepared(prepared: Prepared, machine: Machine, *, steps: int, timeout: float, groups: Any = None,
                 min_seconds: float = 0.0) -> Row:
    """Launch, run `steps` steps (more, until `min_seconds` have passed), trace one more, and make the row;
    failures and out-of-memory become rows too: one round of `run_rounds`."""
    return run_rounds([prepared], machine, rounds=1, steps=steps, timeout=timeout, groups=groups,
                      min_seconds=min_seconds)[0]


def run_rounds(prepared: Sequence[Prepared], machine: Machine, *, rounds: int, steps: int, timeout: float,
               groups: Any = None, min_seconds: float = 0.0, note: Callable[[str], None] | None = None) -> list[Row]:
    """Measure `prepared` (cases of one model) in interleaved rounds, A B C, then C B A, then A B C ...:
    each round launches each case in its warm worker group, warms it up (the Job's warm-up steps), times
    `steps` steps (more, until min_seconds / rounds have passed) and ends it; the last round traces one
    more step. Every case thus runs early and late, beside the same neighbours, so what drifts on the
    machine (another process's load, the clock, a group still warming up) falls on all alike, and the
    spread of a case's round means (Row.round_ms) is its noise, which bench/report/tables.py judges "faster" by.
    A case that fails drops out of the later rounds, its row the failure; the rows come back in the
    order given. note: hears each round's end."""
    order = list(range(len(prepared)))
    rounds_ms: list[list[list[float]]] = [[] for _ in prepared]
    results: list[dict] = [{} for _ in prepared]
    failed: dict[int, Row] = {}
    started = [""] * len(prepared)
    took = [0.0] * len(prepared)
    for r in range(rounds):
        for i in (order if r % 2 == 0 else order[::-1]):
            if i in failed:
                continue
            started[i] = started[i] or now()
            start = time.monotonic()
            try:
                step_ms, results[i] = measure_round(prepared[i], steps=steps, timeout=timeout, groups=groups,
                                                    min_seconds=min_seconds / rounds, trace=r == rounds - 1)
            except _RoundFailed as exc:
                failed[i] = make_row(prepared[i], machine, status=exc.status, reason=exc.reason,
                                     started_at=started[i], duration_s=took[i] + time.monotonic() - start)
                continue
            finally:
                took[i] += time.monotonic() - start
            rounds_ms[i].append(step_ms)
        if note is not None and rounds > 1:
            note(f"round {r + 1} of {rounds} measured ({'forward' if r % 2 == 0 else 'backward'} order)")
    rows = []
    for i, case in enumerate(prepared):
        if i in failed:
            rows.append(failed[i])
            continue
        steps_ms = [ms for one in rounds_ms[i] for ms in one]
        diverged = results[i].get("diverged") or ""  # a NaN or infinite loss: timed all the same, and said so
        rows.append(make_row(case, machine, status="diverged" if diverged else "ok", reason=diverged,
                             result=results[i], step_ms=steps_ms,
                             round_ms=[statistics.fmean(one) for one in rounds_ms[i]] if rounds > 1 else [],
                             started_at=started[i], duration_s=took[i]))
    return rows


class _RoundFailed(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def measure_round(prepared: Prepared, *, steps: int, timeout: float, groups: Any = None, min_seconds: float = 0.0,
                  trace: bool = True) -> tuple[list[float], dict]:
    """One round of one case: launch, warm up, time `steps` steps (more, until `min_seconds` have passed),
    trace one more if `trace`, end; (step ms, rank 0's result). A step's time is the workers' own
    (synchronised, from a common start to the last rank's end): the parent's clock also holds its
    command's round trip through the store and the threads that wait on it, 2-3 ms a step on a 2-core
    CPU, which is not training and was most of a tiny model's step there. The parent's clock stands in
    where the workers' is missing. groups: a bench.launch.sessions.WorkerGroups to run the case in a warm worker
    group of (None: workers of its own). _RoundFailed says how a failure or an out-of-memory ended it."""
    from pipebench.bench.launch.sessions import Session
    from pipebench.bench.launch.spawn import WorkerError

    try:
        with Session(prepared.job, gpus=prepared.gpus, timeout=timeout, groups=groups) as workers:
            step_ms, began = [], time.monotonic()
            while len(step_ms) < steps or (time.monotonic() - began < min_seconds and len(step_ms) < MAX_TIMED_STEPS):
                step_ms.append(workers.step())
            if trace:
                workers.step(trace=True)
            result = workers.finish()
    except WorkerError as exc:
        status = "oom" if exc.oom else "unavailable" if exc.unavailable else "timeout" if exc.timeout else "failed"
        raise _RoundFailed(status, str(exc)) from None
    own = result.get("step_ms") or []
    if len(own) == len(step_ms) + trace:  # the workers' clocks; the traced step last, left out like the parent's
        step_ms = own[:len(step_ms)]
    return step_ms, result


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
