"""Cases measured in interleaved rounds (bench/cases/rounds.py run_rounds), the figures of their timed steps
(pipebench/base/step_stats.py), and the strategies that do the same work as single on a machine (the
registry's compute_devices): no processes start here."""

import math

import pytest

from helpers import worker_result
from pipebench.base.step_stats import StepStats, samples_per_s
from pipebench.bench.cases import rounds
from pipebench.bench.cases.case_rows import same_work_as
from pipebench.bench.cases.machine import Machine


def test_every_one_process_strategy_on_the_cpu_does_the_same_work_as_single():
    cpu = Machine(None, 2, "x86_64")
    same = {name for name in ("single", "dataparallel", "ddp", "zero1", "fsdp", "device-map", "modelparallel",
                              "pipeline", "pp-1f1b", "pp-zbv") if same_work_as(name, cpu)}
    assert same == {"dataparallel", "device-map", "modelparallel", "pipeline"}
    two_gpus, one_gpu = Machine([0, 1], 2, "NVIDIA H200"), Machine([0], 1, "NVIDIA H200")
    assert not any(same_work_as(name, two_gpus) for name in ("dataparallel", "modelparallel", "pipeline"))
    assert same_work_as("dataparallel", one_gpu) == "single" and same_work_as("single", one_gpu) == ""


def test_rounds_interleave_the_cases_and_the_row_keeps_each_rounds_mean(monkeypatch):
    """A B C, then C B A, then A B C: every case runs early and late; the last round traces a step."""
    ran, made = [], []

    def measure_round(prepared, *, steps, timeout, groups, min_seconds, trace):
        ran.append((prepared, trace))
        made.append(worker_result())
        return [10.0 * (len(ran)), 10.0 * (len(ran)) + 2], made[-1]

    monkeypatch.setattr(rounds, "measure_round", measure_round)
    monkeypatch.setattr(rounds, "make_row", lambda prepared, machine, **kw: (prepared, kw))
    rows = rounds.run_rounds(["A", "B", "C"], Machine(None, 2, "cpu"), rounds=3, steps=2, timeout=60)
    assert [p for p, _ in ran] == ["A", "B", "C", "C", "B", "A", "A", "B", "C"]
    assert [t for _, t in ran] == [False] * 6 + [True] * 3
    (a, kw), = [row for row in rows if row[0] == "A"]
    assert kw["round_ms"] == [11.0, 61.0, 71.0] and kw["step_ms"] == [10.0, 12.0, 60.0, 62.0, 70.0, 72.0]
    assert kw["result"] is made[6] and kw["status"] == "ok"  # A's last round's, the 7th measured


def test_a_case_that_fails_leaves_the_later_rounds(monkeypatch):
    ran = []

    def measure_round(prepared, **_):
        ran.append(prepared)
        if prepared == "B":
            raise rounds._RoundFailed("oom", "out of memory")
        return [5.0], worker_result()

    monkeypatch.setattr(rounds, "measure_round", measure_round)
    monkeypatch.setattr(rounds, "make_row", lambda prepared, machine, **kw: (prepared, kw["status"]))
    rows = rounds.run_rounds(["A", "B"], Machine(None, 2, "cpu"), rounds=2, steps=1, timeout=60)
    assert ran == ["A", "B", "A"] and rows == [("A", "ok"), ("B", "oom")]


def test_timed_steps_have_one_answer_where_there_is_no_figure():
    """The worker's result and the row state the same figures: none without a step, no spread of one step,
    no rate of a step of no time (JSON holds no infinity)."""
    assert samples_per_s(64, 100.0) == pytest.approx(640.0)
    assert samples_per_s(64, 0.0) is None and samples_per_s(64, None) is None and samples_per_s(64, math.nan) is None
    assert StepStats.of([], 8) == StepStats(mean_ms=None, std_ms=None, best_ms=None, samples_per_s=None)
    assert StepStats.of([10.0], 8) == StepStats(mean_ms=10.0, std_ms=None, best_ms=10.0, samples_per_s=800.0)
    two = StepStats.of([30.0, 10.0], 8)
    assert (two.mean_ms, two.best_ms, two.samples_per_s) == (20.0, 10.0, 400.0)
    assert two.std_ms == pytest.approx(math.sqrt(200.0))
