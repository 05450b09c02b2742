"""How many threads a CPU process gets when CPU processes stand in for devices.

On a machine without GPUs every "device" is an equal share of the cores, and everything that runs on one
device gets that share: each worker process (whatever the strategy, the single baseline included) and the
profiler that predicts them. A profile timed with all cores predicted workers that each had one; under
load, default thread counts made profiles 10-24x too slow. So the budget is explicit everywhere.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["cores", "threads_per_device", "thread_budget"]


def cores() -> int:
    """The cores this process may run on (its affinity, which a container or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_per_device(devices: int) -> int:
    """One device's share of the cores when `devices` CPU processes stand in for devices (at least 1)."""
    return max(1, cores() // max(1, devices))


@contextmanager
def thread_budget(threads: int) -> Iterator[None]:
    """Run torch with `threads` intra-op threads inside the block, then restore what was set."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
