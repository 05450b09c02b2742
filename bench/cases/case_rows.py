"""A case's outcome as a results Row (bench/store/row.py): measured, failed, unavailable or predicted out
of memory, with what it ran on, its settings and caps, and what its work is beside single's."""
from __future__ import annotations

import socket
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Sequence

from pipebench.bench.cases.case import Case, case_settings, now
from pipebench.bench.cases.machine import Machine
from pipebench.bench.cases.prepare import Prepared
from pipebench.bench.store.row import Row
from pipebench.bench.strategies import BASELINE, STRATEGIES, get_strategy
from pipebench.base.step_stats import StepStats
from pipebench.model_spec import is_user_model

if TYPE_CHECKING:  # a result comes from the launch side, which loads torch
    from pipebench.bench.launch.worker_report import WorkerResult


def make_row(prepared: Prepared, machine: Machine, *, status: str, reason: str = "",
             result: WorkerResult | None = None, step_ms: Sequence[float] = (), round_ms: Sequence[float] = (),
             started_at: str = "", duration_s: float = 0.0) -> Row:
    """The results row of a case: what it measured (step times: measure_round says whose clock; the mean
    step of each round, run_rounds; rank 0's result, None where the case did not run to one) beside what
    its Plan said."""
    case, plan = prepared.case, prepared.plan
    stats = StepStats.of(step_ms, case.batch)
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
        samples_per_s=stats.samples_per_s, step_ms=stats.mean_ms, step_ms_std=stats.std_ms,
        step_ms_best=stats.best_ms, round_ms=list(round_ms),
        same_work_as=same_work_as(case.strategy, machine),
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
        **_measured(result, machine),  # peak memory, first loss, compile cost, device, torch, timeline
        host=socket.gethostname(), started_at=started_at, duration_s=duration_s,
        predicted_timeline=prepared.predicted_timeline,
    )


def _measured(result: WorkerResult | None, machine: Machine) -> dict[str, Any]:
    """The row's fields that rank 0's result holds; without one, the machine's name and the Row's
    defaults (nothing measured)."""
    if result is None:
        return {"device_name": machine.name}
    return {"peak_memory_bytes": result.peak_memory_bytes, "first_loss": result.first_loss,
            "compile_s": result.compile_s, "graph_breaks": result.graph_breaks, "device_name": result.device_name,
            "torch_version": result.torch_version, "timeline": result.timeline}


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


def case_caps(case: Case, machine: Machine, *, over: bool = False) -> str:
    """The row's `max_memory`: the caps (GiB) the case's Plan is cut under; "" for a strategy without a
    Plan, which runs the whole model whatever the cap, unless --gpu-memory caps every worker for real or
    the case is predicted to go `over` the cap (its row then names the cap it was judged against)."""
    strategy = STRATEGIES.get(case.strategy)
    if strategy is None or not machine.caps or not (strategy.needs_plan or machine.gpu_memory or over):
        return ""
    devices = strategy.devices_used(machine.devices)
    return ";".join(f"{c / 2**30:.3g}" for c in machine.caps[:devices])
