"""The memory model: what a stage holds at its peak (`StageMemory`), what a whole step measured beyond
that (`unmodelled_bytes`), a layer as a recomputing stage runs it (`recomputing`), and what fits a
memory cap (`within_caps`, the one rule of "fits" for every strategy, plan and baseline alike, and
`over_cap`, the one line that says why not). Pure: the planner (partition/planning/plan.py) caps stages
with it and the replica strategies' prices (bench/strategies/ddp/ and its siblings) price their memory
with it."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from pipebench.partition.profiling.profile_record import LayerProfile, Profile, kept_bytes
from pipebench.base.schedules import get_schedule
from pipebench.base.text.units import format_bytes

__all__ = ["StageMemory", "unmodelled_bytes", "recomputing", "caps_per_device", "within_caps", "over_cap"]


class StageMemory:
    """A stage's predicted peak bytes: its parameters, gradients and optimizer states (`states` tensors of
    parameter size in all), autocast's bf16 weight copies (once per step), and activations.

    Keeping them, a stage holds each layer's saved activations for every micro-batch in flight. Recomputing
    (activation checkpointing), it holds only what it received for each micro-batch in flight, plus one
    micro-batch's activations while the backward makes them again. A one-stage plan (the single baseline)
    recomputes layer by layer: every layer's input for the micro-batch, plus the largest layer's
    activations.

    `unmodelled`: what the whole step measured beyond these figures at this micro-batch (unmodelled_bytes:
    the backward's transient buffers, convolution workspaces). Those buffers are the size of the
    activation being differentiated, so a stage takes the share its largest activation is of the model's
    largest: all of it on one device, less on a stage of small layers."""

    def __init__(self, layers, states: int, schedule: str, micro_batches: int, stages: int, unmodelled: int = 0):
        self.layers, self.states, self.stages = layers, states, stages
        self.unmodelled = unmodelled
        self.largest = max((l.saved_bytes for l in layers), default=0)
        # For the solver, the most micro-batches any stage may hold under the schedule (1F1B holds at most
        # p; interleaved and zero-bubble schedules are counted as holding all m).
        kind = get_schedule(schedule)
        one_f_one_b = kind.layout == "one" and not kind.forwards_first
        self.worst_in_flight = min(micro_batches, stages) if one_f_one_b else micro_batches

    def fixed(self, layer) -> float:
        return layer.param_bytes * self.states + layer.cast_bytes

    def per_layer(self, recompute: bool) -> list[float]:
        """What each layer adds to its stage, for the solver's caps (a recomputing stage's received
        activations are left to the final figure: one tensor per micro-batch, small beside the rest). Each
        layer's whole saved bytes: what it shares with the layer before is one tensor only within a stage,
        so the solver's additive figure stays on the safe side of `stage`'s."""
        held = 1 if recompute else self.worst_in_flight
        return [self.fixed(l) + l.saved_bytes * held for l in self.layers]

    def stage(self, a: int, b: int, held: int, recompute: bool) -> int:
        layers = self.layers[a:b]
        fixed = sum(self.fixed(l) for l in layers)
        if not recompute:
            modelled = fixed + kept_bytes(layers) * held
        elif self.stages == 1:
            inputs = sum(self.layers[i - 1].output_bytes for i in range(max(a, 1), b))
            modelled = fixed + inputs * held + max(l.saved_bytes for l in layers)
        else:
            received = self.layers[a - 1].output_bytes if a > 0 else 0
            modelled = fixed + received * held + kept_bytes(layers)
        share = max(l.saved_bytes for l in layers) / self.largest if self.largest else 1.0
        return int(max(modelled + self.unmodelled * share, fixed))


def unmodelled_bytes(profiles: Sequence[Profile], micro_batch: int) -> int:
    """The bytes a whole step measured on one device beyond what StageMemory predicts for it (negative
    where it predicts more), from the profile that measured the whole step's peak, scaled to `micro_batch`
    (the transients grow with the activations); 0 when none did (the CPU, older profiles)."""
    measured = [p for p in profiles if p.whole_step_peak_bytes]
    if not measured:
        return 0
    whole = max(measured, key=lambda p: p.micro_batch)
    states = 2 + whole.training.states
    predicted = StageMemory(whole.layers, states, "gpipe", 1, 1).stage(0, len(whole.layers), 1, False)
    return int((whole.whole_step_peak_bytes - predicted) * micro_batch / whole.micro_batch)


def recomputing(layer: LayerProfile) -> LayerProfile:
    """The layer as a recomputing stage runs it: its backward starts with its forward again."""
    def plus(back, fwd):
        return None if back is None or fwd is None else back + fwd
    return replace(layer, backward_ms=layer.backward_ms + layer.forward_ms,
                   backward_cpu_ms=plus(layer.backward_cpu_ms, layer.forward_cpu_ms),
                   backward_input_ms=None, backward_weight_ms=None,
                   backward_input_cpu_ms=None, backward_weight_cpu_ms=None)


# ------------------------------------------------------------------------------------------------ caps

def caps_per_device(caps: float | Sequence[float] | None, devices: int) -> list[float] | None:
    """A request's memory cap(s) (`max_memory`) as one figure per device; None without a cap."""
    if caps is None:
        return None
    return [float(caps)] * devices if isinstance(caps, (int, float)) else list(caps)


def within_caps(memory: Sequence[float], caps: Sequence[float] | None) -> bool:
    """The one rule of "fits": every device holds its predicted memory within that device's cap
    (DataParallel's gather device, a pipeline's first stage, FSDP's gathered layers are all in the figure
    of the device that holds them). No cap: it fits."""
    return caps is None or all(m <= c for m, c in zip(memory, caps))


def over_cap(memory: Sequence[float], caps: Sequence[float] | None) -> str:
    """Why `memory` does not fit `caps` (`within_caps`), one phrase naming the device furthest over its cap;
    "" when every device is within its cap. The one wording of a prediction, a case or a plan over a cap."""
    if within_caps(memory, caps):
        return ""
    worst = max(range(min(len(memory), len(caps))), key=lambda i: memory[i] - caps[i])
    where = f" on device {worst}" if len(memory) > 1 else ""
    return (f"predicted memory exceeds the cap{where}: {format_bytes(memory[worst])} > cap "
            f"{format_bytes(caps[worst])}")
