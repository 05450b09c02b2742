"""Hugging Face accelerate's `device_map="auto"`: the model's layers spread over the GPUs by parameter
size, the whole batch passing from one GPU to the next, one GPU working at a time.

What a Hugging Face user gets by passing nothing else (`from_pretrained(..., device_map="auto")`),
done with accelerate's own functions: `get_balanced_memory` evens the parameter bytes over the GPUs,
`infer_auto_device_map` fills them in module order, `dispatch_model` moves each module to its GPU and
hooks it so that what it receives moves there too (and the output back to the input's GPU).

Two choices, each from the user's side:
- Modules kept whole: a Hugging Face model's own `_no_split_modules`; for any other model its layers
  (the zoo's, or a model of your own's top-level submodules), by class name as accelerate takes them.
- GPU memory: each GPU's free memory (accelerate's default), within this process's cap where the worker
  set one (Job.gpu_memory). No CPU or disk offload: offloaded weights do not train, so a model whose
  parameters do not fit is out of memory here.

transformers 5 carries its own copy of the two functions, whose balancing buffer differs a little (the
largest no-split block or leaf, where accelerate takes the first block of each class and the mean
leaf): for a Hugging Face model, a cut may sit a layer away from from_pretrained's.
"""
from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace
from typing import Sequence

import torch

from pipebench.bench.strategies.trainers import WholeModelTrainer, own_copy
from pipebench.base.errors import UserError
from pipebench.base.training import Training

__all__ = ["DeviceMapTrainer", "auto_device_map", "device_map_bounds", "layer_bounds", "layer_size_bounds",
           "no_split_classes"]


class DeviceMapTrainer(WholeModelTrainer):
    """accelerate's hooks move the activations from GPU to GPU, and the output back to the first."""

    def __init__(self, model, devices, *, training: Training = Training(), **kw):
        if training.checkpoint == "always":  # auto: it runs without
            raise UserError(f"device-map does not recompute activations (got checkpoint {training.checkpoint!r}); "
                            "run it with --checkpoint never")
        super().__init__(own_copy(model), devices, training=training, **kw)
        from accelerate import dispatch_model

        if self.devices[0].type == "cuda":
            self.device_map = auto_device_map(self.model, _gpu_memory(self.devices))
            where = {name: self.devices[d].index for name, d in self.device_map.items()}
            dispatch_model(self.model.module, where, main_device=self.devices[0].index)
        else:
            # CPU stand-ins: accelerate maps onto devices as large as GPUs (memory is no object), and the
            # hooks go on every mapped module as on GPUs (force_hooks), each one moving to "cpu".
            self.device_map = auto_device_map(self.model, _unbounded(len(self.devices)))
            with _quiet_accelerate("accelerate.big_modeling"):  # "offloaded to the cpu": it means its device
                dispatch_model(self.model.module, {name: "cpu" for name in self.device_map}, main_device="cpu",
                               force_hooks=True)
        for name in self.device_map:  # each module accelerate keeps whole on one device, its hooks included
            self.compile(self.model.module.get_submodule(name))


def no_split_classes(model) -> list[str]:
    """Class names of the modules accelerate must keep on one device: a Hugging Face model's own
    `_no_split_modules`, else the classes of the model's layers (its top-level submodules)."""
    from pipebench.models.hugging_face import AsTrained

    module = model.module.wrapped if isinstance(model.module, AsTrained) else model.module
    if hasattr(module, "_no_split_modules"):
        return sorted(module._no_split_modules or [])
    return sorted({type(child).__name__ for child in module.children()})


def auto_device_map(model, max_memory: dict[int, float]) -> dict[str, int]:
    """accelerate's device_map="auto" of `model.module` over devices 0 .. p-1 of `max_memory` bytes each:
    {module name: device index}. Arithmetic on the modules' sizes only: the model may be on the meta
    device. Parameters that fit on none of the devices are out of memory (torch.cuda.OutOfMemoryError)."""
    from accelerate import infer_auto_device_map
    from accelerate.utils import get_balanced_memory

    no_split = no_split_classes(model)
    with _quiet_accelerate("accelerate.utils.modeling"):  # devices 0 .. p-1 may be stand-ins or estimates
        balanced = get_balanced_memory(model.module, dict(max_memory), no_split_module_classes=no_split)
        device_map = infer_auto_device_map(model.module, max_memory=balanced, no_split_module_classes=no_split)
    left = [name or "the whole model" for name, d in device_map.items() if not isinstance(d, int)]
    if left:
        sizes = ", ".join(f"{b / 2**30:.2f}" for b in max_memory.values())
        raise torch.cuda.OutOfMemoryError(f"out of memory: accelerate's device_map=\"auto\" finds no room for "
                                     f"{', '.join(left[:3])}{' ...' if len(left) > 3 else ''} on {len(max_memory)} "
                                     f"device(s) of {sizes} GiB")
    return dict(device_map)


def device_map_bounds(model, devices: int, max_memory_bytes: float | Sequence[float] | None = None,
                      layers: Sequence[str] | None = None) -> list[int]:
    """Layer bounds [0, k, ..., n] of accelerate's split of `model` over `devices` devices: stage s is the
    layers it puts on device s (devices it leaves empty get no stage). Only sizes count: build the model
    on the meta device where it can be. max_memory_bytes: one figure or one per device; None: devices
    larger than the model, as GPUs usually are. layers: module names to bound, in execution order
    (default the zoo's layers; for a model of your own, its profile's layer names)."""
    names = model.layer_names if layers is None else list(layers)
    sizes = [sum(p.numel() * p.element_size() for p in model.module.get_submodule(name).parameters())
             for name in names]
    return layer_bounds(auto_device_map(model, _memory(devices, max_memory_bytes)), names, sizes)


def layer_size_bounds(param_bytes: Sequence[int], devices: int,
                      max_memory_bytes: float | Sequence[float] | None = None) -> list[int]:
    """device_map_bounds for a model known only by its layers' parameter bytes (a profile whose model
    cannot be built here): accelerate maps a stand-in of one whole module per layer. Its balancing buffer
    then counts the first and the mean layer rather than the model's own blocks, so a cut may sit a layer
    or two away from the real model's."""
    stand_in = torch.nn.Sequential()
    for k, nbytes in enumerate(param_bytes):
        layer = _Layer()
        if nbytes:
            layer.weight = torch.nn.Parameter(torch.empty(nbytes, dtype=torch.uint8, device="meta"),
                                              requires_grad=False)
        stand_in.add_module(str(k), layer)
    return device_map_bounds(SimpleNamespace(module=stand_in, layer_names=list(stand_in._modules)), devices,
                             max_memory_bytes)


class _Layer(torch.nn.Module):
    """One layer of layer_size_bounds' stand-in."""


def layer_bounds(device_map: dict[str, int], layers: Sequence[str], param_bytes: Sequence[int]) -> list[int]:
    """Where a device map's devices change along `layers` (module names in execution order): bounds
    [0, ..., n]. A layer without parameters counts on the device of the layer before it, wherever
    accelerate put it (Llama's rotary table: registered after the final norm, run before the first
    block). A layer split over devices, or a map that goes back to an earlier device, is no chain of
    stages (UserError)."""
    owners: list[int] = []
    for name, nbytes in zip(layers, param_bytes):
        found = {d for key, d in device_map.items()
                 if key in ("", name) or name.startswith(key + ".") or key.startswith(name + ".")}
        if len(found) != 1:
            raise UserError(f"accelerate puts layer {name!r} on {len(found)} devices {sorted(found)}, not one")
        owners.append(found.pop() if nbytes or not owners else owners[-1])
    if owners != sorted(owners):
        raise UserError(f"accelerate's device map goes back to an earlier device along the layers "
                        f"(devices {owners}): it is not one chain of stages")
    return [0, *(i for i in range(1, len(owners)) if owners[i] != owners[i - 1]), len(owners)]


def _memory(devices: int, max_memory_bytes) -> dict[int, float]:
    """max_memory for accelerate: {device index: bytes}."""
    if max_memory_bytes is None:
        return _unbounded(devices)
    if isinstance(max_memory_bytes, (int, float)):
        return {d: max_memory_bytes for d in range(devices)}
    if len(max_memory_bytes) != devices:
        raise UserError(f"need one memory figure per device ({len(max_memory_bytes)} != {devices})")
    return dict(enumerate(max_memory_bytes))


def _unbounded(devices: int) -> dict[int, float]:
    return {d: float("inf") for d in range(devices)}


def _gpu_memory(devices: Sequence[torch.device]) -> dict[int, int]:
    """accelerate's default for each GPU, its free memory (accelerate.utils.get_max_memory), within this
    process's share where the worker capped it (torch.cuda.set_per_process_memory_fraction; a torch that cannot
    report the share leaves the free memory alone)."""
    share = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    memory = {}
    for i, device in enumerate(devices):
        free, total = torch.cuda.mem_get_info(device)
        memory[i] = int(min(free, total * share(device))) if share is not None else free
    return memory


@contextlib.contextmanager
def _quiet_accelerate(name: str):
    """Only errors from accelerate's logger `name`: its warnings about CPU stand-ins for GPUs (devices
    "not available", modules "offloaded to the cpu") are not news here."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
