"""One segment of the captured graph timed as a pipeline stage runs it: forward and backward (and the
backward's I and W, as zero-bubble schedules split it) back to back after warm-up, on the inputs it
received when the graph ran once; and the bytes its forward saves for the backward (its own, the weights'
autocast copies, and what it shares with the segment before), which the memory model needs."""
from __future__ import annotations

import warnings

import torch

from pipebench.errors import first_line
from pipebench.partition.profiling.clock import Clock, Span, wall
from pipebench.partition.capture.graph import Segment

__all__ = ["profile_segment"]


def profile_segment(segment: Segment, clock: Clock, repeats, warmup, param_storages, compiled: bool = False) -> dict:
    """Time one segment's forward and backward (and its backward's I and W); return its figures.
    compiled: its module compiles at its first call; that call's forward and backward, beyond the next
    one's, is its compile_s (0.0 eager)."""
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

    def saved_by(xs) -> tuple[dict[int, int], list[torch.Tensor]]:
        """What the forward saves for its backward, bytes by storage, and its outputs."""
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor):
            storage = t.untyped_storage()
            if storage.data_ptr() not in param_storages:
                seen[storage.data_ptr()] = storage.nbytes()
            # A detached alias, not the tensor itself: an op that saves its own output (attention does)
            # would otherwise hold that output through its own graph node, a cycle through autograd that
            # the garbage collector cannot see, and every attention segment's forward would stay alive.
            return t.detach()

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            return seen, forward(xs)

    compile_s = 0.0
    if compiled:  # compiled here, before anything else runs it
        def once() -> None:
            outs = forward(fresh_inputs())
            if outs:
                torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])

        compile_s = max(0.0, wall(once, clock.device) - wall(once, clock.device))
        for p in module.parameters():
            p.grad = None
    # Two forwards, the first kept alive: what both save is kept once per step (autocast's bf16 copies of
    # the weights), the rest is each micro-batch's own.
    first = fresh_inputs()
    saved, outputs = saved_by(first)
    again, _ = saved_by(fresh_inputs())
    cast = {ptr: size for ptr, size in saved.items() if ptr in again}
    saved = {ptr: size for ptr, size in saved.items() if ptr not in cast}
    # What it saves of its input from the previous segment, and of its own outputs: where the previous
    # segment saves what it hands over and this one saves it again, a step holds one tensor (kept_bytes).
    from_previous = {x.untyped_storage().data_ptr() for x, src, need in zip(first, sources, needs)
                     if need and src == segment.index - 1}
    own_outputs = {t.untyped_storage().data_ptr() for t in outputs}
    saved_input = sum(size for ptr, size in saved.items() if ptr in from_previous)
    saved_output = sum(size for ptr, size in saved.items() if ptr in own_outputs)
    grads = [torch.ones_like(t) for t in outputs]
    del outputs, _

    def runs() -> tuple[list[Span], list[Span]]:
        """Per forward and per backward, `repeats` of each back to back, as stages follow one another in a
        real step, each run timed twice over (see `Clock`): the CPU's launch time and the device's run
        time. A stage then costs the larger of its segments' CPU sum and device sum: the CPU queues the next
        launches while the device works, so short segments cost their launches, not their kernels. (A sum
        of per-segment maxima overstated ResNet-101's zero-bubble stages by 20% on an H200.) Each backward
        frees its graph."""
        outs: list[list[torch.Tensor]] = []
        forward_t = clock.each([lambda xs=xs: outs.append(forward(xs)) for xs in
                                [fresh_inputs() for _ in range(repeats)]], "forward")
        backward_t = [Span(0.0, 0.0)] * repeats
        if grads:
            backward_t = clock.each([lambda out=out: torch.autograd.backward(out, grads) for out in outs], "backward")
        return forward_t, backward_t

    for _ in range(warmup):  # also leaves the allocator holding the blocks that the timed runs use
        runs()
    forward_t, backward_t = runs()
    split = None
    if grads:
        # A segment whose inputs need no gradient (token ids, the images) has no input gradient: its
        # backward is all W.
        # Compiled, the backward is one graph that gives both gradients (AOTAutograd's): not split here.
        split = (None if compiled else
                 split_backward(segment, forward, fresh_inputs, grad_inputs, grads, clock, repeats, warmup)
                 if any(needs) else (Span(0.0, 0.0), Span.mean(backward_t)))
    for p in module.parameters():
        p.grad = None
    figures = dict(saved_bytes=sum(saved.values()), cast_bytes=sum(cast.values()), saved_input_bytes=saved_input,
                   saved_output_bytes=saved_output, **Span.mean(forward_t).figures("forward"),
                   **Span.mean(backward_t).figures("backward"), forward_spread=Span.spread(forward_t),
                   backward_spread=Span.spread(backward_t), compile_s=compile_s)
    if split:
        figures.update(**split[0].figures("backward_input"), **split[1].figures("backward_weight"))
    return figures


def split_backward(segment, forward, fresh_inputs, grad_inputs, grads, clock, repeats,
                    warmup) -> tuple[Span, Span] | None:
    """The segment's backward run as zero-bubble schedules run it: I (input gradient) and W (weight
    gradient), with torch.distributed.pipelining's own functions; None if torch lacks them.

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

    def run(n: int) -> tuple[Span, Span]:
        pairs = [(grad_inputs(xs), stage_forward(xs)) for xs in (fresh_inputs() for _ in range(n))]
        groups = []
        input_t = clock.each([lambda xs=xs, outs=outs: groups.append(
            stage_backward_input(outs, grads, xs, iter(params))[1]) for xs, outs in pairs], "input")
        weight_t = clock.each([lambda g=g: stage_backward_weight(iter(params), g) for g in groups], "weight")
        return Span.mean(input_t), Span.mean(weight_t)

    with warnings.catch_warnings():  # the inputs are clones (see fresh_inputs), whose .grad torch reads
        warnings.filterwarnings("ignore", message="The .grad attribute of a Tensor that is not a leaf")
        try:
            if warmup:
                run(warmup)
            input_t, weight_t = run(repeats)
        except (RuntimeError, TypeError) as exc:  # a private API: fall back to the assumed split, say why
            cause = exc.__cause__ or exc
            warnings.warn(f"segment {segment.begins_at}: I and W not measured, the simulator will assume a "
                          f"split ({type(cause).__name__}: {first_line(cause) if str(cause).strip() else ''})",
                          RuntimeWarning, stacklevel=2)
            return None
    for p in segment.module.parameters():
        p.grad = None
    return input_t, weight_t
