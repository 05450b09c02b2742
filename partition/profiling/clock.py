"""The two clocks a piece of work is timed on: the CPU's, until its last launch returns, and the device's,
its pure run time between CUDA events. A pipeline stage costs the larger of the two sums over its
segments (the CPU queues the next launches while the device works), so the profiler keeps both."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from pipebench.partition.profiling.profile_record import relative_spread

__all__ = ["Span", "Clock", "wall", "sync"]


@dataclass(frozen=True)
class Span:
    """Seconds some work took on the CPU (until its last launch returned) and on the device."""

    cpu_s: float
    device_s: float

    @staticmethod
    def mean(spans: "list[Span]") -> "Span":
        return Span(sum(s.cpu_s for s in spans) / len(spans), sum(s.device_s for s in spans) / len(spans))

    @staticmethod
    def spread(spans: "list[Span]") -> float:
        """The runs' relative_spread on the clock that took longer, the device's or the CPU's: a stage costs
        the larger sum, so the other clock's noise is hidden behind it."""
        mean = Span.mean(spans)
        return relative_spread([s.cpu_s if mean.cpu_s > mean.device_s else s.device_s for s in spans])

    def figures(self, what: str) -> dict[str, float | None]:
        """LayerProfile's fields: `<what>_ms`, the device's time, and `<what>_cpu_ms`, the CPU's, which
        only a device that runs asynchronously has (on the CPU both are one time: None)."""
        return {f"{what}_ms": self.device_s * 1e3, f"{what}_cpu_ms": self.cpu_s * 1e3 if self.cpu_s != self.device_s else None}


class Clock:
    """Times work two ways at once. The CPU's time runs until the work's last launch returns. The device's
    runs between two CUDA events around the work, with the stream first held by a sleep kernel a little
    longer than the CPU took to launch the same work last time (each timed run follows warm-ups of the same
    work), so that the device finds it all queued and runs it back to back: its pure run time, even where
    the CPU is the slower (which a synchronised wall clock would report instead). On the CPU both are the
    wall time."""

    MAX_HOLD_MS = 200.0

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.last_cpu_ms: dict[str, float] = {}
        self.cycles_per_ms = _sleep_cycles_per_ms(device) if self.cuda else 0.0

    def each(self, fns: "list[Callable[[], Any]]", what: str) -> list[Span]:
        """Run the fns back to back, each timed; `what` names the work, whose last CPU time sets the next
        hold. On a GPU an event between two runs splits the device's time without a synchronisation."""
        sync(self.device)
        if not self.cuda:
            stamps = [time.perf_counter()]
            for fn in fns:
                fn()
                stamps.append(time.perf_counter())
            return [Span(b - a, b - a) for a, b in zip(stamps, stamps[1:])]
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(fns) + 1)]
        hold_ms = min(1.5 * self.last_cpu_ms.get(what, 10.0) + 1.0, self.MAX_HOLD_MS)
        torch.cuda._sleep(int(hold_ms * self.cycles_per_ms))
        events[0].record()
        stamps = [time.perf_counter()]
        for fn, event in zip(fns, events[1:]):
            fn()
            stamps.append(time.perf_counter())
            event.record()
        sync(self.device)
        self.last_cpu_ms[what] = (stamps[-1] - stamps[0]) * 1e3
        return [Span(stamps[i + 1] - stamps[i], events[i].elapsed_time(events[i + 1]) / 1e3) for i in range(len(fns))]


def _sleep_cycles_per_ms(device: torch.device) -> float:
    """Clock cycles of torch.cuda._sleep per ms on `device`, timed once."""
    cycles = 10_000_000
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # warm-up
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize(device)
    return cycles / max(begin.elapsed_time(end), 1e-3)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall(fn: Callable[[], Any], device: torch.device) -> float:
    """Seconds `fn` takes, the device synchronised before and after."""
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start
