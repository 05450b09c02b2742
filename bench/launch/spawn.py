"""Start a Job's worker processes in fresh children, and read back what they wrote.

Single-process strategies run in one child process; multi-process strategies through torchrun, run
inside bench/launch/torchrun_agent.py, one process per device, rendezvous on 127.0.0.1. Every child:
- sees only the chosen GPUs (CUDA_VISIBLE_DEVICES set before CUDA initialises anywhere: `child_env`);
- starts with PYTHONSAFEPATH=1 (`python -P`), so a models.py in the user's folder cannot shadow our
  `models` package;
- ends itself within a second of losing the process that started it (pipebench.base.processes.exit_with_parent).

Workers hand back a JSON file (result.json, or error-rank<r>.json from the process that failed), never
log text: `collect_result` turns them into the result, or a WorkerError naming the worker that failed
first. `call_in_child` runs one function the same way (the suite's profiles and GPU probes), so that the
parent never initialises CUDA.
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.loopback import free_port, loopback_interface
from pipebench.base import interrupts
from pipebench.base.errors import UserError
from pipebench.base.processes import PARENT_ENV, TEMP_ENV, child_entry, kill_tree

__all__ = ["WorkerError", "visible_devices", "child_env", "worker_command", "start_workers", "collect_result",
           "log_tail", "call_in_child", "ChildTimeout"]


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


@contextlib.contextmanager
def _main_unseen(needed: bool):
    """Start a spawn child without the caller's script: spawn runs `__main__`'s file (or module) again in
    the child to find what the call names there, so a script that calls pipebench outside `if __name__ ==
    "__main__":` would run twice, its side effects too. The call names pipebench's functions, so the child needs
    the script only where the pickled call names `__main__` (`needed`: a class the script defines)."""
    main = sys.modules.get("__main__")
    if needed or main is None:
        yield
        return
    hidden = {name: vars(main)[name] for name in ("__file__", "__spec__") if name in vars(main)}
    if "__file__" in hidden:
        del main.__file__
    main.__spec__ = None  # spawn reads it unguarded: there must be one
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        vars(main).update(hidden)


class ChildTimeout(WorkerError):
    """call_in_child's function did not answer within its `within` seconds; the child and its tree are ended."""


def call_in_child(fn: Callable[..., Any], *args: Any, gpus: Sequence[int] | None = None, within: float | None = None,
                  **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in a fresh process that sees only `gpus`, and its return value; `within`: the
    seconds it may take, after which the child's tree is ended and ChildTimeout raised (None: no bound).

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
        call = pickle.dumps((fn, args, kwargs))
        proc = context.Process(target=child_entry, args=(send, call), daemon=True)
        with _main_unseen(needed=b"__main__" in call):
            proc.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    send.close()
    try:
        if within is not None and not receive.poll(within):  # a model's forward that hangs: ended, not waited on
            kill_tree(proc.pid)
            proc.join()
            raise ChildTimeout(f"did not finish within {within:g} s")
        kind, value = receive.recv()
    except EOFError:
        proc.join()
        main = sys.modules.get("__main__")
        script = getattr(main, "__file__", None) and getattr(main, "__spec__", None) is None
        hint = (f"; if {os.path.basename(main.__file__)} calls pipebench outside `if __name__ == \"__main__\":`, "
                "that is why: spawn imports the script again in the child") if script else ""
        raise WorkerError(f"{fn.__name__} ended without an answer (exit status {proc.exitcode}){hint}") from None
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


# What torchrun (or a job launcher like it) tells the processes it starts: their rank, their group and where
# it meets, its own agent's state (TORCHELASTIC_*) and its options' defaults (PET_*). Inherited from a caller
# inside such a job, they would put our workers in the caller's group (env://) under the caller's rank.
LAUNCHER_VARIABLES = frozenset({"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                                "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
                                "MASTER_PORT"})
LAUNCHER_PREFIXES = ("TORCHELASTIC_", "PET_")


def child_env(gpus: Sequence[int] | None) -> dict[str, str]:
    """The environment of every child pipebench starts: the chosen GPUs, no shadowing of our packages, and
    none of a caller's launcher variables (LAUNCHER_VARIABLES): pipebench starts its own process groups."""
    env = {name: value for name, value in os.environ.items()
           if name not in LAUNCHER_VARIABLES and not name.startswith(LAUNCHER_PREFIXES)}
    env["PYTHONSAFEPATH"] = "1"  # torchrun starts its workers with plain `python`: keep -P for them too
    env["PYTHONUNBUFFERED"] = "1"
    visible = visible_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return env


def worker_command(job: Job, job_path: Path, out_dir: Path, *, port: int,
                   torchrun_args: Sequence[str] = (), log_dir: Path | None = None,
                   group: int | None = None, worker_module: str = "pipebench.bench.launch.worker") -> list[str]:
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
        sys.executable, "-P", "-m", "pipebench.bench.launch.torchrun_agent", str(out_dir),
        "--nnodes", "1", "--nproc-per-node", str(job.processes),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--local-addr", "127.0.0.1",
        "--max-restarts", "0", "--monitor-interval", "0.2", *logs,
        *torchrun_args, *worker,
    ]


def start_workers(job: Job, out_dir: Path, temp: Path, gpus, torchrun_args, group: int | None = None,
                  worker_module: str = "pipebench.bench.launch.worker") -> subprocess.Popen:
    """Start the job's workers (a worker group's, with `group`: worker_command); `temp` is this call's
    temporary folder, which the child removes should we die. A stop asked for before, whatever swallowed
    its KeyboardInterrupt, starts none (interrupts.check)."""
    interrupts.check()
    env = child_env(gpus)
    env[PARENT_ENV], env[TEMP_ENV] = str(os.getpid()), str(temp)
    loopback = loopback_interface()
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


def collect_result(job: Job, out_dir: Path, rc: int, log: Path | None = None) -> dict:
    """rank 0's result, or WorkerError with the error of the worker that failed first. log: the workers'
    output (default: out_dir/workers.log)."""
    log = log or out_dir / "workers.log"
    error = first_error(out_dir)
    if error is not None:
        raise WorkerError(f"rank {error['rank']}: {error['type']}: {error['message']}", oom=error["oom"],
                          unavailable=error.get("unavailable", False), log=log_tail(log))
    result_path = out_dir / "result.json"
    if rc != 0 or not result_path.exists():
        raise WorkerError(f"{job.strategy}: workers exited with status {rc} and no result; log ends: "
                          f"{log_tail(log, 1)}", log=log_tail(log))
    return json.loads(result_path.read_text())


def first_error(out_dir: Path) -> dict | None:
    """The error of the process that failed first (the others were stopped because of it).

    A peer's lost connection ("Connection reset by peer") is a consequence, named only when nothing else
    is known: a rank killed from outside writes no record itself, and comes first although the agent
    recorded its death after the survivor's error (bench/launch/torchrun_agent.py)."""
    errors = []
    for path in out_dir.glob("error-rank*.json"):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return min(errors, key=lambda e: (e.get("peer", False), e.get("time", 0.0))) if errors else None


def log_tail(path: Path, lines: int = 20) -> str:
    """The last `lines` lines of the workers' log, for an error's message ("" if there is none)."""
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])
