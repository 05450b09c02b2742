"""`pipebench run`: the suite from the command line, one results row per case as soon as it ends.

Cases run one after another, in a warm worker group per process count (bench.launch.sessions.WorkerGroups: torchrun,
the imports and the rendezvous paid once per group, not per case; a case that ends its group ends only
that group, and the next case starts a fresh one); each finished case is appended to
<out>/<date>-<host>-<hardware>.json and .csv at once (bench.store.results), so Ctrl-C or a crash loses at most
the case in progress, and `--resume` skips the cases already there. A case predicted not to fit in the
memory cap is a "predicted-oom" row, not run (`--try-anyway` runs it). The Plan each case ran is saved in
<out>/<date>-<host>-<hardware>-plans/<plan_id>.plan.json; its row names it by plan_id.
"""
from __future__ import annotations

import contextlib
import itertools
import socket
import time
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pipebench.bench.store import results as res
from pipebench.bench.strategies import BASELINE, STRATEGIES, get_strategy, profile_counts
from pipebench.bench.cases.machine import Machine
from pipebench.bench.cases.case import Case, CaseUnavailable, make_cases, now
from pipebench.bench.cases.case_rows import make_row, unavailable_row
from pipebench.bench.cases.prepare import prepare, profile_case_model, profile_model
from pipebench.bench.cases.rounds import run_rounds
from pipebench.bench.cases.run_options import RunOptions
from pipebench.base.text.units import format_gib

if TYPE_CHECKING:  # imported for the run where the groups start (run_suite): the launch side loads torch
    from pipebench.bench.launch.sessions import WorkerGroups


def run_suite(options: RunOptions, machine: Machine, note: Callable[[str], None] = print) -> tuple[list[res.Row], Path, Path]:
    """Run every case; returns this run's rows and the CSV and JSON paths. The cases run in warm worker
    groups, stopped when the run ends."""
    from pipebench.bench.launch.sessions import WorkerGroups

    with WorkerGroups() as groups:
        return _run_cases(options, machine, note, groups)


def _run_cases(options: RunOptions, machine: Machine, note: Callable[[str], None],
               groups: WorkerGroups | None) -> tuple[list[res.Row], Path, Path]:
    """Each model's cases in turn: every case prepared (planned, or found done or taken), then the ones
    to measure measured together in interleaved rounds; each row written as soon as it is known."""
    run = _start_run(options, machine, note, groups)
    numbered = list(enumerate(run.cases, 1))
    for key_base, model_cases in itertools.groupby(numbered, key=lambda ic: _model_key(ic[1])):
        with contextlib.ExitStack() as claims:  # each case held from its preparation until its row is written
            to_measure = []
            for i, case in model_cases:
                if (admitted := run.admit(i, case, key_base, claims)) is not None:
                    to_measure.append(admitted)
            if to_measure:
                run.measure(to_measure, key_base)
    return run.rows, run.csv_path, run.json_path


def _start_run(options: RunOptions, machine: Machine, note: Callable[[str], None],
               groups: WorkerGroups | None) -> "_SuiteRun":
    """The results files checked (and the folders beside them made), what --resume skips, the strategies
    of --strategies auto chosen and the cases listed and said, before any case is prepared."""
    csv_path, json_path = res.results_paths(options.out, date.today(), socket.gethostname(), machine.hardware)
    rerun = ["predicted-oom"] if options.try_anyway else []
    profile_dir = options.profiles or json_path.with_name(json_path.stem + "-profiles")
    plan_dir = json_path.with_name(json_path.stem + "-plans")
    check_folders([res.claims_folder(json_path), plan_dir, profile_dir])
    earlier = res.start_run(csv_path, json_path, resume=options.resume or options.again,  # a bad or taken file: refused now
                            rerun=rerun)
    done = set() if options.again else earlier  # --again: every case measured anew, beside the earlier rows
    if options.auto is not None:  # --strategies auto:K: single and the K strategies predicted fastest
        options = replace(options, strategies=auto_strategies(options, machine, profile_dir, note))
    cases = [case for mode in options.compiles
             for case in make_cases(options.models, options.strategies, options.micro_batches, flavour=options.flavour,
                                    overrides=options.overrides, training=replace(options.training, compile=mode),
                                    data_dir=options.data_dir)]
    note(f"{len(cases)} case(s) on {machine.hardware.replace('x', ' x ', 1) if machine.gpus else machine.name}"
         f" ({machine.gpus_label}); rows go to {csv_path} as each model's cases end")
    return _SuiteRun(options, machine, note, groups, csv_path, json_path, profile_dir, plan_dir, rerun, done, earlier,
                cases, start=time.monotonic())


@dataclass
class _SuiteRun:
    """One `pipebench run` under way: where its rows, plans and profiles go, the cases already done, and
    what it has profiled and written so far."""

    options: RunOptions
    machine: Machine
    note: Callable[[str], None]
    groups: WorkerGroups | None
    """The warm worker groups the cases run in (None: each case in workers of its own)."""
    csv_path: Path
    json_path: Path
    profile_dir: Path
    plan_dir: Path
    rerun: list[str]
    """The statuses of earlier rows that are run again (--try-anyway: predicted-oom)."""
    done: set[tuple]
    """The case keys of the rows already written, which --resume skips."""
    earlier: set[tuple]
    """The case keys the file held when this run began: only a key written since is another run's."""
    cases: list[Case]
    start: float
    """time.monotonic() when the cases began."""
    profiled: dict[tuple, Any] = field(default_factory=dict)
    """Each model's profile, by the key of what it was profiled for: every strategy is priced from it."""
    rows: list[res.Row] = field(default_factory=list)
    singles: dict[tuple, float] = field(default_factory=dict)
    """Single's samples/s per model, what each row's speed-up is said over."""

    def admit(self, i: int, case: Case, key_base: tuple, claims: contextlib.ExitStack) -> tuple | None:
        """Case `i` prepared and claimed (in `claims`) for measuring: returns (i, case, prepared) to measure;
        None where it is skipped (done already, run by another run) or its row is written now (unavailable,
        predicted not to fit)."""
        options, head = self.options, f"[{i}/{len(self.cases)}] {case.label()}"
        row, prepared = self.prepare_case(case, key_base)
        if res.case_key(row) in self.done:
            self.note(f"{head}: done already (--resume)")
            return None
        mine = claims.enter_context(res.claim(res.case_key(row), self.json_path))
        # Another run resuming into this file runs it now, or has written it since this run began.
        written_since = res.done_keys(self.json_path, self.rerun) - self.earlier if options.resume else set()
        if not mine or res.case_key(row) in written_since:
            self.note(f"{head}: run by another run into {self.json_path.name}; skipped")
            return None
        if prepared is not None and prepared.job is None:  # predicted not to fit: nothing is launched
            row = make_row(prepared, self.machine, status="predicted-oom", reason=prepared.over_cap, started_at=now())
        elif prepared is not None:
            if prepared.plan is not None:  # the row names it by plan_id; the Plan itself is kept beside
                prepared.plan.save(self.plan_dir / f"{prepared.plan.plan_id}.plan.json")
            return i, case, prepared
        self.write(row)
        self.note(f"{head}: {_outcome(row, None)} | {_elapsed(time.monotonic() - self.start)} so far, "
                  f"{len(self.cases) - i} left")
        return None

    def prepare_case(self, case: Case, key_base: tuple) -> tuple[res.Row, Any]:
        """The case planned from its model's profile (profiled now, the first time it is needed) and the
        row it will write, whose key says whether it is done (the planner may have chosen its micro-batch
        count); an unavailable case's row, and no preparation."""
        options, machine = self.options, self.machine
        profile_key = (*key_base[:4], case.training.precision, case.training.optimizer,  # recomputation: the same
                       case.training.compile)
        prepared = None
        try:
            if profile_key not in self.profiled:  # every strategy is predicted from it, the pipelines planned
                self.profiled[profile_key] = profile_case_model(
                    case, machine, self.profile_dir, repeats=options.repeats, reuse=not options.fresh, note=self.note,
                    counts=profile_counts(options.micro_batches, machine.devices, batch=case.batch,
                                          strategies=options.strategies),
                    strategies=options.strategies, timeout=options.timeout)
            prepared = prepare(case, machine, self.profiled.get(profile_key), steps=options.steps,
                               warmup=options.warmup, try_anyway=options.try_anyway)
            row = make_row(prepared, machine, status="unavailable", reason="not run yet")
        except CaseUnavailable as exc:
            row = unavailable_row(case, machine, str(exc))
        return row, prepared

    def measure(self, to_measure: list[tuple], key_base: tuple) -> None:
        """One model's prepared cases measured in interleaved rounds; their rows written, then said, each
        with its speed-up over single's."""
        options = self.options
        self.note(f"measuring {len(to_measure)} case(s) of {to_measure[0][1].model} in {options.rounds} interleaved "
                  f"round(s) of {options.steps} timed step(s) each: "
                  + ", ".join(c.strategy for _, c, _ in to_measure)
                  + "".join(f"; {c.strategy}: --try-anyway: {p.over_cap}" for _, c, p in to_measure if p.over_cap))
        measured = run_rounds([p for _, _, p in to_measure], self.machine, rounds=options.rounds, steps=options.steps,
                              min_seconds=options.min_seconds, timeout=options.timeout, groups=self.groups,
                              note=self.note)
        for _, row in zip(to_measure, measured):
            self.write(row)
            if row.status == "ok" and row.strategy == BASELINE:
                self.singles[key_base] = row.samples_per_s
        for (i, case, _), row in zip(to_measure, measured):
            self.note(f"[{i}/{len(self.cases)}] {case.label()}: {_outcome(row, self.singles.get(key_base))} | "
                      f"{_elapsed(time.monotonic() - self.start)} so far")

    def write(self, row: res.Row) -> None:
        """The row appended to the results files at once, and kept for the run's summary."""
        res.append(row, self.csv_path, self.json_path)
        self.rows.append(row)


def check_folders(folders: Sequence[Path]) -> None:
    """The folders a run keeps beside its results (claims, plans, profiles), made now and written in once,
    so that a file in the way, or one that cannot be written, is one line before any case runs."""
    from pipebench.base.fileio.files import writable_folder

    for folder in folders:
        writable_folder(folder, "run", in_the_way="a run keeps a folder there beside its results: move the file "
                        "away or give another --out")


def _model_key(case: Case) -> tuple:
    """The cases compared with one another (one model, batch, settings and training): measured together."""
    return (case.model, case.flavour, case.batch, case.overrides, case.training)


def auto_strategies(options: RunOptions, machine: Machine, profile_dir: Path, note: Callable[[str], None]) -> list[str]:
    """`--strategies auto[:K]`: profile each model, predict every strategy and run single plus the K fastest
    predicted that fit (bench/predict/ranking.py pick_strategies), for all models together (the union, in the
    registry's order)."""
    from pipebench.bench.predict.ranking import pick_strategies
    from pipebench.bench.report.advice_text import auto_choice

    chosen: set[str] = set()
    for model, batch in options.models.items():
        profiled = profile_model(model, batch, machine, profile_dir, flavour=options.flavour,
                                 overrides=options.overrides, training=options.training, data_dir=options.data_dir,
                                 repeats=options.repeats, reuse=not options.fresh, note=note, timeout=options.timeout,
                                 counts=profile_counts(options.micro_batches, machine.devices, batch=batch,
                                                       strategies=list(STRATEGIES)))
        advice, picked = pick_strategies(profiled.profiles, machine.request(options.training), options.auto)
        note(auto_choice(advice, picked, model, "running", profiled.path))
        chosen.update(picked)
    return [name for name in STRATEGIES if name in chosen]


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
    if row.compile_s is not None:
        parts.append(f"compiled in {row.compile_s:.1f} s, {row.graph_breaks or 0} graph break(s)")
    return ", ".join(parts)


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"
