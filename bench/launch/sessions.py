"""The parent's side of a running case: its workers started and warmed up, one training step per go-ahead.

A Session sends its workers each command through a TCPStore on 127.0.0.1 (bench/launch/loopback.py) and
waits for their answer: "ready" once warmed up, then `cmd<n>` ("step", "trace" or "stop") answered by
`done<n>` (bench/launch/worker.py holds the workers' side). The parent times each step with its own clock, so
that pytest-benchmark measures multi-process strategies as it measures anything else.

A worker group (WorkerGroup) pays for torchrun, a Python and a torch import per process and the
rendezvous once, not once per case: seconds per case on a small machine, where a tiny model's step takes
milliseconds. Each case in it still has its own process group, keys (a PrefixStore `case<n>/`), time
limit, result and error; a case whose failure ends the group ends only that group, and the next case
starts a fresh one (WorkerGroups). When one worker fails, torchrun stops the others; the whole process
tree is then killed (pipebench.base.processes.kill_child), so no process and no port outlives the case.
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.loopback import loopback_store
from pipebench.bench.launch.spawn import WorkerError, collect_result, log_tail, start_workers
from pipebench.bench.launch.worker_report import WorkerResult
from pipebench.base.processes import kill_child
from pipebench.base.time_limit import LIMIT_SECONDS

__all__ = ["Session", "WorkerGroup", "WorkerGroups"]


class Session:
    """A job's workers, started and warmed up, running one training step each time `step` is called.

    The parent times each step with its own clock (a TCPStore round trip, well under a millisecond,
    is included), so that pytest-benchmark measures multi-process strategies in the parent as it
    measures anything else. Use as a context manager: leaving it stops every worker.

        with Session(job, gpus=[0, 1]) as workers:
            times = [workers.step() for _ in range(5)]
            result = workers.finish()

    groups: run the job in a warm worker group of `groups` (started if none fits) instead of workers of
    its own; the group lives on for the next case unless this one failed, ran out of time or was
    interrupted.
    """

    def __init__(self, job: Job, *, gpus: Sequence[int] | None = None, timeout: float = LIMIT_SECONDS,
                 torchrun_args: Sequence[str] = (), keep: str | Path | None = None,
                 groups: "WorkerGroups | None" = None):
        self.job, self.gpus, self.timeout, self.torchrun_args, self.keep = job, gpus, timeout, torchrun_args, keep
        self.groups = groups
        self._group: WorkerGroup | None = None
        self._prefix = ""
        """The prefix of this case's keys in its group's store: "case<n>"."""
        self._finished = False
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._proc: subprocess.Popen | None = None
        self._store = None
        self._count = 0
        self._threads: list[threading.Thread] = []  # the store must outlive them (C++ aborts otherwise)
        self._deadline = math.inf

    def __enter__(self) -> "Session":
        from datetime import timedelta

        self._deadline = time.monotonic() + self.timeout  # the whole session: start, every step, the stop
        if self.groups is not None:
            return self._enter_group()
        self._store = loopback_store(wait_for_workers=False, timeout=timedelta(seconds=self.timeout))
        job = replace(self.job, control_port=self._store.port)
        self._tmp = tempfile.TemporaryDirectory(prefix="pipebench-")
        self.out_dir = Path(self.keep) if self.keep is not None else Path(self._tmp.name)
        try:  # from the start on, a Ctrl-C anywhere (a thread's start waits too) takes the workers down
            self._proc = start_workers(job, self.out_dir, Path(self._tmp.name), self.gpus, self.torchrun_args)
            self._awaiting = "ready"
            self._thread(self._watch, self._store.port)
            self._wait_for("ready")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _enter_group(self) -> "Session":
        """Send the job to a warm group as its next case, under keys of its own, and wait for it to be ready."""
        from datetime import timedelta

        from torch.distributed import PrefixStore

        try:
            self._group = self.groups.take(self.job, self.gpus, self.torchrun_args)
            self._proc = self._group.proc
            self._group.store.set_timeout(timedelta(seconds=self.timeout))
            self._prefix, self.out_dir = self._group.send(replace(self.job, control_port=self._group.store.port))
            self._store = PrefixStore(self._prefix, self._group.store)
            self._wait_for("ready")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @property
    def _log(self) -> Path:
        return (self._group.folder if self._group is not None else self.out_dir) / "workers.log"

    def step(self, trace: bool = False) -> float:
        """Run one training step on every worker; its wall time in ms on the parent's clock."""
        if time.monotonic() >= self._deadline:
            self._time_out()
        start = time.perf_counter()
        self._store.set(f"cmd{self._count}", "trace" if trace else "step")
        self._wait_for(f"done{self._count}")
        self._count += 1
        return (time.perf_counter() - start) * 1e3

    def finish(self) -> WorkerResult:
        """Stop the workers (in a group: end the case) and return rank 0's result (bench/launch/worker.py)."""
        self._store.set(f"cmd{self._count}", "stop")
        if self._group is not None:
            self._wait_for("finished")
            self._finished = True
            data = collect_result(self.job, self.out_dir, 0, log=self._log)
        else:
            try:
                self._proc.wait(timeout=max(0.0, self._deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._time_out()
            data = collect_result(self.job, self.out_dir, self._proc.returncode)
        return WorkerResult.from_record(data, str(self.out_dir / "result.json"))

    def _time_out(self) -> None:
        """The session ran past `timeout`: stop every worker, whatever it is doing, and say so."""
        kill_child(self._proc)
        raise WorkerError(f"timeout: {self.job.strategy} ran past its limit of {self.timeout:g} s (--timeout); "
                          "stopped", timeout=True, log=log_tail(self._log))

    def _wait_for(self, key: str) -> None:
        """Block until a worker sets `key` in the store (woken at once, no polling).

        A watcher thread sets the awaited key to "exited" if the workers die first, so a failure wakes
        us too; the store's own timeout (`timeout`) ends a hang. The store's wait runs in a thread of its
        own: Python runs a signal handler only between its own steps, so behind a wait in C++ Ctrl-C or
        SIGTERM would wait for the whole step (or the timeout); an Event's wait they interrupt at once."""
        self._awaiting = key
        if self._group is not None:
            self._group.awaiting = f"{self._prefix}/{key}"  # as PrefixStore writes it
        if self._proc.poll() is not None:
            self._store.set(key, "exited")
        answered, failed = threading.Event(), []

        def wait() -> None:
            try:
                self._store.wait([key])
            except Exception:  # noqa: BLE001 - the store timed out
                failed.append(True)
            answered.set()

        self._thread(wait)
        if not answered.wait(max(0.0, self._deadline - time.monotonic())):
            self._time_out()
        if failed:
            kill_child(self._proc)
            raise WorkerError(f"{self.job.strategy}: no answer within {self.timeout:.0f} s; stopped",
                              log=log_tail(self._log))
        if self._store.get(key) == b"exited":
            self._proc.wait()
            kill_child(self._proc)
            if self._group is not None:  # deaths the agent recorded (where a rank wrote none), failures between cases
                for path in self._group.folder.glob("error-rank*.json"):
                    if not (self.out_dir / path.name).exists():
                        shutil.move(path, self.out_dir / path.name)
            collect_result(self.job, self.out_dir, self._proc.returncode or 1, log=self._log)  # raises the worker's error
            raise WorkerError(f"{self.job.strategy}: workers exited early", log=log_tail(self._log))

    def _watch(self, port: int) -> None:
        """Thread: when the workers' process ends, wake whoever waits for a key."""
        from datetime import timedelta

        from torch.distributed import TCPStore

        self._proc.wait()
        try:
            TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5)).set(self._awaiting, "exited")
        except Exception:  # noqa: BLE001 - the session is already closed
            pass

    def _thread(self, target, *args) -> None:
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(threading.Thread(target=target, args=args, daemon=True))
        self._threads[-1].start()

    def __exit__(self, *exc) -> None:
        if self._proc is not None and not self._finished:  # a group that ended its case cleanly lives on
            kill_child(self._proc)
        for thread in self._threads:  # the workers' end wakes them (_watch), within a second
            thread.join(timeout=10)
        if self._group is not None and not self._finished:
            self.groups.drop(self._group)
        if self._tmp is not None:
            self._tmp.cleanup()
        self._store = None


class WorkerGroup:
    """Worker processes for one process count, thread budget and set of GPUs, started once, that run the
    cases sent to them one after another (bench.launch.worker.serve), each in a folder of its own."""

    def __init__(self, job: Job, gpus: Sequence[int] | None, torchrun_args: Sequence[str] = ()):
        from datetime import timedelta

        self.gpus = gpus
        self.cases = 0
        self.awaiting = ""
        """The store key a Session waits for now: set to "exited" when the workers end."""
        self.store = loopback_store(wait_for_workers=False, timeout=timedelta(seconds=LIMIT_SECONDS))
        self._tmp = tempfile.TemporaryDirectory(prefix="pipebench-")
        self.folder = Path(self._tmp.name)
        try:
            self.proc = start_workers(job, self.folder, self.folder, gpus, torchrun_args, group=self.store.port)
        except BaseException:
            self._tmp.cleanup()
            raise
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def send(self, job: Job) -> tuple[str, Path]:
        """Hand `job` to the workers as the next case; its keys' prefix (for PrefixStore) and its folder."""
        key, folder = f"case{self.cases}", self.folder / f"case{self.cases}"
        folder.mkdir()
        job.save(folder / "job.json")
        self.cases += 1
        self.store.set(key, json.dumps([str(folder / "job.json"), str(folder)]))
        return key, folder

    def _watch(self) -> None:
        """Thread: when the workers end, wake whoever waits for a key."""
        from datetime import timedelta

        from torch.distributed import TCPStore

        self.proc.wait()
        try:
            TCPStore("127.0.0.1", self.store.port, is_master=False, timeout=timedelta(seconds=5)).set(
                self.awaiting or "unused", "exited")
        except Exception:  # noqa: BLE001 - the group is already closed
            pass

    def close(self) -> None:
        kill_child(self.proc)
        self._watcher.join(timeout=10)
        self._tmp.cleanup()
        self.store = None


class WorkerGroups:
    """Warm worker groups, one per process count, thread budget, GPU memory cap and set of GPUs: `pipebench
    run` sends each case to the group that fits it (Session(groups=...)). On GPUs, a group is stopped
    before another that shares a GPU with it starts, so that a case never shares its GPUs with an idle
    group's memory. Use as a context manager: leaving it stops every group.

        with WorkerGroups() as groups:
            for job in jobs:
                with Session(job, groups=groups) as workers: ...
    """

    def __init__(self):
        self._live: dict[tuple, WorkerGroup] = {}
        self.started = 0
        """Groups started so far."""

    def take(self, job: Job, gpus: Sequence[int] | None, torchrun_args: Sequence[str] = ()) -> WorkerGroup:
        """The live group for `job`, started now if there is none (or the last one has ended)."""
        key = (job.processes, job.cpu_threads, job.device_type, job.gpu_memory,
               None if gpus is None else tuple(gpus), tuple(torchrun_args))
        group = self._live.get(key)
        if group is not None and group.proc.poll() is not None:
            self.drop(group)
            group = None
        if group is None:
            for other in list(self._live.values()):
                if set(other.gpus or ()) & set(gpus or ()):
                    self.drop(other)
            group = self._live[key] = WorkerGroup(job, gpus, torchrun_args)
            self.started += 1
        return group

    def drop(self, group: WorkerGroup) -> None:
        """Stop `group` and forget it."""
        self._live = {k: g for k, g in self._live.items() if g is not group}
        if group.store is not None:
            group.close()

    def __enter__(self) -> "WorkerGroups":
        return self

    def __exit__(self, *exc) -> None:
        for group in list(self._live.values()):
            self.drop(group)
