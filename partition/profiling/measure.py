"""Measure a model segment by segment on one device at one micro-batch size.

Any ``nn.Module`` is profiled the same way, the zoo's and the user's: the model is captured as a graph
with partition/capture/graph.py (torch.export, as torch.distributed.pipelining does) at one module depth, its
*granularity*, and cut before every candidate module; each piece, a *segment*, is what the finest
pipeline would run as a stage, and what the planner balances. The zoo's models are ``nn.Sequential`` of
their designed layers and use granularity 1, so there a segment is one of those layers. The graph is
captured with its batch dimension dynamic where torch.export allows it.

One capture serves every micro-batch size (`Captures`): the graph is exported once with a dynamic batch
dimension, and each size runs the same stage modules on inputs recorded at that size. Where torch.export
refuses a dynamic batch (a shape the model fixes), each size is captured on its own, with a note.

The planner balances what this measures, so it measures what a pipeline stage really does: each segment
(partition/profiling/segment_timing.py, on partition/profiling/clock.py's CPU and device clocks) runs forward and backward in training mode on a micro-batch of the size
the pipeline will use (its time per sample depends on it), on the inputs it received when the captured graph ran once, after warm-up, as
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
(BatchNorm's running statistics), gradients and ``forward`` methods (pipebench/base/snapshot.py module_state;
compiled for the whole step, then eager again).
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from pipebench.base.errors import UserError, first_line
from pipebench.hardware.cpu import SpeedGauge, cpu_name
from pipebench.partition.profiling.activations import oversized
from pipebench.partition.profiling.clock import Clock, sync, wall
from pipebench.partition.capture.graph import capture, segments
from pipebench.partition.capture.graph_errors import CaptureError, SplitError
from pipebench.partition.profiling.profile_record import model_label
from pipebench.partition.profiling.profile_record import LayerProfile, Profile, relative_spread
from pipebench.partition.profiling.segment_timing import profile_segment
from pipebench.base.snapshot import module_state
from pipebench.base.training import Training, autocast, compile_module, make_optimizer

__all__ = ["profile_model", "profile_sizes", "device_name", "Captures", "SizeSweep"]


def device_name(device: torch.device | str) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_name()


@dataclass(frozen=True)
class SizeSweep:
    """What every micro-batch size of one model shares while they are profiled one after another
    (profile_sizes makes one and hands it to profile_model at each size): the depth the model is cut at,
    its one capture at that depth, and on CPU stand-ins the gauge of the machine's speed."""

    granularity: int | None = None
    """Module depth of the cuts (see partition/capture/graph.py); None: the model's own (`model.granularity`),
    and None there: graph.py's default."""
    captures: Captures | None = None
    """The capture shared by every size of the model (Captures); None: each size is captured on its own."""
    gauge: SpeedGauge | None = None
    """On CPU stand-ins, the machine's speed (hardware/cpu.py SpeedGauge), read around each segment: their
    times are rescaled to the machine's unloaded speed (SpeedGauge.rescale), and the whole step is the
    fastest of those timed over hardware/drift.py drift_seconds() (_whole_step). None: as timed."""


def profile_model(model: Any, device: torch.device | str, micro_batch: int, *, batch: int | None = None,
                  repeats: int = 5, warmup: int = 2, progress: Callable[[int, int, str], None] | None = None,
                  training: Training = Training(), sweep: SizeSweep = SizeSweep()) -> Profile:
    """Profile every segment of `model` on `device` with micro-batches of `micro_batch` samples, in the
    training's precision (bf16: under autocast, as the trainers run) and, for the whole step, with its
    optimizer.

    model: has .module (the nn.Module), .make_batch(batch_size, seed=0, device=...) -> (inputs,
    targets) with inputs a tensor or a tuple of forward's positional args, .name, .flavour, .config and
    .granularity.
    batch: the global batch the plan is for (recorded; defaults to micro_batch).
    progress(i, n, segment_name) is called before each segment.
    sweep: what this size shares with the model's other sizes (SizeSweep: the cuts' depth, the one capture,
    the CPU's speed gauge); the default: the model's own depth, captured here for this size, as timed.
    """
    device = _device_of(device)
    if repeats < 1 or warmup < 0:
        raise UserError(f"need repeats >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    module = model.module
    if training.compile is not None:  # this size's compilations only, each static as a stage's
        from torch import _dynamo

        _dynamo.reset()
    restore = module_state(module, values=False)
    try:
        module.to(device)
        module.train()
        args = _inputs(model, micro_batch, device)
        layers, depth, compile_s = _segment_layers(model, args, device, repeats, warmup, training, progress, sweep)
        # The whole batch on one device: time one whole step too, which calibrates every prediction. On CPU
        # stand-ins it is timed for as long as the machine's drift is watched, and its fastest step is the
        # figure: already at the machine's unloaded speed, so the gauge does not rescale it.
        whole_ms, whole_spread, whole_peak = None, 0.0, None
        if micro_batch == (batch or micro_batch) and hasattr(model, "loss_fn"):
            from pipebench.hardware.drift import drift_seconds

            whole_ms, whole_spread, whole_peak, whole_compile_s = _whole_step(
                model, module, device, micro_batch, repeats, warmup, training,
                seconds=drift_seconds() if sweep.gauge else 0.0)
            compile_s += whole_compile_s
    finally:
        restore()
    return Profile(
        model=model.name, flavour=model.flavour, config=dict(model.config), device=str(device),
        device_name=device_name(device), torch_version=torch.__version__, batch=batch or micro_batch,
        micro_batch=micro_batch, repeats=repeats, warmup=warmup, input_shape=list(args[0].shape),
        input_dtype=_dtype_name(args[0].dtype), layers=layers, granularity=depth, whole_step_ms=whole_ms,
        whole_step_peak_bytes=whole_peak, whole_step_spread=whole_spread,
        training=Training(training.precision, training.optimizer, compile=training.compile),
        compile_s=compile_s if training.compile is not None else None,
        model_class=getattr(model, "model_class", None),  # a UserModel of an object's; the zoo's have none
    )


def _device_of(device: torch.device | str) -> torch.device:
    """`device` as a torch.device, a GPU with its index ("cuda" is the current one)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _segment_layers(model, args: tuple, device: torch.device, repeats: int, warmup: int, training: Training,
                    progress, sweep: SizeSweep) -> tuple[list[LayerProfile], int, float]:
    """The model captured at `args` and each of its segments timed (`_time_segment`): their LayerProfiles,
    the depth they were cut at, and the seconds compiling them took. The capture and its stages are freed
    on return, before the whole step runs: the stages hold copies of replicated parameters."""
    granularity = sweep.granularity if sweep.granularity is not None else model.granularity
    captured = _capture(model, args, device, granularity, training, sweep.captures)
    segs = segments(captured)
    clock = Clock(device)
    param_storages = {p.untyped_storage().data_ptr()
                      for m in (model.module, *(s.module for s in segs)) for p in m.parameters()}
    measured_all, compile_s = [], 0.0
    for i, segment in enumerate(segs):
        if progress:
            progress(i, len(segs), segment.begins_at)
        measured = _time_segment(segment, clock, param_storages, repeats, warmup, training, sweep.gauge)
        compile_s += measured.pop("compile_s")
        measured_all.append(measured)
    return _layer_profiles(captured, segs, measured_all), captured.granularity, compile_s


def _capture(model, args: tuple, device: torch.device, granularity: int | None, training: Training,
             captures: Captures | None):
    """The model's graph recorded at `args`, from the model's one capture (Captures.at) or captured here
    alone. Its one run is under the training's autocast, so that each segment receives what it would in
    the trainers' step: under bf16 a convolution's output is bf16, and what the next segment saves of it
    is half of fp32's."""
    run_in = lambda: autocast(training, device.type)  # noqa: E731
    if captures is not None:
        return captures.at(model.module, args, granularity, run_in, lambda n: _inputs(model, n, device))
    return capture(model.module, args, granularity=granularity, run_in=run_in)


def _time_segment(segment, clock: Clock, param_storages: set[int], repeats: int, warmup: int, training: Training,
                  gauge: SpeedGauge | None) -> dict:
    """One segment's figures (segment_timing.profile_segment), compiled as the training says and under its
    autocast; with a gauge, every time rescaled to the machine's unloaded speed (`_at_speed`)."""
    # An autocast context per segment, as a trainer's step holds one: the weights' bf16 copies are
    # made once per context and kept (see segment_timing.profile_segment), and freed before the next.
    before = gauge.read() if gauge is not None else None
    compile_module(segment.module, training)
    with autocast(training, clock.device.type):
        measured = profile_segment(segment, clock, repeats, warmup, param_storages,
                                   compiled=training.compile is not None)
    if gauge is not None:
        measured = _at_speed(measured, gauge.rescale(before, gauge.read()))
    return measured


def _layer_profiles(captured, segs: list, measured_all: list[dict]) -> list[LayerProfile]:
    """Each segment's LayerProfile: its measured figures, its parameters, the tensors that cross the cut
    after it (what it returns, for the last) and the bytes it and the segment before both keep."""
    handed = [(m.pop("saved_output_bytes"), m.pop("saved_input_bytes")) for m in measured_all]
    layers = []
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
    return layers


def _at_speed(figures: dict, factor: float) -> dict:
    """A segment's figures with every time (`*_ms`) multiplied by `factor` (SpeedGauge.rescale)."""
    return {k: v * factor if k.endswith("_ms") and v is not None else v for k, v in figures.items()}



def _whole_step(model, module, device, micro_batch, repeats, warmup, training: Training,
                seconds: float = 0.0) -> tuple[float | None, float, int | None, float]:
    """(ms, spread, peak bytes, compile seconds) of one whole training step of the model as the single-device trainer runs
    it: forward, loss, backward under the precision's autocast, and the training's optimizer update (lr 0,
    so no weight changes; AdamW's states are zero-initialised and dropped after), synchronised, the median
    of `repeats` after `warmup` and their relative_spread; (None, 0, None) when it does not fit.
    seconds > 0 (CPU stand-ins): steps are timed until that long has passed too, and the time is their
    fastest, as the run's step it is judged against (Row.step_ms_best). A shared host's bursts of load last
    0.2-1.5 s: a median of 3 steps taken inside one makes ResNet-101 tiny's single 57-62 ms in one
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
        elsewhere = _allocated_elsewhere(module, [*args, targets], device)

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
        if compiled:
            compile_module(module, training)
            first_s = wall(step, device)  # compiles
        times = _step_times(step, device, repeats, warmup, seconds)
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


def _allocated_elsewhere(module, batch: list, device: torch.device) -> int:
    """Bytes allocated on the GPU that are neither the model's (its parameters and buffers) nor the
    batch's: what the profiling left, which the whole step's peak leaves out."""
    own = sum(t.untyped_storage().nbytes() for t in [*module.parameters(), *module.buffers()]
              if t.device.type == "cuda")
    batch_bytes = sum(t.untyped_storage().nbytes() for t in batch
                      if isinstance(t, torch.Tensor) and t.device.type == "cuda")
    return torch.cuda.memory_allocated(device) - own - batch_bytes


def _step_times(step: Callable[[], None], device: torch.device, repeats: int, warmup: int,
                seconds: float) -> list[float]:
    """Seconds of each timed `step`, synchronised around each, after `warmup` untimed: `repeats` of them,
    and more until `seconds` have passed. On a GPU the peak memory is counted from the first timed step:
    the steady state's peak, as the worker measures it."""
    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    end = time.perf_counter() + seconds
    while len(times) < repeats or time.perf_counter() < end:
        sync(device)
        start = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - start)
    return times



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


def profile_sizes(model: Any, device: torch.device | str, batch: int, counts: list[int], *, repeats: int, warmup: int,
                  note: Callable[[str], None] | None = None, progress: Callable[[int, int, str], None] | None = None,
                  granularity: int | None = None, training: Training = Training(), already: int = 0,
                  captures: Captures | None = None) -> list[Profile]:
    """Profile `model` once per micro-batch count in `counts` (micro-batches of batch // m samples).

    A size that fails (out of memory, BatchNorm over one value, ...), or whose activations need more than
    the device's free memory (partition/profiling/activations.py, judged before any size runs), is skipped
    with a note; UserError
    when the only size asked for fails, or when none works; `already`: how many other sizes the caller
    has (from the profile cache), which count as working ones. note(line) receives what is worth telling
    (sizes, skips, times); progress(done, total, what) hears each segment as it starts, counted over
    every size (a progress bar).
    granularity: module depth of the cuts (SizeSweep.granularity). A model that torch.export cannot capture
    is a UserError at once.
    captures: the model's one capture, shared with other calls for the same model (None: one for these
    sizes)."""
    say = note or (lambda line: None)
    device = torch.device(device)
    sweep = SizeSweep(granularity, captures if captures is not None else Captures(say),
                      SpeedGauge() if device.type == "cpu" else None)
    profiles = []
    last_error = ""
    started = time.perf_counter()
    say(f"profiling {model_label(model.name, model.flavour)} on {device} at "
        f"{len(counts)} micro-batch size(s) for batch {batch}, {training.precision}"
        + (f", compiled {training.compile}" if training.compile is not None else ""))
    # A size whose activations cannot fit is not run: on the CPU the kernel would end the process.
    no_room = oversized(model, device, [batch // m for m in counts])
    # Smallest micro-batches first: if a large one runs out of memory, the small ones are already measured.
    for k, m in enumerate(sorted(counts, reverse=True), 1):
        size = batch // m
        t0 = time.perf_counter()
        failed = no_room.get(size)
        try:
            if failed is None:
                profiles.append(profile_model(model, device, size, batch=batch, repeats=repeats, warmup=warmup,
                                              progress=_size_progress(progress, size, k, len(counts)),
                                              training=training, sweep=sweep))
        except (CaptureError, SplitError) as exc:  # the same at every size
            raise UserError(f"cannot profile {model.name}: {exc}") from None
        except (RuntimeError, ValueError) as exc:  # out of memory, BatchNorm over one value, ...
            failed = first_line(exc)
            del exc
            _free_failed(device)
        if failed is not None:
            last_error = f"micro-batch {size}: {failed}"
            if len(counts) + already == 1:
                raise UserError(f"cannot run {model.name} with micro-batches of {size}: {failed}")
            say(f"  micro-batch {size} ({k} of {len(counts)}): skipped, {failed}")
            continue
        say(f"  micro-batch {size} ({k} of {len(counts)}): {time.perf_counter() - t0:.1f} s")
    if not profiles and not already:
        raise UserError(f"{model.name} runs at none of the micro-batch sizes tried; the last: {last_error}")
    if sweep.gauge is not None and sweep.gauge.factors:
        factors = sweep.gauge.factors
        say(f"  the machine's speed moved while profiling: every figure taken to its unloaded speed "
            f"(x{min(factors):.2f} to x{max(factors):.2f}; hardware/cpu.py SpeedGauge)")
    say(f"profiled in {time.perf_counter() - started:.1f} s")
    return sorted(profiles, key=lambda p: counts.index(p.micro_batches))  # in the order asked


def _size_progress(progress: Callable[[int, int, str], None] | None, size: int, k: int,
                   sizes: int) -> Callable[[int, int, str], None] | None:
    """profile_model's progress(i, n, segment) for the k-th of `sizes` sizes, told on as profile_sizes's:
    the segments counted over every size, each named with its micro-batch size. None without `progress`."""
    if not progress:
        return None
    return lambda i, n, name: progress((k - 1) * n + i, sizes * n, f"micro-batch {size} ({k}/{sizes}): {name}")


def _free_failed(device: torch.device) -> None:
    """Free what a failed size held (its frames, reached through its traceback) before the next one runs."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
