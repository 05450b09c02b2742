"""How far this machine's speed moves from moment to moment (CPU stand-ins): the least interval of a CPU
prediction."""
from __future__ import annotations

import statistics
import time

from pipebench.base.snapshot import own_state

__all__ = ["DRIFT_SECONDS", "drift_seconds", "measure_machine_drift", "drift_of"]


DRIFT_SECONDS = 2.0
"""How long measure_machine_drift watches the machine, and how long a CPU profile times its whole step
(partition/profiling/measure.py _whole_step): long enough to catch some of the bursts of a busy host (0.2-1.5 s
each on ours) and to see past them, short enough for a first answer. $PIPEBENCH_DRIFT_SECONDS changes it
(the tests, whose many small profiles each watch it, take 0.2)."""


def drift_seconds() -> float:
    """DRIFT_SECONDS, or $PIPEBENCH_DRIFT_SECONDS where set (UserError unless a number of seconds > 0)."""
    from pipebench.base.text.units import env_seconds

    return env_seconds("PIPEBENCH_DRIFT_SECONDS", DRIFT_SECONDS, 3600)


@own_state()  # pipebench's torch settings, whatever the caller's or a model file's
def measure_machine_drift(threads: int, seconds: float | None = None, window_ms: float = 25.0) -> float:
    """How far this machine's speed moves from moment to moment, as a fraction of a step: a fixed piece of
    work (SpeedGauge's, on `threads` threads) timed over and over for `seconds` (None: drift_seconds()), in
    windows of `window_ms`; half the range between the 10th and 90th percentile of the windows' times per
    piece, over their median (0.28: the same step takes about ±28% of its typical time).

    CPU stand-ins only. Within a step, repeats agree to a few percent, but a VM shares its host: on a shared
    2-vCPU VM every copy of one model in one process slows together, in bursts of 0.2 to 1.5 s, from
    4.3 to 7-9.6 ms a step (results/2026-12-02-cpu2-machine-drift). A profile and a run minutes apart
    each catch the machine in one of its states, which no repeat within either one shows; a prediction's
    interval (partition/profiling/profile_record.py step_spread) is at least this wide."""
    from pipebench.hardware.cpu import SpeedGauge, thread_budget

    seconds = drift_seconds() if seconds is None else seconds
    windows = []
    with thread_budget(threads):
        gauge = SpeedGauge(settle=0)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end or len(windows) < 3:
            start, n = time.perf_counter(), 0
            while (elapsed := time.perf_counter() - start) * 1e3 < window_ms or n == 0:
                gauge.piece()
                n += 1
            windows.append(elapsed / n)
    return drift_of(windows)


def drift_of(windows: list[float]) -> float:
    """measure_machine_drift's figure from its windows' times per piece (at least 1e-4: a figure, never 0)."""
    low, high = statistics.quantiles(windows, n=10, method="inclusive")[::8]
    return max(1e-4, (high - low) / 2 / statistics.median(windows))
