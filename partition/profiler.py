"""Measure a model segment by segment on one device at one micro-batch size.

Any ``nn.Module`` is profiled the same way, the zoo's and the user's: the model is captured as a graph
with partition/graph.py (torch.export, as torch.distributed.pipelining does) at one module depth, its
*granularity*, and cut before every candidate module; each piece, a *segment*, is what the finest
pipeline would run as a stage, and what the planner balances. The zoo's models are ``nn.Sequential`` of
their designed layers and use granularity 1, so there a segment is one of those layers. The graph is
captured with its batch dimension dynamic where torch.export allows it.

One capture serves every micro-batch size (`Captures`): the graph is exported once with a dynamic batch
dimension, and each size runs the same stage modules on inputs recorded at that size. Where torch.export
refuses a dynamic batch (a shape the model fixes), each size is captured on its own, with a note.

The planner balances what this measures, so it measures what a pipeline stage really does: each segment
runs forward and backward in training mode on a micro-batch of the size the pipeline will use (its time
per sample depends on it), on the inputs it received when the captured graph ran once, after warm-up, as
the mean of several runs back to back between two synchronisations (as stages follow one another in a
step), each run timed on its own so that the figure keeps its spread over them (profile.relative_spread).
A float input that another segment produced needs a gradient, as torch's runtime gives a received
activation one; a model input (images, token ids, a mask) needs none. Backward starts from ones for
every float output that requires a gradient. The backward is also split into I (input gradient) and W
(weight gradient) as zero-bubble schedules run it. A segment's output bytes are those of every tensor that
crosses the cut after it (skip connections and extra model inputs included), so they price the cut.

Compiled (`Training.compile`), each segment is compiled as the strategies compile a stage
(`nn.Module.compile`), for this size alone (torch._dynamo is reset first: a stage runs one size, static),
and so is the whole step's model; what the first run of each costs beyond the next is its compile time
(`Profile.compile_s`), and the timed runs follow it.

The model is left as it was found: same device, mode (of every submodule), parameter objects, buffers
(BatchNorm's running statistics), gradients and ``forward`` methods (pipebench/snapshot.py module_state;
compiled for the whole step, then eager again).
"""
from __future__ import annotations

import gc
import platform
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch

from pipebench.errors import UserError, first_line
from pipebench.hardware.cpu import SpeedGauge
from pipebench.partition.graph import Segment, capture, segments
from pipebench.partition.graph_errors import CaptureError, SplitError
from pipebench.partition.plan_text import model_label
from pipebench.partition.profile import LayerProfile, Profile, relative_spread
from pipebench.snapshot import module_state
from pipebench.training import Training, autocast, compile_module, make_optimizer

__all__ = ["profile_model", "profile_sizes", "device_name", "Captures"]


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
    training: Training = Training(),
    captures: "Captures | None" = None,
    gauge: "SpeedGauge | None" = None,
) -> Profile:
    """Profile every segment of `model` on `device` with micro-batches of `micro_batch` samples, in the
    training's precision (bf16: under autocast, as the trainers run) and, for the whole step, with its
    optimizer.

    model: has .module (the nn.Module), .make_batch(batch_size, seed=0, device=...) -> (inputs,
    targets) with inputs a tensor or a tuple of forward's positional args, .name, .flavour, .config and
    .granularity. granularity: module depth of the cuts (see partition/graph.py); None takes
    model.granularity, and None there takes graph.py's default.
    batch: the global batch the plan is for (recorded; defaults to micro_batch).
    progress(i, n, segment_name) is called before each segment.
    captures: the capture shared by every size of one model (Captures); None: captured here, for this size.
    gauge: on CPU stand-ins, the machine's speed (hardware/cpu.py SpeedGauge), read around each segment:
    their times are rescaled to the machine's unloaded speed (SpeedGauge.rescale). None: as timed. With a
    gauge, the whole step is the fastest of those timed over hardware/probes.py drift_seconds() (_whole_step).
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if repeats < 1 or warmup < 0:
        raise UserError(f"need repeats >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    module = model.module
    if granularity is None:
        granularity = model.granularity
    if training.compile is not None:  # this size's compilations only, each static as a stage's
        from torch import _dynamo

        _dynamo.reset()
    compile_s = 0.0
    restore = module_state(module, values=False)
    try:
        module.to(device)
        module.train()
        args = _inputs(model, micro_batch, device)
        first = args[0]
        # Each segment receives what it would in the trainers' step: under bf16 autocast a convolution's
        # output is bf16, and what the next segment saves of it is half of fp32's.
        run_in = lambda: autocast(training, device.type)  # noqa: E731
        captured = (captures.at(module, args, granularity, run_in, lambda n: _inputs(model, n, device))
                    if captures is not None
                    else capture(module, args, granularity=granularity, run_in=run_in))
        segs = segments(captured)
        clock = _Clock(device)
        param_storages = {p.untyped_storage().data_ptr()
                          for m in (module, *(s.module for s in segs)) for p in m.parameters()}
        layers = []
        measured_all = []
        for i, segment in enumerate(segs):
            if progress:
                progress(i, len(segs), segment.begins_at)
            # An autocast context per segment, as a trainer's step holds one: the weights' bf16 copies are
            # made once per context and kept (see _profile_segment), and freed before the next segment.
            before = gauge.read() if gauge is not None else None
            compile_module(segment.module, training)
            with autocast(training, device.type):
                measured = _profile_segment(segment, clock, repeats, warmup, param_storages,
                                            compiled=training.compile is not None)
            compile_s += measured.pop("compile_s")
            if gauge is not None:
                measured = _at_speed(measured, gauge.rescale(before, gauge.read()))
            measured_all.append(measured)
        handed = [(m.pop("saved_output_bytes"), m.pop("saved_input_bytes")) for m in measured_all]
        for i, (segment, measured) in enumerate(zip(segs, measured_all)):
            # Kept by both the previous segment (its output) and this one (its input): one tensor.
            shared = min(handed[i - 1][0], handed[i][1]) if i else 0
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
                shared_bytes=shared,
                **measured,
            ))
        depth = captured.granularity
        del captured, segs  # the stages hold copies of replicated parameters
        # The whole batch on one device: time one whole step too, which calibrates every prediction.
        whole, whole_spread, whole_peak = None, 0.0, None
        # On CPU stand-ins it is timed for as long as the machine's drift is watched, and its fastest step
        # is the figure: already at the machine's unloaded speed, so the gauge does not rescale it.
        if micro_batch == (batch or micro_batch) and hasattr(model, "loss_fn"):
            from pipebench.hardware.probes import drift_seconds

            whole, whole_spread, whole_peak, whole_compile_s = _whole_step(
                model, module, device, micro_batch, repeats, warmup, training,
                seconds=drift_seconds() if gauge else 0.0)
            compile_s += whole_compile_s
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
        whole_step_ms=whole,
        whole_step_peak_bytes=whole_peak,
        whole_step_spread=whole_spread,
        training=Training(training.precision, training.optimizer, compile=training.compile),
        compile_s=compile_s if training.compile is not None else None,
    )


def _profile_segment(segment: Segment, clock: "_Clock", repeats, warmup, param_storages, compiled: bool = False) -> dict:
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

        compile_s = max(0.0, _wall(once, clock.device) - _wall(once, clock.device))
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
        real step, each run timed twice over (see `_Clock`): the CPU's launch time and the device's run
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
                 _split_backward(segment, forward, fresh_inputs, grad_inputs, grads, clock, repeats, warmup)
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


def _at_speed(figures: dict, factor: float) -> dict:
    """A segment's figures with every time (`*_ms`) multiplied by `factor` (SpeedGauge.rescale)."""
    return {k: v * factor if k.endswith("_ms") and v is not None else v for k, v in figures.items()}


def _wall(fn: Callable[[], Any], device: torch.device) -> float:
    """Seconds `fn` takes, the device synchronised before and after."""
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _whole_step(model, module, device, micro_batch, repeats, warmup, training: Training,
                seconds: float = 0.0) -> tuple[float | None, float, int | None, float]:
    """(ms, spread, peak bytes, compile seconds) of one whole training step of the model as the single-device trainer runs
    it: forward, loss, backward under the precision's autocast, and the training's optimizer update (lr 0,
    so no weight changes; AdamW's states are zero-initialised and dropped after), synchronised, the median
    of `repeats` after `warmup` and their relative_spread; (None, 0, None) when it does not fit.
    seconds > 0 (CPU stand-ins): steps are timed until that long has passed too, and the time is their
    fastest, as the run's step it is judged against (Row.step_ms_best). A shared host's bursts of load last
    0.2-1.5 s: a median of 3 steps taken inside one had made ResNet-101 tiny's single 57-62 ms in one
    profile and 39 in the next, for a fastest step of 36-38 measured in every run. The time
    holds what the segments leave out: the loss, the update, and what a long step costs beyond short timed
    runs. The peak (GPUs only, else None) is the step's allocated bytes at their highest, the model's own
    included and whatever the profiling left allocated excluded: what the trainer's peak reads, which
    holds the backward's transient buffers and the convolutions' workspaces that the per-layer figures do
    not. Compiled (training.compile), the model is compiled as the single trainer compiles it, for the
    step alone; the first step's time beyond the median is the compile seconds (0.0 eager)."""
    inputs, targets = model.make_batch(micro_batch, seed=0, device=device)
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = make_optimizer(params, training, lr=0.0) if params else None
    on_gpu = device.type == "cuda"
    if on_gpu:
        own = sum(t.untyped_storage().nbytes() for t in [*module.parameters(), *module.buffers()]
                  if t.device.type == "cuda")
        batch_bytes = sum(t.untyped_storage().nbytes() for t in [*args, targets]
                          if isinstance(t, torch.Tensor) and t.device.type == "cuda")
        elsewhere = torch.cuda.memory_allocated(device) - own - batch_bytes  # not the model's: left by profiling

    def step() -> None:
        with autocast(training, device.type):
            loss = model.loss_fn(module(*args), targets)
            loss.backward()
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    compiled = training.compile is not None
    first_s = 0.0
    try:
        times = []
        if compiled:
            compile_module(module, training)
            first_s = _wall(step, device)  # compiles
        for _ in range(warmup):
            step()
        if on_gpu:  # the steady state's peak, as the worker measures it
            torch.cuda.reset_peak_memory_stats(device)
        end = time.perf_counter() + seconds
        while len(times) < repeats or time.perf_counter() < end:
            _sync(device)
            start = time.perf_counter()
            step()
            _sync(device)
            times.append(time.perf_counter() - start)
        peak = max(torch.cuda.max_memory_allocated(device) - elsewhere, 0) if on_gpu else None
    except RuntimeError:  # out of memory: the whole batch does not fit on one device
        return None, 0.0, None, 0.0
    finally:
        if compiled:
            module._compiled_call_impl = None  # eager again, as nn.Module.__init__ leaves it
        for p in params:
            p.grad = None
        del optimizer  # AdamW's states
        if on_gpu:
            torch.cuda.empty_cache()
    figure = min(times) if seconds > 0 else sorted(times)[len(times) // 2]
    return figure * 1e3, relative_spread(times), peak, max(0.0, first_s - figure) if compiled else 0.0


def _split_backward(segment, forward, fresh_inputs, grad_inputs, grads, clock, repeats,
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


@dataclass(frozen=True)
class Span:
    """Seconds some work took on the CPU (until its last launch returned) and on the device."""

    cpu_s: float
    device_s: float

    @staticmethod
    def mean(spans: "list[Span]") -> "Span":
        return Span(sum(s.cpu_s for s in spans) / len(spans), sum(s.device_s for s in spans) / len(spans))

    @staticmethod
    def spread(spans: "list[Span]") -> float:
        """The runs' relative_spread on the clock that took longer, the device's or the CPU's: a stage costs
        the larger sum, so the other clock's noise is hidden behind it."""
        mean = Span.mean(spans)
        return relative_spread([s.cpu_s if mean.cpu_s > mean.device_s else s.device_s for s in spans])

    def figures(self, what: str) -> dict[str, float | None]:
        """LayerProfile's fields: `<what>_ms`, the device's time, and `<what>_cpu_ms`, the CPU's, which
        only a device that runs asynchronously has (on the CPU both are one time: None)."""
        return {f"{what}_ms": self.device_s * 1e3, f"{what}_cpu_ms": self.cpu_s * 1e3 if self.cpu_s != self.device_s else None}


class _Clock:
    """Times work two ways at once. The CPU's time runs until the work's last launch returns. The device's
    runs between two CUDA events around the work, with the stream first held by a sleep kernel a little
    longer than the CPU took to launch the same work last time (each timed run follows warm-ups of the same
    work), so that the device finds it all queued and runs it back to back: its pure run time, even where
    the CPU is the slower (which a synchronised wall clock would report instead). On the CPU both are the
    wall time."""

    MAX_HOLD_MS = 200.0

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.last_cpu_ms: dict[str, float] = {}
        self.cycles_per_ms = _sleep_cycles_per_ms(device) if self.cuda else 0.0

    def each(self, fns: "list[Callable[[], Any]]", what: str) -> list[Span]:
        """Run the fns back to back, each timed; `what` names the work, whose last CPU time sets the next
        hold. On a GPU an event between two runs splits the device's time without a synchronisation."""
        _sync(self.device)
        if not self.cuda:
            stamps = [time.perf_counter()]
            for fn in fns:
                fn()
                stamps.append(time.perf_counter())
            return [Span(b - a, b - a) for a, b in zip(stamps, stamps[1:])]
        events = [torch.cuda.Event(enable_timing=True) for _ in range(len(fns) + 1)]
        hold_ms = min(1.5 * self.last_cpu_ms.get(what, 10.0) + 1.0, self.MAX_HOLD_MS)
        torch.cuda._sleep(int(hold_ms * self.cycles_per_ms))
        events[0].record()
        stamps = [time.perf_counter()]
        for fn, event in zip(fns, events[1:]):
            fn()
            stamps.append(time.perf_counter())
            event.record()
        _sync(self.device)
        self.last_cpu_ms[what] = (stamps[-1] - stamps[0]) * 1e3
        return [Span(stamps[i + 1] - stamps[i], events[i].elapsed_time(events[i + 1]) / 1e3) for i in range(len(fns))]


def _sleep_cycles_per_ms(device: torch.device) -> float:
    """Clock cycles of torch.cuda._sleep per ms on `device`, timed once."""
    cycles = 10_000_000
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(cycles)  # warm-up
    begin.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize(device)
    return cycles / max(begin.elapsed_time(end), 1e-3)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class Captures:
    """One capture of a model for every micro-batch size: exported once with a dynamic batch dimension,
    then recorded at each size (graph.Captured.at). Where torch.export refuses a dynamic batch, or the
    graph fails at a size where a capture of its own runs, every later size is captured on its own, and
    `note` says so once. `exports` counts the exports made (what the sharing saves)."""

    def __init__(self, note: Callable[[str], None] | None = None):
        self.note = note or (lambda line: None)
        self.dynamic: Any = None
        self.refused = False
        self.exports = 0

    def at(self, module, args: tuple, granularity, run_in, example: Callable[[int], tuple]):
        """The capture recorded at `args`; example(n): the model's inputs for n samples (torch.export
        fixes a dimension of size 1, so the dynamic graph is exported at 2 samples or more)."""
        if not self.refused:
            try:
                if self.dynamic is None:
                    self.exports += 1
                    sample = args if _batch_size(args) != 1 else example(2)
                    self.dynamic = capture(module, sample, granularity=granularity, run_in=run_in, dynamic_batch=True)
                return self.dynamic.at(args)
            except (CaptureError, SplitError, RuntimeError, ValueError) as exc:
                alone = self._alone(module, args, granularity, run_in)  # the size's own error, if it has one
                self.refused = True
                self.note(f"  one capture per micro-batch size: torch.export refuses a dynamic batch for "
                          f"{type(module).__name__} ({first_line(exc.__cause__ or exc)[:160]})")
                return alone
        return self._alone(module, args, granularity, run_in)

    def _alone(self, module, args, granularity, run_in):
        self.exports += 1
        return capture(module, args, granularity=granularity, run_in=run_in)


def _batch_size(args: tuple) -> int | None:
    first = next((a for a in args if isinstance(a, torch.Tensor) and a.dim()), None)
    return first.shape[0] if first is not None else None


def _inputs(model, size: int, device: torch.device) -> tuple:
    """The model's forward arguments for a batch of `size` samples (its seeded batch maker)."""
    inputs, _ = model.make_batch(size, seed=0, device=device)
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def profile_sizes(
    model: Any,
    device: torch.device | str,
    batch: int,
    counts: list[int],
    *,
    repeats: int,
    warmup: int,
    note: Callable[[str], None] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    granularity: int | None = None,
    training: Training = Training(),
    already: int = 0,
    captures: Captures | None = None,
) -> list[Profile]:
    """Profile `model` once per micro-batch count in `counts` (micro-batches of batch // m samples).

    A size that fails (out of memory, BatchNorm over one value, ...) is skipped with a note; UserError
    when the only size asked for fails, or when none works; `already`: how many other sizes the caller
    has (from the profile cache), which count as working ones. note(line) receives what is worth telling
    (sizes, skips, times); progress(done, total, what) hears each segment as it starts, counted over
    every size (a progress bar).
    granularity: as for profile_model. A model that torch.export cannot capture is a UserError at once.
    captures: the model's one capture, shared with other calls for the same model (None: one for these
    sizes)."""
    say = note or (lambda line: None)
    captures = captures if captures is not None else Captures(say)
    device = torch.device(device)
    gauge = SpeedGauge() if device.type == "cpu" else None
    profiles = []
    last_error = ""
    started = time.perf_counter()
    say(f"profiling {model_label(model.name, model.flavour)} on {device} at "
        f"{len(counts)} micro-batch size(s) for batch {batch}, {training.precision}"
        + (f", compiled {training.compile}" if training.compile is not None else ""))
    # Smallest micro-batches first: if a large one runs out of memory, the small ones are already measured.
    for k, m in enumerate(sorted(counts, reverse=True), 1):
        size = batch // m
        t0 = time.perf_counter()

        def layer_progress(i, n, name, size=size, k=k):
            progress((k - 1) * n + i, len(counts) * n, f"micro-batch {size} ({k}/{len(counts)}): {name}")

        try:
            profiles.append(profile_model(model, device, size, batch=batch, repeats=repeats, warmup=warmup,
                                          progress=layer_progress if progress else None,
                                          granularity=granularity, training=training, captures=captures,
                                          gauge=gauge))
        except (CaptureError, SplitError) as exc:  # the same at every size
            raise UserError(f"cannot profile {model.name}: {exc}") from None
        except (RuntimeError, ValueError) as exc:  # out of memory, BatchNorm over one value, ...
            last_error = f"micro-batch {size}: {first_line(exc)}"
            if len(counts) + already == 1:
                raise UserError(f"cannot run {model.name} with micro-batches of {size}: {first_line(exc)}") from None
            say(f"  micro-batch {size} ({k} of {len(counts)}): skipped, {first_line(exc)}")
            del exc
            gc.collect()  # what the failed size held (its frames, through the traceback) before the next one
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        say(f"  micro-batch {size} ({k} of {len(counts)}): {time.perf_counter() - t0:.1f} s")
    if not profiles and not already:
        raise UserError(f"{model.name} runs at none of the micro-batch sizes tried; the last: {last_error}")
    if gauge is not None and gauge.factors:
        say(f"  the machine's speed moved while profiling: every figure taken to its unloaded speed "
            f"(x{min(gauge.factors):.2f} to x{max(gauge.factors):.2f}; hardware/cpu.py SpeedGauge)")
    say(f"profiled in {time.perf_counter() - started:.1f} s")
    return sorted(profiles, key=lambda p: counts.index(p.micro_batches))  # in the order asked
