"""Start a Job's worker processes and bring their result back.

Single-process strategies run in one child process; multi-process strategies through torch's own
launcher, torch.distributed.run (torchrun), one process per device, rendezvous on 127.0.0.1. Every case
runs in fresh children so that:
- CUDA_VISIBLE_DEVICES names the chosen GPUs before CUDA initialises anywhere (the seed's first lesson);
- a crash or an out-of-memory in one case cannot take the suite down with it;
- the workers start with PYTHONSAFEPATH=1 (`python -P`), so a models.py in the user's folder cannot
  shadow our `models` package.

Workers hand back a JSON file (result.json, or error-rank<r>.json from the process that failed), never
log text. When one worker fails, torchrun stops the others; we then kill the whole process group, so no
process and no port outlives the call.

Several machines: run the worker under torchrun yourself with its node flags (README, "Several machines").
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from bench.job import Job

__all__ = ["WorkerError", "launch", "visible_devices", "free_port"]


class WorkerError(RuntimeError):
    """A worker failed; the message is that worker's own error, `oom` says if it ran out of memory."""

    def __init__(self, message: str, *, oom: bool = False, unavailable: bool = False, log: str = ""):
        super().__init__(message)
        self.oom = oom
        self.unavailable = unavailable
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
        raise ValueError(f"GPU {missing[0]} does not exist: CUDA_VISIBLE_DEVICES={current} makes "
                         f"{len(entries)} visible (ids count within it)")
    return ",".join(entries[g] for g in gpus)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_command(job: Job, job_path: Path, out_dir: Path, *, port: int,
                   torchrun_args: Sequence[str] = ()) -> list[str]:
    """The command line that starts the job's workers."""
    worker = ["-m", "bench.worker", str(job_path), str(out_dir)]
    if job.processes == 1:
        return [sys.executable, "-P", *worker]
    return [
        sys.executable, "-P", "-m", "torch.distributed.run",
        "--nnodes", "1", "--nproc-per-node", str(job.processes),
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--local-addr", "127.0.0.1",
        "--max-restarts", "0", "--monitor-interval", "0.2",
        *torchrun_args, *worker,
    ]


def launch(job: Job, *, gpus: Sequence[int] | None = None, timeout: float = 1800.0,
           torchrun_args: Sequence[str] = (), keep: str | Path | None = None) -> dict:
    """Run `job` in fresh processes and return rank 0's result (see bench/worker.py).

    gpus: GPU ids to use (within the user's CUDA_VISIBLE_DEVICES); None: those visible.
    keep: a folder to keep the workers' files in (params-rank<r>.pt, the log); default: a temporary one.
    Raises WorkerError with the failing worker's message; `timeout` seconds end everything.
    """
    env = dict(os.environ)
    env["PYTHONSAFEPATH"] = "1"  # torchrun starts its workers with plain `python`: keep -P for them too
    env["PYTHONUNBUFFERED"] = "1"
    env["OMP_NUM_THREADS"] = env.get("OMP_NUM_THREADS", "1" if job.device_type == "cuda" else str(_threads(job)))
    visible = visible_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    with tempfile.TemporaryDirectory(prefix="pipebench-") as tmp:
        out_dir = Path(keep) if keep is not None else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        job_path = out_dir / "job.json"
        job.save(job_path)
        log_path = out_dir / "workers.log"
        command = worker_command(job, job_path, out_dir, port=free_port(), torchrun_args=torchrun_args)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise WorkerError(f"{job.strategy}: no result within {timeout:.0f} s; stopped",
                                  log=_tail(log_path)) from None
            except BaseException:  # Ctrl-C: take the workers down with us
                _kill_group(proc)
                raise
            finally:
                _kill_group(proc)
        error = _first_error(out_dir)
        if error is not None:
            raise WorkerError(f"rank {error['rank']}: {error['type']}: {error['message']}", oom=error["oom"],
                              unavailable=error.get("unavailable", False), log=_tail(log_path))
        result_path = out_dir / "result.json"
        if rc != 0 or not result_path.exists():
            raise WorkerError(f"{job.strategy}: workers exited with status {rc} and no result; log ends: "
                              f"{_tail(log_path, 1)}", log=_tail(log_path))
        return json.loads(result_path.read_text())


def _threads(job: Job) -> int:
    """CPU threads per process when CPU processes stand in for GPUs: share the cores."""
    return max(1, (os.cpu_count() or 1) // job.processes)


def _kill_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """End the child and everything it started.

    torchrun puts its workers in sessions of their own, so a kill of its process group misses them:
    ask torchrun to stop (it stops its workers), then kill whatever is left of the tree."""
    family = _descendants(proc.pid)
    ended_already = proc.poll() is not None  # reaped: its pid may belong to someone else by now
    if not ended_already:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for pid in family if ended_already else [proc.pid, *family]:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    proc.wait()


def _descendants(root: int) -> list[int]:
    """Process ids below `root` (Linux /proc; elsewhere none, and the group kill has to do)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _first_error(out_dir: Path) -> dict | None:
    """The error of the process that failed first (the others were stopped because of it)."""
    errors = []
    for path in out_dir.glob("error-rank*.json"):
        try:
            errors.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return min(errors, key=lambda e: e.get("time", 0.0)) if errors else None


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])
