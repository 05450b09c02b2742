"""pytest-benchmark set-up for the suite under bench/: machine facts go into the saved JSON."""
from __future__ import annotations


def pytest_benchmark_update_machine_info(config, machine_info):
    import torch

    machine_info["torch"] = torch.__version__
    machine_info["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        machine_info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
