"""What the GPUs of a shared server are doing now, through NVML, and which of them to take.

A lab server's GPUs are used by other people at the same time: pipebench reads each visible GPU's free
memory, utilisation and other processes from NVML (nvidia-ml-py), picks the freest for `--gpus auto:N`,
and caps each stage's memory at what is free. No CUDA context is created here.

CUDA_VISIBLE_DEVICES is honoured: GPU i here is the i-th visible one (indices or UUIDs), as CUDA counts.
`nvml` may be any object with pynvml's functions (the tests pass a fake one).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from pipebench.base.errors import DeviceError
from pipebench.base.text.parse import AutoGpus, parse_gpus
from pipebench.base.text.units import GIB, format_gib

__all__ = ["GpuInfo", "query_gpus", "gpu_name", "choose_gpus", "parse_gpu_choice", "free_memory_caps", "format_gpus",
           "describe_choice", "SAFETY_MARGIN", "CAPPED_MARGIN", "plannable"]

SAFETY_MARGIN = 0.05
"""Share of a GPU's total memory left unplanned (CUDA context, allocator slack, others' growth); at least 1 GiB."""

CAPPED_MARGIN = 0.10
"""Share of a hard cap (`--gpu-memory`) left unplanned. The worker's allocator refuses past the cap by the
blocks it holds (fragmentation included), while plans predict allocated bytes, within 10% as measured: on
an H200 capped at 10 GiB, a 1F1B stage planned at 93% of the cap failed in its backward."""


def plannable(limit: int, margin: float = CAPPED_MARGIN) -> int:
    """The memory a plan may use under a hard per-process limit of `limit` bytes."""
    return limit - int(margin * limit)


@dataclass(frozen=True)
class GpuInfo:
    index: int
    """CUDA ordinal as this process sees it (within CUDA_VISIBLE_DEVICES)."""
    physical: int
    """NVML index (nvidia-smi's numbering)."""
    name: str
    memory_total: int
    memory_used: int
    memory_free: int
    utilisation: int
    """Percent of the last sample period a kernel ran (nvidia-smi's GPU-Util)."""
    processes: int
    """Compute processes on the GPU now (other people's jobs, or ours)."""


def _nvml():
    try:
        import pynvml
    except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency
        raise DeviceError("nvidia-ml-py is not installed: pip install nvidia-ml-py") from None
    return pynvml


def query_gpus(nvml: Any | None = None, visible: str | None = None) -> list[GpuInfo]:
    """Every visible GPU now; [] on a machine without NVIDIA GPUs (or without a driver)."""
    nvml = nvml or _nvml()
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded...: no GPUs here
        return []
    try:
        count = nvml.nvmlDeviceGetCount()
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        order = _visible_order(handles, nvml, os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible)
        infos = []
        for index, physical in enumerate(order):
            handle = handles[physical]
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            name = nvml.nvmlDeviceGetName(handle)
            infos.append(GpuInfo(
                index=index, physical=physical, name=name.decode() if isinstance(name, bytes) else name,
                memory_total=int(memory.total), memory_used=int(memory.used), memory_free=int(memory.free),
                utilisation=int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                processes=len(nvml.nvmlDeviceGetComputeRunningProcesses(handle)),
            ))
        return infos
    finally:
        nvml.nvmlShutdown()


def gpu_name(index: int, nvml: Any | None = None) -> str | None:
    """The name of visible GPU `index` ("NVIDIA H200"), as CUDA's get_device_name says it, without
    creating a CUDA context; None when NVML cannot tell (no driver, no such GPU, a MIG slice)."""
    nvml = nvml or _nvml()
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - as in query_gpus: no GPUs here
        return None
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        order = _visible_order(handles, nvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
        if not 0 <= index < len(order):
            return None
        name = nvml.nvmlDeviceGetName(handles[order[index]])
        return name.decode() if isinstance(name, bytes) else name
    except Exception:  # noqa: BLE001 - NVMLError of any kind: let CUDA say it
        return None
    finally:
        nvml.nvmlShutdown()


def _visible_order(handles, nvml, visible: str | None) -> list[int]:
    """NVML indices in CUDA's visible order. Like CUDA, stop at the first entry that names no GPU."""
    if visible is None:
        return list(range(len(handles)))
    uuids = []
    for handle in handles:
        uuid = nvml.nvmlDeviceGetUUID(handle)
        uuids.append(uuid.decode() if isinstance(uuid, bytes) else uuid)
    order: list[int] = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit() and int(entry) < len(handles):
            found = int(entry)
        else:
            matches = [i for i, u in enumerate(uuids) if entry and u.startswith(entry if entry.startswith("GPU-") else f"GPU-{entry}")]
            if len(matches) != 1:
                break
            found = matches[0]
        if found in order:
            break
        order.append(found)
    return order


def choose_gpus(infos: Sequence[GpuInfo], count: int) -> list[GpuInfo]:
    """The `count` freest GPUs: most free memory, then least utilisation, then fewest processes, then
    the lowest index (a stable choice); returned in index order."""
    if count < 1:
        raise DeviceError(f"auto:N takes N >= 1 (got {count})")
    if not infos:
        raise DeviceError("--gpus auto needs GPUs, and none is visible here")
    if count > len(infos):
        raise DeviceError(f"asked for {count} GPUs, only {len(infos)} visible")
    ranked = sorted(infos, key=lambda g: (-g.memory_free, g.utilisation, g.processes, g.index))
    return sorted(ranked[:count], key=lambda g: g.index)


def parse_gpu_choice(spec: str, nvml: Any | None = None) -> tuple[list[int], list[GpuInfo]]:
    """'0,1' -> ids as given; 'auto:N' -> the N freest GPUs now. Returns the ids and what NVML said of them."""
    choice = parse_gpus(spec)
    if isinstance(choice, AutoGpus):
        chosen = choose_gpus(query_gpus(nvml), choice.count)
        return [g.index for g in chosen], chosen
    return choice, gpus_by_id(choice, nvml)


def gpus_by_id(ids: Sequence[int], nvml: Any | None = None) -> list[GpuInfo]:
    """What NVML says now of the visible GPUs `ids`, in their order (an id it does not list left out)."""
    infos = {g.index: g for g in query_gpus(nvml)}
    return [infos[i] for i in ids if i in infos]


def free_memory_caps(infos: Sequence[GpuInfo], margin: float = SAFETY_MARGIN) -> list[int]:
    """Per GPU, the memory a plan may use: what is free now less the safety margin."""
    return [max(0, g.memory_free - max(int(margin * g.memory_total), GIB)) for g in infos]


def format_gpus(infos: Sequence[GpuInfo]) -> str:
    """A table of the GPUs: ids, name, memory used, free and total (GiB), utilisation, other processes."""
    import pandas as pd

    rows = [{"gpu": g.index, "nvidia-smi id": g.physical, "name": g.name,
             "used GiB": format_gib(g.memory_used), "free GiB": format_gib(g.memory_free),
             "total GiB": format_gib(g.memory_total), "busy %": g.utilisation, "processes": g.processes}
            for g in infos]
    return pd.DataFrame(rows).to_string(index=False)


def describe_choice(infos: Sequence[GpuInfo]) -> str:
    """What `--gpus auto:N` took, and why: 'chose GPUs 1 (H200, 140.0 GiB free, 0% busy, 0 process(es))'."""
    return "chose GPUs " + ", ".join(
        f"{g.index} ({g.name}, {format_gib(g.memory_free)} GiB free, {g.utilisation}% busy, "
        f"{g.processes} process(es))" for g in infos)
