"""The pipeline schedules pipebench knows, by name: what each one is (the torch class that runs it, how its
stages sit on the devices, whether its backward splits), so that callers ask the schedule instead of testing
its name.

A vocabulary below every layer that names a schedule: the Request checks its schedule here, the registry of
strategies names each pipeline's, and the planner (partition/planning/schedule_order.py: each device's order of
operations) and the simulator read it for every candidate. No torch.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipebench.base.errors import UserError

__all__ = ["Schedule", "SCHEDULES", "DEFAULT_SCHEDULE", "IN_TURN", "get_schedule", "takes_micro_batches"]


@dataclass(frozen=True)
class Schedule:
    """What a pipeline schedule is, so that callers ask it instead of testing its name."""

    name: str
    torch_class: str
    """The torch.distributed.pipelining class that runs it."""
    layout: str = "one"
    """How stages sit on devices: "one" per device, "loop" (stage s on device s % p) or "v" (down and back
    up, two per device)."""
    stages_per_device: int = 1
    """Stages per device by default (the only count for "one" and "v")."""
    forwards_first: bool = False
    """GPipe: every forward, then every backward (else 1F1B's alternation after a warm-up)."""
    split_backward: bool = False
    """Zero bubble: the backward runs as I and W, so it cannot recompute activations."""
    micro_batch_per_stage: bool = False
    """torch's class needs at least as many micro-batches as stages (Schedule1F1B)."""

    @property
    def fixed_stages_per_device(self) -> bool:
        return self.layout != "loop"


SCHEDULES: dict[str, Schedule] = {s.name: s for s in [
    Schedule("gpipe", "ScheduleGPipe", forwards_first=True),
    Schedule("1f1b", "Schedule1F1B", micro_batch_per_stage=True),
    Schedule("interleaved", "ScheduleInterleaved1F1B", layout="loop", stages_per_device=2),
    Schedule("zb-interleaved", "ScheduleInterleavedZeroBubble", layout="loop", stages_per_device=2,
             split_backward=True),
    Schedule("zbv", "ScheduleZBVZeroBubble", layout="v", stages_per_device=2, split_backward=True),
]}

DEFAULT_SCHEDULE = "1f1b"
"""What `pipebench plan` and pipebench.plan() plan for when no schedule is named."""
IN_TURN = "gpipe"
"""The schedule of stages that run in turn on one batch: hand plans, device maps, the single baseline."""


def get_schedule(name: str) -> Schedule:
    """The schedule of that name; UserError naming the choices otherwise (the one home of that refusal)."""
    try:
        return SCHEDULES[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown schedule {name!r}; choose one of: {', '.join(SCHEDULES)}") from None


def takes_micro_batches(schedule: str, devices: int, micro_batches: int) -> bool:
    """Whether torch's class of `schedule` runs `micro_batches` on `devices`: the looped ones
    (ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble) take them in max(1, m // p) equal rounds."""
    if get_schedule(schedule).layout != "loop":
        return True
    return micro_batches % max(1, micro_batches // devices) == 0
