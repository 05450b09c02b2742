"""Measure a model segment by segment on one device at one micro-batch size.

Any ``nn.Module`` is profiled the same way, the zoo's and the user's: the model is captured as a graph
with partition/graph.py (torch.export, as torch.distributed.pipelining does) at one module depth, its
*granularity*, and cut before every candidate module; each piece, a *segment*, is what the finest
pipeline would run as a stage, and what the planner balances. The zoo's models are ``nn.Sequential`` of
their designed layers and use granularity 1, so there a segment is one of those layers. The graph is
specialised to the example's shapes (a ``.view(batch, -1)`` keeps the batch size), so every micro-batch
size is captured anew.

The planner balances what this measures, so it measures what a pipeline stage really does: each segment
runs forward and backward in training mode on a micro-batch of the size the pipeline will use (its time
per sample depends on it), on the inputs it received when the captured graph ran once, after warm-up, as
the mean of several runs back to back between two synchronisations (as stages follow one another in a
step). A float input that another segment produced needs a gradient, as torch's runtime gives a received
activation one; a model input (images, token ids, a mask) needs none. Backward starts from ones for
every float output that requires a gradient. The backward is also split into I (input gradient) and W
(weight gradient) as zero-bubble schedules run it. A segment's output bytes are those of every tensor that
crosses the cut after it (skip connections and extra model inputs included), so they price the cut.

The model is left as it was found: same device, mode, parameter objects, buffers (BatchNorm's running
statistics), gradients and ``forward`` methods.
"""
from __future__ import annotations

import platform
import time
import warnings
from typing import Any, Callable

import torch

from pipebench.errors import UserError, first_line
from pipebench.partition.graph import CaptureError, Segment, capture, segments
from pipebench.partition.profile import LayerProfile, Profile

__all__ = ["profile_model", "profile_sizes", "device_name", "set_fast_math"]


def set_fast_math() -> None:
    """TF32 matrix products and cuDNN autotuning, as the GPU figures in results/ were measured."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True


def device_name(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or device.type


def profile_model(
    model: Any,
    device: torch.device | str,
    micro_batch: int,
    *,
    batch: int | None = None,
    repeats: int = 5,
    warmup: int = 2,
    progress: Callable[[int, int, str], None] | None = None,
    granularity: int | None = None,
) -> Profile:
    """Profile every segment of `model` on `device` with micro-batches of `micro_batch` samples.

    model: has .module (the nn.Module), .make_batch(batch_size, seed=0, device=...) -> (inputs,
    targets) with inputs a tensor or a tuple of forward's positional args, .name, .flavour, .config and
    .granularity. granularity: module depth of the cuts (see partition/graph.py); None takes
    model.granularity, and None there takes graph.py's default.
    batch: the global batch the plan is for (recorded; defaults to micro_batch).
    progress(i, n, segment_name) is called before each segment.
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if repeats < 1 or warmup < 0:
        raise UserError(f"need repeats >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    module = model.module
    if granularity is None:
        granularity = model.granularity
    restore = _snapshot(module)
    try:
        module.to(device)
        module.train()
        inputs, _ = model.make_batch(micro_batch, seed=0, device=device)
        args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
        first = args[0]
        captured = capture(module, args, granularity=granularity)
        segs = segments(captured)
        param_storages = {p.untyped_storage().data_ptr()
                          for m in (module, *(s.module for s in segs)) for p in m.parameters()}
        layers = []
        for i, segment in enumerate(segs):
            if progress:
                progress(i, len(segs), segment.begins_at)
            measured = _profile_segment(segment, device, repeats, warmup, param_storages)
            if i < len(captured.cuts):
                crossing = [(t.bytes, t.shape, t.dtype) for t in captured.cuts[i].tensors]
            else:  # the last segment: what it returns
                crossing = [(t.bytes, t.shape, t.dtype) for t in segment.outputs]
            largest = max(crossing, key=lambda c: c[0], default=(0, (), torch.float32))
            layers.append(LayerProfile(
                name=segment.begins_at,
                params=segment.param_count,
                param_bytes=segment.param_bytes,
                output_bytes=sum(c[0] for c in crossing),
                output_shape=list(largest[1]),
                output_dtype=_dtype_name(largest[2]),
                **measured,
            ))
        depth = captured.granularity
        del captured, segs  # the stages hold copies of replicated parameters
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
        input_shape=list(first.shape),
        input_dtype=_dtype_name(first.dtype),
        layers=layers,
        granularity=depth,
    )


def _profile_segment(segment: Segment, device, repeats, warmup, param_storages) -> dict:
    """Time one segment's forward and backward (and its backward's I and W); return its figures."""
    module = segment.module
    # As torch's runtime does: a float activation received from another segment needs a gradient; a model
    # input (and an integer tensor) is passed as given.
    sources = list(segment.arg_sources) + [-1] * (len(segment.args) - len(segment.arg_sources))
    needs = [isinstance(a, torch.Tensor) and a.is_floating_point() and src >= 0
             for a, src in zip(segment.args, sources)]
    sources_ = [a.detach() if isinstance(a, torch.Tensor) else a for a in segment.args]
    kwargs = segment.kwargs

    def fresh_inputs() -> list:
        # Each run gets leaves of its own, so that its input gradients are stored, not added to an earlier
        # run's (a pass over the activation that a real step does not make), seen through a clone so that
        # an in-place op may write to them. Other tensors are cloned too (outside the timed region).
        return [a.clone().requires_grad_().clone() if need else (a.clone() if isinstance(a, torch.Tensor) else a)
                for a, need in zip(sources_, needs)]

    def grad_inputs(xs: list) -> list[torch.Tensor]:
        return [x for x, need in zip(xs, needs) if need]

    def forward(xs: list) -> list[torch.Tensor]:
        """The segment's float outputs that require a gradient (what backward starts from)."""
        out = module(*xs, **kwargs)
        flat = out if isinstance(out, (tuple, list)) else (out,)
        return [t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]

    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        storage = t.untyped_storage()
        if storage.data_ptr() not in param_storages:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        outputs = forward(fresh_inputs())
    grads = [torch.ones_like(t) for t in outputs]
    del outputs

    def runs() -> tuple[float, float]:
        """Seconds per forward and per backward, `repeats` of each back to back between two
        synchronisations, as stages follow one another in a real step: the CPU queues the next launches
        while the GPU works, so a segment costs what the slower of the two needs. (Synchronising around
        every run also counted the idle GPU while the CPU launched, which a real step hides; it made
        small micro-batches look up to 45% slower than they ran.) Each backward frees its graph."""
        xss = [fresh_inputs() for _ in range(repeats)]
        outs: list[list[torch.Tensor]] = []
        forward_s = _timed(lambda: outs.extend(forward(xs) for xs in xss), device)[1]
        backward_s = 0.0
        if grads:
            backward_s = _timed(lambda: [torch.autograd.backward(out, grads) for out in outs], device)[1]
        return forward_s / repeats, backward_s / repeats

    for _ in range(warmup):  # also leaves the allocator holding the blocks that the timed runs use
        runs()
    forward_s, backward_s = runs()
    split = None
    if grads:
        # A segment whose inputs need no gradient (token ids, the images) has no input gradient: its
        # backward is all W.
        split = (_split_backward_ms(segment, forward, fresh_inputs, grad_inputs, grads, device, repeats, warmup)
                 if any(needs) else (0.0, backward_s * 1e3))
    for p in module.parameters():
        p.grad = None
    return dict(
        forward_ms=forward_s * 1e3,
        backward_ms=backward_s * 1e3,
        saved_bytes=sum(saved.values()),
        backward_input_ms=split[0] if split else None,
        backward_weight_ms=split[1] if split else None,
    )


def _split_backward_ms(segment, forward, fresh_inputs, grad_inputs, grads, device, repeats,
                       warmup) -> tuple[float, float] | None:
    """The segment's backward run as zero-bubble schedules run it: ms of I (input gradient) and of W
    (weight gradient), with torch.distributed.pipelining's own functions; None if torch lacks them.

    Each I consumes its forward's graph, so `repeats` forwards run first (untimed); then the I passes
    and the W passes are timed back to back, like the segment's other figures."""
    try:
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight
    except ImportError:  # a private module: absent or renamed in some torch version
        return None
    params = [p for p in segment.module.parameters() if p.requires_grad]

    def stage_forward(xs):
        # stage_backward_input detaches the outputs in place, which a view (a flatten) does not allow; a
        # real stage's output is a fresh tensor sent or returned, so copy views.
        return [t.clone() if t._is_view() else t for t in forward(xs)]

    def run(n: int) -> tuple[float, float]:
        pairs = [(grad_inputs(xs), stage_forward(xs)) for xs in (fresh_inputs() for _ in range(n))]
        groups = []
        _, input_s = _timed(lambda: [groups.append(stage_backward_input(outs, grads, xs, iter(params))[1])
                                     for xs, outs in pairs], device)
        _, weight_s = _timed(lambda: [stage_backward_weight(iter(params), g) for g in groups], device)
        return input_s / n, weight_s / n

    with warnings.catch_warnings():  # the inputs are clones (see fresh_inputs), whose .grad torch reads
        warnings.filterwarnings("ignore", message="The .grad attribute of a Tensor that is not a leaf")
        try:
            if warmup:
                run(warmup)
            input_s, weight_s = run(repeats)
        except (RuntimeError, TypeError) as exc:  # a private API: fall back to the assumed split, say why
            cause = exc.__cause__ or exc
            warnings.warn(f"segment {segment.begins_at}: I and W not measured, the simulator will assume a "
                          f"split ({type(cause).__name__}: {first_line(cause) if str(cause).strip() else ''})",
                          RuntimeWarning, stacklevel=2)
            return None
    for p in segment.module.parameters():
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


def _snapshot(module: torch.nn.Module):
    """Remember what profiling changes (device, mode, buffers, gradients); return a function restoring it.
    (graph.capture restores the forward methods that pipeline() replaces.)"""
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


def profile_sizes(
    model: Any,
    device: torch.device | str,
    batch: int,
    counts: list[int],
    *,
    repeats: int,
    warmup: int,
    note: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
    granularity: int | None = None,
) -> list[Profile]:
    """Profile `model` once per micro-batch count in `counts` (micro-batches of batch // m samples).

    A size that fails (out of memory, BatchNorm over one value, ...) is skipped with a note; UserError
    when the only size asked for fails, or when none works. note(line) receives what is worth telling
    (sizes, skips, times); progress(line) the segment being measured, a line meant to be overwritten.
    granularity: as for profile_model. A model that torch.export cannot capture is a UserError at once."""
    say = note or (lambda line: None)
    device = torch.device(device)
    profiles = []
    last_error = ""
    started = time.perf_counter()
    say(f"profiling {model.name} ({model.flavour}) on {device} at "
        f"{len(counts)} micro-batch size(s) for batch {batch}")
    for k, m in enumerate(counts, 1):
        size = batch // m
        t0 = time.perf_counter()

        def layer_progress(i, n, name, size=size, k=k):
            progress(f"  [{k}/{len(counts)}] micro-batch {size}: segment {i + 1}/{n} {name}")

        try:
            profiles.append(profile_model(model, device, size, batch=batch, repeats=repeats, warmup=warmup,
                                          progress=layer_progress if progress else None,
                                          granularity=granularity))
        except CaptureError as exc:  # the same at every size
            raise UserError(f"cannot profile {model.name}: {exc}") from None
        except (RuntimeError, ValueError) as exc:  # out of memory, BatchNorm over one value, ...
            last_error = f"micro-batch {size}: {first_line(exc)}"
            if len(counts) == 1:
                raise UserError(f"cannot run {model.name} with micro-batches of {size}: {first_line(exc)}") from None
            say(f"  [{k}/{len(counts)}] micro-batch {size}: skipped, {first_line(exc)}" + " " * 30)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        say(f"  [{k}/{len(counts)}] micro-batch {size}: {time.perf_counter() - t0:.1f} s" + " " * 30)
    if not profiles:
        raise UserError(f"{model.name} runs at none of the micro-batch sizes tried; the last: {last_error}")
    say(f"profiled in {time.perf_counter() - started:.1f} s")
    return profiles
