"""The report's notes, each a line under the tables: how far apart a model's cases measured (what is a
tie), whether the predictions ranked the cases in their measured order, what compiling gave against the
eager twin, and why first losses differ where a model has BatchNorm. No torch (the BatchNorm check builds
the zoo's model on the meta device, and only when first losses differ), no printing."""
from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import pandas as pd

from pipebench.bench.report.labels import GROUP, group_labels

__all__ = ["SAME_SPEED", "resolution_notes", "measured_tie", "noise_ms", "misordered_pairs", "measured_ties",
           "order_notes", "measured_text", "compile_notes", "loss_notes"]


SAME_SPEED = 0.03
"""Cases measured closer than this share are a tie whatever their spread (a spread from two or three
timed steps can be small by chance)."""


def _reversed_pairs(summary: pd.DataFrame) -> list[tuple[Any, Any, bool]]:
    """Within each model, the pairs of ok cases that the prediction ranks in the other order from their
    measured means, each once as (measured faster, measured slower, whether they measured a tie).

    A tie: the means are apart by no more than their combined spread, the sum of the two standard
    deviations of their timed steps (their mean ± std intervals overlap; a row without one counts 0), or
    by no more than SAME_SPEED. Either could then have measured faster, and no order is there to judge."""
    pairs = []
    for _, group in summary.groupby(GROUP, sort=False):
        known = group[(group["status"] == "ok") & group["predicted_step_ms"].notna() & (group["predicted_step_ms"] > 0)]
        rows = [row for _, row in known.iterrows()]
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                fast, slow = (a, b) if a["step_ms"] <= b["step_ms"] else (b, a)
                if fast["predicted_step_ms"] <= slow["predicted_step_ms"]:
                    continue
                pairs.append((fast, slow, measured_tie(fast, slow)))
    return pairs


def measured_tie(fast, slow) -> bool:
    """Whether two ok cases measured a tie: their means apart by no more than the sum of their noises
    (`noise_ms`: the spread of their round means, where they were measured in rounds, else of their
    steps), or by no more than SAME_SPEED; `fast` measured the faster."""
    gap = slow["step_ms"] - fast["step_ms"]
    return gap <= _noise(fast) + _noise(slow) or slow["step_ms"] <= fast["step_ms"] * (1 + SAME_SPEED)


def noise_ms(round_ms: Sequence[float] | None, step_ms_std: float | None) -> float:
    """A case's noise, in ms: the standard deviation of its round means where it ran two rounds or more
    (bench/cases/rounds.py run_rounds: what moves between rounds, the order and the machine's drift, is in it),
    else of its timed steps; NaN where neither was measured."""
    import statistics

    if round_ms is not None and len(round_ms) > 1:
        return statistics.stdev(round_ms)
    return math.nan if step_ms_std is None else float(step_ms_std)


def _noise(row) -> float:
    noise = row.get("noise_ms")
    if noise is None or (isinstance(noise, float) and math.isnan(noise)):
        noise = row.get("step_ms_std")
    return 0.0 if noise is None or math.isnan(noise) else float(noise)


def _std(row) -> float:
    std = row.get("step_ms_std")
    return 0.0 if std is None or math.isnan(std) else float(std)


def misordered_pairs(summary: pd.DataFrame) -> list[tuple[Any, Any]]:
    """Within each model, the pairs of ok cases whose predicted order was wrong: the prediction ranks one
    faster, the measurement the other, by more than their noise (_reversed_pairs). Each pair once, the
    one measured faster first."""
    return [(fast, slow) for fast, slow, tied in _reversed_pairs(summary) if not tied]


def measured_ties(summary: pd.DataFrame) -> list[tuple[Any, Any]]:
    """The pairs predicted in the other order from their measured means that measured a tie: apart by less
    than their noise, so the prediction is not judged wrong (_reversed_pairs)."""
    return [(fast, slow) for fast, slow, tied in _reversed_pairs(summary) if tied]


def order_notes(summary: pd.DataFrame) -> list[str]:
    """For each model with at least two predicted cases: one line per pair whose predicted order was wrong
    (misordered_pairs), or one line saying the order held; then one line naming the pairs predicted in
    the other order that measured a tie (measured_ties), if any."""
    lines = []
    labels = group_labels(summary)
    for key, group in summary.groupby(GROUP, sort=False):
        predicted = group[(group["status"] == "ok") & group["predicted_step_ms"].notna() & (group["predicted_step_ms"] > 0)]
        if len(predicted) < 2:
            continue
        wrong, ties = misordered_pairs(group), measured_ties(group)
        name = labels[key]
        if not wrong:
            lines.append(f"Predicted order: {name}: every pair of cases measured apart by more than their noise "
                         f"(the sum of their steps' standard deviations, and {SAME_SPEED:.0%}) was ranked right by "
                         f"its prediction.")
        for fast, slow in wrong:
            lines.append(f"Predicted order wrong: {name}: {fast['case']} measured {measured_text(fast)} ms, faster than "
                         f"{slow['case']} at {measured_text(slow)} ms by more than their noise, but was predicted slower "
                         f"({fast['predicted_step_ms']:.1f} against {slow['predicted_step_ms']:.1f} ms).")
        if ties:
            pairs = "; ".join(f"{fast['case']} {measured_text(fast)} and {slow['case']} {measured_text(slow)} ms"
                              for fast, slow in ties)
            lines.append(f"Measured a tie: {name}: {pairs}: apart by less than their noise, so the predicted order "
                         f"of these {len(ties)} pair(s) is not judged.")
    return lines


def measured_text(row) -> str:
    """'26.5 ± 2.4': a case's mean step ms and its noise (`noise_ms`; the spread of its steps in a
    summary without it), where it has one."""
    noise = row.get("noise_ms")
    if noise is None or (isinstance(noise, float) and math.isnan(noise)):
        noise = row.get("step_ms_std")
    return f"{row['step_ms']:.1f}" + ("" if noise is None or math.isnan(noise) else f" ± {noise:.1f}")


COMPILE_PAIR = ["model", "flavour", "settings", "batch", "device_name", "strategy", "gpus", "precision", "optimizer",
                "checkpoint"]
"""What a compiled case shares with the eager case it is set beside (the micro-batch count too, where
both ran with several)."""


def compile_notes(summary: pd.DataFrame) -> list[str]:
    """One line per compiled case that ran beside its eager twin: the compiled step against the eager one
    (a ratio above 1: compiled is faster), its prediction, the compile seconds and the graph breaks."""
    lines = []
    ok = summary[summary["status"] == "ok"]
    eager = ok[ok["compile"].isna()]
    for _, row in ok[ok["compile"].notna()].iterrows():
        twins = eager
        for name in COMPILE_PAIR:
            twins = twins[twins[name] == row[name]]
        if len(twins) > 1:
            twins = twins[twins["micro_batches"] == row["micro_batches"]]
        if len(twins) != 1:
            continue
        twin = twins.iloc[0]
        label = f"{row['model']} {row['flavour']}".strip() + f" b{row['batch']} {row['case']}"
        predicted = (f", predicted {row['predicted_step_ms']:.1f} ms" if pd.notna(row["predicted_step_ms"]) else "")
        compiled_in = f", compiled in {row['compile_s']:.1f} s" if pd.notna(row["compile_s"]) else ""
        breaks = (f", {int(row['graph_breaks'])} graph break(s)" if pd.notna(row["graph_breaks"]) else "")
        lines.append(f"Compiled: {label}: {row['compile']} {twin['step_ms'] / row['step_ms']:.2f}x eager (step "
                     f"{row['step_ms']:.1f} ms against {twin['step_ms']:.1f}{predicted}){compiled_in}{breaks}.")
    return lines


def loss_notes(summary: pd.DataFrame) -> list[str]:
    """One line per group whose ok cases started from different losses and whose model has BatchNorm:
    this is expected there, and the README's "first losses agree" does not hold for such a model."""
    lines = []
    labels = group_labels(summary)
    for key, group in summary.groupby(GROUP, sort=False):
        losses = group.loc[group["status"] == "ok", "first_loss"].dropna()
        if len(losses) < 2 or math.isclose(losses.min(), losses.max(), rel_tol=1e-4, abs_tol=1e-6):
            continue
        if _has_batch_norm(key[0], key[1]):
            lines.append(f"Note: {labels[key]}: first losses differ between strategies "
                         f"({losses.min():.5f} to {losses.max():.5f}), as expected: the model has BatchNorm layers, "
                         f"which normalise each micro-batch (or each process's share of the batch) with its own "
                         f"statistics. Models without BatchNorm start from equal losses.")
    return lines


def resolution_notes(summary: pd.DataFrame) -> list[str]:
    """One line per model measured in rounds: how many, and how far apart its cases' rounds came (the
    median noise as a share of the step): differences below about twice that are ties, not speed-ups."""
    lines = []
    labels = group_labels(summary)
    for key, group in summary.groupby(GROUP, sort=False):
        ok = group[(group["status"] == "ok") & (group["rounds"] > 1)]
        if ok.empty:
            continue
        share = (ok["noise_ms"] / ok["step_ms"]).median()
        lines.append(f"Resolution: {labels[key]}: {ok['rounds'].min()} interleaved round(s) per case; their means "
                     f"moved {share:.1%} of a step (median over {len(ok)} case(s)), so cases closer than about "
                     f"{max(2 * share, SAME_SPEED):.0%} measured a tie.")
    return lines


@functools.lru_cache(maxsize=None)
def _has_batch_norm(model: str, flavour: str) -> bool:
    """Whether the zoo's `model` has BatchNorm layers, built on the meta device (no memory, no weights);
    False for a model of your own (a report does not run your file) or one that cannot be built here.
    Loads torch, so it is asked only when first losses differ."""
    if ":" in model:  # path/to/file.py:NAME or package.module:NAME
        return False
    try:
        from torch.nn.modules.batchnorm import _BatchNorm

        from pipebench import models

        built = models.get_model(model, None if flavour in ("", "full") else flavour, device="meta")
    except Exception:  # noqa: BLE001 - any failure to build means "cannot tell", never a failed report
        return False
    return any(isinstance(m, _BatchNorm) for m in built.module.modules())
