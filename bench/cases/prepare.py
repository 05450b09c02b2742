"""One case made ready to run: its model profiled, the case planned and priced as its registry entry
says, and its Job; or why it cannot run.

What a strategy needs comes from the registry (bench/strategies): each one that runs a Plan is planned with
the schedule it runs, on the devices it uses, so the report can set every measured step beside its
prediction; the Plan then travels whole to the workers inside the Job. A case predicted not to fit in the
memory cap is not launched: its row says "predicted-oom" (unless the run asks to try anyway, to test the
prediction). The machine the cases run on is bench/cases/machine.py.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from pipebench.bench.cases.case import Case, CaseUnavailable, make_cases
from pipebench.bench.cases.machine import Machine
from pipebench.bench.launch.job import Job
from pipebench.bench.store.row import timeline_from_ops
from pipebench.bench.strategies import BASELINE, STRATEGIES, get_strategy
from pipebench.base.errors import UserError
from pipebench.base.fileio.file_names import slug
from pipebench.hardware.cpu import threads_per_device
from pipebench.models.source import ModelSource
from pipebench.partition.planning.plan import Plan
from pipebench.partition.profiling.profile_record import Profile, load_profiles, save_profiles
from pipebench.partition.planning.memory import over_cap
from pipebench.request import Request
from pipebench.model_spec import is_user_model
from pipebench.base.training import DEFAULT_PRECISION, Training


# ------------------------------------------------------------------------------------------- profiles

@dataclass
class CaseProfiles:
    """A case's model profiled: one Profile per micro-batch size, and the file they are saved in."""
    profiles: list[Profile]
    path: Path


def profile_case_model(case: Case, machine: Machine, folder: Path, *, repeats: int | None = None,
                       reuse: bool = True, note: Callable[[str], None] = print,
                       counts: Sequence[int] | None = None, strategies: Sequence[str] = (),
                       timeout: float | None = None) -> CaseProfiles:
    """Profile the case's model at every micro-batch size with a ProfilingSession (partition/profile_session.py,
    what `pipebench.profile` runs), in a child process (so that this one never initialises CUDA), timing the
    link between the first two GPUs; saved under `folder` and reused when already there. counts: the micro-batch counts to profile (None: every power
    of two that splits the batch, for the planner to choose from). Profiled in the case's precision, its
    whole step with the case's optimizer, compiled as the case is; each names the file unless it is tf32,
    sgd or eager (the defaults: a file without them in its name is theirs). strategies: those the profile serves; under auto, the close choices
    of their predictions are measured (pipebench.profile's rank). timeout: the seconds the profiling may take
    (run's --timeout, which bounds each case too; None: no bound): a forward that hangs would hang the run."""
    from pipebench.bench.launch.spawn import ChildTimeout, WorkerError, call_in_child

    model = ModelSource(case.model).label if is_user_model(case.model) else case.model
    name = slug(f"{model}-{case.flavour or 'full'}-b{case.batch}"
                + "".join(f"-{k}{v}" for k, v in case.overrides) + ("-m" + "_".join(map(str, counts)) if counts else "")
                + ("" if case.training.precision == DEFAULT_PRECISION else f"-{case.training.precision}")
                + ("" if case.training.optimizer == Training.optimizer else f"-{case.training.optimizer}")
                + ("-data" if case.data_dir else "")
                + ("" if case.training.compile is None else f"-compiled-{case.training.compile}"), keep="._+-", strip="")
    path = folder / f"{name}.profile.json"
    if not (reuse and path.exists()):
        devices = ([f"cuda:{i}" for i in range(min(2, machine.devices))] if machine.gpus is not None
                   else ["cpu"] * machine.devices)  # as many CPU processes as run the cases (--cpu-processes)
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
    return CaseProfiles(load_profiles(path), path)


def profile_model(model: str, batch: int, machine: Machine, folder: Path, *, flavour: str | None,
                  overrides: dict[str, Any], training: Training, data_dir: str | None = None, **how: Any) -> CaseProfiles:
    """A model's profile before any case is chosen (`run --strategies auto:K`, `train`): profiled as its
    single baseline's case is (`profile_case_model`, which `how` is passed to), so that a case of it reuses
    the file."""
    probe = make_cases({model: batch}, [BASELINE], [1], flavour=flavour, overrides=overrides, training=training,
                       data_dir=data_dir)[0]
    return profile_case_model(probe, machine, folder, **how)


def _profile_to_file(path: Path, case: Case, devices: list[str], *, repeats: int | None, micro_batches="auto",
                     fresh: bool = False, strategies: tuple[str, ...] = (), ranked_on: Sequence[str] = ()) -> None:
    """In the child: profile the case's model (through the profile cache unless `fresh`) in its precision,
    optimizer and compile mode, and save (the parent reads the file; it stays for --resume and reuse).
    Under auto, the predictions of `strategies` on `ranked_on` (every device the cases use; else `devices`)
    rank the micro-batch counts (bench.predict.ranking.advice_ranking)."""
    from pipebench.bench.predict.ranking import advice_ranking
    from pipebench.model_spec import ModelSpec
    from pipebench.partition.profile_session import ProfilingSession, counts_and_devices
    from pipebench.base.text.progress import ProgressBar, say

    training = Training(precision=case.training.precision, optimizer=case.training.optimizer,
                        compile=case.training.compile)
    rank = advice_ranking(Request.from_keywords(None, {"devices": ranked_on or devices, "training": training}),
                          strategies=list(strategies) or None)
    request = Request.from_keywords(None, {"devices": devices, "batch": case.batch, "training": training,
                                           "repeats": repeats, "micro_batches": micro_batches, "fresh": fresh})
    counts, devices = counts_and_devices(request)
    with ProgressBar() as progress:
        spec = ModelSpec(case.model, flavour=case.flavour, settings=dict(case.overrides), data_dir=case.data_dir)
        profiles = ProfilingSession(spec, request, counts, devices, note=say, progress=progress).profiles(rank)
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


def prepare(case: Case, machine: Machine, profiled: CaseProfiles | None, *, steps: int, warmup: int,
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
    job_fields = dict(model=case.model, flavour=case.flavour, overrides=dict(case.overrides), data_dir=case.data_dir,
                      strategy=case.strategy, batch=case.batch, devices=p, steps=steps, warmup=warmup,
                      device_type=machine.device_type, cpu_threads=threads_per_device(machine.devices),
                      gpu_memory=machine.gpu_memory, training=training)  # the Job's keyword arguments
    gpus = machine.gpus[:p] if machine.gpus is not None else None
    plan = prediction = None
    over = ""
    try:
        if profiled is not None:  # every strategy is predicted from the profile; the pipelines by their Plan
            from pipebench.bench.predict.ranking import predict

            def predicted(caps):
                return predict(strategy, profiled.profiles, machine.request(training, caps),
                               micro_batches=case.micro_batches if strategy.micro_batched else None)

            prediction = predicted(machine.caps)
            over = over_cap_reason(prediction, machine.caps)
            if over and not try_anyway:
                return Prepared(case, None, None, gpus, prediction=prediction, over_cap=over)
            if over and prediction.plan is None and strategy.needs_plan:
                prediction = predicted(None)  # the plan it runs anyway, cut without the cap
        if strategy.needs_plan:
            if prediction is None:
                raise CaseUnavailable(f"{case.strategy} needs a profile of {case.model}")
            if prediction.plan is None:
                raise CaseUnavailable(prediction.reason)
            plan = prediction.plan
        if training.checkpoint == "auto" and not strategy.needs_plan:  # a replica recomputes all layers or none
            recompute = prediction is not None and prediction.recompute
            job_fields["training"] = replace(training, checkpoint="always" if recompute else "never")
        job = Job(plan=plan.to_dict() if plan else None, **job_fields)
    except UserError as exc:  # InfeasibleError too
        raise CaseUnavailable(str(exc).splitlines()[0]) from None
    return Prepared(case, job, plan, gpus, timeline_from_ops(plan.simulate().ops) if plan else [], prediction,
                    over)


def over_cap_reason(prediction: Any, caps: Sequence[int] | None) -> str:
    """Why `prediction` says the case will not fit in `caps`, one line; "" when it fits, or when it gives
    no memory figure (a batch that does not split, say: the case is then unavailable, not out of memory).
    The prediction's reason says it where it can (partition/planning/memory.py over_cap's line, put there by
    bench/predict/ranking.py, or the solver's naming the stage that does not fit)."""
    needed = prediction.peak_memory_bytes
    if prediction.fits or not caps or not any(needed):
        return ""
    return prediction.reason or over_cap(needed, caps)
