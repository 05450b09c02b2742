"""A case of the benchmark suite, and the cases a run is asked for.

A case is (model, flavour, batch, strategy, micro-batch count, training: precision, optimizer, checkpoint
mode); `make_cases` makes every case of a run, and `CaseUnavailable` says why one cannot run. The rest of a
case's way: bench/cases/prepare.py (profiled, planned, its Job), bench/cases/rounds.py (its steps timed),
bench/cases/case_rows.py (its Row) and bench/cases/run_suite.py (`pipebench run`'s cases in rounds).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Sequence

from pipebench.bench.store.row import settings_text
from pipebench.bench.strategies import STRATEGIES, get_strategy
from pipebench.model_spec import is_user_model
from pipebench.base.training import Training


DEFAULT_MODELS = {"gpt": 64, "resnet101": 256}
"""The default suite's models and global batches (the README's GPU figures are for these)."""


QUICK_BATCH = 8


def overrides_key(overrides: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The model's settings (`--set`, `overrides=`) as `Case.overrides` holds them: sorted (key, value)
    pairs, a list made a tuple, so that a case hashes and the same settings make one case whatever their
    order."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in overrides.items()))


class CaseUnavailable(Exception):
    """The case cannot run as asked (too few layers for the stages, a batch that does not split...)."""


@dataclass(frozen=True)
class Case:
    model: str
    flavour: str | None
    batch: int
    strategy: str
    micro_batches: int | None = None
    """None: the planner's choice (micro-batched strategies); always 1 for the others."""
    overrides: tuple[tuple[str, Any], ...] = ()
    training: Training = Training()
    """Precision, optimizer and checkpoint mode: rows of another training are another case."""
    data_dir: str | None = None
    """A local MNIST folder the model trains on (`--data-dir`; the convnet), None: synthetic batches."""

    @property
    def schedule(self) -> str:
        """The pipeline schedule of a micro-batched strategy, "" for the others (as rows record it)."""
        strategy = STRATEGIES.get(self.strategy)
        return strategy.schedule.name if strategy is not None and strategy.micro_batched else ""

    @property
    def virtual_stages(self) -> int:
        strategy = STRATEGIES.get(self.strategy)
        return strategy.stages_per_device if strategy is not None else 1

    def label(self) -> str:
        strategy = STRATEGIES.get(self.strategy)
        m = f" m={self.micro_batches or 'auto'}" if strategy is not None and strategy.micro_batched else ""
        flavour = "" if is_user_model(self.model) else f" {self.flavour or 'full'}"
        training = "" if self.training == Training() else f" ({self.training.label()})"
        return f"{self.model}{flavour} b{self.batch} {self.strategy}{m}{training}"


def make_cases(models: dict[str, int], strategies: Sequence[str], micro_batches: Sequence[int | None], *,
               flavour: str | None = None, overrides: dict[str, Any] | None = None,
               training: Training = Training(), data_dir: str | None = None) -> list[Case]:
    """Every model x strategy, and for micro-batched strategies every count in `micro_batches` (None = planner's)."""
    from pipebench import models as zoo

    defaults = {info.name: info.default_flavour for info in zoo.list_models()}
    extra = overrides_key(overrides or {})
    cases = []
    for model, batch in models.items():
        named = None if zoo.is_user_model(model) else flavour or defaults.get(model)  # e.g. "800m", not "full"
        for strategy in strategies:
            counts = micro_batches if get_strategy(strategy).micro_batched else [1]
            cases += [Case(model, named, batch, strategy, m, extra, training, data_dir) for m in counts]
    return cases


def case_settings(case: Case) -> str:
    """The row's `settings`: what changes the training itself, for every strategy alike (so rows of
    other settings are other cases for --resume and the report). A new setting is one entry here."""
    return settings_text({**dict(case.overrides), **({"data_dir": case.data_dir} if case.data_dir else {})})


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
