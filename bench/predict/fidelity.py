"""How good the predictions are, as a benchmark rather than a claim: from results rows that carry both a
prediction and a measurement, the step error (median and 90th percentile of |predicted - measured| /
measured), the memory error on GPUs, Kendall's tau between the predicted and the measured order of the
strategies, and the regret of the recommendation (1 - the measured throughput of the strategy advise
recommends from the predictions / the best measured).

    python -m pipebench.bench.predict.fidelity RESULTS.json|FOLDER ... [--markdown]

A prediction is judged against the measured step it is of (`measured_step`). On CPU stand-ins that is a
case's fastest step (Row.step_ms_best): the profile's whole step there is its fastest over the machine's
drift seconds, the step without the other load that slows every process at once in bursts; the table
against the mean steps follows. On GPUs it is the mean step: the profile's whole step there is the median of
its repeats, and a launch-bound model's fastest step lies well below it on a busy host (bert-base at batch
16 x 256 on one H200: fastest 26.5 ms, mean 32.4).

Several rows of one case (the rounds of scripts/cpu_fidelity.sh, each in its own folder) are one case: its
measured and its predicted step are the medians of theirs. A CPU stand-in's speed moves with the host's
other load, by up to 1.9x within minutes on a shared 2-vCPU VM (every copy of a model in one process slows
together: results/2026-12-02-cpu2-machine-drift), so a case measured once judges the machine as much as
the prediction; "round spread" says how far the rounds of a case measured apart, and `noise_floor` how
close the rounds come to one another by the same figures: each round's measurement taken as the
prediction of the others'.

Targets, the accuracy at which advice can be trusted: median step error at most 5%, 90th percentile at most 15%,
memory within 10% on GPUs, tau at least 0.8, regret at most 5%; interval coverage (the share of measured
steps, every round's, inside the interval their row printed) at least 80%. A group is one question asked of the
tool: one machine, model, batch and training; its cases are the strategies (and micro-batch counts) run.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pipebench.base.step_stats import samples_per_s
from pipebench.base.text.text_tables import text_table
from pipebench.base.training import Training

__all__ = ["Fidelity", "fidelity", "noise_floor", "kendall_tau", "TARGETS"]

TARGETS = {"median_step_error": 0.05, "p90_step_error": 0.15, "max_memory_error": 0.10, "tau": 0.8, "regret": 0.05,
           "coverage": 0.8}
AT_LEAST = ("tau", "coverage")
"""The targets that are floors; the others are ceilings."""


@dataclass
class Fidelity:
    """One group's figures (or, with group "all", every row's)."""

    group: str
    cases: int
    median_step_error: float | None
    p90_step_error: float | None
    max_memory_error: float | None
    tau: float | None
    regret: float | None
    recommended: str = ""
    fastest: str = ""
    in_interval: float | None = None
    """The share of the cases whose measured step fell inside their prediction's interval (rows written
    with one); not a target: it says whether the intervals are as wide as the noise they claim."""
    rounds: int = 1
    """The fewest rows a case of the group had (its rounds)."""
    round_spread: float | None = None
    """The median over the cases of (slowest - fastest round) / the median round, of the measured step;
    None with one round."""
    coverage: float | None = None
    """Interval coverage: the share of the measured steps (every round's row of every case, its fastest
    step or mean as judged) inside the interval its row printed, predicted_step_ms x (1 ± its
    predicted_step_spread); None where no row kept one. Target: at least 80%."""

    def misses(self) -> list[str]:
        """The targets this group misses, named."""
        out = []
        for name, limit in TARGETS.items():
            value = getattr(self, name)
            if value is not None and (value < limit if name in AT_LEAST else value > limit):
                out.append(name)
        return out


def kendall_tau(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """Kendall's tau-a between two orderings of the same cases (1: the same order, -1: reversed); None
    for fewer than two cases. Pairs tied in either are counted as neither agreeing nor disagreeing."""
    n = len(predicted)
    if n < 2:
        return None
    score = 0
    for i in range(n):
        for j in range(i + 1, n):
            a = (predicted[i] > predicted[j]) - (predicted[i] < predicted[j])
            b = (measured[i] > measured[j]) - (measured[i] < measured[j])
            score += a * b
    return score / (n * (n - 1) / 2)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.9 * (len(ordered) - 1))))]


def _case(row) -> str:
    return row.strategy + (f" m={row.micro_batches}" if row.micro_batches > 1 else "")


def _group(row) -> str:
    training = "" if (row.precision, row.optimizer) == (Training.precision, Training.optimizer) else f" {row.precision} {row.optimizer}"
    settings = f" [{row.settings}]" if row.settings else ""
    return f"{row.device_name or row.gpus}: {row.model} {row.flavour}{settings} b{row.batch}{training}"


def recommendation(rows: list, predicted: list[float]) -> int:
    """The row advise would have recommended from `predicted` samples/s and the rows' intervals
    (bench/predict/ranking.py `recommendation_of`; a row written before rows kept their interval ties by the
    TIE margin alone, partition/profiling/micro_batch_sizes.py)."""
    from pipebench.bench.predict.ranking import recommendation_of
    from pipebench.bench.strategies.prediction import Prediction

    order = sorted(range(len(rows)), key=lambda i: -predicted[i])
    fitting = [Prediction(rows[i].strategy, 1e3 / predicted[i], predicted[i], [], True, 1, None,
                          step_spread=rows[i].predicted_step_spread or 0.0,
                          own_spread=rows[i].predicted_own_spread) for i in order]
    return order[fitting.index(recommendation_of(fitting))]


def measured_step(row, against: str = "predicted") -> float:
    """The measured step a prediction is judged against: the one it is of (`against` "predicted": a CPU
    row's fastest step, Row.step_ms_best, a GPU row's mean; module docstring) or the mean ("mean"); a row
    written before rows kept their fastest step gives its mean."""
    fastest = against == "predicted" and row.gpus == "cpu" and row.step_ms_best is not None
    return row.step_ms_best if fastest else row.step_ms


@dataclass
class FidelityCase:
    """One case's rounds, as one row for the figures: the medians of their steps."""

    rows: list
    against: str = "predicted"
    """Which measured step (`measured_step`)."""

    def __getattr__(self, name):  # what the rounds share: model, strategy, batch, ...
        return getattr(self.rows[0], name)

    @property
    def step_ms(self) -> float:
        return statistics.median(measured_step(r, self.against) for r in self.rows)

    @property
    def samples_per_s(self) -> float | None:
        return samples_per_s(self.batch, self.step_ms)

    @property
    def predicted_step_ms(self) -> float:
        return statistics.median(r.predicted_step_ms for r in self.rows)

    @property
    def predicted_step_spread(self) -> float | None:
        return self._median("predicted_step_spread")

    @property
    def predicted_own_spread(self) -> float | None:
        return self._median("predicted_own_spread")

    def _median(self, name: str) -> float | None:
        """The median of the rounds' `name` where they kept one (None where none did)."""
        values = [getattr(r, name) for r in self.rows if getattr(r, name) is not None]
        return statistics.median(values) if values else None

    @property
    def peak_memory_bytes(self):
        return self.rows[-1].peak_memory_bytes

    @property
    def predicted_memory_bytes(self):
        return self.rows[-1].predicted_memory_bytes

    @property
    def round_spread(self) -> float | None:
        steps = [measured_step(r, self.against) for r in self.rows]
        return (max(steps) - min(steps)) / statistics.median(steps) if len(steps) > 1 else None


def _figures(group: str, rows: list[FidelityCase]) -> Fidelity:
    steps = [abs(r.predicted_step_ms - r.step_ms) / r.step_ms for r in rows]
    memory = [abs(max(r.predicted_memory_bytes) - max(r.peak_memory_bytes)) / max(r.peak_memory_bytes)
              for r in rows if r.predicted_memory_bytes and r.peak_memory_bytes and max(r.peak_memory_bytes) > 0]
    predicted = [samples_per_s(r.batch, r.predicted_step_ms) for r in rows]
    measured = [r.samples_per_s for r in rows]
    pick = recommendation(rows, predicted)
    spread = [r for r in rows if r.predicted_step_spread is not None]
    inside = [abs(r.step_ms - r.predicted_step_ms) <= r.predicted_step_ms * r.predicted_step_spread for r in spread]
    apart = [r.round_spread for r in rows if r.round_spread is not None]
    covered = [abs(measured_step(row, case.against) - row.predicted_step_ms)
               <= row.predicted_step_ms * row.predicted_step_spread
               for case in rows for row in case.rows if row.predicted_step_spread is not None]
    best = max(range(len(rows)), key=lambda i: measured[i])
    return Fidelity(group=group, cases=len(rows),
                    median_step_error=statistics.median(steps) if steps else None,
                    p90_step_error=_p90(steps) if steps else None,
                    max_memory_error=max(memory) if memory else None,
                    tau=kendall_tau(predicted, measured),
                    regret=1 - measured[pick] / measured[best] if measured[best] > 0 else None,
                    recommended=_case(rows[pick]), fastest=_case(rows[best]),
                    in_interval=sum(inside) / len(inside) if inside else None,
                    rounds=min(len(r.rows) for r in rows),
                    round_spread=statistics.median(apart) if apart else None,
                    coverage=sum(covered) / len(covered) if covered else None)


def _rounds(rows: Sequence, predicted: bool) -> dict[tuple, list]:
    """The ok rows (with a prediction, if `predicted`) by case, (group, case, GPUs): each case's rounds, in
    the order they started."""
    cases: dict[tuple, list] = {}
    for r in sorted(rows, key=lambda r: r.started_at):
        if r.status == "ok" and r.step_ms and r.samples_per_s and (r.predicted_step_ms or not predicted):
            cases.setdefault((_group(r), _case(r), r.gpus), []).append(r)
    return cases


def fidelity(rows: Sequence, against: str = "predicted") -> list[Fidelity]:
    """Each group's figures, then "all": the step and memory errors over every case, and the median tau
    and the mean regret over the groups. Only ok rows with a prediction count; the rows of one case are its
    rounds (`FidelityCase`), judged against the step each prediction is of or their mean step (`measured_step`)."""
    cases = {key: FidelityCase(rounds, against) for key, rounds in _rounds(rows, predicted=True).items()}
    groups: dict[str, list] = {}
    for (group, _, _), case in cases.items():
        groups.setdefault(group, []).append(case)
    out = [_figures(g, cs) for g, cs in groups.items()]
    if not out:
        return out
    every = _figures("all", list(cases.values()))
    taus = [f.tau for f in out if f.tau is not None]
    regrets = [f.regret for f in out if f.regret is not None and f.cases > 1]
    every.tau = statistics.median(taus) if taus else None
    every.regret = statistics.mean(regrets) if regrets else None
    every.recommended = every.fastest = ""
    return [*out, every]


def noise_floor(rows: Sequence, against: str = "predicted") -> Fidelity | None:
    """How close the machine lets any prediction come: each round's own measurement taken as the
    prediction of the median of the case's other rounds, judged by the same figures (the step errors over
    every case and round, the median tau and the mean regret over the groups and rounds; the "prediction"
    recommends what its round measured fastest). A prediction cannot be judged closer than the
    measurements agree with themselves. None unless some cases were measured in two rounds or more."""
    groups: dict[str, list[list[float]]] = {}
    for (group, _, _), rounds in _rounds(rows, predicted=False).items():
        if len(rounds) > 1:
            groups.setdefault(group, []).append([measured_step(r, against) for r in rounds])
    errors, taus, regrets = [], [], []
    for steps in groups.values():
        for k in range(min(len(s) for s in steps)):
            own = [s[k] for s in steps]
            others = [statistics.median(s[:k] + s[k + 1:]) for s in steps]
            errors += [abs(o - m) / m for o, m in zip(own, others)]
            if len(steps) > 1:
                taus.append(kendall_tau(own, others))
                pick = min(range(len(own)), key=own.__getitem__)
                regrets.append(1 - min(others) / others[pick])
    if not errors:
        return None
    return Fidelity(group="one round as the others' prediction", cases=sum(len(s) for s in groups.values()),
                    median_step_error=statistics.median(errors), p90_step_error=_p90(errors),
                    max_memory_error=None, tau=statistics.median(taus) if taus else None,
                    regret=statistics.mean(regrets) if regrets else None,
                    rounds=min(len(s) for steps in groups.values() for s in steps))


def table(figures: list[Fidelity], markdown: bool = False) -> str:
    def pct(v):
        return "-" if v is None else f"{100 * v:.1f}%"

    head = ["group", "cases", "median step err", "p90 step err", "max memory err", "tau", "regret",
            "recommended", "fastest measured", "measured in interval", "coverage", "rounds", "round spread", "misses"]
    lines = [[f.group, str(f.cases), pct(f.median_step_error), pct(f.p90_step_error), pct(f.max_memory_error),
              "-" if f.tau is None else f"{f.tau:.2f}", pct(f.regret), f.recommended, f.fastest,
              pct(f.in_interval), pct(f.coverage), str(f.rounds), pct(f.round_spread), ", ".join(f.misses()) or "none"]
             for f in figures]
    return text_table(head, lines, markdown)


def main(argv: list[str] | None = None) -> int:
    from pipebench.bench.store import results
    from pipebench.base.errors import UserError

    parser = argparse.ArgumentParser(prog="python -m pipebench.bench.predict.fidelity", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="results files (.json or .csv) or folders of them")
    parser.add_argument("--markdown", action="store_true", help="a markdown table")
    args = parser.parse_args(argv)
    try:
        rows = results.load([Path(p) for p in args.paths])
    except UserError as exc:
        print(f"fidelity: error: {exc}", file=sys.stderr)
        return 2
    figures = fidelity(rows)
    if not figures:
        print("fidelity: no ok rows with a prediction", file=sys.stderr)
        return 2
    print(table(figures, args.markdown))
    _print_floor(rows, "predicted", args.markdown)
    if any(r.step_ms_best is not None and r.gpus == "cpu" for r in rows):  # CPU rows against their mean too
        print("\nThe same predictions judged against each case's mean step (above: a CPU row's fastest):\n")
        print(table(fidelity(rows, against="mean"), args.markdown))
        _print_floor(rows, "mean", args.markdown)
    every = figures[-1]
    if every.coverage is not None:
        counted = sum(1 for r in rows if r.status == "ok" and r.predicted_step_ms and r.predicted_step_spread is not None)
        print(f"\ninterval coverage: {every.coverage:.0%} of {counted} measured steps inside their printed "
              f"interval (target >= {TARGETS['coverage']:.0%})")
    targets = ", ".join(f"{k.replace('_', ' ')} {'>=' if k in AT_LEAST else '<='} "
                        f"{v if k == 'tau' else f'{100 * v:.0f}%'}" for k, v in TARGETS.items())
    print(f"\ntargets: {targets}")
    return 0


def _print_floor(rows: Sequence, against: str, markdown: bool) -> None:
    floor = noise_floor(rows, against)
    if floor is not None:
        print("\nThe measurements against themselves (noise_floor: each round's step as the prediction of the "
              "median of the case's other rounds; no prediction can be judged closer):\n")
        print(table([floor], markdown))


if __name__ == "__main__":
    sys.exit(main())
