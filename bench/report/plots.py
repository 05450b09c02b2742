"""The report's PNG plots: throughput by strategy, throughput against micro-batches, measured and simulated
timelines. matplotlib is imported inside the functions, so only drawing a plot loads it (bench/report/tables.py
imports this module when write_report draws)."""
from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import pandas as pd

from pipebench.bench.report.labels import GROUP, case_label, group_labels, is_pipeline, one_device
from pipebench.bench.store.row import CASE_FIELDS
from pipebench.bench.strategies import BASELINE, LEVELS
from pipebench.base.fileio.file_names import slug

__all__ = ["write_plots"]

_KIND_COLOURS = {"F": "#4C72B0", "B": "#DD8452", "I": "#55A868", "W": "#8172B3"}
_KIND_NAMES = {"F": "forward", "B": "backward", "I": "backward, input grad", "W": "backward, weight grad"}
_OTHER_KIND = "#937860"
_IDLE = "#E6E6E6"

MAX_PANELS, MAX_BARS, MAX_SERIES, MAX_LANES, MAX_TIMELINES = 12, 40, 8, 32, 24
"""A plot shows at most MAX_PANELS models, MAX_BARS cases per model (the fastest), MAX_SERIES lines per
panel (the fastest) and MAX_LANES timeline lanes, and at most MAX_TIMELINES timelines are drawn; a note says what was left out. Unbounded, 2,000 cases make a PNG 84,288 pixels tall, and 1,500 lanes
one of 214 megapixels, which image viewers refuse to open. summary.csv and report.md keep every case."""


def write_plots(summary: pd.DataFrame, cases: pd.DataFrame, out: Path, footer: str, notes: list[str],
                csv_files: Sequence[Path] = (), progress: Callable[[int, int, str], None] | None = None) -> list[Path]:
    """Draw the plots of `summary` (report.summarise) into `out`, with `cases` (report.frame) for the
    timelines; returns the paths written. A plot without data is left out and a line in `notes` says why;
    `footer` (hardware, versions, the command) goes under every plot. csv_files: the CSV files the rows
    came from, which hold no timelines (a missing timeline is then blamed on them, not on the cases).
    progress(done, total, what) hears each plot as it starts."""
    groups = list(summary.groupby(GROUP, sort=False))
    total = 2 + min(len(groups), MAX_TIMELINES)
    say = progress or (lambda done, total, what: None)
    labels = _Labels(group_labels(summary), group_labels(summary, batch=True))
    say(0, total, "throughput")
    plots = [_plot_throughput(summary, labels, out / "throughput.png", footer, notes)]
    say(1, total, "throughput against micro-batches")
    plots.append(_plot_micro_batches(summary, labels, out / "micro_batches.png", footer, notes))
    timelines = _timelines(cases)
    if len(groups) > MAX_TIMELINES:
        notes.append(f"timelines: drawn for the first {MAX_TIMELINES} of {len(groups)} models")
    for k, (key, group) in enumerate(groups[:MAX_TIMELINES], 2):
        say(k, total, f"timeline of {labels.plain[key]}")
        path = out / f"timeline-{_slug(labels.with_batch[key])}.png"
        plots.append(_plot_timeline(labels, key, group, timelines, path, footer, notes, csv_files))
    say(total, total, "plots drawn")
    return [p for p in plots if p is not None]


class _Labels(NamedTuple):
    """Each group's label (labels.group_labels), without and with its batch."""

    plain: dict
    with_batch: dict


_TIMELINE_KEY = [*CASE_FIELDS, "device_name"]


def _timelines(cases: pd.DataFrame) -> dict[tuple, Any]:
    """The cases that recorded a measured timeline, by their key; made once for every plot."""
    keys = zip(*(cases[c] for c in _TIMELINE_KEY))
    return {key: row for key, row, timeline in zip(keys, cases.to_dict("records"), cases["timeline"]) if timeline}


SLUG_LENGTH = 80
"""The longest file-name part made from a label; a longer one keeps its start and a hash of the whole,
so that two long names stay apart and every name fits the file system's 255 bytes."""


def _slug(text: str) -> str:
    name = slug(text, keep="._").lower()
    if len(name) <= SLUG_LENGTH and name:
        return name
    return f"{name[:SLUG_LENGTH - 9]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}".lstrip("-")


def _save(fig, path: Path, footer: str) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # A figure label, so that the constrained layout keeps room for it under the axes and legends.
    fig.supxlabel(footer, fontsize=7, color="0.4", x=0.01, ha="left")
    FigureCanvasAgg(fig)  # render with Agg, whatever backend pyplot users have chosen
    fig.savefig(path, dpi=120)
    return path


def _capped(groups: list, what: str, notes: list[str], bars: bool = True) -> list:
    """At most MAX_PANELS of `groups` ((key, frame) pairs), each with at most MAX_BARS rows, the fastest
    kept in their order; a note for what is left out."""
    if len(groups) > MAX_PANELS:
        notes.append(f"{what}: the first {MAX_PANELS} of {len(groups)} models drawn; summary.csv has them all")
        groups = groups[:MAX_PANELS]
    if not bars:
        return groups
    capped = []
    for key, group in groups:
        if len(group) > MAX_BARS:
            notes.append(f"{what}: the {MAX_BARS} fastest of {len(group)} cases of one model drawn; summary.csv "
                         "has them all")
            group = group.loc[group["samples_per_s"].fillna(-1.0).nlargest(MAX_BARS).index.sort_values()]
        capped.append((key, group))
    return capped


def _plot_throughput(summary: pd.DataFrame, labels: _Labels, path: Path, footer: str, notes: list[str]) -> Path:
    """(a) One horizontal bar per case, one panel per model; the speed-up over single on each bar and on
    a second axis along the top."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    groups = _capped(list(summary.groupby(GROUP, sort=False)), "throughput by strategy", notes)
    heights = [0.35 * len(g) + 1.6 for _, g in groups]
    fig = Figure(figsize=(9, sum(heights) + 0.8), layout="constrained")
    axes = fig.subplots(len(groups), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (key, group) in zip(axes, groups):
        speed = group["samples_per_s"].fillna(0.0)
        ticks = [f"{c}  [{g}]" for c, g in zip(group["case"], group["gpus"])]
        colours = ["#4C72B0" if is_pipeline(s) else "#8C8C8C" for s in group["strategy"]]
        ax.barh(range(len(group)), speed, color=colours)
        ax.set_yticks(range(len(group)), ticks, fontsize=8)
        ax.invert_yaxis()  # first case at the top
        top = speed.max() or 1.0
        for y, r in enumerate(group.itertuples()):
            if r.status != "ok":
                ax.text(0, y, f" {r.status}", va="center", fontsize=8, color="#C44E52")
            elif pd.notna(r.x_single):
                ax.text(r.samples_per_s + top * 0.01, y, f"{r.x_single:.2f}x", va="center", fontsize=8)
        ax.set_xlim(0, top * 1.15)
        ax.set_xlabel("throughput (samples/s)" + (", this panel's own scale" if len(groups) > 1 else ""))
        devices = "CPU processes" if (group["gpus"] == "cpu").all() else "GPU ids"
        ax.set_title(f"{labels.with_batch[key]}: throughput by strategy [{devices}]", fontsize=10)
        single = _fastest(group, BASELINE)
        if single:
            second = ax.secondary_xaxis("top", functions=(lambda x, s=single: x / s, lambda k, s=single: k * s))
            second.set_xlabel(f"speed-up over {one_device(group)} (x)", fontsize=8)
    fig.legend(handles=[Patch(color="#4C72B0", label="pipeline (micro-batches)"),
                        Patch(color="#8C8C8C", label="other strategies")], loc="outside upper right", fontsize=8)
    return _save(fig, path, footer)


def _plot_micro_batches(summary: pd.DataFrame, labels: _Labels, path: Path, footer: str,
                        notes: list[str]) -> Path | None:
    """(b) Throughput against the micro-batch count: one line per pipeline strategy (and schedule, stages
    per device, GPUs), one panel per model; the fastest single, dataparallel and ddp runs as levels."""
    ok = summary[(summary["status"] == "ok") & summary["strategy"].map(is_pipeline)]
    series_keys = ["strategy", "schedule", "virtual_stages", "gpus"]
    panels = [(key, group) for key, group in ok.groupby(GROUP, sort=False)
              if group.groupby(series_keys)["micro_batches"].nunique().max() > 1]
    panels = _capped(panels, "throughput against micro-batches", notes, bars=False)
    if not panels:
        notes.append("throughput against micro-batches: not drawn, no pipeline strategy ran ok at two or more "
                     "micro-batch counts")
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6 * len(panels) + 0.4), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (key, group) in zip(axes, panels):
        series = list(group.groupby(series_keys, sort=False))
        if len(series) > MAX_SERIES:  # the fastest lines; a legend of more fills the panel
            notes.append(f"throughput against micro-batches: the {MAX_SERIES} fastest of {len(series)} lines of "
                         f"{labels.plain[key]} drawn")
            series = sorted(series, key=lambda s: -s[1]["samples_per_s"].max())[:MAX_SERIES]
        for (strategy, schedule, v, gpus), line in series:
            line = line.sort_values("micro_batches")
            label = case_label(strategy, schedule, None, v)
            ax.plot(line["micro_batches"], line["samples_per_s"], marker="o", label=f"{label} [{gpus}]")
        everything = summary[(summary[GROUP] == pd.Series(key, index=GROUP)).all(axis=1)]
        for strategy, style in zip(LEVELS, ("--", ":", "-.")):
            level = _fastest(everything, strategy)
            if level:
                ax.axhline(level, linestyle=style, color="0.3", linewidth=1, label=f"{strategy} (fastest)")
        counts = sorted(group["micro_batches"].unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set_xlabel("micro-batches per step (m)")
        ax.set_ylabel("throughput (samples/s)" + ("\nthis panel's own scale" if len(panels) > 1 else ""))
        ax.set_ylim(bottom=0)
        ax.set_title(f"{labels.with_batch[key]}: throughput against micro-batch count", fontsize=10)
        ax.legend(fontsize=8)
    return _save(fig, path, footer)


def _plot_timeline(labels: _Labels, key: tuple, group: pd.DataFrame, timelines: dict[tuple, Any], path: Path,
                   footer: str, notes: list[str], csv_files: Sequence[Path] = ()) -> Path | None:
    """(c) The fastest ok pipeline case that recorded a timeline: its measured step above the Plan's
    simulated one, one lane per (device, stage), so the bubble shows as grey. Each panel has its own time
    axis: a prediction 20x off must not squeeze the measured step into a sliver."""
    name = labels.plain[key]
    best = _timeline_case(name, group, timelines, notes, csv_files)
    if best is None:
        return None
    panels = _timeline_panels(name, best, timelines[tuple(best[c] for c in _TIMELINE_KEY)], notes)
    from matplotlib.figure import Figure

    lanes, panels = _drawn_lanes(name, panels, notes)
    fig = Figure(figsize=(11, 1.4 + len(panels) * (0.45 * len(lanes) + 1.1)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    spans = [max(op["end_ms"] for op in ops) - min(op["start_ms"] for op in ops) for _, ops, _ in panels]
    own_scales = max(spans) > 1.5 * min(spans)  # then say so: the bars' lengths do not compare across panels
    kinds: set[str] = set()
    for ax, panel in zip(axes, panels):
        kinds |= _draw_timeline_panel(ax, panel, lanes, None if own_scales else max(spans))
    _kinds_legend(fig, kinds)
    fig.suptitle(_wrap(_timeline_title(labels.with_batch[key], best), 100))
    return _save(fig, path, f"{footer}; the number in a bar is its micro-batch")


def _timeline_case(name: str, group: pd.DataFrame, timelines: dict[tuple, Any], notes: list[str],
                   csv_files: Sequence[Path]) -> pd.Series | None:
    """The summary row of the fastest ok pipeline case of `group` that recorded a timeline; None, and a
    note that says why (the CSV files hold none, or no case recorded one), where there is none."""
    pipelines = group[(group["status"] == "ok") & group["strategy"].map(is_pipeline)]
    ok = pipelines[[k in timelines for k in zip(*(pipelines[c] for c in _TIMELINE_KEY))]]
    if not ok.empty:
        return ok.loc[ok["samples_per_s"].idxmax()]
    if not pipelines.empty and csv_files:
        notes.append(f"timeline for {name}: not drawn, a results CSV holds no timelines "
                     f"({', '.join(f.name for f in csv_files)}); report the .json file beside it to draw them")
    else:
        notes.append(f"timeline for {name}: not drawn, no ok pipeline case recorded a measured timeline")
    return None


def _timeline_panels(name: str, best: pd.Series, case: dict, notes: list[str]) -> list[tuple[str, list, str]]:
    """The panels to draw, each (title, operations, what its title adds): the measured step, and the
    simulated one where the case has it (a note where it has not)."""
    mean = f" (the timed steps' mean, untraced: {best['step_ms']:.1f} ms)"
    panels = [("the last timed step, traced", case["timeline"], mean)]
    if case["predicted_timeline"]:
        panels.append(("simulated by the plan", case["predicted_timeline"], ""))
    else:
        notes.append(f"timeline for {name}: {best['case']} has no predicted timeline; measured step drawn alone")
    return panels


def _drawn_lanes(name: str, panels: list[tuple[str, list, str]],
                 notes: list[str]) -> tuple[list[tuple], list[tuple[str, list, str]]]:
    """The (device, stage) lanes the panels use, in order, and the panels; beyond MAX_LANES lanes, the
    first MAX_LANES, each panel's operations on them alone, a panel left with none dropped, and a note."""
    lanes = sorted({(op["device"], op["stage"]) for _, ops, _ in panels for op in ops}, key=lambda l: (str(l[0]), l[1]))
    if len(lanes) <= MAX_LANES:
        return lanes, panels
    notes.append(f"timeline for {name}: the first {MAX_LANES} of {len(lanes)} lanes drawn")
    lanes = lanes[:MAX_LANES]
    drawn = set(lanes)
    return lanes, [(title, kept, aside) for title, ops, aside in panels
                   if (kept := [op for op in ops if (op["device"], op["stage"]) in drawn])]


def _draw_timeline_panel(ax, panel: tuple[str, list, str], lanes: list[tuple], widest: float | None) -> set[str]:
    """One panel: each lane's idle time in grey under its operations, coloured by kind and numbered by
    micro-batch where wide enough, on the time axis of the widest panel (`widest`; None: its own).
    Returns the kinds of operation drawn."""
    title, ops, aside = panel
    origin = min(op["start_ms"] for op in ops)
    span = max(op["end_ms"] for op in ops) - origin
    kinds: set[str] = set()
    for y, lane in enumerate(lanes):
        ax.barh(y, span, left=0, height=0.8, color=_IDLE)  # idle time shows through between operations
        for op in (op for op in ops if (op["device"], op["stage"]) == lane):
            start, width = op["start_ms"] - origin, op["end_ms"] - op["start_ms"]
            kinds.add(op["kind"])
            ax.barh(y, width, left=start, height=0.8, color=_KIND_COLOURS.get(op["kind"], _OTHER_KIND),
                    edgecolor="white", linewidth=0.5)
            if width > span / 60:
                ax.text(start + width / 2, y, str(op["micro"]), ha="center", va="center", fontsize=7, color="white")
    ax.set_yticks(range(len(lanes)), [f"device {d}, stage {s}" for d, s in lanes])
    ax.invert_yaxis()
    ax.set_xlim(0, (span if widest is None else widest) * 1.01)  # one scale, unless the panels say otherwise
    ax.set_xlabel("time since the step's first operation (ms)" + (", this panel's own scale" if widest is None else ""))
    ax.set_title(_wrap(f"{title}: {span:.1f} ms from first to last operation{aside}", 120), fontsize=10)
    return kinds


def _kinds_legend(fig, kinds: set[str]) -> None:
    """The legend of the kinds of operation drawn (F, B, I, W, then any other) and of idle time."""
    from matplotlib.patches import Patch

    order = [k for k in _KIND_COLOURS if k in kinds] + sorted(kinds - set(_KIND_COLOURS))  # F, B, I, W, others
    handles = [Patch(color=_KIND_COLOURS.get(k, _OTHER_KIND), label=_KIND_NAMES.get(k, k)) for k in order]
    # Beside the panels, not their top corner: the title spans the figure's width and would run under it.
    fig.legend(handles=handles + [Patch(color=_IDLE, label="idle (bubble)")], fontsize=8, loc="outside right center")


def _timeline_title(label: str, best: pd.Series) -> str:
    """The figure's title: the case, where it ran, and its measured step against the predicted one."""
    versus = f"measured {best['step_ms']:.1f} ms"
    if pd.notna(best["predicted_step_ms"]):
        versus += f" vs predicted {best['predicted_step_ms']:.1f} ms ({best['step_error_pct']:+.1f}%)"
    where = "on the CPU" if best["gpus"] == "cpu" else f"on GPUs {best['gpus']}"
    return f"{label}, {best['case']} {where}: {versus} per step"


def _wrap(title: str, width: int) -> str:
    """A title on as many lines as it needs: one line wider than the figure is clipped at both ends."""
    return "\n".join(textwrap.wrap(title, width))


def _fastest(df: pd.DataFrame, strategy: str) -> float | None:
    """The best ok samples/s of `strategy` in df, or None."""
    speeds = df.loc[(df["strategy"] == strategy) & (df["status"] == "ok"), "samples_per_s"]
    return float(speeds.max()) if speeds.notna().any() and speeds.max() > 0 else None
