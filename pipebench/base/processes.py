"""Every process and temporary folder pipebench makes ends with the command that made it.

Three layers, each for what the one above cannot do:

- `run_folder()`: the command's own temporary folder (`pipebench-run-<pid>-*` in the temp dir). While it
  is open, TMPDIR points into it, for this process (tempfile) and for every child, so each folder anything
  of the run makes (the workers', the CPU probe's, torchrun's) lies beneath it. Each child carries the
  run's mark in its environment (RUN_ENV, inherited down the tree), by which `end_run_processes` finds them
  all, orphans reparented to init included, where a walk of the process tree would miss them. Leaving it,
  on success, an error or Ctrl-C / SIGTERM, ends every such process, then removes the folder.
- `exit_with_parent()`, first thing in every child: a parent killed outright (SIGKILL, which no handler
  sees) is noticed within 0.2 s; the child then kills what it started, removes its own temporary folder,
  and the run's folder too when the run's own process is gone. A child told its parent's pid (PARENT_ENV)
  notices a parent that died before it looked (during its imports).
- A reaper, a small process started with the run folder, waits on a pipe from the command: when the
  command is killed outright, even at a moment it has no other child, it ends the run's processes and
  removes the folder. It runs in a session of its own, so that what is sent to the command's whole
  process group (Ctrl-C, `kill -9 -PGID`, timeout's KILL) leaves it to do so.
- The next run removes what a run killed with all its processes at once left (the out-of-memory killer,
  a kill of every process of the user): `pipebench-run-<pid>-*` folders whose process is gone.

Processes are walked and killed with psutil.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil

__all__ = ["PARENT_ENV", "TEMP_ENV", "RUN_ENV", "run_folder", "end_run_processes", "exit_with_parent",
           "descendants", "kill_tree", "kill_child", "child_entry", "leave"]

PARENT_ENV, TEMP_ENV = "PIPEBENCH_PARENT", "PIPEBENCH_TEMP"
"""What a child learns from its parent: the parent's pid, and the temporary folder to remove if the parent dies."""
RUN_ENV = "PIPEBENCH_RUN"
"""'<pid> <folder>': the command every process below belongs to, and its run folder (inherited by all)."""
RUN_PREFIX = "pipebench-run-"


@contextmanager
def run_folder() -> Iterator[Path]:
    """The command's temporary folder, TMPDIR for it and its children while open; see the module docstring.
    Nested use (a command run inside another, as the tests do) keeps the outer one."""
    if os.environ.get(RUN_ENV, "").split(" ")[0] == str(os.getpid()):
        yield Path(tempfile.gettempdir())
        return
    remove_stale_run_folders()
    folder = Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-"))
    saved = {name: os.environ.get(name) for name in ("TMPDIR", RUN_ENV, INDUCTOR_CACHE)}
    saved_tempdir = tempfile.tempdir
    # torch.compile's cache is meant to outlive a run: where it would go without the run folder
    os.environ.setdefault(INDUCTOR_CACHE, str(Path(tempfile.gettempdir()) / f"torchinductor_{_user()}"))
    mark = f"{os.getpid()} {folder}"
    # The reaper: should this process be killed outright, it ends the run's processes and removes the folder
    # (the pipe's end tells it; no child of ours inherits that end, PEP 446).
    reaper = subprocess.Popen([sys.executable, "-P", "-m", "pipebench.base.processes", "--reap", mark],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    os.environ["TMPDIR"], os.environ[RUN_ENV] = str(folder), mark
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        end_run_processes(mark)
        reaper.stdin.close()
        try:
            reaper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            reaper.kill()
        tempfile.tempdir = saved_tempdir
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)


INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"


def _user() -> str:
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def end_run_processes(mark: str) -> None:
    """Kill every process whose environment carries RUN_ENV=`mark` (but this one), at once."""
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(RUN_ENV) == mark:
                proc.kill()
        except (psutil.Error, OSError):
            continue


def remove_stale_run_folders() -> None:
    """Remove the run folders in the temp dir whose run's process is gone (a run killed with all of its
    processes at once, which none of them could clean up after)."""
    try:
        entries = list(Path(tempfile.gettempdir()).glob(f"{RUN_PREFIX}*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(RUN_PREFIX):].split("-")[0]
        if pid.isdigit() and not psutil.pid_exists(int(pid)) and entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)


def descendants(root: int) -> list[int]:
    """Process ids below `root`, children first."""
    try:
        return [p.pid for p in psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return []


def kill_tree(pid: int, *, include_root: bool = True) -> None:
    """SIGKILL `pid` and everything below it, at once: torchrun puts its workers in sessions of their own,
    so a process-group kill would miss them."""
    try:
        root = psutil.Process(pid)
        family = root.children(recursive=True)
    except psutil.Error:
        return
    for proc in ([root] if include_root else []) + family:
        try:
            proc.kill()
        except psutil.Error:
            pass


def kill_child(proc: subprocess.Popen) -> None:
    """End the child `proc` and everything it started, at once, and reap it.

    No polite SIGTERM first: torchrun would spend seconds stopping workers that have nothing to save (a
    stopped case is a lost case either way), and Ctrl-C must end the run within seconds. A child reaped
    already may have handed its pid on: then only the processes below it are killed. What the kill misses
    (reparented already) ends itself (`exit_with_parent`), or with the run (`run_folder`)."""
    if proc.poll() is None:
        kill_tree(proc.pid)
    else:
        for pid in descendants(proc.pid):
            kill_tree(pid)
    proc.wait()


def exit_with_parent() -> None:
    """End this process within a second of the process that started it ending (kill -9 included).

    A worker whose parent vanished would otherwise live on for minutes holding ports: spinning in a
    store's connect-retry loop, or waiting in a collective. Call first thing in a child. The parent's pid
    and the temporary folder to remove come from PIPEBENCH_PARENT and PIPEBENCH_TEMP (taken out of the
    environment, so that grandchildren watch their own parent); without them, the parent now is watched.

    Without a folder to remove, Linux kills us the moment the parent goes (PR_SET_PDEATHSIG); with one, a
    thread notices within 0.2 s, kills what we started, removes the folder (and the run's, where the run's
    own process is gone) and leaves."""
    parent = int(os.environ.pop(PARENT_ENV, None) or os.getppid())
    temp = os.environ.pop(TEMP_ENV, None)
    if temp is None and sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    def orphaned() -> None:
        kill_tree(os.getpid(), include_root=False)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        owner, _, folder = os.environ.get(RUN_ENV, "").partition(" ")
        if owner.isdigit() and folder and not psutil.pid_exists(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        orphaned()

    if os.getppid() != parent:  # gone before we looked
        orphaned()
    threading.Thread(target=watch, daemon=True, name="exit_with_parent").start()


def child_entry(send, call: bytes) -> None:
    """A call_in_child child (bench/launch/spawn.py): watch the parent before anything is imported (the call's own
    modules take seconds, torch among them), then run the pickled (fn, args, kwargs) and send the outcome."""
    exit_with_parent()
    from pipebench.base.errors import UserError

    fn = None
    try:
        fn, args, kwargs = pickle.loads(call)
        outcome = ("ok", fn(*args, **kwargs))
    except UserError as exc:
        outcome = ("user", str(exc))
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent
        message = (str(exc).strip().splitlines() or [""])[0]
        outcome = ("error", f"{getattr(fn, '__name__', 'the call')}: {type(exc).__name__}: {message}")
    send.send(outcome)
    send.close()
    leave(0)


def leave(code: int) -> None:
    """Exit with `code` now if threads that are not daemons still run once the process's work is done:
    Python would wait for them before exiting, and a model file's thread that never ends (started when it
    was imported) would keep the command, or a child that imported the file to profile it, running for ever
    after its answer. The streams are flushed and what is registered to run at exit still runs first."""
    import atexit

    if not any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    atexit._run_exitfuncs()
    os._exit(code)


def _reap(mark: str) -> None:
    """`python -m pipebench.base.processes --reap MARK`: wait for the run's process to close our stdin (it
    ends, or is killed), then end the processes of the run and remove its folder. Interrupts that reach
    the whole process group (Ctrl-C) are ignored: it is what cleans up after them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdin.buffer.read()
    end_run_processes(mark)
    folder = mark.partition(" ")[2]
    if Path(folder).name.startswith(RUN_PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--reap"]:
    _reap(sys.argv[2])
