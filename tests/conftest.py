"""Shared test set-up: seeded RNG, the torch version in the header, GPU tests skipped without GPUs, and the
fixtures that several test files take (nothing_runs, within_seconds, paths, text)."""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

# Every test measures its model for itself; tests of the profile cache turn it on in a folder of their own.
# The machine's link figures (gloo and the cores' sharing between CPU processes, seconds to time) are timed
# once a session and kept in a folder of the session's (partition/profiling/cache.py link_cache).
# Every CPU profile also watches the machine's speed for a while (hardware/drift.py DRIFT_SECONDS): briefly.
os.environ["PIPEBENCH_CACHE"] = "off"
os.environ.setdefault("PIPEBENCH_DRIFT_SECONDS", "0.2")
os.environ["PIPEBENCH_LINK_CACHE"] = tempfile.mkdtemp(prefix="pipebench-test-links-")
atexit.register(shutil.rmtree, os.environ["PIPEBENCH_LINK_CACHE"], ignore_errors=True)

# The tests of interrupts send Ctrl-C as a terminal does. Started as a shell's background job, pytest (and
# every process it starts) would inherit SIGINT ignored, which pipebench keeps ignored (base/interrupts.py).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config):
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return f"torch {torch.__version__}, {gpus} CUDA GPU(s)"


def pytest_collection_modifyitems(config, items):
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    for item in items:
        if "multigpu" in item.keywords and gpus < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2 or more CUDA GPUs ({gpus} visible)"))
        elif "gpu" in item.keywords and gpus < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture
def one_thread():
    """One torch thread for the test, as each worker process has: timings sane on 2 cores, and the same
    reduction order as the workers."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def groups():
    """Warm worker groups for the whole session (bench.launch.sessions.WorkerGroups): the gloo equality tests run
    their jobs in them, `launch(job, groups=groups)`, as `pipebench run` runs its cases. The session pays
    for torchrun, a Python and a torch import per process and the rendezvous once per process count, not
    once per test (seconds each on two cores, where a tiny model's step takes a fraction of one); each job
    still meets in a process group of its own, with its own result or error. The Hugging Face fixtures
    are built from configs: the workers have nothing to download."""
    from pipebench.bench.launch.sessions import WorkerGroups

    with pytest.MonkeyPatch.context() as monkeypatch, WorkerGroups() as warm:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        yield warm


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _signal_handlers():
    """A command interrupted in this process keeps SIGINT and SIGTERM ignored, as it must until the process
    exits (a second signal still exits 130): put them back, or every later test's processes inherit them
    ignored and no Ctrl-C test can stop one."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


# ----------------------------------------------------------------------- fixtures several test files share

@pytest.fixture
def nothing_runs(monkeypatch):
    """No GPU (the CPU path), and neither measuring nor the suite may start: bad input stops before both.
    Taken by the tests of refused input (`pytest.mark.usefixtures("nothing_runs")`), so that a check that comes
    too late fails the test at once instead of profiling or running a case."""
    import torch

    from pipebench.bench.cases import prepare, run_suite
    from pipebench.partition.profiling import measure

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)

    def too_far(*args, **kwargs):
        raise AssertionError("got as far as profiling or running")

    monkeypatch.setattr(measure, "profile_sizes", too_far)  # pipebench.profile and plan, in this process
    monkeypatch.setattr(prepare, "profile_case_model", too_far)  # train's profile, which runs in a child
    monkeypatch.setattr(run_suite, "run_suite", too_far)


@pytest.fixture
def within_seconds():
    """A read that waits (a FIFO's open) fails the test instead of hanging it."""
    import signal

    def late(signum, frame):
        raise AssertionError("waited on a file")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def paths(tmp_path):
    """A results CSV and its JSON twin in the test's folder."""
    return tmp_path / "r.csv", tmp_path / "r.json"


STDLIB = ("argparse.py", "textwrap.py", "json/decoder.py", "csv.py")


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    """The bytes of a few standard-library modules as uint16 token ids, nanoGPT's train.bin format."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    data = b"".join((lib / name).read_bytes() for name in STDLIB)
    path = tmp_path_factory.mktemp("text") / "stdlib.bin"
    np.frombuffer(data, dtype=np.uint8).astype(np.uint16).tofile(path)
    return path
