"""A case's outcome as a results Row (bench/store/row.py): measured, failed, unavailable or predicted out
of memory, with what it ran on, its settings and caps, and what its work is beside single's."""
from __future__ import annotations

import socket
import statistics
from dataclasses import asdict
from typing import Sequence

from pipebench.bench.cases.case import Case, case_settings, now
from pipebench.bench.cases.machine import Machine
from pipebench.bench.cases.prepare import Prepared
from pipebench.bench.store.row import Row
from pipebench.bench.strategies import BASELINE, STRATEGIES, get_strategy
from pipebench.base.text.parse import is_user_model


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


def case_caps(case: Case, machine: Machine, *, over: bool = False) -> str:
    """The row's `max_memory`: the caps (GiB) the case's Plan is cut under; "" for a strategy without a
    Plan, which runs the whole model whatever the cap, unless --gpu-memory caps every worker for real or
    the case is predicted to go `over` the cap (its row then names the cap it was judged against)."""
    strategy = STRATEGIES.get(case.strategy)
    if strategy is None or not machine.caps or not (strategy.needs_plan or machine.gpu_memory or over):
        return ""
    devices = strategy.devices_used(machine.devices)
    return ";".join(f"{c / 2**30:.3g}" for c in machine.caps[:devices])
