"""Which change moved the CPU step error: the profile, the pricing, or the measured side.

Between two runs of the CPU quick suite three things changed at once, and the step error grew: the
profile (`--micro-batches auto` measures a few sizes on one dynamic-batch export and interpolates the rest:
partition/profiling/micro_batch_sizes.py), the CPU pricing (processes sharing the cores: simulator.SharedCores, the probes'
contention, the pipeline runtime's and FSDP2's own costs, nn.DataParallel priced as the whole step), and
the measured step (the workers' own clocks). Figures compared across runs on a shared 2-core machine
measure its load as much as the change, so this separates them offline: every committed row is
predicted again from each profile (measured in one session, back to back) with each pricing, and
scored against the step it measured.

    python scripts/error_split.py measure OUT [--models gpt,resnet101] [--rounds 2] [--old-code DIR]
    python scripts/error_split.py clocks OUT [--steps 6]
    python scripts/error_split.py table OUT LABEL=ROWS ... [--workers-clock LABEL] [--markdown]

`measure` profiles each model (tiny flavour, batch 8, two CPU stand-ins, one device's share of the
cores), in rounds of: every size on one dynamic-batch export (`dynamic`) and every size on its own export
(`static`, as the profiler did before one export served them all), in turn; with `--old-code DIR` (an
older checkout laid out as an importable `pipebench` package) a profile made by that code (`old-code`);
and `--micro-batches auto` as `pipebench run` profiles (`auto-run`). Each is saved as
OUT/<model>-<variant><round>.profile.json, all with the link figures of the session's first probe, so
that the probes' noise moves no comparison. A profile file OUT/<model>-nov30-run.profile.json (the
11-30 run's own) is scored too.

`clocks` runs the quick suite's cases as `pipebench run` does and times the same steps on the parent's
clock (what rows held before) and on the workers' (what they hold now): OUT/clocks.json.

`table` predicts every ok row of the ROWS files (results files or folders) at the micro-batch count it
ran, along a chain of changes (STEPS), each round's profiles apart: the 11-30 code's profile, today's
profiler on one export per size, on one dynamic export, with the sizes auto interpolates interpolated
(`auto`, made here from `dynamic`, so that only the interpolation differs), each priced as on 11-30
(pricing off: the plain simulator with transfers beside the compute, no contention for DDP and FSDP, no
runtime cost per operation or FSDP2 layer, nn.DataParallel priced as single), then with today's
shared-cores pricing. Per group (rows file, model) it prints the median and 90th percentile of
|predicted - measured| / measured, the median signed error, the median over the cases every ROWS file
ran, and how far each step moved the predictions (the median ratio to the step before: the change alone,
whatever the measured steps). --workers-clock LABEL adds those rows moved to the workers' clock by what
clocks.json measured the parent's clock to add.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence

from pipebench.partition.profiling.cache import LINK_FIELDS
from pipebench.base.text.text_tables import text_table
from pipebench.request import Request

BATCH = 8
DEVICES = ["cpu", "cpu"]
CPU_ONLY = tuple(f for f in LINK_FIELDS if f not in ("link_gbps", "allreduce_gbps", "link_latency_ms"))
"""The link figures only the CPU stand-ins' pricing reads: none of them existed on 11-30."""

_OLD_PROFILE = """
import sys, pipebench
from pipebench.partition.profiling.profile_record import save_profiles
save_profiles(pipebench.profile(sys.argv[1], batch={batch}, device="cpu", devices=["cpu", "cpu"], flavour="tiny"),
              sys.argv[2])
"""


# ---------------------------------------------------------------------------------------------- measure

def measure(out: Path, models: Sequence[str], rounds: int, old_code: Path | None) -> None:
    """Profile each model in `rounds` rounds of the variants (module docstring), saving each."""
    import pipebench
    from pipebench.bench.predict.ranking import advice_ranking
    from pipebench.hardware.cpu import thread_budget, threads_per_device
    from pipebench.models import get_model
    from pipebench.partition.profiling.profile_record import load_profiles, save_profiles
    from pipebench.partition.profiling.measure import Captures, profile_sizes
    from pipebench.partition.profiling.micro_batch_sizes import counts_to_profile

    out.mkdir(parents=True, exist_ok=True)
    counts = counts_to_profile(None, BATCH, 1)
    links: dict | None = None

    def keep(profiles, name: str) -> None:
        nonlocal links
        if links is None:
            links = {f: getattr(profiles[0], f) for f in LINK_FIELDS}
            print(f"  links (every profile's): {json.dumps(links)}", flush=True)
        for p in profiles:
            for f, v in links.items():
                setattr(p, f, v)
        save_profiles(profiles, out / f"{name}.profile.json")
        print(f"  {name}: " + ", ".join(f"size {p.micro_batch} {sum(l.step_ms for l in p.layers):.2f} ms"
                                       + ("" if p.whole_step_ms is None else f" (whole step {p.whole_step_ms:.2f})")
                                       + (" interpolated" if p.interpolated_from else "")
                                       for p in profiles), flush=True)

    for model in models:
        for r in range(1, rounds + 1):
            print(f"{model}, round {r}", flush=True)
            built = get_model(model, "tiny", device="cpu")

            def static():
                alone = Captures()
                alone.refused = True  # every size captured on its own, as before one export served them all
                with thread_budget(threads_per_device(len(DEVICES))):
                    return profile_sizes(built, "cpu", BATCH, counts, repeats=3, warmup=1, captures=alone)

            def dynamic():
                return pipebench.profile(model, batch=BATCH, device="cpu", devices=["cpu"] * 2, flavour="tiny",
                                         micro_batches=counts, cache=False)

            # The two exports in turn, first one then the other, so that a load that rises or falls over a
            # round does not favour either; the first dynamic profile's probe gives every profile its links.
            for kind, run in [("dynamic", dynamic), ("static", static)][::1 if r % 2 else -1]:
                keep(run(), f"{model}-{kind}{r}")
            if old_code is not None:
                path = out / f"{model}-old-code{r}.profile.json"
                subprocess.run([sys.executable, "-c", _OLD_PROFILE.format(batch=BATCH), model, str(path)], check=True,
                               env={**os.environ, "PYTHONPATH": str(old_code)}, cwd=old_code, stdout=subprocess.DEVNULL)
                keep(load_profiles(path), f"{model}-old-code{r}")
            auto = pipebench.profile(model, batch=BATCH, device="cpu", devices=["cpu"] * 2, flavour="tiny",
                                     micro_batches="auto", cache=False, rank=advice_ranking(Request(devices=DEVICES)))
            keep(auto, f"{model}-auto-run{r}")


def clocks(out: Path, models: Sequence[str], strategies: Sequence[str], steps: int) -> list[dict]:
    """The measured side's change, both clocks on the same steps: each case run as `pipebench run` runs it
    (a warm worker group, planned from OUT's `dynamic1` profile), every step timed by the parent (its
    command's round trip through the store included: the clock of rows before the workers' own) and by
    the workers (what rows hold now). Saved as OUT/clocks.json."""
    from pipebench.bench.launch.sessions import Session, WorkerGroups
    from pipebench.bench.cases.prepare import CaseProfiles, prepare
    from pipebench.bench.cases.case import make_cases
    from pipebench.bench.cases.machine import detect_machine
    from pipebench.partition.profiling.profile_record import load_profiles

    machine = detect_machine(None, cpu_processes=len(DEVICES), cpu=True)  # CPU stand-ins, GPUs visible or not
    found = []
    with WorkerGroups() as groups:
        for model in models:
            path = out / f"{model}-dynamic1.profile.json"
            profiled = CaseProfiles(load_profiles(path), path)
            for case in make_cases({model: BATCH}, strategies, [None], flavour="tiny"):
                prepared = prepare(case, machine, profiled, steps=steps, warmup=2)
                with Session(prepared.job, timeout=600, groups=groups) as workers:
                    parent = [workers.step() for _ in range(steps)]
                    workers.step(trace=True)
                    own = workers.finish().step_ms[:steps]
                micro = prepared.plan.micro_batches if prepared.plan else 1
                found.append({"model": model, "strategy": case.strategy, "micro_batches": micro,
                              "parent_ms": statistics.median(parent), "workers_ms": statistics.median(own)})
                print(f"  {model} {case.strategy} m={micro}: parent {found[-1]['parent_ms']:.2f} ms, "
                      f"workers {found[-1]['workers_ms']:.2f} ms", flush=True)
    (out / "clocks.json").write_text(json.dumps(found, indent=1) + "\n")
    return found


# ------------------------------------------------------------------------------------------------ table

STEPS = [  # (what changed, profile variant, pricing on), in the order the chain applies them
    ("the 11-30 run's own profile, priced as then", "nov30-run", False),
    ("11-30's code, profiled today", "old-code", False),
    ("+ today's profiler, each size its own export", "static", False),
    ("+ one dynamic-batch export (a)", "dynamic", False),
    ("+ the sizes between interpolated (a)", "auto", False),
    ("+ the shared-cores pricing (b)", "auto", True),
    ("today's `--micro-batches auto` as run, priced today", "auto-run", True),
]


@dataclass
class Line:
    group: str
    step: str
    cases: int
    rounds: list[tuple[float, float, float] | None]
    """Per profiling round: (median |error|, p90 |error|, median signed error)."""
    common: float | None
    """Round 1's median |error| over the cases every rows file ran."""
    moved: list[float | None]
    """Per round: the median over the rows of this step's prediction over the previous step's (the change
    alone, whatever the measured steps)."""


def interpolated(dynamic: list) -> list:
    """What `--micro-batches auto` would have given from the sizes of `dynamic`: the anchors taken from it, the
    other sizes interpolated, and those the advice's ranking finds close taken from it too (micro_batch_sizes.refine)."""
    from pipebench.bench.predict.ranking import advice_ranking
    from pipebench.partition.profiling import micro_batch_sizes

    by_count = {p.micro_batches: p for p in dynamic}
    counts = sorted(by_count)
    first = [by_count[m] for m in micro_batch_sizes.anchors(counts, len(DEVICES))]
    return micro_batch_sizes.refine(first, counts, advice_ranking(Request(devices=DEVICES)), lambda wanted: [by_count[m] for m in wanted])


@contextmanager
def pricing(on: bool) -> Iterator[None]:
    """`on`: today's pricing; off: CPU stand-ins' pipelines simulated as devices of their own."""
    if on:
        yield
        return
    from pipebench.bench.strategies.planned import price as prices

    shared = prices.shared_cores
    prices.shared_cores = lambda profile, devices: None
    try:
        yield
    finally:
        prices.shared_cores = shared


def predict_row(row, profiles: list, on: bool) -> float | None:
    """The row's step predicted from `profiles` at the micro-batch count it ran, with the pricing `on`
    (off: no shared cores, no contention for DDP and FSDP, no cost per runtime operation or FSDP2 layer,
    nn.DataParallel priced as single)."""
    from pipebench.bench.predict.ranking import predict
    from pipebench.bench.strategies import get_strategy
    from pipebench.base.errors import UserError
    from pipebench.base.training import Training

    if not on:
        profiles = [replace(p, **{f: None for f in CPU_ONLY}) for p in profiles]
    strategy = row.strategy
    if strategy == "dataparallel" and not on:  # before: the module as it is, as single's plan prices it
        strategy = "single"
    training = Training(precision=row.precision, optimizer=row.optimizer, checkpoint=row.checkpoint)
    micro = row.micro_batches if get_strategy(strategy).micro_batched else None
    try:
        with pricing(on):
            return predict(strategy, profiles, Request(devices=DEVICES, training=training), micro_batches=micro).predicted_step_ms
    except UserError:
        return None


def _errors(pairs: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """(median |error|, p90 |error|, median signed error) of (predicted, measured) pairs."""
    from pipebench.bench.predict.fidelity import _p90

    if not pairs:
        return None
    signed = [(p - m) / m for p, m in pairs]
    absolute = [abs(e) for e in signed]
    return statistics.median(absolute), _p90(absolute), statistics.median(signed)


def _median_ratio(now: list, then: list) -> float | None:
    ratios = [a / b for (a, _), (b, _) in zip(now, then) if a and b]
    return statistics.median(ratios) if ratios else None


def on_workers_clock(rows: list, timed: list[dict]) -> list:
    """`rows` measured on the parent's clock, moved to the workers' clock: each step less what the parent's
    clock added to the same case's steps in `timed` (clocks.json; the store's round trip is a fixed cost
    per step, not a share of it). Rows of a case `timed` lacks are left out."""
    extra = {(t["model"], t["strategy"]): t["parent_ms"] - t["workers_ms"] for t in timed}
    return [replace(r, step_ms=r.step_ms - extra[(r.model, r.strategy)]) for r in rows
            if (r.model, r.strategy) in extra]


def lines(rows_by_label: dict[str, list], profiles: dict[str, dict[str, list]]) -> list[Line]:
    """Per rows file and model: the committed predictions' errors, then each step of STEPS whose profiles
    OUT has, each profiling round's."""
    def ok(rows):
        return [r for r in rows if r.status == "ok" and r.step_ms and r.batch == BATCH and r.flavour == "tiny"]

    ran = [{r.strategy for r in ok(rows)} for rows in rows_by_label.values()]
    common = set.intersection(*ran) if ran else set()
    out = []
    for label, rows in rows_by_label.items():
        for model, variants in profiles.items():
            mine = [r for r in ok(rows) if r.model == model]
            if not mine:
                continue
            before: list | None = None
            for step, kind, on in [("committed (as run)", None, None), *STEPS]:
                if kind is None:
                    scored = [[(r.predicted_step_ms, r) for r in mine]]
                else:
                    rounds = sorted(v for v in variants if v == kind or v.removeprefix(kind).isdigit())
                    if not rounds:
                        continue
                    scored = [[(predict_row(r, variants[v], on), r) for r in mine] for v in rounds]
                errors = [_errors([(p, r.step_ms) for p, r in s if p]) for s in scored]
                shared = _errors([(p, r.step_ms) for p, r in scored[0] if p and r.strategy in common])
                moved = [None] * len(scored)
                if before is not None and kind not in (None, "nov30-run") and before[1] not in (None, "nov30-run"):
                    moved = [_median_ratio(now, before[0][min(k, len(before[0]) - 1)]) for k, now in enumerate(scored)]
                out.append(Line(f"{label} {model}", step, sum(1 for p, _ in scored[0] if p), errors,
                                shared[0] if shared else None, moved))
                before = (scored, kind)
    return out


def load_variants(folder: Path) -> dict[str, dict[str, list]]:
    """{model: {variant: profiles}} from OUT's files, with `auto<round>` made from each `dynamic<round>`."""
    from pipebench.partition.profiling.profile_record import load_profiles

    found: dict[str, dict[str, list]] = {}
    for path in sorted(folder.glob("*.profile.json")):
        stem = path.name.removesuffix(".profile.json")
        model, _, variant = stem.partition("-")
        found.setdefault(model, {})[variant] = load_profiles(path)
    for variants in found.values():
        for name in [n for n in variants if n.startswith("dynamic")]:
            variants["auto" + name.removeprefix("dynamic")] = interpolated(variants[name])
    return found


def table(found: list[Line], markdown: bool) -> str:
    def pct(v):
        return "-" if v is None else f"{100 * v:+.0f}%" if v < 0 else f"{100 * v:.0f}%"

    rounds = max(len(x.rounds) for x in found)
    head = ["group", "profile and pricing", "cases"]
    for k in range(1, rounds + 1):
        head += [f"r{k} median", f"r{k} p90", f"r{k} signed"]
    head.append("r1 common median")
    head += [f"r{k} moved" for k in range(1, rounds + 1)]
    rows = []
    for x in found:
        cells = [x.group, x.step, str(x.cases)]
        for k in range(rounds):
            e = x.rounds[k] if k < len(x.rounds) else None
            cells += ["-"] * 3 if e is None else [pct(e[0]), pct(e[1]), pct(e[2])]
        rows.append(cells + [pct(x.common)] + [f"{m:.2f}x" if m else "-" for m in
                                               (x.moved + [None] * rounds)[:rounds]])
    return text_table(head, rows, markdown)


def main(argv: list[str] | None = None) -> int:
    from pipebench.bench.store import results
    from pipebench.base.errors import UserError

    parser = argparse.ArgumentParser(prog="python scripts/error_split.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="profile the variants into OUT")
    m.add_argument("out", type=Path)
    m.add_argument("--models", default="gpt,resnet101")
    m.add_argument("--rounds", type=int, default=2)
    m.add_argument("--old-code", type=Path, help="an older checkout laid out as an importable pipebench package")
    c = sub.add_parser("clocks", help="time the quick suite's cases on both clocks, into OUT/clocks.json")
    c.add_argument("out", type=Path)
    c.add_argument("--models", default="gpt,resnet101")
    c.add_argument("--strategies", default="single,dataparallel,ddp,modelparallel,pipeline,pp-gpipe,pp-1f1b,"
                   "pp-interleaved,pp-zb,pp-zbv")
    c.add_argument("--steps", type=int, default=6)
    t = sub.add_parser("table", help="the errors of the rows re-predicted from OUT's profiles")
    t.add_argument("out", type=Path)
    t.add_argument("rows", nargs="+", help="LABEL=results file or folder")
    t.add_argument("--markdown", action="store_true")
    t.add_argument("--workers-clock", metavar="LABEL", help="also those rows moved to the workers' clock (clocks.json)")
    args = parser.parse_args(argv)
    try:
        if args.command == "measure":
            os.environ["PIPEBENCH_CACHE"] = "off"
            measure(args.out, args.models.split(","), args.rounds, args.old_code)
            return 0
        if args.command == "clocks":
            clocks(args.out, args.models.split(","), args.strategies.split(","), args.steps)
            return 0
        labelled = {}
        for item in args.rows:
            label, sep, path = item.partition("=")
            if not sep:
                raise UserError(f"rows {item!r}: give LABEL=PATH")
            labelled[label] = results.load(Path(path))
        timed = args.out / "clocks.json"
        if args.workers_clock:
            if args.workers_clock not in labelled or not timed.exists():
                raise UserError(f"--workers-clock {args.workers_clock}: needs those rows and {timed} (clocks)")
            labelled[args.workers_clock + " on the workers' clock"] = on_workers_clock(
                labelled[args.workers_clock], json.loads(timed.read_text()))
        variants = load_variants(args.out)
        if not variants:
            raise UserError(f"no *.profile.json in {args.out}")
        print(table(lines(labelled, variants), args.markdown))
    except UserError as exc:
        print(f"error_split: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
