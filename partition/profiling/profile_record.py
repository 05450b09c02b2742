"""What the profiler measured, as plain data, and its JSON file.

No torch here: a saved profile plans on a machine without GPUs (`pipebench plan --profile FILE`).

File format (version 1), one JSON object:

    {
      "format": "pipebench-profile",
      "version": 1,
      "profiles": [                      # one entry per micro-batch size that was measured
        {
          "model": "resnet101", "flavour": "full", "config": {...},
          "device": "cuda:0", "device_name": "NVIDIA H200", "torch_version": "2.11.0+cu130",
          "batch": 256,                  # the global batch the plan is for
          "micro_batch": 32,             # samples per forward/backward measured below
          "repeats": 5, "warmup": 2,     # timings: mean of `repeats` back-to-back runs after `warmup` runs
          "whole_step_ms": 41.2, "whole_step_spread": 0.02,   # median of `repeats` whole steps, and its spread
          "input_shape": [32, 3, 224, 224], "input_dtype": "float32",
          "layers": [
            {"name": "conv1", "params": 9408, "param_bytes": 37632,
             "forward_ms": 0.21, "backward_ms": 0.43,   # one micro-batch, synchronised
             "forward_spread": 0.01, "backward_spread": 0.03,   # the repeats' noise (relative_spread)
             "output_bytes": 51380224,                   # what crosses a cut after this layer
             "output_shape": [32, 64, 112, 112], "output_dtype": "float32",
             "saved_bytes": 19267584,                    # activations kept for backward
             "shared_bytes": 0},                         # of those, what the previous layer keeps too
            ...
          ]
        }
      ]
    }

Fields added since version 1 was written have defaults, so older files load: a spread missing from a file
is 0 (no noise known), and its predictions carry a point interval.
"""
from __future__ import annotations

import math

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence
from pipebench.base.errors import UserError
from pipebench.base.fileio.files import read_json, record, writable_file, write_json
from pipebench.base.training import Training, nest_training

__all__ = ["ProfileError", "LayerProfile", "Profile", "save_profiles", "load_profiles", "calibration", "kept_bytes", "model_label",
           "relative_spread", "step_spread"]

FORMAT = "pipebench-profile"
VERSION = 1
MAX_LAYER_MS = 1e9
"""A layer time above this (11 days per micro-batch) is not a measurement: sums of such times overflow
and the plan prints nonsense."""


def model_label(name: str, flavour: str | None) -> str:
    """"gpt (tiny)" for the zoo's models; a model of the user's own has no flavour and shows its name alone
    (`printable`: a line feed in a file's name does not break the line it heads). What a profile, its plan
    and the progress lines call the model."""
    from pipebench.base.errors import printable

    return printable(f"{name} ({flavour})" if flavour else name)


class ProfileError(UserError):
    """A profile file that is missing, unreadable or malformed; the message names the field."""


@dataclass
class LayerProfile:
    name: str
    params: int
    param_bytes: int
    forward_ms: float
    backward_ms: float
    output_bytes: int
    output_shape: list[int]
    output_dtype: str
    saved_bytes: int
    backward_input_ms: float | None = None
    """The backward split as zero-bubble schedules run it: I, the input gradient (torch's
    stage_backward_input), and W, the weight gradient from what I kept (stage_backward_weight). Together
    they cost more than one backward (W walks the graph again). None in profiles made before they were
    measured, or where torch lacks the functions; the simulator then assumes a split."""
    backward_weight_ms: float | None = None
    forward_cpu_ms: float | None = None
    """On a GPU, the `*_ms` figures are the device's run time and these the CPU's launch time of the same
    work (the profiler times both). A stage costs the larger of the two sums: with short layers the CPU
    launching them is the bottleneck, with long ones the GPU. None: not timed apart (the CPU, whose one
    time is both, or a profile made before they were timed)."""
    backward_cpu_ms: float | None = None
    backward_input_cpu_ms: float | None = None
    backward_weight_cpu_ms: float | None = None
    cast_bytes: int = 0
    """Under bf16 autocast: the bf16 copies of the segment's weights that autocast makes once and keeps for
    the whole step (its cast cache), however many micro-batches run. Measured as the saved tensors two
    forwards share, so that `saved_bytes` holds only what each micro-batch keeps."""
    shared_bytes: int = 0
    """Of `saved_bytes`, the tensor from the previous layer that both keep: the previous layer saves it as
    its output and this one as its input (a ReLU's result, then the next convolution's input). Profiled
    apart, each layer counts it; on one device it is one tensor (`kept_bytes`). Per-segment sums
    overstated ResNet-101's activations by 30% against the eager model's (CPU, 8 samples, fp32 and bf16)."""

    forward_spread: float = 0.0
    """The noise of the forward over its repeats (relative_spread; on a GPU, of the clock that took longer:
    `forward_ms` or `forward_cpu_ms`); 0: unknown (one repeat, or a profile made before spreads were kept)."""
    backward_spread: float = 0.0
    """The same for `backward_ms`."""

    @property
    def step_ms(self) -> float:
        """Forward plus backward of one micro-batch: the cost the solver balances."""
        return self.forward_ms + self.backward_ms


@dataclass
class Profile:
    model: str
    flavour: str
    device: str
    device_name: str
    torch_version: str
    batch: int
    micro_batch: int
    repeats: int
    warmup: int
    input_shape: list[int]
    input_dtype: str
    layers: list[LayerProfile]
    config: dict[str, Any] = field(default_factory=dict)
    granularity: int | None = None
    """Module depth of the cut candidates the layers are (1: the model's top-level children; see
    partition/capture/graph.py); None in profiles made before models were captured as graphs."""
    link_gbps: float | None = None
    """GB/s between the first two devices, timed when profiled (None: not measured, e.g. one device); a
    plan made from this profile later prices its cuts with it, without touching a GPU."""
    allreduce_gbps: float | None = None
    """Bus bandwidth of an all-reduce over the profiled devices (NCCL's definition), timed when profiled;
    it prices DDP's gradient all-reduce (None: taken to be link_gbps)."""
    whole_step_ms: float | None = None
    """One whole training step of the model on one device at this micro-batch (forward, loss, backward and
    the optimizer's update), timed when profiled at the whole batch; None where it was not (or did not
    fit). The segments' sum leaves out the loss, the update and what a long step costs beyond short timed
    runs; `calibration` turns the difference into one factor on every device time."""
    whole_step_peak_bytes: int | None = None
    """The whole step's peak allocated bytes on a GPU, measured with `whole_step_ms` (None on the CPU, or
    where it was not measured). What the per-layer figures leave out of the peak (the backward's transient
    buffers, the convolutions' workspaces) is the difference: `unmodelled_bytes`."""
    whole_step_spread: float = 0.0
    """The noise of `whole_step_ms` over its repeats (relative_spread); 0: unknown or not timed."""
    link_latency_ms: float | None = None
    """The fixed cost of one message between the devices (None: not measured, taken as 0)."""
    collective_ms: float | None = None
    """CPU stand-ins: an all-reduce of one number between the processes (hardware/cpu_processes.py
    measure_cpu_processes): the loss's all-reduce or broadcast that ends every step, and each collective's
    fixed cost; None: not measured, taken to be `link_latency_ms`."""
    core_contention: float | None = None
    """CPU processes standing in for the devices share the cores: how much slower a step is when all of
    them compute and then synchronise than when one does (hardware/cpu_processes.py measure_cpu_processes), timed
    when profiled; None: devices of their own (GPUs), or not measured, taken as 1."""
    action_ms: float | None = None
    """CPU stand-ins: what torch.distributed.pipelining's runtime costs per operation beyond its compute
    (hardware/cpu_processes.py measure_cpu_processes), timed when profiled; None: not measured, taken as 0."""
    fsdp_layer_ms: float | None = None
    """CPU stand-ins: what FSDP2's runtime costs per sharded layer and step beyond its compute and its
    messages (hardware/cpu_processes.py measure_cpu_processes), timed when profiled; None: not measured, taken as 0."""
    ddp_ms: float | None = None
    """CPU stand-ins: what DDP's runtime costs per step beyond the compute and the all-reduce's bytes
    (hardware/cpu_processes.py measure_cpu_processes); None: not measured, taken as 0."""
    ddp_layer_ms: float | None = None
    """CPU stand-ins: what DDP's runtime costs per layer with parameters and step (its gradient hooks and
    bucket copies; hardware/cpu_processes.py measure_cpu_processes); None: not measured, taken as 0."""
    gather_gbps: float | None = None
    """CPU stand-ins: bus bandwidth of an all-gather over the processes (hardware/cpu_processes.py
    measure_cpu_processes), which FSDP's parameter gathers move; None: taken to be `allreduce_gbps`."""
    scatter_gbps: float | None = None
    """CPU stand-ins: bus bandwidth of a reduce-scatter over the processes, which FSDP's gradients move;
    None: taken to be `allreduce_gbps`."""
    machine_drift: float | None = None
    """CPU stand-ins: how far the machine's speed moved from moment to moment while it was profiled, a
    fraction (hardware/drift.py measure_machine_drift); every prediction's interval is at least this wide
    (step_spread). None: not measured (GPUs, or a link speed given)."""
    training: Training = field(default_factory=Training)
    """How it was measured (pipebench/base/training.py): the precision of its times and bytes (a plan for bf16
    needs a bf16 profile; profiles made before precisions existed were TF32) and the optimizer of the
    whole step (`whole_step_ms`), whose update it includes. Its checkpoint mode is always never: a
    recomputing stage is priced from the layers' own times (partition/planning/memory.py recomputing). Its compile
    mode: every segment and the whole step were compiled in it, as the strategies compile what they run."""
    compile_s: float | None = None
    """Seconds compiling took, kept out of every time above: each segment's first run beyond its next, and
    the whole step's first beyond its median. None: eager."""
    profile_id: str | None = None
    """The profile cache's name for this measurement (partition/profiling/cache.py); plans and rows record it, so
    a reader can tell two answers made from the same measurement. None: not cached (a module object, or
    an interpolated profile)."""
    model_class: str | None = None
    """A profile of an nn.Module object: where its class is defined (pipebench/model_spec.py class_source:
    `/abs/file.py:Qualname`), which `model`, the class's name alone, does not tell from another class of that
    name. None: a model named by its registry name or target, or a profile made before it was recorded."""
    interpolated_from: list[int] | None = None
    """Not measured: every figure on the straight line between the profiles measured at these two
    micro-batch sizes (partition/profiling/micro_batch_sizes.py). None: measured."""

    @property
    def micro_batches(self) -> int:
        return self.batch // self.micro_batch

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str = "profile") -> "Profile":
        """A Profile from its JSON object, every field checked (ProfileError names the first wrong one)."""
        if isinstance(data, dict) and data.get("layers") == []:
            raise ProfileError(f"{where}.layers: expected a non-empty list")
        profile = record(cls, nest_training(data), where, error=ProfileError, nonnegative=True)  # finite, >= 0
        for name in ("batch", "repeats"):  # a mean of no runs, or of no samples, measured nothing
            if getattr(profile, name) < 1:
                raise ProfileError(f"{where}.{name}: must be at least 1, got {getattr(profile, name)}")
        if profile.micro_batch < 1 or profile.batch % profile.micro_batch:
            raise ProfileError(f"{where}.micro_batch: {profile.micro_batch} does not divide batch {profile.batch}")
        for i, layer in enumerate(profile.layers):
            for name in ("forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms"):
                if (getattr(layer, name) or 0) > MAX_LAYER_MS:
                    raise ProfileError(f"{where}.layers[{i}].{name}: {getattr(layer, name):g} ms is not a "
                                       f"measurement (at most {MAX_LAYER_MS:g})")
        if not sum(layer.step_ms for layer in profile.layers) > 0:  # a plan would divide by zero
            raise ProfileError(f"{where}.layers: every forward and backward time is 0; nothing was measured")
        return profile


def relative_spread(times: Sequence[float]) -> float:
    """How noisy repeated timings of one thing are: half their interquartile range over their median, a
    fraction (0.04: the middle half of the runs lay within about ±4% of the median). The quartiles, not the
    extremes: one run that a garbage collection or another process interrupted does not widen it. 0 for
    fewer than two runs (no spread known)."""
    if len(times) < 2:
        return 0.0
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return (q3 - q1) / 2 / median if median > 0 else 0.0


BETWEEN_RUNS = {"gpu": 0.024, "cpu": 0.356}
"""What moves between runs and machines of one kind, which one profile's repeats cannot see: the spread
added (in quadrature) to every interval shown, so that 80% of measured steps fall inside it. Measured by
scripts/interval_widening.py from the committed results that kept each prediction's interval beside its
measured step: on one H200 each of two machines (tf32 and bf16, 46 rows, 24% inside the intervals as
printed; the steps themselves moved 0.5% between rounds, the profiles between machines); on the shared
2-vCPU VM (729 rows over five runs hours apart, 42% inside; a case's steps moved ±34% between runs)."""


HOST_BETWEEN_RUNS = 0.86
"""On a GPU, how far the part of a step that waits on the host's launches (`launch_share`) moves between runs:
as the host's CPU does, which the device's clock does not see. Fitted by scripts/launch_widening.py on seven
models measured on one H200 (bf16, AdamW; results/2026-12-04-H200-broad-fidelity/run3): the least value that
puts 80% of their measured steps inside the interval (6 of 7); of six other models held out of the fit
(run4), 5 fell inside. The rounds of one such case, minutes apart in one process, differ
by up to 27% (bert-base at batch 16: 32.1 and 24.5 ms); a step the device's work sets (ResNet-50 at batch
256) moved 0.5%."""


def launch_share(profiles: "Sequence[Profile]") -> float:
    """The part of the whole step that its segments' device time does not explain, on a GPU: 1 - (their
    forward and backward on the device) / (the whole step timed); the time the device waits on the host
    (launches, Python, the optimizer's loop). 0 on the CPU (one clock), without a whole step, or where
    the whole step is below its segments (compiled, fused)."""
    whole = _whole_step_profile(profiles)
    if whole is None or str(whole.device).startswith("cpu"):
        return 0.0
    device = sum(l.forward_ms + l.backward_ms for l in whole.layers)
    return max(0.0, 1.0 - device / whole.whole_step_ms)


def between_runs_spread(profiles: "Sequence[Profile]") -> float:
    """What moves between runs and machines for a step predicted from `profiles`, which their repeats
    cannot see: BETWEEN_RUNS of their kind of device and, on a GPU, the host's part of the step
    (HOST_BETWEEN_RUNS x launch_share), in quadrature."""
    if not profiles:
        return 0.0
    kind = "cpu" if str(profiles[0].device).startswith("cpu") else "gpu"
    host = HOST_BETWEEN_RUNS * launch_share(profiles) if kind == "gpu" else 0.0
    return math.hypot(BETWEEN_RUNS[kind], host)


def step_spread(profiles: "Sequence[Profile]", micro_batch: int | None = None, *, drift: bool = True,
                between_runs: bool = False) -> float:
    """The relative half-width of the interval around a step predicted from `profiles` with micro-batches
    of `micro_batch` samples (None, or a size not profiled: every profile's segments): step x (1 ± this).

    The largest of three estimates of one thing, the noise of a step's measured work:
    - the segments' forward and backward spreads, weighted by their times: a step is a sum of such times
      along its critical path, so every figure at its low (or high) moves it by their time-weighted mean;
    - the whole step's spread, which the calibration (a factor of the whole step) carries onto every
      prediction;
    - on CPU stand-ins, the machine's drift (`Profile.machine_drift`): repeats taken back to back agree
      where a shared host's bursts of load, seconds apart, do not.
    The largest rather than the sum: they measure the same noise over shorter or longer times, and the
    interval should claim no more certainty than any. 0 when nothing recorded a spread (an older profile).
    between_runs: widen it by what moves between runs and machines (`between_runs_spread`, in quadrature):
    the interval a prediction shows (a Plan's, advise's).
    drift=False leaves the machine's drift out: what is left is a prediction's own noise,
    by which two predictions of one profile are told apart (a burst slows the strategies compared together
    alike)."""
    chosen = [p for p in profiles if p.micro_batch == micro_batch] or list(profiles)
    figures = [(l.forward_ms, l.forward_spread) for p in chosen for l in p.layers]
    figures += [(l.backward_ms, l.backward_spread) for p in chosen for l in p.layers]
    total = sum(ms for ms, _ in figures)
    segments = sum(ms * spread for ms, spread in figures) / total if total > 0 else 0.0
    whole = _whole_step_profile(profiles)
    machine = max((p.machine_drift or 0.0 for p in profiles), default=0.0) if drift else 0.0
    own = max(segments, whole.whole_step_spread if whole else 0.0, machine)
    if not between_runs or not profiles:
        return own
    return math.hypot(own, between_runs_spread(profiles))


def _whole_step_profile(profiles: "Sequence[Profile]") -> "Profile | None":
    """The profile whose whole step calibrates the predictions: the largest micro-batch that timed one."""
    return max((p for p in profiles if p.whole_step_ms), key=lambda p: p.micro_batch, default=None)


def calibration(profiles: "list[Profile]") -> float:
    """Measured whole step over what the segments predict for it on one device, from the profile that
    timed one (1.0 when none did). The prediction plays the two clocks as the simulator does: the CPU
    launches the forward, then the backward, while the device runs them. At most 1.5: a whole step slower
    than that measured something else (a GPU shared with another job), and the segments alone are the safer
    figure. At least 0.8 where the device's clock sets the step; no lower bound where
    - the step is compiled: the whole model compiled at once fuses and lays out across the cuts that the
      segments, compiled apart, cannot (ResNet-50, bf16, one H200: its segments compiled apart summed to
      76 ms, the whole step 40 ms, and the 0.8 bound predicted 61);
    - the segments' launches set it (their CPU time above their device time): each segment timed apart pays
      the host's cost of a call of its own, which the whole step does not (DenseNet-121, bf16, batch 64, one
      H200: 225 ms of segment launches against a 75.6 ms whole step; the 0.8 bound predicted 180 ms, 59.0
      measured; Mistral-shaped 50.1 against 38.3)."""
    whole = _whole_step_profile(profiles)
    if whole is None:
        return 1.0

    def total(name: str, cpu: bool) -> float:
        return sum((getattr(l, name + "_cpu_ms") if cpu and getattr(l, name + "_cpu_ms") is not None
                    else getattr(l, name + "_ms")) for l in whole.layers)

    forward, backward = total("forward", False), total("backward", False)
    launches = total("forward", True) + total("backward", True)
    predicted = max(max(forward, total("forward", True)) + backward, launches)
    if predicted <= 0:
        return 1.0
    lowest = 0.0 if whole.training.compile is not None or launches > forward + backward else 0.8
    return min(max(whole.whole_step_ms / predicted, lowest), 1.5)


def kept_bytes(layers: Sequence[LayerProfile]) -> int:
    """The activations that consecutive layers on one device keep for their backward, per micro-batch:
    their saved bytes, each tensor two neighbours share counted once (the first layer's from the layer
    before it is held there, on another stage)."""
    return sum(l.saved_bytes for l in layers) - sum(l.shared_bytes for l in layers[1:])


def check_profile_list(profiles: Any, values: bool = False, where: str = "") -> None:
    """A non-empty list of Profile objects of one model and batch, else one UserError line: the one home of
    that check (a profile file's list, plan's and advise's profiles, save_profiles; an mlp's and a convnet's
    profile must not be planned as one model). `values`: every field checked too, as a profile file's are
    (Profile.from_dict): for profiles a caller made or edited (pipebench.plan's, save_profiles'), where
    repeats=0 would be planned and batch='8' be a TypeError of `//`. `where` begins each line (the file)."""
    if isinstance(profiles, (str, bytes)) or not isinstance(profiles, Sequence) or not profiles:
        raise UserError(f"need at least one profile (pipebench.profile makes them), got {type(profiles).__name__} "
                        f"{str(profiles)[:40]!r}")
    wrong = [type(p).__name__ for p in profiles if not isinstance(p, Profile)]
    if wrong:
        raise UserError(f"profiles takes Profile objects (pipebench.profile makes them), got a {wrong[0]}")
    if values:
        for i, profile in enumerate(profiles):
            try:
                data = profile.to_dict()
            except (TypeError, ValueError, RecursionError) as exc:  # asdict of what is no record
                raise ProfileError(f"profiles[{i}]: {exc}") from None
            Profile.from_dict(data, where=f"profiles[{i}]")
    first = profiles[0]
    for i, other in enumerate(profiles[1:], 1):
        if (other.model, other.model_class, other.batch, len(other.layers)) != \
                (first.model, first.model_class, first.batch, len(first.layers)):
            raise ProfileError(f"{where}profiles[{i}] is for another model or batch than profiles[0]")


def save_profiles(profiles: list[Profile], path: str | Path) -> None:
    """Write profiles (one per micro-batch size) to `path` in the format of the module docstring, the path
    checked first as the command line checks an output (fileio.files.writable_file)."""
    if isinstance(profiles, (str, Path)):
        raise UserError(f"save_profiles(profiles, path) takes the profiles first, then the path (got {str(profiles)[:40]!r} "
                        "first)")
    check_profile_list(profiles, values=True)
    path = writable_file(path, "save_profiles")  # 'dir/' and a name too long: one line each
    write_json(path, {"format": FORMAT, "version": VERSION, "profiles": [p.to_dict() for p in profiles]})


def load_profiles(path: str | Path) -> list[Profile]:
    """Read a profile file, naming the first field that is missing or wrong."""
    data = read_json(path, kind="profile", fmt=FORMAT, versions=(VERSION,), error=ProfileError)
    entries = data.get("profiles")
    if not isinstance(entries, list) or not entries:
        raise ProfileError(f"{path}: field 'profiles' should be a non-empty list")
    profiles = [Profile.from_dict(entry, f"{path}: profiles[{i}]") for i, entry in enumerate(entries)]
    check_profile_list(profiles, where=f"{path}: ")
    return profiles
