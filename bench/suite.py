"""The benchmark suite: which cases run, how one case goes from a Plan to a measured Row.

`pipebench run` and the pytest-benchmark suite (bench/bench_suite.py) share everything here; they differ
only in who times the steps (this module's loop, or pytest-benchmark's `pedantic`), and both time them
in the parent process through `bench.launch.Session`.

A case is (model, flavour, batch, strategy, micro-batch count). Each strategy is planned with the
schedule it runs, so the report can set every measured step beside its prediction:

    single          1 device, 1 micro-batch         modelparallel   p devices, 1 micro-batch (the seed's split)
    dataparallel    no plan (replicas)              ddp             no plan (replicas)
    pipeline        GPipe, planner's micro-batches  pp-gpipe        GPipe       pp-1f1b       1F1B
    pp-interleaved  interleaved 1F1B, 2 stages/GPU  pp-zb           zero bubble, 2 stages/GPU (loops)
    pp-zbv          zero bubble in a V, 2 stages/GPU
"""
from __future__ import annotations

import json
import platform
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from bench.job import PIPELINES, STRATEGIES, Job, job_from_plan
from bench.results import Row, timeline_from_ops
from partition.plan import Plan, make_plan
from partition.profile import Profile, load_profiles

SCHEDULE_OF = {
    "pipeline": ("gpipe", 1), "pp-gpipe": ("gpipe", 1), "pp-1f1b": ("1f1b", 1),
    "pp-interleaved": ("interleaved", 2), "pp-zb": ("zb-interleaved", 2), "pp-zbv": ("zbv", 2),
}
"""Pipeline strategy -> (schedule the planner simulates, stages per device)."""

DEFAULT_MODELS = {"gpt": 64, "resnet101": 256}
"""The default suite's models and global batches (DESIGN.md's figures are for these)."""
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
    """None: the planner's choice (pipelines); always 1 for the others."""
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def schedule(self) -> str:
        return SCHEDULE_OF.get(self.strategy, ("", 1))[0]

    @property
    def virtual_stages(self) -> int:
        return SCHEDULE_OF.get(self.strategy, ("", 1))[1]

    def label(self) -> str:
        m = "" if self.strategy not in PIPELINES else f" m={self.micro_batches or 'auto'}"
        return f"{self.model} {self.flavour or 'full'} b{self.batch} {self.strategy}{m}"


@dataclass
class Machine:
    """Where cases run: chosen GPU ids (None: CPU processes standing in for `devices` GPUs)."""

    gpus: list[int] | None
    devices: int
    name: str
    """Device name, e.g. "NVIDIA H200" or the CPU's."""
    caps: list[int] | None = None
    """Memory a plan may use per GPU (what was free when the run started, less a margin); None: no cap."""
    speeds: list[float] | None = None
    """Speed factor per GPU that plans are cut for (`--speeds`: a busy GPU gets fewer layers); None: equal."""

    @property
    def device_type(self) -> str:
        return "cpu" if self.gpus is None else "cuda"

    @property
    def hardware(self) -> str:
        return f"{self.devices}x{self.name}" if self.gpus is not None else f"cpu{self.devices}proc"

    @property
    def gpus_label(self) -> str:
        return "cpu" if self.gpus is None else ",".join(map(str, self.gpus))


def make_cases(models: dict[str, int], strategies: Sequence[str], chunks: Sequence[int | None], *,
               flavour: str | None = None, overrides: dict[str, Any] | None = None) -> list[Case]:
    """Every model x strategy, and for pipelines every micro-batch count in `chunks` (None = planner's)."""
    import models as zoo

    defaults = {info.name: info.default_flavour for info in zoo.list_models()}
    extra = tuple(sorted((overrides or {}).items()))
    cases = []
    for model, batch in models.items():
        named = flavour or defaults.get(model)  # rows always name the flavour, e.g. "800m" not "full"
        for strategy in strategies:
            counts = chunks if strategy in PIPELINES else [1]
            cases += [Case(model, named, batch, strategy, m, extra) for m in counts]
    return cases


# ------------------------------------------------------------------------------------------- profiles

@dataclass
class Profiled:
    profiles: list[Profile]
    link_gbps: float
    path: Path


def profile_case_model(case: Case, machine: Machine, folder: Path, *, repeats: int | None = None,
                       reuse: bool = True, note: Callable[[str], None] = print) -> Profiled:
    """Profile the case's model at every micro-batch size, in a child `pipebench plan` (so that this
    process never initialises CUDA), and measure the link between the first two GPUs; saved under
    `folder` and reused when already there."""
    name = f"{case.model}-{case.flavour or 'full'}-b{case.batch}" + "".join(f"-{k}{v}" for k, v in case.overrides)
    profile_path, plan_path = folder / f"{name}.profile.json", folder / f"{name}.plan.json"
    if not (reuse and profile_path.exists() and plan_path.exists()):
        where = (["--gpus", ",".join(str(i) for i in range(min(2, machine.devices)))] if machine.gpus is not None
                 else ["--stages", "2", "--device", "cpu"])
        command = [sys.executable, "-P", "-m", "bench.cli", "plan", "--model", case.model, "--batch", str(case.batch),
                   *where, "--save-profile", str(profile_path), "--json", str(plan_path)]
        if case.flavour:
            command += ["--flavour", case.flavour]
        for key, value in case.overrides:
            command += ["--set", f"{key}={value}"]
        if repeats:
            command += ["--repeats", str(repeats)]
        note(f"profiling {case.model} ({case.flavour or 'full'}, batch {case.batch}) on "
             f"{machine.name}: {' '.join(command[3:])}")
        start = time.monotonic()
        from bench.launch import child_env

        done = subprocess.run(command, env=child_env(machine.gpus), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"exit {done.returncode}"
            raise CaseUnavailable(f"profiling {case.model} failed: {last}")
        note(f"profiled in {time.monotonic() - start:.0f} s -> {profile_path}")
    plan = json.loads(plan_path.read_text())
    return Profiled(load_profiles(profile_path), float(plan.get("link_gbps", 0.0)), profile_path)


# ----------------------------------------------------------------------------------------------- cases

@dataclass
class Prepared:
    """A case made ready to launch: its Job, the Plan it follows (if any) and the GPUs it takes."""

    case: Case
    job: Job
    plan: Plan | None
    gpus: list[int] | None
    predicted_timeline: list[dict] = field(default_factory=list)


def prepare(case: Case, machine: Machine, profiled: Profiled | None, *, steps: int, warmup: int) -> Prepared:
    """Plan the case and make its Job; CaseUnavailable when it cannot run as asked."""
    if case.strategy not in STRATEGIES:
        raise CaseUnavailable(f"unknown strategy {case.strategy!r}")
    p = machine.devices
    settings = dict(steps=steps, warmup=warmup, device_type=machine.device_type)
    overrides = dict(case.overrides)
    if case.strategy in ("dataparallel", "ddp"):
        if case.strategy == "ddp" and case.batch % p:
            raise CaseUnavailable(f"batch {case.batch} does not split evenly over {p} DDP processes")
        job = Job(model=case.model, flavour=case.flavour, overrides=overrides, strategy=case.strategy,
                  batch=case.batch, devices=p, **settings)
        return Prepared(case, job, None, machine.gpus)
    if profiled is None:
        raise CaseUnavailable(f"{case.strategy} needs a profile of {case.model}")
    devices = [f"{machine.device_type}:{i}" for i in range(p)]
    try:
        caps, speeds = machine.caps, machine.speeds
        if case.strategy == "single":
            plan = make_plan(profiled.profiles, devices[:1], schedule="gpipe", micro_batches=1,
                             max_memory=caps[:1] if caps else None, speeds=speeds[:1] if speeds else None)
        elif case.strategy == "modelparallel":
            plan = make_plan(profiled.profiles, devices, schedule="gpipe", micro_batches=1,
                             link_gbps=profiled.link_gbps, max_memory=caps, speeds=speeds)
        else:
            plan = make_plan(profiled.profiles, devices, schedule=case.schedule, virtual_stages=case.virtual_stages,
                             micro_batches=case.micro_batches, link_gbps=profiled.link_gbps, max_memory=caps,
                             speeds=speeds,
                             min_micro_batches=p if case.strategy == "pp-1f1b" else 1)  # torch's 1F1B wants m >= p
        job = job_from_plan(plan, case.strategy, **settings)
    except ValueError as exc:  # InfeasibleError too
        raise CaseUnavailable(str(exc).splitlines()[0]) from None
    gpus = machine.gpus[:1] if case.strategy == "single" and machine.gpus is not None else machine.gpus
    return Prepared(case, job, plan, gpus, timeline_from_ops(plan.simulate().ops))


def make_row(prepared: Prepared, machine: Machine, *, status: str, reason: str = "", result: dict | None = None,
             step_ms: Sequence[float] = (), started_at: str = "", duration_s: float = 0.0) -> Row:
    """The results row of a case: what it measured (parent-clock step times) beside what its Plan said."""
    import statistics

    case, plan, result = prepared.case, prepared.plan, result or {}
    mean = statistics.fmean(step_ms) if step_ms else None
    return Row(
        model=case.model, flavour=case.flavour or (plan.flavour if plan else "full"), strategy=case.strategy,
        gpus=machine.gpus_label if case.strategy != "single" or machine.gpus is None else str(machine.gpus[0]),
        world_size=prepared.job.processes, batch=case.batch,
        micro_batches=prepared.job.micro_batches, schedule=case.schedule, virtual_stages=case.virtual_stages,
        status=status, reason=reason,
        samples_per_s=case.batch / mean * 1e3 if mean else None, step_ms=mean,
        step_ms_std=statistics.stdev(step_ms) if len(step_ms) > 1 else None,
        peak_memory_bytes=result.get("peak_memory_bytes", []), first_loss=result.get("first_loss"),
        predicted_step_ms=plan.predicted_step_ms if plan else None,
        predicted_memory_bytes=plan.memory_per_device() if plan else [],
        bubble_fraction=plan.bubble_fraction if plan else None, bounds=list(plan.bounds) if plan else [],
        # Only a plan cut across devices depends on the speeds (one GPU runs the whole model either way).
        speeds=(";".join(f"{v:.3g}" for v in machine.speeds[:plan.device_count])
                if plan and machine.speeds and plan.device_count > 1 else ""),
        device_name=result.get("device_name", machine.name), torch_version=result.get("torch_version", ""),
        host=socket.gethostname(), started_at=started_at, duration_s=duration_s,
        timeline=result.get("timeline", []), predicted_timeline=prepared.predicted_timeline,
    )


def unavailable_row(case: Case, machine: Machine, reason: str) -> Row:
    return Row(model=case.model, flavour=case.flavour or "full", strategy=case.strategy, gpus=machine.gpus_label,
               world_size=1, batch=case.batch, micro_batches=case.micro_batches or 1, schedule=case.schedule,
               virtual_stages=case.virtual_stages, status="unavailable", reason=reason, device_name=machine.name,
               host=socket.gethostname(), started_at=now())


def run_prepared(prepared: Prepared, machine: Machine, *, steps: int, timeout: float) -> Row:
    """Launch, time `steps` steps on the parent's clock, trace one more, and make the row; failures and
    out-of-memory become rows too."""
    from bench.launch import Session, WorkerError

    started, start = now(), time.monotonic()
    try:
        with Session(prepared.job, gpus=prepared.gpus, timeout=timeout) as workers:
            step_ms = [workers.step() for _ in range(steps)]
            workers.step(trace=True)
            result = workers.finish()
    except WorkerError as exc:
        status = "oom" if exc.oom else "unavailable" if exc.unavailable else "failed"
        return make_row(prepared, machine, status=status, reason=str(exc), started_at=started,
                        duration_s=time.monotonic() - start)
    return make_row(prepared, machine, status="ok", result=result, step_ms=step_ms, started_at=started,
                    duration_s=time.monotonic() - start)


def probe_speeds(machine: Machine) -> list[float]:
    """Speed factor per chosen GPU (partition.devices.measure_speeds), probed in a child process so that
    this one never initialises CUDA."""
    from bench.launch import child_env
    from partition.devices import DeviceError

    code = ("import json, torch; from partition.devices import measure_speeds; "
            "print(json.dumps(measure_speeds([f'cuda:{i}' for i in range(torch.cuda.device_count())])))")
    done = subprocess.run([sys.executable, "-P", "-c", code], env=child_env(machine.gpus), capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise DeviceError("the GPU speed probe failed: " + (done.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def detect_machine(gpus: list[int] | None, cpu_processes: int = 2) -> Machine:
    """The chosen GPUs (all visible ones when `gpus` is None), or CPU processes when there is none.

    Counts and names GPUs through torch in this process, which starts the CUDA driver but no context;
    the cases themselves run in children with CUDA_VISIBLE_DEVICES set."""
    import torch

    from partition.devices import DeviceError, check_gpus

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        if gpus is not None:
            raise DeviceError("no CUDA GPU is visible here; leave out --gpus to run on the CPU")
        return Machine(None, cpu_processes, platform.processor() or platform.machine() or "cpu")
    chosen = list(range(count)) if gpus is None else gpus
    check_gpus(chosen)  # names a GPU that does not exist
    from partition.gpus import free_memory_caps, query_gpus

    infos = {g.index: g for g in query_gpus()}
    caps = free_memory_caps([infos[i] for i in chosen]) if all(i in infos for i in chosen) else None
    return Machine(chosen, len(chosen), torch.cuda.get_device_name(chosen[0]), caps)
