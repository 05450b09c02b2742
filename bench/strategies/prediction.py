"""The `Prediction` record: what one strategy should give on some devices, as its price (bench/strategies/
pricing.py, or the strategy's package) figures it and bench/predict/ranking.py ranks it. No torch: the cached `pipebench advise` loads none."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipebench.base.step_stats import samples_per_s
from pipebench.partition.planning.plan import Plan

__all__ = ["Prediction"]


@dataclass
class Prediction:
    """What one strategy should give on these devices; `reason` says why a strategy has no figure."""

    strategy: str
    predicted_step_ms: float | None
    predicted_samples_per_s: float | None
    peak_memory_bytes: list[int]
    """Per device the strategy uses."""
    fits: bool
    micro_batches: int
    schedule: str | None
    """The torch schedule it runs (or the simulated one), None for the replica strategies."""
    reason: str = ""
    plan: Plan | None = field(default=None, repr=False)
    recompute: bool = False
    """A replica strategy (DDP, FSDP) recomputes every layer: --checkpoint always, or auto where it would
    not fit otherwise (a Plan says per stage instead)."""
    step_spread: float = 0.0
    """The step's noise as a fraction: the prediction is an interval, step x (1 ± step_spread), from the
    spreads of the profile it was priced from (profile.step_spread); 0 where those are unknown."""
    own_spread: float | None = None
    """The part of step_spread that is this prediction's own: the profile's repeats, without the machine's
    drift (profile.step_spread drift=False). Two own intervals that overlap are a tie whichever is shown
    faster; with the drift, only a slower prediction inside the faster's interval is (`tie`). None:
    step_spread."""

    @classmethod
    def of_step(cls, strategy: str, step_ms: float, batch: int, *, memory: list[int], fits: bool,
                micro_batches: int = 1, schedule: str | None = None, **more: Any) -> "Prediction":
        """A price's figure: the step it predicts on `batch` samples, its samples/s from them
        (pipebench/base/step_stats.py: None for a step of no time), the memory per device and whether it
        fits; `more` the other fields (reason, plan, recompute, spreads)."""
        return cls(strategy, step_ms, samples_per_s(batch, step_ms), memory, fits, micro_batches, schedule, **more)

    @property
    def step_interval_ms(self) -> tuple[float, float] | None:
        """(low, high) step ms: the point prediction widened by its spread; None without a figure."""
        return self._interval(self.step_spread)

    @property
    def own_interval_ms(self) -> tuple[float, float] | None:
        """(low, high) step ms widened by its own spread alone (`own_spread`), which ties are judged by."""
        return self._interval(self.step_spread if self.own_spread is None else self.own_spread)

    def _interval(self, spread: float) -> tuple[float, float] | None:
        if self.predicted_step_ms is None:
            return None
        step = self.predicted_step_ms
        return max(step * (1 - spread), 0.0), step * (1 + spread)

    def to_dict(self) -> dict[str, Any]:
        interval = self.step_interval_ms
        return {"strategy": self.strategy, "predicted_step_ms": self.predicted_step_ms,
                "predicted_step_ms_low": interval[0] if interval else None,
                "predicted_step_ms_high": interval[1] if interval else None, "step_spread": self.step_spread,
                "own_spread": self.own_spread,
                "predicted_samples_per_s": self.predicted_samples_per_s,
                "peak_memory_bytes": self.peak_memory_bytes, "fits": self.fits,
                "micro_batches": self.micro_batches, "schedule": self.schedule, "reason": self.reason,
                "plan_id": self.plan.plan_id if self.plan else None, "recompute": self.recompute}


