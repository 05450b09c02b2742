"""Shared test set-up: seeded RNG, the torch version in the header, GPU tests skipped without GPUs."""
from __future__ import annotations

import os

import pytest
import torch

# Every test measures for itself; tests of the profile cache turn it on in a folder of their own.
os.environ["PIPEBENCH_CACHE"] = "off"


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
def together(request, tmp_path_factory):
    """The gloo jobs of every selected test marked `together(job=make_job)`, run in one process group per
    process count before the first of those tests; called as bench.launch.launch (tests/together.py)."""
    from together import Together, jobs_of

    return Together(jobs_of(request.session.items), tmp_path_factory.mktemp("together"))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
