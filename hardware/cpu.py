"""What a CPU process gets when CPU processes stand in for devices: its threads and how it holds memory.

On a machine without GPUs every "device" is an equal share of the cores, and everything that runs on one
device gets that share: each worker process (whatever the strategy, the single baseline included) and the
profiler that predicts them. A profile timed with all cores predicted workers that each had one; under
load, default thread counts made profiles 10-24x too slow. So the budget is explicit everywhere.

Each of them also keeps the memory it frees (`held_memory`), as a GPU's caching allocator does. glibc's
malloc gives large freed blocks back to the kernel and faults them in again at the next step: on the 2-core
machine ResNet-18's step (3x64x64, batch 16) took 0 to 14,000 page faults and 0 to 37 ms of kernel time,
depending on what the process had allocated before (one warm worker measured from 2,160 to 13,792 faults
a step over five cases running the same step), so that the worker and the profiler, two processes with
other histories, timed the same step differently. Held, every step after the first takes none.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["cores", "threads_per_device", "thread_budget", "hold_memory", "held_memory"]

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
"""glibc's mallopt parameters (malloc.h)."""
GLIBC_DEFAULTS = {M_TRIM_THRESHOLD: 128 * 1024, M_MMAP_MAX: 65536}
HELD = {M_TRIM_THRESHOLD: 2**31 - 1, M_MMAP_MAX: 0}
"""No block is mapped on its own (each would be unmapped when freed) and the heap is never trimmed."""


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


def hold_memory(hold: bool = True) -> bool:
    """From now on, this process keeps the memory it frees for its next allocations (hold), or gives it
    back to the kernel as glibc does by default (not hold). False where the C library is not glibc
    (nothing changes there)."""
    libc = _glibc()
    if libc is None:
        return False
    return all(libc.mallopt(param, value) == 1 for param, value in (HELD if hold else GLIBC_DEFAULTS).items())


@contextmanager
def held_memory() -> Iterator[None]:
    """Keep freed memory inside the block (`hold_memory`); after it, give back what is free and set glibc's
    default thresholds again (its starting values: the mmap threshold that glibc raises as a process frees
    large blocks starts over, fixed)."""
    held = hold_memory()
    try:
        yield
    finally:
        if held:
            hold_memory(False)
            _glibc().malloc_trim(0)


def _glibc():
    """The C library, if it is glibc (it has mallopt and malloc_trim); None otherwise."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt, libc.malloc_trim  # noqa: B018
        libc.gnu_get_libc_version  # noqa: B018 (musl has a mallopt that does nothing)
    except (OSError, AttributeError, TypeError):
        return None
    return libc
