"""pytest-benchmark set-up for the suite under bench/: the suite's options, and machine facts (GPU names,
driver, torch and CUDA versions, GPU topology) in the saved JSON."""
from __future__ import annotations

import subprocess

from pipebench.base.training import Training


def pytest_addoption(parser):
    group = parser.getgroup("pipebench", "pipebench suite (bench/benchmarks/bench_suite.py)")
    group.addoption("--suite-models", default=None,
                    help="comma-separated models (default: gpt,resnet101 on GPUs; tiny flavours on the CPU)")
    group.addoption("--suite-strategies", default=None, help="comma-separated strategies (default: all)")
    group.addoption("--suite-gpus", default=None, help="GPU ids (default: every visible GPU)")
    group.addoption("--suite-batch", type=int, default=None, help="global batch for every model")
    group.addoption("--suite-micro-batches", "--suite-chunks", dest="suite_micro_batches", default="auto",
                    metavar="auto|M,M,...",
                    help="micro-batch counts for pipelines, e.g. 2,4,auto, as run --micro-batches")
    group.addoption("--suite-quick", action="store_true", help="tiny flavours, batch 8 (default without GPUs)")
    group.addoption("--suite-steps", type=int, default=5, help="timed steps (benchmark rounds) per case")
    group.addoption("--suite-warmup", type=int, default=2, help="untimed steps in the workers first")
    group.addoption("--suite-out", default=None, help="also append each case's row to a results file here")
    group.addoption("--suite-precision", default=Training.precision, help="fp32, tf32 (default) or bf16, as run --precision")
    group.addoption("--suite-optimizer", default=Training.optimizer, help="sgd (default) or adamw, as run --optimizer")


def pytest_configure(config):
    """Check the --suite-* options before collection: a bad one is a usage error, not a collection error."""
    from bench_suite import suite_options

    suite_options(config)


def pytest_benchmark_update_machine_info(config, machine_info):
    import torch

    machine_info["torch"] = torch.__version__
    machine_info["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        machine_info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        machine_info["gpu_driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        machine_info["gpu_topology"] = _run(["nvidia-smi", "topo", "-m"])


def _run(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
