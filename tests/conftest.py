"""Shared test set-up: seeded RNG, the torch version in the header, GPU tests skipped without GPUs."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

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
