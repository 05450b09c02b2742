"""What the GPUs measure as a plan sees them: the bandwidth of a copy between two and of an all-reduce
over all, and each one's speed against the fastest (a GPU someone else is using runs our kernels slower)."""
from __future__ import annotations

import statistics
import time

__all__ = ["measure_link_gbps", "measure_stage_link", "measure_speeds", "measure_allreduce_gbps"]


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


def measure_allreduce_gbps(devices: list[str], megabytes: int = 64, repeats: int = 5) -> float | None:
    """Bus bandwidth (NCCL's definition, GB/s) of a timed all-reduce of `megabytes` MB over the distinct
    GPUs of `devices`, from one process with torch.cuda.nccl (median of `repeats` after one warm-up); it
    prices DDP's gradient all-reduce. None on the CPU, on one GPU, or where NCCL is not available."""
    import torch

    distinct = list(dict.fromkeys(devices))
    if len(distinct) < 2 or not all(d.startswith("cuda") for d in distinct):
        return None
    try:
        import torch.cuda.nccl as nccl

        tensors = [torch.ones(megabytes * 10**6 // 4, device=d) for d in distinct]
        times = []
        for _ in range(repeats + 1):
            for d in distinct:
                torch.cuda.synchronize(d)
            start = time.perf_counter()
            nccl.all_reduce(tensors)
            for d in distinct:
                torch.cuda.synchronize(d)
            times.append(time.perf_counter() - start)
    except (RuntimeError, ImportError, AttributeError):
        return None
    p = len(distinct)
    return 2 * (p - 1) / p * megabytes * 10**6 / statistics.median(times[1:]) / 1e9
