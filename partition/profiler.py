"""Measure each layer of a LayeredModel on one device at one micro-batch size.

The planner balances what this measures, so it measures what a pipeline stage really does: each layer
runs forward and backward in training mode on a micro-batch of the size the pipeline will use (a layer's
time per sample depends on it), after warm-up, as the mean of several runs back to back between two
synchronisations (as layers follow one another in a step). The model is left as it was found: same device, same parameter objects,
same buffers (BatchNorm's running statistics), same gradients.
"""
from __future__ import annotations

import platform
import time
import warnings
from typing import Callable

import torch

from models.base import LayeredModel
from partition.profile import LayerProfile, Profile

__all__ = ["profile_model", "device_name", "set_fast_math"]


def set_fast_math() -> None:
    """TF32 matrix products and cuDNN autotuning, as the figures in DESIGN.md were measured."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True


def device_name(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or device.type


def profile_model(
    model: LayeredModel,
    device: torch.device | str,
    micro_batch: int,
    *,
    batch: int | None = None,
    repeats: int = 5,
    warmup: int = 2,
    progress: Callable[[int, int, str], None] | None = None,
) -> Profile:
    """Profile every layer of `model` on `device` with micro-batches of `micro_batch` samples.

    batch: the global batch the plan is for (recorded; defaults to micro_batch).
    progress(i, n, layer_name) is called before each layer.
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    restore = _snapshot(model)
    try:
        model.layers.to(device)
        model.layers.train()
        inputs, _ = model.make_batch(micro_batch, seed=0, device=device)
        input_shape, input_dtype = list(inputs.shape), _dtype_name(inputs.dtype)
        param_storages = {p.untyped_storage().data_ptr() for p in model.layers.parameters()}
        layers = []
        n = len(model)
        for i, (name, layer) in enumerate(model.layers.named_children()):
            if progress:
                progress(i, n, name)
            measured, inputs = _profile_layer(layer, inputs, device, repeats, warmup, param_storages)
            layers.append(LayerProfile(name=name, **measured))
    finally:
        restore()
    return Profile(
        model=model.name,
        flavour=model.flavour,
        config=dict(model.config),
        device=str(device),
        device_name=device_name(device),
        torch_version=torch.__version__,
        batch=batch or micro_batch,
        micro_batch=micro_batch,
        repeats=repeats,
        warmup=warmup,
        input_shape=input_shape,
        input_dtype=input_dtype,
        layers=layers,
    )


def _profile_layer(layer, inputs, device, repeats, warmup, param_storages):
    """Time one layer's forward and backward; return its figures and its (detached) output."""
    needs_grad = inputs.is_floating_point()
    source = inputs.detach()

    def fresh_input():
        # Each run gets a leaf of its own, so that its input gradient is stored, not added to an earlier
        # run's (a pass over the activation that a real step does not make), seen through a clone so
        # that in-place layers (ReLU(inplace=True)) may write to it.
        return source.clone().requires_grad_().clone() if needs_grad else source

    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in param_storages:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = layer(fresh_input())
    if not isinstance(output, torch.Tensor):
        raise TypeError(f"layer {type(layer).__name__} returned {type(output).__name__}, not one tensor")
    grad = torch.ones_like(output) if output.requires_grad else None

    def runs() -> tuple[float, float]:
        """Seconds per forward and per backward, `repeats` of each back to back between two
        synchronisations, as layers follow one another in a real step: the CPU queues the next launches
        while the GPU works, so a layer costs what the slower of the two needs. (Synchronising around
        every run also counted the idle GPU while the CPU launched, which a real step hides; it made
        small micro-batches look up to 45% slower than they ran.) Each backward frees its graph."""
        xs = [fresh_input() for _ in range(repeats)]
        outs: list[torch.Tensor] = []
        forward_s = _timed(lambda: outs.extend(layer(x) for x in xs), device)[1]
        backward_s = 0.0
        if grad is not None:
            backward_s = _timed(lambda: [torch.autograd.backward(out, grad) for out in outs], device)[1]
        return forward_s / repeats, backward_s / repeats

    for _ in range(warmup):  # also leaves the allocator holding the blocks that the timed runs use
        runs()
    forward_s, backward_s = runs()
    split = None
    if grad is not None:
        # A layer whose input needs no gradient (token ids) has no input gradient: its backward is all W.
        split = (_split_backward_ms(layer, fresh_input, grad, device, repeats, warmup) if needs_grad
                 else (0.0, backward_s * 1e3))
    params = sum(p.numel() for p in layer.parameters())
    figures = dict(
        params=params,
        param_bytes=sum(p.numel() * p.element_size() for p in layer.parameters()),
        forward_ms=forward_s * 1e3,
        backward_ms=backward_s * 1e3,
        output_bytes=output.numel() * output.element_size(),
        output_shape=list(output.shape),
        output_dtype=_dtype_name(output.dtype),
        saved_bytes=sum(saved.values()),
        backward_input_ms=split[0] if split else None,
        backward_weight_ms=split[1] if split else None,
    )
    for p in layer.parameters():
        p.grad = None
    return figures, output.detach()


def _split_backward_ms(layer, fresh_input, grad, device, repeats, warmup) -> tuple[float, float] | None:
    """The layer's backward run as zero-bubble schedules run it: ms of I (input gradient) and of W
    (weight gradient), with torch.distributed.pipelining's own functions; None if torch lacks them.

    Each I consumes its forward's graph, so `repeats` forwards run first (untimed); then the I passes
    and the W passes are timed back to back, like the layer's other figures."""
    try:
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight
    except ImportError:  # a private module: absent or renamed in some torch version
        return None
    params = [p for p in layer.parameters() if p.requires_grad]

    def forward(x):
        out = layer(x)
        # stage_backward_input detaches the output in place, which a view (a flatten) does not allow;
        # a real stage's output is a fresh tensor received or returned, so copy views.
        return out.clone() if out._is_view() else out

    def run(n: int) -> tuple[float, float]:
        pairs = [(x, forward(x)) for x in (fresh_input() for _ in range(n))]
        groups = []
        _, input_s = _timed(lambda: [groups.append(stage_backward_input([out], [grad], [x], iter(params))[1])
                                     for x, out in pairs], device)
        _, weight_s = _timed(lambda: [stage_backward_weight(iter(params), g) for g in groups], device)
        return input_s / n, weight_s / n

    with warnings.catch_warnings():  # the input is a clone (see fresh_input), whose .grad torch reads
        warnings.filterwarnings("ignore", message="The .grad attribute of a Tensor that is not a leaf")
        try:
            if warmup:
                run(warmup)
            input_s, weight_s = run(repeats)
        except (RuntimeError, TypeError) as exc:  # a private API: fall back to the assumed split, say why
            cause = exc.__cause__ or exc
            warnings.warn(f"{type(layer).__name__}: I and W not measured, the simulator will assume a split "
                          f"({type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''})",
                          RuntimeWarning, stacklevel=2)
            return None
    for p in layer.parameters():
        p.grad = None
    return input_s * 1e3, weight_s * 1e3


def _timed(fn, device):
    _sync(device)
    start = time.perf_counter()
    result = fn()
    _sync(device)
    return result, time.perf_counter() - start


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _snapshot(model: LayeredModel):
    """Remember what profiling changes (device, mode, buffers, gradients); return a function restoring it."""
    module = model.layers
    first = next(module.parameters(), None)
    home = first.device if first is not None else torch.device("cpu")
    training = module.training
    buffers = {name: b.detach().clone() for name, b in module.named_buffers()}
    grads = {name: (None if p.grad is None else p.grad.detach().clone()) for name, p in module.named_parameters()}

    def restore():
        module.to(home)
        module.train(training)
        with torch.no_grad():
            for name, b in module.named_buffers():
                b.copy_(buffers[name].to(b.device))
        for name, p in module.named_parameters():
            g = grads[name]
            p.grad = None if g is None else g.to(p.device)

    return restore
