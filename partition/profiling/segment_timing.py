"""One segment of the captured graph timed as a pipeline stage runs it: forward and backward (and the
backward's I and W, as zero-bubble schedules split it) back to back after warm-up, on the inputs it
received when the graph ran once; and the bytes its forward saves for the backward (its own, the weights'
autocast copies, and what it shares with the segment before), which the memory model needs."""
from __future__ import annotations

import warnings

import torch

from pipebench.base.errors import first_line
from pipebench.partition.profiling.clock import Clock, Span, wall
from pipebench.partition.capture.graph import Segment

__all__ = ["profile_segment"]


def profile_segment(segment: Segment, clock: Clock, repeats, warmup, param_storages, compiled: bool = False) -> dict:
    """Time one segment's forward and backward (and its backward's I and W); return its figures.
    compiled: its module compiles at its first call; that call's forward and backward, beyond the next
    one's, is its compile_s (0.0 eager)."""
    stage = _StageRun(segment)
    compile_s = _compile_seconds(stage, clock) if compiled else 0.0  # compiled here, before anything else runs it
    first = stage.fresh_inputs()
    saved, grads = _saved_bytes(stage, first, param_storages)
    for _ in range(warmup):  # also leaves the allocator holding the blocks that the timed runs use
        _timed_runs(stage, grads, clock, repeats)
    forward_t, backward_t = _timed_runs(stage, grads, clock, repeats)
    split = None
    if grads:
        # A segment whose inputs need no gradient (token ids, the images) has no input gradient: its
        # backward is all W.
        # Compiled, the backward is one graph that gives both gradients (AOTAutograd's): not split here.
        split = (None if compiled else
                 split_backward(stage, grads, clock, repeats, warmup)
                 if any(stage.needs) else (Span(0.0, 0.0), Span.mean(backward_t)))
    _clear_grads(segment.module)
    figures = dict(**saved, **Span.mean(forward_t).figures("forward"),
                   **Span.mean(backward_t).figures("backward"), forward_spread=Span.spread(forward_t),
                   backward_spread=Span.spread(backward_t), compile_s=compile_s)
    if split:
        figures.update(**split[0].figures("backward_input"), **split[1].figures("backward_weight"))
    return figures


class _StageRun:
    """One segment run as a pipeline stage runs it: on inputs of its own each time, and backward from its
    float outputs. As torch's runtime does, a float activation received from another segment needs a
    gradient; a model input (and an integer tensor) is passed as given."""

    def __init__(self, segment: Segment):
        self.segment = segment
        self.module, self.kwargs = segment.module, segment.kwargs
        # Per input, the segment that produces it (-1: a model input), and whether it needs a gradient.
        self.sources = list(segment.arg_sources) + [-1] * (len(segment.args) - len(segment.arg_sources))
        self.needs = [isinstance(a, torch.Tensor) and a.is_floating_point() and src >= 0
                      for a, src in zip(segment.args, self.sources)]
        self._given = [a.detach() if isinstance(a, torch.Tensor) else a for a in segment.args]

    def fresh_inputs(self) -> list:
        """Each run gets leaves of its own, so that its input gradients are stored, not added to an earlier
        run's (a pass over the activation that a real step does not make), seen through a clone so that
        an in-place op may write to them. Other tensors are cloned too (outside the timed region)."""
        return [a.clone().requires_grad_().clone() if need else (a.clone() if isinstance(a, torch.Tensor) else a)
                for a, need in zip(self._given, self.needs)]

    def grad_inputs(self, xs: list) -> list[torch.Tensor]:
        return [x for x, need in zip(xs, self.needs) if need]

    def forward(self, xs: list) -> list[torch.Tensor]:
        """The segment's float outputs that require a gradient (what backward starts from)."""
        out = self.module(*xs, **self.kwargs)
        flat = out if isinstance(out, (tuple, list)) else (out,)
        return [t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]

    def saved_by(self, xs: list, param_storages) -> tuple[dict[int, int], list[torch.Tensor]]:
        """What the forward on `xs` saves for its backward, bytes by storage (the parameters' own storages,
        `param_storages`, left out), and its outputs."""
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
            return seen, self.forward(xs)


def _compile_seconds(stage: _StageRun, clock: Clock) -> float:
    """What the first forward and backward of a compiled segment, which compile it, take beyond the next
    ones; the gradients they leave are cleared."""
    def once() -> None:
        outs = stage.forward(stage.fresh_inputs())
        if outs:
            torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])

    compile_s = max(0.0, wall(once, clock.device) - wall(once, clock.device))
    _clear_grads(stage.module)
    return compile_s


def _saved_bytes(stage: _StageRun, first: list, param_storages) -> tuple[dict[str, int], list[torch.Tensor]]:
    """The bytes the forward on `first` saves for its backward, as the memory model needs them, and the
    gradients every backward starts from (ones like each output). saved_bytes: each micro-batch's own;
    cast_bytes: what every forward saves alike (autocast's bf16 copies of the weights), kept once per step;
    saved_input_bytes and saved_output_bytes: of the own, the input from the previous segment and the
    segment's outputs."""
    # Two forwards, the first kept alive: what both save is kept once per step (autocast's bf16 copies of
    # the weights), the rest is each micro-batch's own.
    saved, outputs = stage.saved_by(first, param_storages)
    again, _ = stage.saved_by(stage.fresh_inputs(), param_storages)
    cast = {ptr: size for ptr, size in saved.items() if ptr in again}
    saved = {ptr: size for ptr, size in saved.items() if ptr not in cast}
    # What it saves of its input from the previous segment, and of its own outputs: where the previous
    # segment saves what it hands over and this one saves it again, a step holds one tensor (kept_bytes).
    from_previous = {x.untyped_storage().data_ptr() for x, src, need in zip(first, stage.sources, stage.needs)
                     if need and src == stage.segment.index - 1}
    own_outputs = {t.untyped_storage().data_ptr() for t in outputs}
    figures = dict(saved_bytes=sum(saved.values()), cast_bytes=sum(cast.values()),
                   saved_input_bytes=sum(size for ptr, size in saved.items() if ptr in from_previous),
                   saved_output_bytes=sum(size for ptr, size in saved.items() if ptr in own_outputs))
    return figures, [torch.ones_like(t) for t in outputs]


def _timed_runs(stage: _StageRun, grads: list[torch.Tensor], clock: Clock,
                repeats: int) -> tuple[list[Span], list[Span]]:
    """Per forward and per backward, `repeats` of each back to back, as stages follow one another in a
    real step, each run timed twice over (see `Clock`): the CPU's launch time and the device's run
    time. A stage then costs the larger of its segments' CPU sum and device sum: the CPU queues the next
    launches while the device works, so short segments cost their launches, not their kernels. (A sum
    of per-segment maxima overstated ResNet-101's zero-bubble stages by 20% on an H200.) Each backward
    frees its graph."""
    forward = stage.forward
    outs: list[list[torch.Tensor]] = []
    forward_t = clock.each([lambda xs=xs: outs.append(forward(xs)) for xs in
                            [stage.fresh_inputs() for _ in range(repeats)]], "forward")
    backward_t = [Span(0.0, 0.0)] * repeats
    if grads:
        backward_t = clock.each([lambda out=out: torch.autograd.backward(out, grads) for out in outs], "backward")
    return forward_t, backward_t


def _clear_grads(module: torch.nn.Module) -> None:
    for p in module.parameters():
        p.grad = None


def split_backward(stage: _StageRun, grads: list[torch.Tensor], clock: Clock, repeats: int,
                   warmup: int) -> tuple[Span, Span] | None:
    """The segment's backward run as zero-bubble schedules run it: I (input gradient) and W (weight
    gradient), with torch.distributed.pipelining's own functions; None if torch lacks them.

    Each I consumes its forward's graph, so `repeats` forwards run first (untimed); then the I passes
    and the W passes are timed back to back, like the segment's other figures."""
    try:
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight
    except ImportError:  # a private module: absent or renamed in some torch version
        return None
    params = [p for p in stage.module.parameters() if p.requires_grad]

    def stage_forward(xs):
        # stage_backward_input detaches the outputs in place, which a view (a flatten) does not allow; a
        # real stage's output is a fresh tensor sent or returned, so copy views.
        return [t.clone() if t._is_view() else t for t in stage.forward(xs)]

    def run(n: int) -> tuple[Span, Span]:
        pairs = [(stage.grad_inputs(xs), stage_forward(xs)) for xs in (stage.fresh_inputs() for _ in range(n))]
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
            warnings.warn(f"segment {stage.segment.begins_at}: I and W not measured, the simulator will assume a "
                          f"split ({type(cause).__name__}: {first_line(cause) if str(cause).strip() else ''})",
                          RuntimeWarning, stacklevel=2)
            return None
    _clear_grads(stage.module)
    return input_t, weight_t
