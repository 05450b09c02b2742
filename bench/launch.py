"""Start a Job's worker processes and bring their result back.

Single-process strategies run in one child process; multi-process strategies through torch's own
launcher, torch.distributed.run (torchrun), one process per device, rendezvous on 127.0.0.1. torchrun
runs inside `python -m pipebench.bench.launch` (`agent` below), which makes its stores listen on
127.0.0.1 only. Every case runs in fresh children (or, in `pipebench run`, in a warm group of them that
runs its cases one after another: WorkerGroups) so that:
- CUDA_VISIBLE_DEVICES names the chosen GPUs before CUDA initialises anywhere (the blog recipe's first lesson);
- a crash or an out-of-memory in one case cannot take the suite down with it;
- the workers start with PYTHONSAFEPATH=1 (`python -P`), so a models.py in the user's folder cannot
  shadow our `models` package.

A worker group (WorkerGroup) pays for torchrun, a Python and a torch import per process and the
rendezvous once, not once per case: seconds per case on a small machine, where a tiny model's step takes
milliseconds. Each case in it still has its own process group, keys, time limit, result and error; a case
whose failure ends the group ends only that group, and the next case starts a fresh one.

Workers hand back a JSON file (result.json, or error-rank<r>.json from the process that failed), never
log text. When one worker fails, torchrun stops the others; we then kill the whole process tree, so no
process and no port outlives the call. Every child also ends itself within a second of losing the process
that started it (`exit_with_parent`): kill -9 of `pipebench run` leaves no worker spinning on a port.

Several machines: run the worker under torchrun yourself with its node flags (docs/several-machines.md).
"""
from __future__ import annotations

import ipaddress
import json
import math
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from pipebench.bench.job import Job
from pipebench.errors import UserError
from pipebench.processes import PARENT_ENV, TEMP_ENV, child_entry, descendants, exit_with_parent, kill_tree

__all__ = ["WorkerError", "Session", "WorkerGroup", "WorkerGroups", "launch", "call_in_child", "visible_devices",
           "free_port", "child_env", "exit_with_parent", "loopback_store"]



class WorkerError(RuntimeError):
    """A worker failed; the message is that worker's own error, `oom` says if it ran out of memory,
    `timeout` if the case ran past its time limit and was stopped."""

    def __init__(self, message: str, *, oom: bool = False, unavailable: bool = False, timeout: bool = False,
                 log: str = ""):
        super().__init__(message)
        self.oom = oom
        self.unavailable = unavailable
        self.timeout = timeout
        self.log = log


def visible_devices(gpus: Sequence[int] | None, current: str | None) -> str | None:
    """CUDA_VISIBLE_DEVICES for the workers: `gpus` count within the user's CUDA_VISIBLE_DEVICES if set.

    visible_devices([0, 2], "3,4,5") == "3,5"; visible_devices([1], None) == "1"; None keeps `current`.
    """
    if gpus is None:
        return current
    if current is None or current.strip() == "":
        return ",".join(str(g) for g in gpus)
    entries = [e.strip() for e in current.split(",") if e.strip()]
    missing = [g for g in gpus if g >= len(entries)]
    if missing:
        raise UserError(f"GPU {missing[0]} does not exist: CUDA_VISIBLE_DEVICES={current} makes "
                         f"{len(entries)} visible (ids count within it)")
    return ",".join(entries[g] for g in gpus)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_loopback(host: str) -> bool:
    """127.0.0.1, ::1 or localhost: a store there is for this machine alone."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_store(port: int = 0, **options):
    """A TCPStore server (torch.distributed.TCPStore) that listens on 127.0.0.1 only."""
    from torch.distributed import TCPStore

    fd, port = _listen_on_loopback(port)
    return TCPStore("127.0.0.1", port, is_master=True, master_listen_fd=fd, **options)


def _listen_on_loopback(port: int) -> tuple[int, int]:
    """A socket listening on 127.0.0.1:`port` (0: a free one), as (file descriptor, port).

    TCPStore takes no address to bind and listens on every interface, where anyone who reaches the host
    could set keys and stop or distort a run; it does take a socket that listens already
    (`master_listen_fd`, which it then owns: hence the bare descriptor)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    port = listener.getsockname()[1]
    return listener.detach(), port


def worker_command(job: Job, job_path: Path, out_dir: Path, *, port: int,
                   torchrun_args: Sequence[str] = (), log_dir: Path | None = None,
                   group: int | None = None, worker_module: str = "pipebench.bench.worker") -> list[str]:
    """The command line that starts the job's workers: the worker itself, or torchrun in our agent.
    group: the parent's store port of a worker group, whose workers run the cases sent there (the job
    only says how many processes). worker_module: the module each worker runs (`pipebench train`'s
    is pipebench.bench.train.loop), with the same arguments."""
    worker = ["-m", worker_module,
              *(["--group", str(group)] if group is not None else [str(job_path)]), str(out_dir)]
    if job.processes == 1:
        return [sys.executable, "-P", *worker]
    logs = ["--log-dir", str(log_dir)] if log_dir is not None else []  # else torchrun makes /tmp/torchelastic_*
    return [
        sys.executable, "-P", "-m", "pipebench.bench.launch", str(out_dir),
        "--nnodes", "1", "--nproc-per-node", str(job.processes),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--local-addr", "127.0.0.1",
        "--max-restarts", "0", "--monitor-interval", "0.2", *logs,
        *torchrun_args, *worker,
    ]


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

    def __init__(self, job: Job, *, gpus: Sequence[int] | None = None, timeout: float = 1800.0,
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
            self._proc = _start(job, self.out_dir, Path(self._tmp.name), self.gpus, self.torchrun_args)
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

    def finish(self) -> dict:
        """Stop the workers (in a group: end the case) and return rank 0's result (bench/worker.py)."""
        self._store.set(f"cmd{self._count}", "stop")
        if self._group is not None:
            self._wait_for("finished")
            self._finished = True
            return _collect(self.job, self.out_dir, 0, log=self._log)
        try:
            self._proc.wait(timeout=max(0.0, self._deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._time_out()
        return _collect(self.job, self.out_dir, self._proc.returncode)

    def _time_out(self) -> None:
        """The session ran past `timeout`: stop every worker, whatever it is doing, and say so."""
        _kill_group(self._proc)
        raise WorkerError(f"timeout: {self.job.strategy} ran past its limit of {self.timeout:g} s (--timeout); "
                          "stopped", timeout=True, log=_tail(self._log))

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
            _kill_group(self._proc)
            raise WorkerError(f"{self.job.strategy}: no answer within {self.timeout:.0f} s; stopped",
                              log=_tail(self._log))
        if self._store.get(key) == b"exited":
            self._proc.wait()
            _kill_group(self._proc)
            if self._group is not None:  # deaths the agent recorded (where a rank wrote none), failures between cases
                for path in self._group.folder.glob("error-rank*.json"):
                    if not (self.out_dir / path.name).exists():
                        shutil.move(path, self.out_dir / path.name)
            _collect(self.job, self.out_dir, self._proc.returncode or 1, log=self._log)  # raises the worker's error
            raise WorkerError(f"{self.job.strategy}: workers exited early", log=_tail(self._log))

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
            _kill_group(self._proc)
        for thread in self._threads:  # the workers' end wakes them (_watch), within a second
            thread.join(timeout=10)
        if self._group is not None and not self._finished:
            self.groups.drop(self._group)
        if self._tmp is not None:
            self._tmp.cleanup()
        self._store = None


class WorkerGroup:
    """Worker processes for one process count, thread budget and set of GPUs, started once, that run the
    cases sent to them one after another (bench.worker.serve), each in a folder of its own."""

    def __init__(self, job: Job, gpus: Sequence[int] | None, torchrun_args: Sequence[str] = ()):
        from datetime import timedelta

        self.gpus = gpus
        self.cases = 0
        self.awaiting = ""
        """The store key a Session waits for now: set to "exited" when the workers end."""
        self.store = loopback_store(wait_for_workers=False, timeout=timedelta(seconds=1800))
        self._tmp = tempfile.TemporaryDirectory(prefix="pipebench-")
        self.folder = Path(self._tmp.name)
        try:
            self.proc = _start(job, self.folder, self.folder, gpus, torchrun_args, group=self.store.port)
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
        _kill_group(self.proc)
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


def launch(job: Job, *, gpus: Sequence[int] | None = None, timeout: float = 1800.0,
           torchrun_args: Sequence[str] = (), keep: str | Path | None = None,
           groups: WorkerGroups | None = None) -> dict:
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
        proc = _start(job, out_dir, Path(tmp), gpus, torchrun_args)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise WorkerError(f"{job.strategy}: no result within {timeout:.0f} s; stopped",
                              log=_tail(out_dir / "workers.log")) from None
        finally:  # also on Ctrl-C: take the workers down with us
            _kill_group(proc)
        return _collect(job, out_dir, rc)


def call_in_child(fn: Callable[..., Any], *args: Any, gpus: Sequence[int] | None = None, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a fresh process that sees only `gpus`, and its return value.

    The suite profiles and probes GPUs this way, so that its own process never initialises CUDA (the
    workers it starts later must choose their GPUs first). `fn` must be a module-level function; its
    arguments and result cross as pickles between our own processes. A UserError in the child is
    raised here as a UserError with the same message; any other failure as WorkerError."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    saved, env = dict(os.environ), child_env(gpus)
    env[PARENT_ENV] = str(os.getpid())  # a child still importing when we die notices it (exit_with_parent)
    os.environ.clear()
    os.environ.update(env)  # what the child inherits when it starts; restored at once
    try:  # the call pickled, so that the child watches us before it imports the call's modules
        proc = context.Process(target=child_entry, args=(send, pickle.dumps((fn, args, kwargs))), daemon=True)
        proc.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    send.close()
    try:
        kind, value = receive.recv()
    except EOFError:
        proc.join()
        raise WorkerError(f"{fn.__name__} ended without an answer (exit status {proc.exitcode})") from None
    except BaseException:  # Ctrl-C, SIGTERM: the child and what it started (the CPU probe's peers) end now
        kill_tree(proc.pid)
        proc.join()
        raise
    finally:
        receive.close()
    proc.join()
    if kind == "ok":
        return value
    if kind == "user":
        raise UserError(value)
    raise WorkerError(value)


def child_env(gpus: Sequence[int] | None) -> dict[str, str]:
    """The environment of every child pipebench starts: the chosen GPUs, and no shadowing of our packages."""
    env = dict(os.environ)
    env["PYTHONSAFEPATH"] = "1"  # torchrun starts its workers with plain `python`: keep -P for them too
    env["PYTHONUNBUFFERED"] = "1"
    visible = visible_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def _start(job: Job, out_dir: Path, temp: Path, gpus, torchrun_args, group: int | None = None,
           worker_module: str = "pipebench.bench.worker") -> subprocess.Popen:
    """Start the job's workers (a worker group's, with `group`: worker_command); `temp` is this call's
    temporary folder, which the child removes should we die."""
    env = child_env(gpus)
    env[PARENT_ENV], env[TEMP_ENV] = str(os.getpid()), str(temp)
    loopback = _loopback_interface()
    if loopback is not None:  # the collectives' own sockets, which would take the host's address
        env.setdefault("GLOO_SOCKET_IFNAME", loopback)
        env.setdefault("NCCL_SOCKET_IFNAME", loopback)
    env["OMP_NUM_THREADS"] = str(job.cpu_threads)  # each process stands in for one device: its share of the cores
    out_dir.mkdir(parents=True, exist_ok=True)
    job_path = out_dir / "job.json"
    job.save(job_path)
    command = worker_command(job, job_path, out_dir, port=free_port(), torchrun_args=torchrun_args,
                             log_dir=temp / "torchelastic", group=group, worker_module=worker_module)
    with open(out_dir / "workers.log", "wb") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def _collect(job: Job, out_dir: Path, rc: int, log: Path | None = None) -> dict:
    """rank 0's result, or WorkerError with the error of the worker that failed first. log: the workers'
    output (default: out_dir/workers.log)."""
    log = log or out_dir / "workers.log"
    error = _first_error(out_dir)
    if error is not None:
        raise WorkerError(f"rank {error['rank']}: {error['type']}: {error['message']}", oom=error["oom"],
                          unavailable=error.get("unavailable", False), log=_tail(log))
    result_path = out_dir / "result.json"
    if rc != 0 or not result_path.exists():
        raise WorkerError(f"{job.strategy}: workers exited with status {rc} and no result; log ends: "
                          f"{_tail(log, 1)}", log=_tail(log))
    return json.loads(result_path.read_text())


def _kill_group(proc: subprocess.Popen) -> None:
    """End the child and everything it started, at once (pipebench.processes.kill_tree).

    No polite SIGTERM first: torchrun would spend seconds stopping workers that have nothing to save (a
    stopped case is a lost case either way), and Ctrl-C must end the run within seconds. What the kill
    misses (reparented already) ends itself (`exit_with_parent`), or with the run (`run_folder`)."""
    if proc.poll() is None:
        kill_tree(proc.pid)
    else:  # reaped: its pid may belong to someone else by now; its children know it is gone
        for pid in descendants(proc.pid):
            kill_tree(pid)
    proc.wait()


_descendants = descendants


def _first_error(out_dir: Path) -> dict | None:
    """The error of the process that failed first (the others were stopped because of it).

    A peer's lost connection ("Connection reset by peer") is a consequence, named only when nothing else
    is known: a rank killed from outside writes no record itself, and comes first although the agent
    recorded its death after the survivor's error (`_record_deaths`)."""
    errors = []
    for path in out_dir.glob("error-rank*.json"):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return min(errors, key=lambda e: (e.get("peer", False), e.get("time", 0.0))) if errors else None


def _record_deaths(failures: dict, out_dir: Path) -> None:
    """Write error-rank<r>.json for each failed worker that wrote none: killed by a signal (SIGKILL from
    the out-of-memory killer or a user), or crashed in C++. `failures`: torchrun's, by rank."""
    from pipebench.files import write_json

    for rank, failure in failures.items():
        path = out_dir / f"error-rank{rank}.json"
        if path.exists():
            continue
        code = failure.exitcode
        killed = code < 0
        write_json(path, {
            "rank": rank, "type": "Killed" if killed else "Exited",
            "message": f"ended by {failure.signal_name()} before it could report an error" if killed
            else f"exited with status {code} without reporting an error",
            "oom": False, "unavailable": False, "peer": False, "traceback": "", "time": time.time(),
        })


def _loopback_interface() -> str | None:
    """The loopback interface's name ("lo" on Linux, "lo0" on macOS), for GLOO_ and NCCL_SOCKET_IFNAME."""
    try:
        names = {name for _, name in socket.if_nameindex()}
    except OSError:
        return None
    return next((name for name in ("lo", "lo0") if name in names), None)


def agent(argv: Sequence[str]) -> int:
    """`python -P -m pipebench.bench.launch OUT_DIR TORCHRUN_ARGS...`: torchrun, for one machine.

    - torchrun's two stores (the rendezvous store, and the store its workers share) listen on every
      interface and take no address; here each store the endpoint puts on a loopback address listens
      on 127.0.0.1 only (loopback_store).
    - A worker killed from outside writes no record; its death, as torchrun saw it, goes to
      OUT_DIR/error-rank<r>.json, so that the row names it rather than a survivor's lost connection.
    - It ends with `pipebench` (exit_with_parent), and its workers with it."""
    exit_with_parent()
    os.environ[PARENT_ENV] = str(os.getpid())  # our workers: should we die while they start, they know
    out_dir, torchrun_args = Path(argv[0]), list(argv[1:])
    import torch.distributed as dist
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend

    class LoopbackStore(dist.TCPStore):
        def __init__(self, host_name, port, world_size=None, is_master=False, **options):
            if not (is_master and is_loopback(host_name)):
                super().__init__(host_name, port, world_size, is_master, **options)
                return
            fd, port = _listen_on_loopback(port)
            super().__init__(host_name, port, world_size, is_master, master_listen_fd=fd, **options)

    # Where torchrun makes them: dynamic_rendezvous calls dist.TCPStore, the c10d backend its own import.
    dist.TCPStore = c10d_rendezvous_backend.TCPStore = LoopbackStore
    try:
        torchrun.main(torchrun_args)
    except ChildFailedError as exc:
        _record_deaths(exc.failures, out_dir)
        return 1
    return 0


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


if __name__ == "__main__":
    sys.exit(agent(sys.argv[1:]))
