"""`pipebench report`: results rows ─▶ one table per model, recommendations, summary.csv and plots.

No torch and no printing: functions return frames, text and the paths they wrote; the CLI prints.

How the figures are defined (per model, flavour, batch and GPU kind):
- x_single: samples/s over the fastest ok `single` row; x_dataparallel: over the fastest ok
  `dataparallel` row on as many devices.
- efficiency: samples/s over the ideal p x single x v·m / (v·m + p - 1) for pipelines (strategies named
  "pipeline" or "pp-*"), p x single for the others; p is the number of devices. With v = 1 stage per
  device this is GPipe's m / (m + p - 1) (Huang et al., GPipe, 2019, section 2.2); with v stages per
  device the bubble shrinks v-fold (Narayanan et al., Megatron-LM, 2021, section 2.2.2). Zero-bubble
  schedules can pass 1.0.
- step_error_pct, memory_error_pct: (predicted - measured) / measured x 100, memory as the largest
  device's peak.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from bench.results import CASE_FIELDS, FIELDS, Row

__all__ = ["GIB", "SUMMARY_COLUMNS", "DISPLAY_COLUMNS", "WrittenReport", "frame", "summarise", "recommend",
           "markdown_table", "write_report"]

GIB = 2**30
GROUP = ["model", "flavour", "batch", "device_name"]
"""Rows are compared with each other only within one of these groups."""
STRATEGY_ORDER = ("single", "dataparallel", "ddp", "modelparallel", "pipeline")
SUMMARY_COLUMNS = [
    "model", "flavour", "batch", "device_name", "case", "strategy", "gpus", "devices", "micro_batches",
    "schedule", "virtual_stages", "speeds", "status", "reason", "samples_per_s", "x_single", "x_dataparallel",
    "ideal_samples_per_s", "efficiency", "step_ms", "predicted_step_ms", "step_error_pct", "peak_gib",
    "peak_gib_max", "predicted_gib_max", "memory_error_pct", "bubble_fraction", "first_loss",
]
DISPLAY_COLUMNS = {
    "case": "case", "gpus": "GPUs", "status": "status", "samples_per_s": "samples/s", "x_single": "x one GPU",
    "x_dataparallel": "x DataParallel", "efficiency": "efficiency", "step_ms": "step ms",
    "predicted_step_ms": "predicted ms", "step_error_pct": "step error %", "peak_gib": "peak GiB per GPU",
    "predicted_gib_max": "predicted GiB (max)", "memory_error_pct": "memory error %", "first_loss": "first loss",
}
"""The summary columns people read, with their headers; `markdown_table` shows these by default."""
_FORMATS = {
    "samples_per_s": "{:.1f}", "ideal_samples_per_s": "{:.1f}", "x_single": "{:.2f}", "x_dataparallel": "{:.2f}",
    "efficiency": "{:.2f}", "step_ms": "{:.1f}", "predicted_step_ms": "{:.1f}", "step_error_pct": "{:+.1f}",
    "peak_gib_max": "{:.1f}", "predicted_gib_max": "{:.1f}", "memory_error_pct": "{:+.1f}",
    "bubble_fraction": "{:.1%}", "first_loss": "{:.5f}",
}
_KIND_COLOURS = {"F": "#4C72B0", "B": "#DD8452", "I": "#55A868", "W": "#8172B3"}
_KIND_NAMES = {"F": "forward", "B": "backward", "I": "backward, input grad", "W": "backward, weight grad"}
_OTHER_KIND = "#937860"
_IDLE = "#E6E6E6"


class WrittenReport(NamedTuple):
    """What `write_report` wrote, and what it left out and why."""

    paths: list[Path]
    notes: list[str]


def frame(rows: Sequence[Row]) -> pd.DataFrame:
    """One row per case (the latest by started_at when a case ran twice, on one kind of GPU), all Row
    fields (lists kept), plus devices, peak_gib_max and predicted_gib_max."""
    df = pd.DataFrame([asdict(r) for r in rows], columns=list(FIELDS))
    for name in ("samples_per_s", "step_ms", "step_ms_std", "first_loss", "predicted_step_ms", "bubble_fraction"):
        df[name] = df[name].astype("float64")  # None -> NaN
    df = df.sort_values("started_at", kind="stable").drop_duplicates([*CASE_FIELDS, "device_name"], keep="last")
    df["devices"] = [_device_count(g, w) for g, w in zip(df["gpus"], df["world_size"])]
    df["peak_gib_max"] = [max(b) / GIB if b else math.nan for b in df["peak_memory_bytes"]]
    df["predicted_gib_max"] = [max(b) / GIB if b else math.nan for b in df["predicted_memory_bytes"]]
    return df.reset_index(drop=True)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """The figures of the module docstring, one row per case, in SUMMARY_COLUMNS order, sorted by model,
    then strategy (single, dataparallel, ddp, modelparallel, pipeline, pp-*), devices and micro-batches."""
    out = df.copy()
    ok = out["status"] == "ok"
    single = out[ok & (out["strategy"] == "single")].groupby(GROUP)["samples_per_s"].max().rename("_single")
    dp = (out[ok & (out["strategy"] == "dataparallel")].groupby([*GROUP, "devices"])["samples_per_s"].max()
          .rename("_dp"))
    out = out.merge(single, how="left", left_on=GROUP, right_index=True)
    out = out.merge(dp, how="left", left_on=[*GROUP, "devices"], right_index=True)
    measured = out["samples_per_s"]
    out["x_single"] = measured / out["_single"]
    out["x_dataparallel"] = measured / out["_dp"]
    keeps = [_ideal_share(s, p, m, v) for s, p, m, v in
             zip(out["strategy"], out["devices"], out["micro_batches"], out["virtual_stages"])]
    out["ideal_samples_per_s"] = out["devices"] * out["_single"] * keeps
    out["efficiency"] = measured / out["ideal_samples_per_s"]
    out["step_error_pct"] = (out["predicted_step_ms"] - out["step_ms"]) / out["step_ms"] * 100
    peak = out["peak_gib_max"].where(out["peak_gib_max"] > 0)  # a CPU reports 0: no error to speak of
    out["memory_error_pct"] = (out["predicted_gib_max"] - peak) / peak * 100
    out["peak_gib"] = [" / ".join(f"{b / GIB:.1f}" for b in bs) for bs in out["peak_memory_bytes"]]
    out["case"] = [_case_label(s, sch, m, v) + (f", planned for speeds {sp.replace(';', '/')}" if sp else "")
                   for s, sch, m, v, sp in zip(out["strategy"], out["schedule"], out["micro_batches"],
                                               out["virtual_stages"], out["speeds"])]
    out["_rank"] = [_strategy_rank(s) for s in out["strategy"]]
    out = out.sort_values([*GROUP, "_rank", "strategy", "devices", "gpus", "micro_batches", "schedule",
                           "virtual_stages"], kind="stable")
    return out[SUMMARY_COLUMNS].reset_index(drop=True)


def recommend(df: pd.DataFrame) -> list[str]:
    """One line per model (and batch, and GPU kind, where the results hold several): the fastest ok
    case, its speed-up over one GPU, and its peak memory per GPU against one GPU's."""
    lines = []
    for key, group in df.groupby(GROUP, sort=False):
        name = _group_label(df, key)
        ok = group[group["status"] == "ok"]
        spread = ok.loc[ok["devices"] > 1, "devices"]
        if ok.empty:
            counts = group["status"].value_counts()
            lines.append(f"{name}: no case ran ({', '.join(f'{n} {s}' for s, n in counts.items())})")
            continue
        best = ok.loc[ok["samples_per_s"].idxmax()]
        single = ok[ok["strategy"] == "single"]
        where = f" on {best['devices']} devices" if spread.nunique() > 1 and best["devices"] > 1 else ""
        text = f"{name}: {best['case']}{where} is fastest at {best['samples_per_s']:.1f} samples/s"
        if best["strategy"] == "single":
            lines.append(f"{text}, {best['peak_gib_max']:.1f} GiB peak per GPU")
            continue
        if single.empty:
            lines.append(f"{text} (no single-GPU run to compare with), {best['peak_gib_max']:.1f} GiB peak per GPU")
            continue
        base = single.loc[single["samples_per_s"].idxmax()]
        lines.append(f"{text}, {best['x_single']:.2f}x one GPU, {best['peak_gib_max']:.1f} GiB peak per GPU "
                     f"(single: {base['peak_gib_max']:.1f} GiB)")
    return lines


def markdown_table(df: pd.DataFrame, columns: dict[str, str] | Sequence[str] | None = None) -> str:
    """A GitHub markdown table (no `tabulate` needed). columns: {column: header} or a list of columns;
    None shows the DISPLAY_COLUMNS that `df` has, or all its columns if it has none of them. Cells of
    cases that are not ok carry their status and reason; missing numbers are blank."""
    if columns is None:
        columns = {c: h for c, h in DISPLAY_COLUMNS.items() if c in df.columns} or list(df.columns)
    if not isinstance(columns, dict):
        columns = {c: c for c in columns}
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"no column {missing[0]!r} to show; the frame has: {', '.join(map(str, df.columns))}")
    lines = ["| " + " | ".join(columns.values()) + " |", "|" + "---|" * len(columns)]
    for _, row in df.iterrows():
        cells = []
        for c in columns:
            value = row[c]
            if c == "status" and value != "ok" and "reason" in row and row["reason"]:
                value = f"{value}: {_shorten(row['reason'], 60)}"
            cells.append(_cell(c, value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(rows: Sequence[Row], out_dir: str | Path, command: str = "") -> WrittenReport:
    """Write report.md, summary.csv and the PNG plots into out_dir; plots without data are left out and
    the notes say which and why. `command`, e.g. "pipebench report results/x.json", is printed in the
    report and under every plot, beside the hardware and versions, so a figure says how to remake it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(frame(rows))
    notes: list[str] = []
    paths: list[Path] = []
    if summary.empty:
        notes.append("no result rows: nothing to tabulate or plot")
    else:
        cases = frame(rows)
        footer = _machine_line(rows) + (f"; made by: {command}" if command else "")
        plots = [_plot_throughput(summary, out / "throughput.png", footer),
                 _plot_micro_batches(summary, out / "micro_batches.png", footer, notes)]
        for key, group in summary.groupby(GROUP, sort=False):
            path = out / f"timeline-{_slug(_group_label(summary, key, batch=True))}.png"
            plots.append(_plot_timeline(summary, key, group, cases, path, footer, notes))
        paths = [p for p in plots if p is not None]
    csv_path = out / "summary.csv"
    summary.to_csv(csv_path, index=False)
    md_path = out / "report.md"
    md_path.write_text(_report_markdown(rows, summary, [p.name for p in paths], notes, command), encoding="utf-8")
    return WrittenReport([md_path, csv_path, *paths], notes)


# ------------------------------------------------------------------------------------------------ figures

def _device_count(gpus: str, world_size: int) -> int:
    """Devices a case used: the GPU ids listed ("cpu" counts one), or its processes if more."""
    return max(len([g for g in str(gpus).split(",") if g.strip()]), int(world_size), 1)


def _is_pipeline(strategy: str) -> bool:
    return strategy.startswith(("pipeline", "pp-"))


def _ideal_share(strategy: str, devices: int, micro_batches: int, virtual_stages: int) -> float:
    """The share of p x single a schedule can reach: v·m / (v·m + p - 1) for pipelines, else 1."""
    if not _is_pipeline(strategy):
        return 1.0
    work = virtual_stages * micro_batches
    return work / (work + devices - 1)


def _strategy_rank(strategy: str) -> int:
    return STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)


def _case_label(strategy: str, schedule: str, micro_batches: int | None, virtual_stages: int) -> str:
    """E.g. "single", "pipeline 1f1b (m=8)", "pp-interleaved (m=8, v=2)"; micro_batches None leaves m out."""
    label = strategy
    if schedule and not strategy.startswith("pp-") and schedule not in strategy:  # pp-* names carry theirs
        label += f" {schedule}"
    extras = []
    if micro_batches is not None and (_is_pipeline(strategy) or micro_batches > 1):
        extras.append(f"m={micro_batches}")
    if virtual_stages > 1:
        extras.append(f"v={virtual_stages}")
    return f"{label} ({', '.join(extras)})" if extras else label


def _group_label(df: pd.DataFrame, key: tuple, batch: bool = False) -> str:
    """'gpt 800m', with the batch (always if asked) and the GPU kind added where the results hold several."""
    model, flavour, size, device = key
    same_model = df[(df["model"] == model) & (df["flavour"] == flavour)]
    label = f"{model} {flavour}"
    if batch or same_model["batch"].nunique() > 1:
        label += f", batch {size}"
    if df["device_name"].nunique() > 1:
        label += f", {device or 'unknown device'}"
    return label


def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return _FORMATS.get(column, "{:.4g}").format(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-").lower()


def _machine_line(rows: Sequence[Row]) -> str:
    """Hardware, versions and hosts of the rows: every table and figure carries them."""
    def seen(values, unknown="unknown"):
        return ", ".join(dict.fromkeys(v for v in values if v)) or unknown
    return (f"{seen((r.device_name for r in rows), 'unknown device')}; torch {seen(r.torch_version for r in rows)}; "
            f"host {seen(r.host for r in rows)}")


def _report_markdown(rows, summary, plots: list[str], notes: list[str], command: str) -> str:
    lines = ["# pipebench report", ""]
    if command:
        lines += [f"Made by `{command}`.", ""]
    if rows:
        dates = sorted(r.started_at[:10] for r in rows if r.started_at)
        when = f"{dates[0]} to {dates[-1]}" if dates and dates[0] != dates[-1] else (dates[0] if dates else "unknown")
        lines += [f"Measured on {_machine_line(rows)}; {when}. {len(summary)} case(s).", ""]
        lines += ["## Recommendations", ""] + [f"- {line}" for line in recommend(summary)] + [""]
    for key, group in summary.groupby(GROUP, sort=False):
        lines += [f"## {_group_label(summary, key, batch=True)}", "", markdown_table(group), ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    if notes:
        lines += ["## Not drawn", ""] + [f"- {n}" for n in notes] + [""]
    lines += ["x one GPU: samples/s over the fastest single-GPU run; efficiency: over p x single x "
              "v·m/(v·m+p-1) for pipelines, p x single otherwise (see bench/report.py); errors: "
              "(predicted - measured) / measured.", ""]
    return "\n".join(lines)


def _save(fig: Figure, path: Path, footer: str) -> Path:
    fig.text(0.01, 0.005, footer, fontsize=7, color="0.4", ha="left", va="bottom")
    FigureCanvasAgg(fig)  # render with Agg, whatever backend pyplot users have chosen
    fig.savefig(path, dpi=120)
    return path


def _plot_throughput(summary: pd.DataFrame, path: Path, footer: str) -> Path:
    """(a) One horizontal bar per case, one panel per model; the speed-up over one GPU on each bar and on
    a second axis along the top."""
    groups = list(summary.groupby(GROUP, sort=False))
    heights = [0.35 * len(g) + 1.6 for _, g in groups]
    fig = Figure(figsize=(9, sum(heights) + 0.8), layout="constrained")
    axes = fig.subplots(len(groups), 1, squeeze=False, height_ratios=heights)[:, 0]
    for ax, (key, group) in zip(axes, groups):
        speed = group["samples_per_s"].fillna(0.0)
        labels = [f"{c}  [{g}]" for c, g in zip(group["case"], group["gpus"])]
        colours = ["#4C72B0" if _is_pipeline(s) else "#8C8C8C" for s in group["strategy"]]
        ax.barh(range(len(group)), speed, color=colours)
        ax.set_yticks(range(len(group)), labels, fontsize=8)
        ax.invert_yaxis()  # first case at the top
        top = speed.max() or 1.0
        for y, r in enumerate(group.itertuples()):
            if r.status != "ok":
                ax.text(0, y, f" {r.status}", va="center", fontsize=8, color="#C44E52")
            elif pd.notna(r.x_single):
                ax.text(r.samples_per_s + top * 0.01, y, f"{r.x_single:.2f}x", va="center", fontsize=8)
        ax.set_xlim(0, top * 1.15)
        ax.set_xlabel("throughput (samples/s)")
        ax.set_title(f"{_group_label(summary, key, batch=True)}: throughput by strategy [GPU ids]", fontsize=10)
        single = _fastest(group, "single")
        if single:
            second = ax.secondary_xaxis("top", functions=(lambda x, s=single: x / s, lambda k, s=single: k * s))
            second.set_xlabel("speed-up over one GPU (x)", fontsize=8)
    fig.legend(handles=[Patch(color="#4C72B0", label="pipeline (micro-batches)"),
                        Patch(color="#8C8C8C", label="other strategies")], loc="outside lower right", fontsize=8)
    return _save(fig, path, footer)


def _plot_micro_batches(summary: pd.DataFrame, path: Path, footer: str, notes: list[str]) -> Path | None:
    """(b) Throughput against the micro-batch count: one line per pipeline strategy (and schedule, stages
    per device, GPUs), one panel per model; the fastest single, dataparallel and ddp runs as levels."""
    ok = summary[(summary["status"] == "ok") & summary["strategy"].map(_is_pipeline)]
    series_keys = ["strategy", "schedule", "virtual_stages", "gpus"]
    panels = [(key, group) for key, group in ok.groupby(GROUP, sort=False)
              if group.groupby(series_keys)["micro_batches"].nunique().max() > 1]
    if not panels:
        notes.append("throughput against micro-batches: not drawn, no pipeline strategy ran ok at two or more "
                     "micro-batch counts")
        return None
    fig = Figure(figsize=(8, 3.6 * len(panels) + 0.4), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (key, group) in zip(axes, panels):
        for (strategy, schedule, v, gpus), line in group.groupby(series_keys, sort=False):
            line = line.sort_values("micro_batches")
            label = _case_label(strategy, schedule, None, v)
            ax.plot(line["micro_batches"], line["samples_per_s"], marker="o", label=f"{label} [{gpus}]")
        everything = summary[(summary[GROUP] == pd.Series(key, index=GROUP)).all(axis=1)]
        for strategy, style in (("single", "--"), ("dataparallel", ":"), ("ddp", "-.")):
            level = _fastest(everything, strategy)
            if level:
                ax.axhline(level, linestyle=style, color="0.3", linewidth=1, label=f"{strategy} (fastest)")
        counts = sorted(group["micro_batches"].unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.set_xlabel("micro-batches per step (m)")
        ax.set_ylabel("throughput (samples/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{_group_label(summary, key, batch=True)}: throughput against micro-batch count", fontsize=10)
        ax.legend(fontsize=8)
    return _save(fig, path, footer)


def _plot_timeline(summary: pd.DataFrame, key: tuple, group: pd.DataFrame, cases: pd.DataFrame, path: Path,
                   footer: str, notes: list[str]) -> Path | None:
    """(c) The fastest ok pipeline case that recorded a timeline: its measured step above the Plan's
    simulated one, one lane per (device, stage), so the bubble shows as grey."""
    name = _group_label(summary, key)
    key_columns = [*CASE_FIELDS, "device_name"]
    timelines = {tuple(r[c] for c in key_columns): r for _, r in cases.iterrows() if r["timeline"]}
    ok = group[(group["status"] == "ok") & group["strategy"].map(_is_pipeline)]
    ok = ok[[tuple(r[c] for c in key_columns) in timelines for _, r in ok.iterrows()]]
    if ok.empty:
        notes.append(f"timeline for {name}: not drawn, no ok pipeline case recorded a measured timeline")
        return None
    best = ok.loc[ok["samples_per_s"].idxmax()]
    case = timelines[tuple(best[c] for c in key_columns)]
    mean = f" (mean of the timed steps: {best['step_ms']:.1f} ms)"
    panels = [("measured step", case["timeline"], mean)]
    if case["predicted_timeline"]:
        panels.append(("simulated by the plan", case["predicted_timeline"], ""))
    else:
        notes.append(f"timeline for {name}: {best['case']} has no predicted timeline; measured step drawn alone")
    lanes = sorted({(op["device"], op["stage"]) for _, ops, _ in panels for op in ops}, key=lambda l: (str(l[0]), l[1]))
    fig = Figure(figsize=(11, 1.4 + len(panels) * (0.45 * len(lanes) + 1.1)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True)[:, 0]
    kinds: set[str] = set()
    for ax, (title, ops, aside) in zip(axes, panels):
        origin = min(op["start_ms"] for op in ops)
        span = max(op["end_ms"] for op in ops) - origin
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
        ax.set_title(f"{title}: {span:.1f} ms from first to last operation{aside}", fontsize=10)
    axes[-1].set_xlabel("time since the step's first operation (ms)")
    order = [k for k in _KIND_COLOURS if k in kinds] + sorted(kinds - set(_KIND_COLOURS))  # F, B, I, W, others
    handles = [Patch(color=_KIND_COLOURS.get(k, _OTHER_KIND), label=_KIND_NAMES.get(k, k)) for k in order]
    fig.legend(handles=handles + [Patch(color=_IDLE, label="idle (bubble)")], fontsize=8, loc="outside lower right",
               ncols=len(handles) + 1)
    versus = f"measured {best['step_ms']:.1f} ms"
    if pd.notna(best["predicted_step_ms"]):
        versus += f" vs predicted {best['predicted_step_ms']:.1f} ms ({best['step_error_pct']:+.1f}%)"
    fig.suptitle(f"{_group_label(summary, key, batch=True)}, {best['case']} on GPUs {best['gpus']}: {versus} per step")
    return _save(fig, path, f"{footer}; the number in a bar is its micro-batch")


def _fastest(df: pd.DataFrame, strategy: str) -> float | None:
    """The best ok samples/s of `strategy` in df, or None."""
    speeds = df.loc[(df["strategy"] == strategy) & (df["status"] == "ok"), "samples_per_s"]
    return float(speeds.max()) if speeds.notna().any() and speeds.max() > 0 else None
