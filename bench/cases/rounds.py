"""Prepared cases measured: their steps timed in the parent through bench/launch/sessions.py's Session,
the cases of one model in interleaved rounds, so that the machine's drift falls on all of them alike.

`pipebench run` (bench/cases/run_suite.py) and the pytest-benchmark suite (bench/benchmarks/bench_suite.py)
share everything before this; they differ only in who times the steps (this module's loop, or
pytest-benchmark's `pedantic`).
"""
from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Callable, Sequence

from pipebench.bench.cases.case import now
from pipebench.bench.cases.case_rows import make_row
from pipebench.bench.cases.machine import Machine
from pipebench.bench.cases.prepare import Prepared
from pipebench.bench.store.row import Row

if TYPE_CHECKING:  # the launch side (torch) is imported where a case is measured (measure_round)
    from pipebench.bench.launch.sessions import WorkerGroups
    from pipebench.bench.launch.worker_report import WorkerResult


MAX_TIMED_STEPS = 10_000
"""--min-seconds times no more steps than this, however short they are."""


def run_prepared(prepared: Prepared, machine: Machine, *, steps: int, timeout: float,
                 groups: WorkerGroups | None = None, min_seconds: float = 0.0) -> Row:
    """Launch, run `steps` steps (more, until `min_seconds` have passed), trace one more, and make the row;
    failures and out-of-memory become rows too: one round of `run_rounds`."""
    return run_rounds([prepared], machine, rounds=1, steps=steps, timeout=timeout, groups=groups,
                      min_seconds=min_seconds)[0]


def run_rounds(prepared: Sequence[Prepared], machine: Machine, *, rounds: int, steps: int, timeout: float,
               groups: WorkerGroups | None = None, min_seconds: float = 0.0,
               note: Callable[[str], None] | None = None) -> list[Row]:
    """Measure `prepared` (cases of one model) in interleaved rounds, A B C, then C B A, then A B C ...:
    each round launches each case in its warm worker group, warms it up (the Job's warm-up steps), times
    `steps` steps (more, until min_seconds / rounds have passed) and ends it; the last round traces one
    more step. Every case thus runs early and late, beside the same neighbours, so what drifts on the
    machine (another process's load, the clock, a group still warming up) falls on all alike, and the
    spread of a case's round means (Row.round_ms) is its noise, which bench/report/tables.py judges "faster" by.
    A case that fails drops out of the later rounds, its row the failure; the rows come back in the
    order given. note: hears each round's end."""
    order = list(range(len(prepared)))
    rounds_ms: list[list[list[float]]] = [[] for _ in prepared]
    results: list[WorkerResult | None] = [None] * len(prepared)
    failed: dict[int, Row] = {}
    started = [""] * len(prepared)
    took = [0.0] * len(prepared)
    for r in range(rounds):
        for i in (order if r % 2 == 0 else order[::-1]):
            if i in failed:
                continue
            started[i] = started[i] or now()
            start = time.monotonic()
            try:
                step_ms, results[i] = measure_round(prepared[i], steps=steps, timeout=timeout, groups=groups,
                                                    min_seconds=min_seconds / rounds, trace=r == rounds - 1)
            except _RoundFailed as exc:
                failed[i] = make_row(prepared[i], machine, status=exc.status, reason=exc.reason,
                                     started_at=started[i], duration_s=took[i] + time.monotonic() - start)
                continue
            finally:
                took[i] += time.monotonic() - start
            rounds_ms[i].append(step_ms)
        if note is not None and rounds > 1:
            note(f"round {r + 1} of {rounds} measured ({'forward' if r % 2 == 0 else 'backward'} order)")
    rows = []
    for i, case in enumerate(prepared):
        if i in failed:
            rows.append(failed[i])
            continue
        steps_ms = [ms for one in rounds_ms[i] for ms in one]
        # A NaN or infinite loss: timed all the same, and said so.
        diverged = results[i].diverged if results[i] is not None else ""
        rows.append(make_row(case, machine, status="diverged" if diverged else "ok", reason=diverged,
                             result=results[i], step_ms=steps_ms,
                             round_ms=[statistics.fmean(one) for one in rounds_ms[i]] if rounds > 1 else [],
                             started_at=started[i], duration_s=took[i]))
    return rows


class _RoundFailed(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def measure_round(prepared: Prepared, *, steps: int, timeout: float, groups: WorkerGroups | None = None,
                  min_seconds: float = 0.0, trace: bool = True) -> tuple[list[float], WorkerResult]:
    """One round of one case: launch, warm up, time `steps` steps (more, until `min_seconds` have passed),
    trace one more if `trace`, end; (step ms, rank 0's result). A step's time is the workers' own
    (synchronised, from a common start to the last rank's end): the parent's clock also holds its
    command's round trip through the store and the threads that wait on it, 2-3 ms a step on a 2-core
    CPU, which is not training and is most of a tiny model's step there. The parent's clock stands in
    where the workers' is missing. groups: a bench.launch.sessions.WorkerGroups to run the case in a warm worker
    group of (None: workers of its own). _RoundFailed says how a failure or an out-of-memory ended it."""
    from pipebench.bench.launch.sessions import Session
    from pipebench.bench.launch.spawn import WorkerError

    try:
        with Session(prepared.job, gpus=prepared.gpus, timeout=timeout, groups=groups) as workers:
            step_ms, began = [], time.monotonic()
            while len(step_ms) < steps or (time.monotonic() - began < min_seconds and len(step_ms) < MAX_TIMED_STEPS):
                step_ms.append(workers.step())
            if trace:
                workers.step(trace=True)
            result = workers.finish()
    except WorkerError as exc:
        status = "oom" if exc.oom else "unavailable" if exc.unavailable else "timeout" if exc.timeout else "failed"
        raise _RoundFailed(status, str(exc)) from None
    own = result.step_ms
    if len(own) == len(step_ms) + trace:  # the workers' clocks; the traced step last, left out like the parent's
        step_ms = own[:len(step_ms)]
    return step_ms, result
