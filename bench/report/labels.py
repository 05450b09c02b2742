"""How the report and its plots name what they show: the groups rows are compared within, a case's label,
a group's label, and which strategies are pipelines. No torch, no matplotlib, and pandas only for the
report's tables (advise asks is_pipeline without it)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pipebench.bench.strategies import STRATEGIES
from pipebench.base.training import Training

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GROUP", "is_pipeline", "case_label", "group_label", "group_labels", "one_device"]

GROUP = ["model", "flavour", "settings", "training", "batch", "device_name"]
"""Rows are compared with each other only within one of these groups (`settings`: the `--set` values,
which make another model; `training`: precision, optimizer and checkpoint mode, as Training.label says)."""


def is_pipeline(strategy: str) -> bool:
    """The registry entry's `Strategy.is_pipeline`, by name: a results row may name a strategy it does not
    know (no)."""
    known = STRATEGIES.get(strategy)
    return known is not None and known.is_pipeline


def case_label(strategy: str, schedule: str, micro_batches: int | None, virtual_stages: int) -> str:
    """E.g. "single", "pipeline 1f1b (m=8)", "pp-interleaved (m=8, v=2)"; micro_batches None leaves m out."""
    label = strategy
    known = STRATEGIES.get(strategy)
    if schedule and not (known is not None and known.named_after_schedule) and schedule not in strategy:
        label += f" {schedule}"
    extras = []
    if micro_batches is not None and (is_pipeline(strategy) or micro_batches > 1):
        extras.append(f"m={micro_batches}")
    if virtual_stages > 1:
        extras.append(f"v={virtual_stages}")
    return f"{label} ({', '.join(extras)})" if extras else label


def group_label(df: pd.DataFrame, key: tuple, batch: bool = False) -> str:
    """'gpt 800m', with the --set settings ('gpt 800m (depth=4)'), the training where it is not TF32 SGD or
    the results hold several ('gpt 800m, bf16 adamw'), the batch (always if asked) and the GPU kind added
    where the results hold several. One group's: a loop over groups takes `group_labels` once."""
    return group_labels(df, batch)[key]


def group_labels(df: pd.DataFrame, batch: bool = False) -> dict[tuple, str]:
    """`group_label` of every group of `df`, in one pass over it (a report of thousands of cases stays
    linear)."""
    several_trainings = df["training"].nunique() > 1
    several_devices = df["device_name"].nunique() > 1
    batches = df.groupby(["model", "flavour"])["batch"].nunique().to_dict()
    labels = {}
    for key in df.groupby(GROUP, sort=False).groups:
        model, flavour, settings, training, size, device = key
        label = f"{model} {flavour}".strip() + (f" ({settings.replace(';', ', ')})" if settings else "")  # own models: no flavour
        if training != Training().label() or several_trainings:
            label += f", {training}"
        if batch or batches[(model, flavour)] > 1:
            label += f", batch {size}"
        if several_devices:
            label += f", {device or 'unknown device'}"
        labels[key] = label
    return labels


def one_device(group: "pd.DataFrame") -> str:
    """What single ran on, for a line about its speed-up: "one GPU", or "one CPU process" where CPU
    processes stood in for the devices."""
    return "one CPU process" if (group["gpus"] == "cpu").all() else "one GPU"
