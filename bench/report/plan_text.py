"""A Plan as text: its stages as a table, then its predicted figures beside a baseline plan's.

`pipebench plan` prints this; pandas is imported only when a plan is formatted.
"""
from __future__ import annotations

from typing import Sequence

from pipebench.partition.profiling.profile_record import model_label
from pipebench.base.schedules import get_schedule
from pipebench.partition.planning.memory import caps_per_device, over_cap
from pipebench.base.text.units import format_bytes, format_count

__all__ = ["format_plan"]



def format_plan(plan, baseline, max_memory: float | Sequence[float] | None = None) -> str:
    """The stages of `plan` as a table, then its predicted step time, throughput, bubble, balance and
    memory beside `baseline`'s (the parameter-balanced split), the speed-up over it (none where the
    baseline breaks a cap: it is no baseline then), the memory cap(s) and the micro-batch counts the
    planner tried."""
    lines = [_heading(plan), "", _stage_table(plan), ""]
    caps = caps_per_device(max_memory, plan.device_count)
    lines += _against_baseline(plan, baseline, caps)
    if plan.cut_note:
        lines.append(plan.cut_note)
    if caps:
        lines.append(_caps_line(plan, caps))
    if len(plan.candidates) > 1:
        lines.append(_counts_tried(plan.candidates))
    if plan.interpolated_from:
        lines.append(f"this plan's micro-batch size ({plan.micro_batch_size}) was not measured: its figures are interpolated "
                     f"between sizes {plan.interpolated_from[0]} and {plan.interpolated_from[1]}")
    return "\n".join(lines)


def _heading(plan) -> str:
    """One line: the model, its stages and devices, the batch and its micro-batches, the schedule, what
    the cuts balance and how it trains (the checkpoint mode and compile mode where not the default)."""
    where = f" ({plan.virtual_stages} per device on {plan.device_count} devices)" if plan.virtual_stages > 1 else ""
    return (
        f"{model_label(plan.model, plan.flavour)} on {len(plan.stages)} stages{where} [{plan.device_name}], batch {plan.batch} = "
        f"{plan.micro_batches} micro-batch(es) of {plan.micro_batch_size}, {plan.schedule}, balanced by {plan.balanced_by}, "
        f"{plan.training.precision} + {plan.training.optimizer}"
        + (f", checkpoint {plan.training.checkpoint}" if plan.training.checkpoint != "never" else "")
        + (f", compiled {plan.training.compile}" if plan.training.compile is not None else "")
    )


def _stage_table(plan) -> str:
    """The stages as a text table, a row each."""
    import pandas as pd

    # Zero-bubble schedules split each backward into I and W; show them where they were profiled.
    split = get_schedule(plan.schedule).split_backward and all(s.backward_input_ms is not None for s in plan.stages)
    recomputes = plan.training.checkpoint != "never"
    return pd.DataFrame([_stage_row(s, split, recomputes) for s in plan.stages]).to_string(index=False)


def _stage_row(s, split: bool, recomputes: bool) -> dict[str, object]:
    """One stage's row: its device and layers, its parameters, times (I and W apart where `split`), what
    it sends, the micro-batches it holds at its peak and its memory; whether it recomputes where any may."""
    names = s.layers[0] if len(s.layers) == 1 else f"{s.layers[0]} .. {s.layers[-1]}"
    backward = ({"I ms": f"{s.backward_input_ms:.3f}", "W ms": f"{s.backward_weight_ms:.3f}"} if split
                else {"bwd ms": f"{s.backward_ms:.3f}"})
    return {
        "stage": s.index,
        "device": s.device,
        "layers": f"{s.first_layer}-{s.end_layer - 1} ({s.end_layer - s.first_layer})",
        "names": names,
        "params": format_count(s.params),
        "fwd ms": f"{s.forward_ms:.3f}",
        **backward,
        "sends": format_bytes(s.activation_out_bytes) if s.activation_out_bytes else "-",
        "in flight": s.peak_in_flight,
        "memory": format_bytes(s.predicted_memory_bytes),
        **({"recompute": "yes" if s.recompute else "no"} if recomputes else {}),
    }


def _against_baseline(plan, baseline, caps: list[float] | None) -> list[str]:
    """The plan's figures beside the baseline's as a table, then the speed-up over it; none where the
    baseline breaks a cap, since a split that does not fit is no baseline."""
    import pandas as pd

    breaks = over_cap(baseline.memory_per_device(), caps)
    summary = pd.DataFrame(
        {
            f"this plan ({plan.balanced_by})": _summary(plan),
            "by parameters" + (" (breaks the cap)" if breaks else ""): _summary(baseline),
        }
    )
    if breaks:
        verdict = (f"\nthe parameter-balanced split (cuts {baseline.bounds[1:-1]}) breaks the memory cap "
                   f"({breaks}); no speed-up is claimed over it")
    else:
        ratio = plan.predicted_samples_per_s / baseline.predicted_samples_per_s
        verdict = (f"\npredicted speed-up over the parameter-balanced split: {ratio:.2f}x "
                   f"(cuts {plan.bounds[1:-1]} vs {baseline.bounds[1:-1]})")
    return [summary.to_string(), verdict]


def _caps_line(plan, caps: list[float]) -> str:
    """The memory cap per GPU (or device): one figure where all are equal."""
    unit = "GPU" if str(plan.stages[0].device).startswith("cuda") else "device"
    shown = caps[:1] if len(set(caps)) == 1 else caps
    return f"memory cap per {unit}: " + " / ".join(format_bytes(c) for c in shown)


def _counts_tried(candidates: list[dict]) -> str:
    """Each micro-batch count the planner tried with its predicted samples/s (or "no fit"), marked "~"
    where its profile was interpolated between measured sizes."""
    tried = ", ".join(
        (f"{c['micro_batches']}: {c['samples_per_s']:.1f}/s" if "samples_per_s" in c else f"{c['micro_batches']}: no fit")
        + ("~" if c.get("interpolated_from") else "")
        for c in candidates
    )
    guessed = "; ~: interpolated between measured sizes" if any(c.get("interpolated_from") for c in candidates) else ""
    return f"micro-batch counts tried (predicted samples/s{guessed}): {tried}"


def _summary(plan) -> dict[str, str]:
    slowest = max(s.forward_ms + s.backward_ms for s in plan.stages)
    return {
        "step time (ms)": f"{plan.predicted_step_ms:.2f} ±{plan.step_spread:.1%}",
        "throughput (samples/s)": f"{plan.predicted_samples_per_s:.1f}",
        "bubble": f"{plan.bubble_fraction:.1%}",
        "balance (slowest/mean)": f"{plan.balance_ratio:.3f}",
        "slowest stage (ms/micro-batch)": f"{slowest:.3f}",
        "largest stage memory": format_bytes(max(s.predicted_memory_bytes for s in plan.stages)),
    }
