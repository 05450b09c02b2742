"""The memory free now on the device that work is about to run on.

What the checks made before large work compare with (the activations a profiled size keeps, the index
table of a training's sampler): work beyond it is no out-of-memory error on the CPU but the kernel's OOM
killer, which ends the process without a line, or another process of a shared machine.
"""
from __future__ import annotations

__all__ = ["free_bytes"]


def free_bytes(device) -> int:
    """Bytes free on `device` (a torch.device or its name): the CPU's available memory (psutil: what can
    be allocated without swapping), or a GPU's free memory plus what torch's allocator holds unused."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    import psutil

    return psutil.virtual_memory().available
