"""Which devices a plan runs on, checked before anything is measured.

GPU ids are CUDA ordinals, so they count within CUDA_VISIBLE_DEVICES when the user has set it.
"""
from __future__ import annotations

import statistics
import sys
import time
from pipebench.errors import DeviceError

__all__ = ["check_gpus", "resolve_device", "measure_link_gbps", "measure_stage_link",
           "measure_speeds", "measure_allreduce_gbps", "measure_gloo_links", "measure_core_contention",
           "measure_runtimes"]


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
    from pipebench.specs import parse_device

    text = parse_device(str(device))
    if text == "cpu":
        return text
    index = text.partition(":")[2]
    torch = sys.modules.get("torch")
    if index:
        index = int(index)
    elif torch is not None and torch.cuda.is_available() and torch.cuda.device_count() > 0:
        index = torch.cuda.current_device()
    else:
        index = 0
    return check_gpus([index])[0] if check else f"cuda:{index}"


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


def measure_gloo_links(megabytes: int = 4, repeats: int = 5) -> tuple[float, float, float]:
    """(copy GB/s, all-reduce bus GB/s, latency ms) between two CPU stand-ins for devices talking through
    gloo, as the CPU workers do: two gloo groups in threads of this process over loopback (gloo leaves the
    GIL while it moves bytes), so it costs half a second, not two process starts. The CPU plans price their
    cuts, and DDP its all-reduce, with these."""
    import threading
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    store = dist.HashStore()
    figures: dict[str, float] = {}
    errors: list[BaseException] = []

    def side(rank: int) -> None:
        try:
            group = dist.ProcessGroupGloo(dist.PrefixStore("pipebench-probe", store), rank, 2, timedelta(seconds=60))
            peer = 1 - rank

            def ping(tensor) -> float:  # one way, half a round trip; the median: a worker's message
                times = []              # waits for its receiver to be scheduled as often as the probe's
                for _ in range(repeats + 1):
                    group.barrier().wait()
                    start = time.perf_counter()
                    for turn in (0, 1):
                        (group.send if turn == rank else group.recv)([tensor], peer, 0).wait()
                    times.append((time.perf_counter() - start) / 2)
                return statistics.median(times[1:])

            small, large = torch.zeros(1), torch.zeros(megabytes * 10**6 // 4)
            latency, copy = ping(small), ping(large)
            times = []
            for _ in range(repeats + 1):
                group.barrier().wait()
                start = time.perf_counter()
                group.allreduce([large]).wait()
                times.append(time.perf_counter() - start)
            if rank == 0:  # bandwidths with the latency in (conservative, and never a division by noise)
                nbytes = large.numel() * 4
                figures.update(latency_ms=latency * 1e3, copy_gbps=nbytes / copy / 1e9,
                               allreduce_gbps=nbytes / statistics.median(times[1:]) / 1e9)
        except BaseException as exc:  # noqa: BLE001 - reported in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=side, args=(rank,)) for rank in (0, 1)]
    from pipebench.hardware.cpu import thread_budget

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the GIL over at once, or each message waits up to 5 ms for it
    try:
        with thread_budget(1):  # each side is one worker's share of a 2-core machine at most
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(switch)
    if errors:
        raise DeviceError(f"the gloo link probe failed: {errors[0]}")
    # busbw of an all-reduce over 2: 2 (p - 1) / p x bytes / time = bytes / time
    return figures["copy_gbps"], figures["allreduce_gbps"], figures["latency_ms"]


def measure_core_contention(devices: int, repeats: int = 4, rounds: int = 3) -> float:
    """How much slower one CPU stand-in for a device computes while all `devices` compute at once, on
    this machine's cores at its present load: the median time of a convolution's forward and backward
    (a training step's mix of arithmetic and memory traffic) in `devices` threads at once, over its
    median alone, each thread with one device's share of the cores, as the workers have (at least 1.0).
    Alone and together alternate `rounds` times, `repeats` runs each, so that a burst of someone else's
    load falls on both sides of the ratio.

    Processes standing in for devices share the cores, the caches and the memory bandwidth; a profile
    times each layer alone. The pipelines' simulator (schedule.SharedCores) and the replica strategies'
    prices slow their concurrent compute by this. torch leaves the GIL inside the operations, so threads
    measure it in about a second, without starting processes."""
    import threading

    import torch

    from pipebench.hardware.cpu import thread_budget, threads_per_device

    if devices < 2:
        return 1.0
    x = torch.randn(8, 32, 32, 32, requires_grad=True)
    weight = torch.randn(32, 32, 3, 3, requires_grad=True)

    def work() -> float:
        start = time.perf_counter()
        y = torch.nn.functional.conv2d(x, weight, padding=1).relu()
        y.sum().backward()
        return time.perf_counter() - start

    def timed(out: list[float]) -> None:
        for _ in range(repeats + 1):
            out.append(work())

    alone: list[float] = []
    together: list[float] = []
    with thread_budget(threads_per_device(devices)):
        for _ in range(rounds):
            runs: list[float] = []
            timed(runs)
            alone += runs[1:]
            each: list[list[float]] = [[] for _ in range(devices)]
            threads = [threading.Thread(target=timed, args=(out,)) for out in each]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            together += [t for out in each for t in out[1:]]
    return max(1.0, statistics.median(together) / statistics.median(alone))


def measure_runtimes(micro_batches: int = 16, layers: int = 8, repeats: int = 5) -> tuple[float, float]:
    """(ms per pipeline operation, ms per FSDP2 layer): what torch's runtimes spend beyond the compute on
    the CPU, timed in a gloo group of this process alone on modules too small to compute anything (the
    least of `repeats` steps after one warm-up). A profile times the layers without them, and on small
    models they are a large share of the step; messages are priced apart, by gloo's latency.

    - torch.distributed.pipelining: a one-stage ScheduleGPipe over `micro_batches`, per operation (each
      micro-batch's forward and backward); the CPU pipelines' simulator charges it on every operation
      (schedule.SharedCores).
    - FSDP2: a stack of `layers` fully_shard-ed Linear layers against the same stack unsharded, per layer
      and step (its hooks, its gathers' and reduce-scatters' calls); the CPU FSDP price charges it on
      every layer (costs.fsdp_step).

    Skipped when this process already has a default process group: then (0.001, 0.001), never 0, which
    the profile cache would not keep."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    from pipebench.hardware.cpu import thread_budget

    if dist.is_initialized():
        return 1e-3, 1e-3

    def least_ms(step) -> float:
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return min(times[1:]) * 1e3

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, timeout=timedelta(seconds=60))
    try:
        with thread_budget(1):
            stage = PipelineStage(torch.nn.Linear(1, 1), 0, 1, torch.device("cpu"))
            schedule = ScheduleGPipe(stage, micro_batches, loss_fn=lambda out, target: out.sum())
            x = torch.zeros(micro_batches, 1)
            action = least_ms(lambda: schedule.step(x, target=x)) / (2 * micro_batches)
            plain, sharded = (torch.nn.Sequential(*[torch.nn.Linear(1, 1) for _ in range(layers)]) for _ in range(2))
            for layer in sharded:
                fully_shard(layer)
            one = torch.zeros(1, 1)
            per_layer = (least_ms(lambda: sharded(one).sum().backward())
                         - least_ms(lambda: plain(one).sum().backward())) / layers
    finally:
        dist.destroy_process_group()
    return max(1e-3, action), max(1e-3, per_layer)
