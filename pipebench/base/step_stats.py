"""A training step's figures, computed in one place for every layer that states them: samples per second
from a step's milliseconds and its batch (`samples_per_s`), and timed steps summarised (`StepStats`).

The planner's predicted step, the strategies' prices, the worker's result and the results rows all state
the same figures; here they are one formula with one answer where there is no figure: None, for no
step timed and for a step of no time (or no number), whose rate would be infinite. The results rows and
the predictions write None so already, and the JSON files hold no infinity.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

__all__ = ["samples_per_s", "StepStats"]


def samples_per_s(batch: int, step_ms: float | None) -> float | None:
    """Samples a second of a step of `step_ms` ms on `batch` samples; None without a step, or for one of
    0 ms or less (or NaN)."""
    if step_ms is None or not step_ms > 0:
        return None
    return batch / step_ms * 1e3


@dataclass(frozen=True)
class StepStats:
    """Timed steps summarised: what the worker's result.json and a results Row state of them."""

    mean_ms: float | None
    """The mean step; None without a timed step."""
    std_ms: float | None
    """The steps' sample standard deviation; None with fewer than two steps."""
    best_ms: float | None
    """The fastest step; None without a timed step."""
    samples_per_s: float | None
    """The batch over the mean step (`samples_per_s`)."""

    @classmethod
    def of(cls, step_ms: Sequence[float], batch: int) -> "StepStats":
        """The figures of the timed steps `step_ms` (ms each) of a step on `batch` samples."""
        mean = statistics.fmean(step_ms) if step_ms else None
        return cls(mean_ms=mean, std_ms=statistics.stdev(step_ms) if len(step_ms) > 1 else None,
                   best_ms=min(step_ms) if step_ms else None, samples_per_s=samples_per_s(batch, mean))
