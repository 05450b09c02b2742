"""Processes and ports of a run: SIGTERM is Ctrl-C, no worker outlives its parent,
nothing listens beyond 127.0.0.1, and a killed rank is named as the cause of its case's failure.

Each `pipebench run` here runs in a TMPDIR of its own, so that what it leaves there, and the processes that
name it on their command line, are this test's alone."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.sessions import Session
from pipebench.bench.launch.spawn import WorkerError
from pipebench.base.processes import descendants
from pipebench.bench.store.results import load
from pipebench.bench.launch.worker_report import error_record

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads processes from Linux /proc")


def processes_naming(text: str) -> list[int]:
    """Our processes whose command line contains `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def wait_until(condition, what: str, deadline: float = 60.0):
    """Poll `condition` until it is true; a generous deadline only ends a hang."""
    end = time.monotonic() + deadline
    while not (value := condition()):
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {deadline:.0f} s")
        time.sleep(0.1)
    return value


def start_run(tmp_path: Path, *options: str, group: bool = False) -> tuple[subprocess.Popen, Path, Path, Path]:
    """`pipebench run` on the CPU in a process of its own (`group`: in a process group of its own, as a
    shell's foreground job); its (process, TMPDIR, results folder, stderr file)."""
    temp, out, err = tmp_path / "tmp", tmp_path / "out", tmp_path / "stderr.txt"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    with open(err, "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "pipebench", "run", "--quick", "--out", str(out), *options],
                                env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
                                process_group=0 if group else None)
    return proc, temp, out, err


def worker_running(temp: Path) -> bool:
    return any(b"pipebench.bench.launch.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
               for pid in processes_naming(str(temp)) if Path(f"/proc/{pid}").exists())


def assert_nothing_left(temp: Path) -> None:
    """No process of the run, and none of its temporary folders (torch's own caches may stay)."""
    wait_until(lambda: not processes_naming(str(temp)), "every worker and torchrun gone", deadline=20)
    left = [p.name for p in temp.iterdir() if p.name.startswith(("pipebench-", "torchelastic_"))]
    assert left == []


@pytest.mark.ci  # process handling, run by CI after the default run
def test_sigterm_is_handled_like_ctrl_c(tmp_path):
    """SIGTERM (timeout, Slurm, systemd, docker stop) while the second case's workers run: the first row
    is kept, and no worker, torchrun or temporary folder is left."""
    proc, temp, out, err = start_run(tmp_path, "--models", "mlp,gpt", "--strategies", "ddp", "--min-seconds", "3")
    try:  # each round of a case lasts 3 s or more: the signal falls inside the second case's timed steps
        wait_until(lambda: "measuring 1 case(s) of gpt" in err.read_text(), "the second case started")
        wait_until(lambda: worker_running(temp), "the second case's workers started")
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130, err.read_text()
    finally:
        proc.kill()
    assert "interrupted" in err.read_text()
    rows = load(sorted(out.glob("*.json")))
    assert [(r.model, r.status) for r in rows] == [("mlp", "ok")]
    assert_nothing_left(temp)


@pytest.mark.ci  # process handling, run by CI after the default run
def test_kill_9_of_the_parent_while_workers_start_leaves_nothing(tmp_path):
    """kill -9 cannot be handled by the parent: its children notice it is gone and end themselves, and rank 0
    does not spin in the store's connect-retry loop for minutes, holding ports."""
    proc, temp, _, _ = start_run(tmp_path, "--models", "mlp", "--strategies", "ddp")
    try:
        wait_until(lambda: worker_running(temp), "the workers started")
        proc.kill()
        proc.wait()
    finally:
        proc.kill()
    assert_nothing_left(temp)


PARENT = """
import sys, time
from pipebench.bench.launch import sessions
from pipebench.bench.launch import spawn
from pipebench.bench.launch.job import Job

spawn.worker_command = lambda *args, **kwargs: ["sleep", "600"]  # workers that never answer
job = Job.by_hand("mlp", "ddp", flavour="tiny", batch=8, devices=2, device_type="cpu")
try:
    with sessions.Session(job, timeout=600):
        pass
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.ci  # process handling, run by CI after the default run
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_does_not_wait_for_the_workers(tmp_path, sig):
    """While the parent waits for its workers (a step, or here a start that never ends), Ctrl-C ends it at
    once, not after the store's timeout (a wait in C++ holds the signal)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    # Ctrl-C's KeyboardInterrupt, set even where this test's own process was started with SIGINT ignored
    # (in the background of a shell without job control, which Python then leaves ignored).
    code = PARENT.replace("try:", f"import signal\nsignal.signal({int(sig)}, signal.default_int_handler)\ntry:")
    proc = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(temp)}, cwd=tmp_path)
    try:
        wait_until(lambda: descendants(proc.pid), "the workers started")
        time.sleep(0.5)  # into the wait
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 130
    finally:
        proc.kill()
    assert list(temp.iterdir()) == []


def listening_sockets(pids: list[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket these processes listen on, from /proc/net/tcp and tcp6."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # 0A: LISTEN
                address, port = local.split(":")
                raw = bytes.fromhex(address)
                # /proc writes each 32-bit word in host order (little-endian here)
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
                found.append((socket.inet_ntop(family, words), int(port, 16)))
    return found


def network_address() -> str | None:
    """This machine's address on its network (not loopback), or None."""
    candidates = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.255", 9))  # no packet is sent: only the route is looked up
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    try:
        candidates += subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        pass
    return next((a for a in candidates if "." in a and not a.startswith("127.")), None)


@pytest.mark.ci  # process handling, run by CI after the default run
def test_every_listening_socket_is_on_loopback(one_thread):
    """The parent's control store, torchrun's rendezvous store and the store its workers share, and the
    workers' own sockets: all on 127.0.0.1; from the machine's network address, every port is refused."""
    job = Job.by_hand("gpt", "pp-1f1b", flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=2,
                      warmup=0)
    address = network_address()
    with Session(job, timeout=120) as workers:
        listening = listening_sockets([os.getpid(), *descendants(os.getpid())])
        answered = []
        for _, port in listening if address is not None else []:
            with socket.socket() as s:
                s.settimeout(5)
                try:
                    s.connect((address, port))
                    answered.append(port)
                except ConnectionRefusedError:
                    pass
        with socket.create_connection(("127.0.0.1", workers._store.port), timeout=5):
            pass  # the control store itself does answer on loopback
    assert len(listening) >= 3  # ours, and torchrun's two
    assert all(host in ("127.0.0.1", "::ffff:127.0.0.1", "::1") for host, _ in listening), listening
    if address is None:
        pytest.skip("this machine has no network address to try the ports from")
    assert answered == []


def rank_pid(workers: Session, rank: int) -> int:
    """The worker of `rank` below the session's own process (not a warm group's the test session holds)."""
    for pid in descendants(workers._proc.pid):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"pipebench.bench.launch.worker" in command and f"RANK={rank}".encode() in environ:
            return pid
    raise AssertionError(f"no worker of rank {rank}")


@pytest.mark.ci  # process handling, run by CI after the default run
def test_a_killed_rank_is_named_not_the_survivor(one_thread):
    """Rank 1 killed from outside (the out-of-memory killer, a user) writes no error; rank 0 reports a
    lost connection first. The failure names rank 1 and its signal."""
    job = Job.by_hand("gpt", "pp-1f1b", flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=2,
                      warmup=0)
    with pytest.raises(WorkerError, match="rank 1: Killed: ended by SIGKILL") as info:
        with Session(job, timeout=120) as workers:
            workers.step()
            os.kill(rank_pid(workers, 1), signal.SIGKILL)
            for _ in range(3):
                workers.step()
    assert "by peer" not in str(info.value)


def test_a_lost_peer_is_a_consequence():
    lost = RuntimeError("[gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:58019: Connection reset by peer.")
    assert error_record(lost, 0)["peer"]
    assert not error_record(RuntimeError("injected failure on rank 1"), 1)["peer"]


def test_a_child_inherits_the_users_environment(monkeypatch):
    """The profiling child sees what the user set (the profile cache's folder, HOME, HF_HOME, ...), plus
    only the GPU choice and our own settings."""
    import os

    from pipebench.bench.launch.spawn import call_in_child

    monkeypatch.setenv("PIPEBENCH_SOMETHING", "kept")
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    assert call_in_child(os.getenv, "PIPEBENCH_SOMETHING") == "kept"
    assert call_in_child(os.getenv, "PATH") == os.environ["PATH"]
    assert call_in_child(os.getenv, "PYTHONSAFEPATH") == "1" and "PYTHONSAFEPATH" not in os.environ  # ours restored


# ------------------------------------------------------------------ interrupts at any moment of a run

RUN = ["--models", "mlp", "--strategies", "single,ddp,pp-1f1b", "--fresh"]
"""The run the interrupt tests stop: profiled afresh, so that the CPU processes' probe runs."""


def of_the_run(temp: Path) -> list[int]:
    """Our processes that belong to a run started with TMPDIR=`temp` (pipebench points TMPDIR of all of
    them into its run folder there): by their environment, which orphans keep too."""
    import psutil

    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get("TMPDIR", "").startswith(str(temp)):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            pass
    return found


def naming(temp: Path, text: str) -> bool:
    """Whether a process of the run's has `text` in its command line."""
    return any(text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
               for pid in of_the_run(temp) if Path(f"/proc/{pid}").exists())


def assert_the_run_left_nothing(temp: Path) -> None:
    wait_until(lambda: not of_the_run(temp), "every process of the run gone", deadline=20)
    assert sorted(p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")) == []  # torch's cache


@pytest.mark.ci  # process handling, run by CI after the default run
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGTERM twice", "Ctrl-C to the group"])
def test_an_interrupt_during_the_cpu_probe_leaves_nothing(tmp_path, how):
    """An interrupt during the CPU probe leaves no pipebench-cpu-* folder and no probe peer running (the
    probe's peers and folder are cleaned up with the workers'), and a second SIGTERM exits 130, not -15."""
    proc, temp, _, err = start_run(tmp_path, *RUN, group=how == "Ctrl-C to the group")
    try:
        wait_until(lambda: naming(temp, "pipebench.hardware.cpu_processes"), "the CPU probe's peers started", deadline=300)
        if how == "Ctrl-C to the group":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(getattr(signal, how.split()[0]))
            if how.endswith("twice"):
                time.sleep(0.05)
                proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130, err.read_text()
    finally:
        proc.kill()
    assert_the_run_left_nothing(temp)


@pytest.mark.ci  # process handling, run by CI after the default run
@pytest.mark.parametrize("when", ["the profiling child starts", "the CPU probe runs"])
def test_kill_9_of_the_parent_while_profiling_leaves_nothing(tmp_path, when):
    """kill -9 of the parent 1.7 s in leaves neither the profiling child nor its resource tracker running (the
    child watches its parent from its start, before its imports, when it may be reparented already), nor,
    during the probe, its folder."""
    proc, temp, _, _ = start_run(tmp_path, *RUN)
    try:
        mark = "multiprocessing" if when.startswith("the profiling") else "pipebench.hardware.cpu_processes"
        wait_until(lambda: naming(temp, mark), when, deadline=300)
        proc.kill()
        proc.wait()
    finally:
        proc.kill()
    assert_the_run_left_nothing(temp)


@pytest.mark.ci  # process handling, run by CI after the default run
def test_two_runs_resuming_one_folder_one_killed_leave_nothing(tmp_path):
    """Two runs resuming into one folder, one of them killed with -9 while its workers run, leave no
    pipebench-* folder."""
    first, temp, out, err = start_run(tmp_path, "--models", "mlp", "--strategies", "single,ddp", "--resume")
    env = {**os.environ, "TMPDIR": str(temp), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    second = subprocess.Popen([sys.executable, "-m", "pipebench", "run", "--quick", "--out", str(out), "--models",
                               "mlp", "--strategies", "single,ddp", "--resume"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        wait_until(lambda: worker_running(temp) or first.poll() is not None, "a worker started", deadline=300)
        second.kill()
        second.wait()
        first.wait(timeout=300)
    finally:
        first.kill()
        second.kill()
    assert_the_run_left_nothing(temp)


@pytest.mark.ci  # process handling, run by CI after the default run
def test_kill_9_of_the_whole_process_group_leaves_nothing(tmp_path):
    """kill -9 of the command's process group (`kill -9 -PGID`, timeout's KILL) while profiling, the reaper
    killed with it, leaves no pipebench-run-* folder in the temp dir."""
    proc, temp, _, _ = start_run(tmp_path, *RUN, group=True)
    try:
        wait_until(lambda: naming(temp, "multiprocessing"), "the profiling child started", deadline=300)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        proc.kill()
    assert_the_run_left_nothing(temp)


SWALLOWS = '''
import time
from pathlib import Path

from torch import nn

Path(__file__).with_suffix(".importing").touch()
try:
    time.sleep(60)
except BaseException:  # a bare except, as some libraries keep around an import: the interrupt is lost
    pass
raise RuntimeError("half imported")
'''


@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_that_the_model_swallows_is_still_an_interrupt(tmp_path, sig):
    """What follows a signal is the interrupt (one line, exit 130), even where the code it cut short swallows
    the KeyboardInterrupt and fails later: a torchvision import cut short by SIGTERM on an H200 fails as
    "cannot import torchvision.models: RecursionError", which is not said."""
    (tmp_path / "slow.py").write_text(SWALLOWS)
    proc = subprocess.Popen([sys.executable, "-m", "pipebench", "plan", "--model", f"{tmp_path / 'slow.py'}:Net",
                             "--input-shape", "4", "--stages", "2"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, start_new_session=True)
    try:
        wait_until(lambda: (tmp_path / "slow.importing").exists(), "the model file's import began")
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 130
        assert proc.stderr.read().strip().splitlines()[-1] == "pipebench: interrupted"
    finally:
        proc.kill()


def test_an_interrupt_while_the_commands_are_imported_is_one_line(capsys, monkeypatch):
    """Ctrl-C in the first seconds, while build_parser imports every command's module (train -> spawn ->
    torch), is one line and exit 130, not a KeyboardInterrupt traceback."""
    import pipebench.bench.cli as cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["models"]) == 130
    assert capsys.readouterr().err.strip() == "pipebench: interrupted"


def test_an_interrupted_command_leaves_no_signal_for_the_next_one(capsys, monkeypatch):
    """`main` interrupted in this process leaves no signal on record: the next call in the process that starts
    workers (the API's run, the next command) runs, with no KeyboardInterrupt before its first one."""
    import pipebench.bench.cli as cli
    from pipebench.base import interrupts

    def interrupted(args):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        return 0

    monkeypatch.setattr(cli, "_command", interrupted)
    assert cli.main(["models"]) == 130
    assert not interrupts.signalled()
    interrupts.check()  # raises if the record outlived the command


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_swallowed_interrupt_starts_no_workers(capsys, monkeypatch, tmp_path):
    """Ctrl-C in train's first second, while torch is imported under a bare `except:` that swallows it, still
    stops train: no worker starts after a stop, and no training runs to its end before saying "interrupted".
    """
    import pipebench.bench.train.data as data
    from helpers import NET_AND_DATA

    parse = data.parse_data

    def swallowing(*args):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except BaseException:  # as some libraries' imports do
            pass
        return parse(*args)

    monkeypatch.setattr(data, "parse_data", swallowing)
    (tmp_path / "net.py").write_text(NET_AND_DATA)
    from pipebench.bench.cli import main

    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--data", f"{tmp_path / 'net.py'}:data",
                 "--input-shape", "4", "--batch", "8", "--steps", "2", "--strategy", "single", "--device", "cpu"])
    out, err = capsys.readouterr()
    assert code == 130 and "done:" not in out and err.strip().splitlines()[-1] == "pipebench: interrupted", err
