"""Run one Job in worker processes and bring its result back: `launch(job)`.

Fresh processes (bench/launch/spawn.py), or with `groups` the next case of a warm worker group
(bench/launch/sessions.py). The tests and scripts run a Job through it; `pipebench run` times its cases'
steps through a Session itself (bench/cases/rounds.py). Every case runs in children of its own, never in
this process, so that:
- CUDA_VISIBLE_DEVICES names the chosen GPUs before CUDA initialises anywhere;
- a crash or an out-of-memory in one case cannot take the suite down with it.

Several machines: run the worker under torchrun yourself with its node flags (docs/several-machines.md).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.sessions import Session, WorkerGroups
from pipebench.bench.launch.spawn import WorkerError, collect_result, log_tail, start_workers
from pipebench.bench.launch.worker_report import WorkerResult
from pipebench.base.processes import kill_child
from pipebench.base.time_limit import LIMIT_SECONDS

__all__ = ["launch"]


def launch(job: Job, *, gpus: Sequence[int] | None = None, timeout: float = LIMIT_SECONDS,
           torchrun_args: Sequence[str] = (), keep: str | Path | None = None,
           groups: WorkerGroups | None = None) -> WorkerResult:
    """Run `job` in fresh processes (or a warm group's: `groups`), timing its steps in the workers, and
    return rank 0's result.

    gpus: GPU ids to use (within the user's CUDA_VISIBLE_DEVICES); None: those visible.
    keep: a folder to keep the workers' files in (params-rank<r>.pt, the log); default: a temporary one.
    groups: run it as the next case of the warm group of `groups` that fits it (Session), its steps one
    per go-ahead, the last traced, as fresh workers run them on their own.
    Raises WorkerError with the failing worker's message; `timeout` seconds end everything.
    """
    if groups is not None:
        with Session(job, gpus=gpus, timeout=timeout, torchrun_args=torchrun_args, groups=groups) as workers:
            for i in range(job.steps):
                workers.step(trace=i == job.steps - 1)
            result = workers.finish()
            if keep is not None:
                shutil.copytree(workers.out_dir, keep, dirs_exist_ok=True)
        return result
    with tempfile.TemporaryDirectory(prefix="pipebench-") as tmp:
        out_dir = Path(keep) if keep is not None else Path(tmp)
        proc = start_workers(job, out_dir, Path(tmp), gpus, torchrun_args)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_child(proc)
            raise WorkerError(f"{job.strategy}: no result within {timeout:.0f} s; stopped",
                              log=log_tail(out_dir / "workers.log")) from None
        finally:  # also on Ctrl-C: take the workers down with us
            kill_child(proc)
        return WorkerResult.from_record(collect_result(job, out_dir, rc), str(out_dir / "result.json"))
