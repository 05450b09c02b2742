"""`pipebench run`: the suite from the command line, one results row per case as soon as it ends.

Cases run one after another in fresh processes (bench.launch); each finished case is appended to
<out>/<date>-<host>-<hardware>.json and .csv at once (bench.results), so Ctrl-C or a crash loses at most
the case in progress, and `--resume` skips the cases already there. The Plan each case ran is saved in
<out>/<date>-<host>-<hardware>-plans/<plan_id>.plan.json; its row names it by plan_id.
"""
from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Callable, Sequence

from pipebench.bench import results as res
from pipebench.bench.strategies import get_strategy, parse_strategies  # noqa: F401 - parse_strategies: re-exported
from pipebench.bench.suite import (DEFAULT_MODELS, QUICK_BATCH, CaseUnavailable, Machine, make_cases, make_row, prepare,
                         profile_case_model, run_prepared, unavailable_row)
from pipebench.errors import UserError
from pipebench.units import format_gib


@dataclass
class RunOptions:
    models: dict[str, int]
    strategies: list[str]
    chunks: list[int | None]
    flavour: str | None
    overrides: dict[str, Any]
    out: Path
    resume: bool
    steps: int
    warmup: int
    timeout: float
    repeats: int | None = None
    profiles: Path | None = None
    """Folder of saved profiles to reuse (default: next to the results file)."""


def run_suite(options: RunOptions, machine: Machine, note: Callable[[str], None] = print) -> tuple[list[res.Row], Path, Path]:
    """Run every case; returns this run's rows and the CSV and JSON paths."""
    csv_path, json_path = res.results_paths(options.out, date.today(), socket.gethostname(), machine.hardware)
    done = res.done_keys([json_path]) if options.resume else set()
    profile_dir = options.profiles or json_path.with_name(json_path.stem + "-profiles")
    profile_dir.mkdir(parents=True, exist_ok=True)
    plan_dir = json_path.with_name(json_path.stem + "-plans")
    cases = make_cases(options.models, options.strategies, options.chunks, flavour=options.flavour,
                       overrides=options.overrides)
    note(f"{len(cases)} case(s) on {machine.hardware.replace('x', ' x ', 1) if machine.gpus else machine.name}"
         f" ({machine.gpus_label}); rows go to {csv_path} as each case ends")
    profiled: dict[tuple, Any] = {}
    rows: list[res.Row] = []
    singles: dict[tuple, float] = {}
    start = time.monotonic()
    for i, case in enumerate(cases, 1):
        head = f"[{i}/{len(cases)}] {case.label()}"
        key_base = (case.model, case.flavour, case.batch, case.overrides)
        prepared = None
        try:
            if get_strategy(case.strategy).needs_plan and key_base not in profiled:
                # Only the micro-batch counts this run needs (1 for the whole-batch cases), unless one is auto.
                counts = None if None in options.chunks else sorted({1, *options.chunks})
                profiled[key_base] = profile_case_model(case, machine, profile_dir, repeats=options.repeats,
                                                        reuse=True, note=note, counts=counts)
            prepared = prepare(case, machine, profiled.get(key_base), steps=options.steps, warmup=options.warmup)
            # The key of the row this case will write (the planner may have chosen its micro-batch count).
            row = make_row(prepared, machine, status="unavailable", reason="not run yet")
        except CaseUnavailable as exc:
            row = unavailable_row(case, machine, str(exc))
        if res.case_key(row) in done:
            note(f"{head}: done already (--resume)")
            continue
        if prepared is not None:
            note(f"{head} ...")
            if prepared.plan is not None:  # the row names it by plan_id; the Plan itself is kept beside
                prepared.plan.save(plan_dir / f"{prepared.plan.plan_id}.plan.json")
            row = run_prepared(prepared, machine, steps=options.steps, timeout=options.timeout)
        res.append(row, csv_path, json_path)
        rows.append(row)
        if row.status == "ok" and row.strategy == "single":
            singles[key_base] = row.samples_per_s
        note(f"{head}: {_outcome(row, singles.get(key_base))} | {_elapsed(time.monotonic() - start)} so far, "
             f"{len(cases) - i} left")
    return rows, csv_path, json_path


def _outcome(row: res.Row, single: float | None) -> str:
    if row.status != "ok":
        return f"{row.status}: {row.reason}"
    parts = [f"{row.samples_per_s:.1f} samples/s"]
    if single:
        parts.append(f"{row.samples_per_s / single:.2f}x single")
    step = f"step {row.step_ms:.1f} ms"
    if row.predicted_step_ms:
        step += f" (predicted {row.predicted_step_ms:.1f})"
    parts.append(step)
    if any(row.peak_memory_bytes):
        parts.append("peak " + " / ".join(format_gib(b) for b in row.peak_memory_bytes) + " GiB")
    if row.first_loss is not None:
        parts.append(f"first loss {row.first_loss:.5f}")
    return ", ".join(parts)


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def quick_options(options: RunOptions) -> RunOptions:
    """--quick: tiny flavours of the default models, small batch, every strategy, few steps."""
    options.models = {name: QUICK_BATCH for name in options.models}
    options.flavour = "tiny"
    options.steps, options.warmup = min(options.steps, 2), min(options.warmup, 1)
    options.chunks = [c for c in options.chunks if c is None or QUICK_BATCH % c == 0] or [None]
    return options


def parse_models(text: str | None, batch: int | None) -> dict[str, int]:
    """'gpt,resnet101' -> {name: batch}; the default batch per model unless --batch is given."""
    from pipebench import models as zoo

    names = list(DEFAULT_MODELS) if text is None else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--models names no model")
    for name in names:
        if name not in zoo.model_names() and not zoo.is_user_model(name):
            raise zoo.UnknownModelError(f"unknown model {name!r}; choose one of: {', '.join(zoo.model_names())}")
    return {name: batch or DEFAULT_MODELS.get(name, 64) for name in names}


def check_user_models(models: dict[str, int], settings: dict) -> None:
    """Build each model of the user's own once, without memory (the meta device), and put a batch through
    it, so that a missing file, a constructor that needs arguments or an input the forward rejects is one
    line before anything is profiled."""
    from pipebench import models as zoo

    for name in models:
        if zoo.is_user_model(name):
            zoo.get_model(name, device="meta", **settings)


def summary_table(rows: Sequence[res.Row]) -> str:
    from pipebench.bench.report import frame, markdown_table, recommend, summarise

    ok = [r for r in rows if r.status == "ok"]
    if not ok:
        return "no case ran to the end"
    summary = summarise(frame(rows))
    return "\n".join([markdown_table(summary), "", *recommend(summary)])


def note_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
