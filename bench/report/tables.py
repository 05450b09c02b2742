"""`pipebench report`: results rows ─▶ one table per model, recommendations, summary.csv and plots.

No torch, no matplotlib and no printing: functions return frames, text and the paths they wrote; the CLI
prints. The plots are bench/report/plots.py, imported (with matplotlib) only when write_report draws them; the
notes under the tables (ties, the predicted order, compiled against eager, first losses) bench/report/report_notes.py.

How the figures are defined (per model, flavour, batch and GPU kind):
- x_single: samples/s over the fastest ok `single` row; x_dataparallel: over the fastest ok
  `dataparallel` row on as many devices.
- efficiency: samples/s over the ideal p x single x v·m / (v·m + p - 1) for pipelines (the registry's
  micro-batched strategies), p x single for the others; p is the number of devices. With v = 1 stage per
  device this is GPipe's m / (m + p - 1) (Huang et al., GPipe, 2019, section 2.2); with v stages per
  device the bubble shrinks v-fold (Narayanan et al., Megatron-LM, 2021, section 2.2.2). Zero-bubble
  schedules can pass 1.0.
- step_error_pct, memory_error_pct: (predicted - measured) / measured x 100, memory as the largest
  device's peak. A CPU measures no peak (its rows say 0): "n/a", and no error.
- Rows of other `--set` settings, or of another training (precision, optimizer, checkpoint or compile
  mode), are another model (another group, its label naming the training); rows of another memory cap or other
  speeds are another case, labelled so.
- A "predicted-oom" row did not run: it is listed like an unavailable one, with what it was predicted
  to need against the cap, and takes no part in the figures or the ranking.
"""
from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import pandas as pd

from pipebench.bench.report.labels import GROUP, case_label, group_labels, is_pipeline, one_device
from pipebench.bench.report.report_notes import (compile_notes, loss_notes, measured_text, measured_tie, noise_ms, order_notes,
                                         resolution_notes)
from pipebench.bench.strategies import BASELINE, LEVELS, STRATEGIES, registry_rank
from pipebench.bench.store.row import CASE_FIELDS, FIELDS, Row
from pipebench.base.fileio.csvtext import frame_csv
from pipebench.base.fileio.files import write_text
from pipebench.partition.planning.schedule_order import ideal_efficiency
from pipebench.base.training import Training
from pipebench.base.text.units import GIB, format_gib

__all__ = ["GIB", "SUMMARY_COLUMNS", "DISPLAY_COLUMNS", "WrittenReport", "frame", "summarise", "recommend",
           "order_notes", "ranking", "compile_notes", "resolution_notes",
           "noise_ms",
           "markdown_table", "text_report", "loss_notes", "write_report"]

SUMMARY_COLUMNS = [
    "model", "flavour", "settings", "batch", "device_name", "case", "strategy", "gpus", "devices", "micro_batches",
    "schedule", "virtual_stages", "speeds", "max_memory", "status", "reason", "samples_per_s", "x_single", "x_dataparallel",
    "ideal_samples_per_s", "efficiency", "step_ms", "step_ms_std", "rounds", "noise_ms", "same_work_as",
    "predicted_step_ms", "step_error_pct", "peak_gib",
    "peak_gib_max", "predicted_gib_max", "memory_error_pct", "bubble_fraction", "first_loss",
    "training", "precision", "optimizer", "checkpoint", "compile", "compile_s", "graph_breaks",
]
DISPLAY_COLUMNS = {
    "case": "case", "gpus": "GPUs", "status": "status", "samples_per_s": "samples/s", "x_single": "x single",
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
    modes = [c if isinstance(c, str) else None for c in df["compile"]]  # eager: None (pandas may say NaN)
    df["training"] = [Training(*t).label() for t in zip(df["precision"], df["optimizer"], df["checkpoint"], modes)]
    df["devices"] = [_device_count(g, w) for g, w in zip(df["gpus"], df["world_size"])]
    df["peak_gib_max"] = [max(b) / GIB if b and max(b) > 0 else math.nan  # a CPU measures none: 0
                          for b in df["peak_memory_bytes"]]
    df["predicted_gib_max"] = [max(b) / GIB if b else math.nan for b in df["predicted_memory_bytes"]]
    return df.reset_index(drop=True)


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """The figures of the module docstring, one row per case, in SUMMARY_COLUMNS order, sorted by model,
    then strategy (single, dataparallel, ddp, modelparallel, pipeline, pp-*), devices and micro-batches."""
    out = df.copy()
    ok = out["status"] == "ok"
    single = out[ok & (out["strategy"] == BASELINE)].groupby(GROUP)["samples_per_s"].max().rename("_single")
    dp = (out[ok & (out["strategy"] == LEVELS[1])].groupby([*GROUP, "devices"])["samples_per_s"].max()
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
    out["rounds"] = [len(r) for r in out["round_ms"]]
    out["noise_ms"] = [noise_ms(r, std) for r, std in zip(out["round_ms"], out["step_ms_std"])]
    out["step_error_pct"] = (out["predicted_step_ms"] - out["step_ms"]) / out["step_ms"] * 100
    out["memory_error_pct"] = (out["predicted_gib_max"] - out["peak_gib_max"]) / out["peak_gib_max"] * 100
    out["peak_gib"] = [_peak_text(bs) for bs in out["peak_memory_bytes"]]
    # A cap is named only where the group's cases ran under several (on GPUs every plan has one; the
    # strategies that plan nothing record none, which is no other cap).
    several_caps = out.groupby(GROUP)["max_memory"].transform(lambda caps: caps[caps != ""].nunique() > 1)
    out["case"] = [case_label(s, sch, m, v) + (f", planned for speeds {sp.replace(';', '/')}" if sp else "")
                   + (f", memory cap {cap.replace(';', '/')} GiB" if cap and several else "")
                   for s, sch, m, v, sp, cap, several in
                   zip(out["strategy"], out["schedule"], out["micro_batches"], out["virtual_stages"], out["speeds"],
                       out["max_memory"], several_caps)]
    out["_rank"] = [registry_rank(s) for s in out["strategy"]]
    out = out.sort_values([*GROUP, "_rank", "strategy", "devices", "gpus", "micro_batches", "schedule",
                           "virtual_stages"], kind="stable")
    return out[SUMMARY_COLUMNS].reset_index(drop=True)


def recommend(df: pd.DataFrame) -> list[str]:
    """One line per model (and batch, and GPU kind, where the results hold several): the fastest ok
    case, its speed-up over one GPU, its peak memory per GPU against one GPU's, and the cases that
    measured a tie with it (`measured_tie`): the fastest by less than the noise is no winner. A case that
    does the same work as single (`same_work_as`: a one-process strategy on one device) is not a
    candidate where single ran: it can only tie with single or trail it, and the line says how it
    measured against single instead."""
    lines = []
    labels = group_labels(df)
    for key, group in df.groupby(GROUP, sort=False):
        name = labels[key]
        ok = group[group["status"] == "ok"]
        spread = ok.loc[ok["devices"] > 1, "devices"]
        if ok.empty:
            counts = group["status"].value_counts()
            lines.append(f"{name}: no case ran ({', '.join(f'{n} {s}' for s, n in counts.items())})")
            continue
        single = ok[ok["strategy"] == BASELINE]
        same = ok[ok["same_work_as"].fillna("") == BASELINE] if not single.empty and "same_work_as" in ok else ok[:0]
        candidates = ok.drop(same.index)
        best = candidates.loc[candidates["samples_per_s"].idxmax()]
        where = f" on {best['devices']} devices" if spread.nunique() > 1 and best["devices"] > 1 else ""
        text = f"{name}: {best['case']}{where} is fastest at {best['samples_per_s']:.1f} samples/s"
        # Peak memory where it was measured (GPUs); the CPU's processes have none to report.
        peak = "" if math.isnan(best["peak_gib_max"]) else f", {_gib(best['peak_gib_max'])} peak per GPU"
        tied = [row for i, row in candidates.iterrows() if i != best.name and measured_tie(best, row)]
        ties = ("; " + ", ".join(f"{row['case']} ({measured_text(row)} ms)" for row in tied) + " measured a tie with "
                f"it ({measured_text(best)} ms): apart by less than their noise") if tied else ""
        if any(row["strategy"] == BASELINE for row in tied):
            ties += f", so nothing measured faster than {one_device(group)}"
        if not same.empty:
            base = single.loc[single["samples_per_s"].idxmax()]
            ratios = same["samples_per_s"] / base["samples_per_s"]
            ties += (f"; {', '.join(same['case'])} do the same work as single on one device here: "
                     f"{ratios.min():.2f}-{ratios.max():.2f}x it, no speed-up to measure" if len(same) > 1 else
                     f"; {same['case'].iloc[0]} does the same work as single on one device here: "
                     f"{ratios.iloc[0]:.2f}x it, no speed-up to measure")
        if best["strategy"] == BASELINE:
            lines.append(f"{text}{peak}{ties}")
        elif single.empty:
            lines.append(f"{text} (no single run to compare with){peak}{ties}")
        else:
            base = single.loc[single["samples_per_s"].idxmax()]
            against = f" (single: {_gib(base['peak_gib_max'])})" if peak else ""
            lines.append(f"{text}, {best['x_single']:.2f}x {one_device(group)}{peak}{against}{ties}")
    return lines



def markdown_table(df: pd.DataFrame, columns: dict[str, str] | Sequence[str] | None = None) -> str:
    """A GitHub markdown table (no `tabulate` needed). columns: {column: header} or a list of columns;
    None shows the DISPLAY_COLUMNS that `df` has, or all its columns if it has none of them, led by a
    model column when the rows are of several models (or batches, settings, GPU kinds), so that each
    row says whose it is. Cells of cases that are not ok carry their status and reason; missing numbers
    are blank."""
    if columns is None:
        columns = {c: h for c, h in DISPLAY_COLUMNS.items() if c in df.columns} or list(df.columns)
        if set(GROUP) <= set(df.columns) and len(df.groupby(GROUP)) > 1:
            labels = group_labels(df)
            df = df.assign(_model=[labels[key] for key in zip(*(df[c] for c in GROUP))])
            columns = {"_model": "model", **columns}
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
            if c == "status" and value == "predicted-oom" and "predicted_gib_max" in row and "max_memory" in row:
                value = _predicted_oom_text(row["predicted_gib_max"], row["max_memory"])
            elif c == "status" and value != "ok" and "reason" in row and row["reason"]:
                value = f"{value}: {_shorten(row['reason'], 60)}"
            cells.append(_cell(c, value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text_report(summary: pd.DataFrame) -> str:
    """What `pipebench report` prints: the table (with its model column), the ranking of what ran, the
    notes on first losses, the pairs the predictions ranked wrongly, and the recommendations."""
    notes = ranking(summary) + resolution_notes(summary) + compile_notes(summary) + loss_notes(summary) + order_notes(summary)
    return "\n".join([markdown_table(summary), *(["", *notes] if notes else []), "", *recommend(summary)])


def ranking(summary: pd.DataFrame) -> list[str]:
    """One line per model with two or more ok cases: what ran, fastest first, with samples/s (cases that
    did not run, predicted out of memory among them, are in the table, not here)."""
    lines = []
    labels = group_labels(summary)
    for key, group in summary.groupby(GROUP, sort=False):
        ok = group[group["status"] == "ok"].sort_values("samples_per_s", ascending=False, kind="stable")
        if len(ok) > 1:
            ranked = ", ".join(f"{c} [{g}] {v:.1f}/s" for c, g, v in zip(ok["case"], ok["gpus"], ok["samples_per_s"]))
            lines.append(f"Ranked: {labels[key]}: {ranked}.")
    return lines



def write_report(rows: Sequence[Row], out_dir: str | Path, command: str = "",
                 csv_files: Sequence[str | Path] = (), progress=None) -> WrittenReport:
    """Write report.md, summary.csv and the PNG plots into out_dir; plots without data are left out and
    the notes say which and why. `command`, e.g. "pipebench report results/x.json", is printed in the
    report and under every plot, beside the hardware and versions, so a figure says how to remake it.
    csv_files: the CSV files the rows were read from, which hold no timelines (the notes say so).
    progress(done, total, what): hears each plot as it starts (pipebench.base.text.progress.ProgressBar draws it)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(frame(rows))
    notes: list[str] = []
    paths: list[Path] = []
    if summary.empty:
        notes.append("no result rows: nothing to tabulate or plot")
    else:
        from pipebench.bench.report.plots import write_plots  # matplotlib loads here, only when plots are drawn

        footer = _machine_line(rows) + (f"; made by: {command}" if command else "")
        paths = write_plots(summary, frame(rows), out, footer, notes, csv_files=[Path(f) for f in csv_files],
                            progress=progress)
    csv_path = out / "summary.csv"
    write_text(csv_path, frame_csv(summary))
    md_path = out / "report.md"
    md_path.write_text(_report_markdown(rows, summary, [p.name for p in paths], notes, command), encoding="utf-8")
    return WrittenReport([md_path, csv_path, *paths], notes)


# ------------------------------------------------------------------------------------------------ helpers

def _device_count(gpus: str, world_size: int) -> int:
    """Devices a case used: the GPU ids listed ("cpu" counts one), or its processes if more."""
    return max(len([g for g in str(gpus).split(",") if g.strip()]), int(world_size), 1)


def _ideal_share(strategy: str, devices: int, micro_batches: int, virtual_stages: int) -> float:
    """The share of p x single a schedule can reach: v·m / (v·m + p - 1) for pipelines (GPipe's bound with
    v·m chunks of work per device), else 1."""
    if not is_pipeline(strategy):
        return 1.0
    known = STRATEGIES.get(strategy)
    if known is not None and known.replicated:  # each replica's pipeline is that many devices deep
        devices = min(devices, known.stages_per_replica)
    return ideal_efficiency(devices, virtual_stages * micro_batches)


def _peak_text(peaks: list[int]) -> str:
    """'20.0 / 12.0' GiB per device; "n/a" where the device measures no peak (a CPU says 0)."""
    if peaks and not any(peaks):
        return "n/a"
    return " / ".join(format_gib(b) for b in peaks)


def _predicted_oom_text(predicted_gib: float, caps: str) -> str:
    """'predicted out of memory: 12.3 GiB > cap 10 GiB' (caps as the row's max_memory, GiB per device)."""
    cap = "/".join(dict.fromkeys(caps.split(";"))) if caps else "?"
    need = "?" if math.isnan(predicted_gib) else f"{predicted_gib:.3g}"
    return f"predicted out of memory: {need} GiB > cap {cap} GiB"


def _gib(value: float) -> str:
    return "n/a GiB" if math.isnan(value) else f"{value:.1f} GiB"



def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return _FORMATS.get(column, "{:.4g}").format(value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


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
    labels = group_labels(summary, batch=True)
    for key, group in summary.groupby(GROUP, sort=False):
        lines += [f"## {labels[key]}", "", markdown_table(group), ""]
        if (group["status"] == "ok").sum() > 1:  # every note compares two or more cases that ran
            lines += [line for note in ranking(group) + resolution_notes(group) + loss_notes(group) + order_notes(group)
                      for line in (note, "")]  # under its table
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    if notes:
        lines += ["## Not drawn", ""] + [f"- {n}" for n in notes] + [""]
    lines += ["x single: samples/s over the fastest single run (one GPU, or one CPU process); efficiency: over p x single x "
              "v·m/(v·m+p-1) for pipelines (p devices, v stages per device, m micro-batches), p x single otherwise; "
              "errors: (predicted - measured) / measured.", ""]
    return "\n".join(lines)


def summary_table(rows) -> str:
    """What `pipebench run` prints when its cases end: the summary table of these rows, the compiled and
    resolution notes and the recommendations, as `pipebench report` words them."""
    ok = [r for r in rows if r.status == "ok"]
    if not ok:
        return "no case ran to the end"
    summary = summarise(frame(rows))
    compiled = compile_notes(summary)
    return "\n".join([markdown_table(summary), *(["", *compiled] if compiled else []), "", *resolution_notes(summary),
                      *recommend(summary)])
