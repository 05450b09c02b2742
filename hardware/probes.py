"""Which devices a plan runs on, checked before anything is measured.

GPU ids are CUDA ordinals, so they count within CUDA_VISIBLE_DEVICES when the user has set it.
"""
from __future__ import annotations

import statistics
import time
from pipebench.errors import UserError

__all__ = ["DeviceError", "parse_gpu_ids", "check_gpus", "measure_link_gbps", "measure_stage_link",
           "measure_speeds"]


class DeviceError(UserError):
    """A device that does not exist or cannot be used."""


def parse_gpu_ids(spec: str) -> list[int]:
    """'0,1' -> [0, 1]; rejects empty, negative, repeated or non-numeric ids (and auto:N, which names no ids).

    Kept for callers of the old name; pipebench.specs.parse_gpus reads both forms."""
    from pipebench.specs import parse_gpus

    if spec.startswith("auto"):
        raise DeviceError(f"--gpus takes comma-separated GPU ids such as 0,1 (got {spec!r})")
    return parse_gpus(spec)


def check_gpus(ids: list[int]) -> list[str]:
    """Device names 'cuda:i' for ids that exist; DeviceError naming the ones that don't."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise DeviceError("no CUDA GPU is visible here; plan on the CPU with --stages N --device cpu")
    missing = [i for i in ids if i >= count]
    if missing:
        have = "GPU 0" if count == 1 else f"GPUs 0-{count - 1}"
        raise DeviceError(f"GPU {missing[0]} does not exist: {have} visible")
    return [f"cuda:{i}" for i in ids]


def measure_link_gbps(src: str, dst: str, megabytes: int = 256, repeats: int = 5) -> float:
    """GB/s of a timed device-to-device copy of `megabytes` MB (median of `repeats` after one warm-up)."""
    import torch

    nbytes = megabytes * 10**6
    a = torch.empty(nbytes, dtype=torch.uint8, device=src)
    b = torch.empty(nbytes, dtype=torch.uint8, device=dst)
    times = []
    for _ in range(repeats + 1):
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        start = time.perf_counter()
        b.copy_(a, non_blocking=True)
        torch.cuda.synchronize(src)
        torch.cuda.synchronize(dst)
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times[1:]) / 1e9


def measure_stage_link(devices: list[str]) -> tuple[str, str, float] | None:
    """The link a plan prices activation transfers with: (first, second, GB/s) between the first two
    distinct GPUs of `devices`, timed; None on the CPU or on a single device (transfers are free there)."""
    distinct = list(dict.fromkeys(devices))
    if len(distinct) < 2 or not distinct[0].startswith("cuda"):
        return None
    return distinct[0], distinct[1], measure_link_gbps(distinct[0], distinct[1])


def measure_speeds(devices: list[str], size: int = 4096, repeats: int = 20) -> list[float]:
    """Speed factor per GPU from a short matrix-product probe: its products per second over the fastest's.

    A GPU that someone else is using runs our kernels slower; the factor tells the solver to give it
    fewer layers. About 20 products of size x size per GPU (a fraction of a second on an H200)."""
    import torch

    rates = []
    for device in devices:
        a = torch.randn(size, size, device=device)
        b = torch.randn(size, size, device=device)
        a @ b  # warm-up: cuBLAS picks its kernel
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        torch.cuda.synchronize(device)
        rates.append(repeats / (time.perf_counter() - start))
        del a, b
    fastest = max(rates)
    return [rate / fastest for rate in rates]
