"""What a CPU process gets when CPU processes stand in for devices: its threads and how it holds memory.

On a machine without GPUs every "device" is an equal share of the cores, and everything that runs on one
device gets that share: each worker process (whatever the strategy, the single baseline included) and the
profiler that predicts them. A profile timed with all cores would predict workers that each have one; under
load, default thread counts make profiles 10-24x too slow. So the budget is explicit everywhere.

Each of them also keeps the memory it frees (`held_memory`), as a GPU's caching allocator does. glibc's
malloc gives large freed blocks back to the kernel and faults them in again at the next step: on the 2-core
machine ResNet-18's step (3x64x64, batch 16) takes 0 to 14,000 page faults and 0 to 37 ms of kernel time,
depending on what the process has allocated before (one warm worker measured from 2,160 to 13,792 faults
a step over five cases running the same step), so that the worker and the profiler, two processes with
other histories, would time the same step differently. Held, every step after the first takes none.

And a CPU process shares its machine: on a VM the host's other load slows every process in bursts of 0.2 to
1.5 s, by up to 1.9x (results/2026-12-02-cpu2-machine-drift). `SpeedGauge` reads the machine's speed of the
moment, so that the profiler's figures, each timed in a window of its own, are all at one speed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import time
from contextlib import contextmanager
from typing import Iterator, Sequence

__all__ = ["cpu_name", "cores", "threads_per_device", "thread_budget", "hold_memory", "held_memory", "SpeedGauge"]

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
"""glibc's mallopt parameters (malloc.h)."""
GLIBC_DEFAULTS = {M_TRIM_THRESHOLD: 128 * 1024, M_MMAP_MAX: 65536}
HELD = {M_TRIM_THRESHOLD: 2**31 - 1, M_MMAP_MAX: 0}
"""No block is mapped on its own (each would be unmapped when freed) and the heap is never trimmed."""


def cpu_name() -> str:
    """The CPU's name, as profiles, their cache keys and the rows of CPU stand-ins record it: the processor
    where Python can tell (x86_64 on Linux says only the architecture), else the machine, else "cpu"."""
    import platform

    return platform.processor() or platform.machine() or "cpu"


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


def unloaded_ms(times: Sequence[float]) -> float:
    """The time of the machine without others' load, from several timings of one thing: their 25th
    percentile. Someone else's load only ever slows a timing, in bursts of 0.2-1.5 s on a shared VM, so the fast
    end is the machine's own; the fastest alone would be one lucky timing."""
    ordered = sorted(times)
    return ordered[int(0.25 * (len(ordered) - 1))]


class SpeedGauge:
    """The machine's speed of the moment, read from a small fixed piece of work (a convolution's forward
    and backward, about 1 ms on one thread) timed on its own.

    The profiler reads it before and after each segment's window and rescales the segment's times to the
    machine's unloaded speed, that of the fastest quarter of the readings so far (`rescale`): a segment
    timed in a burst of someone else's load and one timed outside it come out at one speed, as do the sizes
    profiled seconds apart. (The whole step that calibrates them is timed for seconds and its fastest taken
    instead: partition/profiling/measure.py _whole_step.) A prediction is then of the step without the host's other
    load, as the measured step it is judged against is the fastest of those timed (Row.step_ms_best). On
    a shared 2-vCPU VM the gauge moves with the steps it is read beside: gpt tiny's step ranged 1.71x between
    its 10th and 90th percentile over 25 s, its step over the gauge's reading 1.23x; resnet101 tiny's 1.67x
    and 1.28x."""

    def __init__(self, settle: int = 20):
        import torch

        own = torch.Generator().manual_seed(0)  # the caller's random stream stays as it was
        # float32 whatever the default dtype (a model file's float64): one piece of work wherever it is read
        self._x = torch.randn(4, 16, 16, 16, generator=own, dtype=torch.float32, requires_grad=True)
        self._w = torch.randn(16, 16, 3, 3, generator=own, dtype=torch.float32, requires_grad=True)
        self.readings: list[float] = []
        self.factors: list[float] = []
        self.piece()
        for _ in range(settle):  # a first reference to rescale to
            self.read()

    def piece(self) -> None:
        import torch

        torch.nn.functional.conv2d(self._x, self._w, padding=1).relu().sum().backward()

    def read(self, pieces: int = 4) -> float:
        """ms a piece takes now (the mean of `pieces`, after one untimed: read right after a segment, the
        first piece finds the caches full of the segment's data and takes 20-25% longer, which would make
        every figure of a large model look timed in a burst), kept among the readings."""
        self.piece()
        start = time.perf_counter()
        for _ in range(pieces):
            self.piece()
        ms = (time.perf_counter() - start) * 1e3 / pieces
        self.readings.append(ms)
        return ms

    def unloaded(self) -> float:
        """ms a piece takes at the machine's unloaded speed (`unloaded_ms` of the readings so far)."""
        return unloaded_ms(self.readings)

    def rescale(self, before: float, after: float) -> float:
        """The factor that takes a figure timed between readings `before` and `after` to the machine's
        unloaded speed (`unloaded`; below 1: it was timed while the machine was slowed)."""
        factor = self.unloaded() / ((before + after) / 2)
        self.factors.append(factor)
        return factor
