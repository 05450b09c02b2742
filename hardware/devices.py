"""Which devices a plan runs on, checked before anything is measured.

GPU ids are CUDA ordinals, so they count within CUDA_VISIBLE_DEVICES when the user has set it.
"""
from __future__ import annotations

import sys

from pipebench.base.errors import DeviceError, UserError

__all__ = ["check_gpus", "resolve_device"]


def check_gpus(ids: list[int]) -> list[str]:
    """Device names 'cuda:i' for ids that exist; DeviceError naming the ones that don't. Counted by NVML,
    which creates no CUDA context; CUDA has the last word where NVML sees too few."""
    from pipebench.hardware.gpus import query_gpus

    count = len(query_gpus())
    if not ids or max(ids) >= count:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise DeviceError("no CUDA GPU is visible here; plan on the CPU with --stages N --device cpu")
    missing = [i for i in ids if i >= count]
    if missing:
        have = "GPU 0" if count == 1 else f"GPUs 0-{count - 1}"
        raise DeviceError(f"GPU {missing[0]} does not exist: {have} visible")
    return [f"cuda:{i}" for i in ids]


def resolve_device(device, check: bool = True) -> str:
    """The name every torch call takes for `device` (any spelling torch accepts: 'cpu', 'cuda', 'cuda:N' or
    a torch.device): 'cpu', or 'cuda:N', where bare 'cuda' is the current GPU (torch refuses an index-less
    CUDA device in many calls), GPU 0 in a process that has not imported torch. `check`: the GPU must exist
    (DeviceError, one line). torch is not imported here: a cached answer needs none."""
    from pipebench.base.text.parse import parse_device

    torch = sys.modules.get("torch")
    if not isinstance(device, str) and not (torch is not None and isinstance(device, torch.device)):
        raise UserError(f"device takes a device name such as 'cpu' or a torch.device (got {type(device).__name__})")
    text = parse_device(device if isinstance(device, str) else str(device))
    if text == "cpu":
        return text
    index = text.partition(":")[2]
    if index:
        index = int(index)
    elif torch is not None and torch.cuda.is_available() and torch.cuda.device_count() > 0:
        index = torch.cuda.current_device()
    else:
        index = 0
    return check_gpus([index])[0] if check else f"cuda:{index}"
