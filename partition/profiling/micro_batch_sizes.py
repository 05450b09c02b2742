"""Which micro-batch counts to profile, which of them to measure, and the sizes between them predicted
instead of measured.

The counts a profile holds are decided here alone. A run or advise asks for what its strategies'
predictions need (`counts_to_ask`: the whole batch, the replicas' share, the pipelines' counts, or auto);
a request's counts are those asked, or under auto every power of two that splits the batch and the
replicas' share (`counts_to_profile`); under auto a few of them are measured (`anchors`) and the others
interpolated, the close ones measured too (`refine`).

Measuring a size is the slow part of an answer (every segment timed forward and backward), and
`--micro-batches auto` considers up to seven sizes. Per layer, the time of one micro-batch against its size is
smooth: flat while the device is bound by launches, then affine; the bytes a layer saves and sends are
affine in the size (per-sample activations plus what does not scale, such as a mask or RoPE table), and
its parameters do not depend on it (and a figure's spread, its noise, is taken from the noisier
neighbour). So a few sizes are measured (`anchors`: the whole batch, the smallest
micro-batch any count asks for, the replicas' share, one in between), and every figure
of every layer at a size between two measured ones is the straight line between them (`interpolate`).
A straight chord over a curve that bends upwards (flat, then rising) overstates the sizes between, so
where the choice is close it is measured (`refine`): after the caller ranks the counts from the
interpolated profiles, the interpolated counts predicted within `TIE` of the best are measured and
the ranking made again, until every close one is measured.

An interpolated Profile says so (`Profile.interpolated_from`, the sizes it came from); it is never put
in the profile cache, and plans made from it carry the same field.

No torch here (partition/'s pure modules stay importable without it).
"""
from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Callable, Iterable, Sequence

from pipebench.partition.profiling.profile_record import LayerProfile, Profile

__all__ = ["AUTO_COUNTS", "TIE", "counts_to_ask", "counts_to_profile", "anchors", "interpolate", "complete",
           "close_counts", "refine"]

AUTO_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""The micro-batch counts auto considers (`--micro-batches auto`, micro_batches None): those that split the batch."""

TIE = 0.05
"""Two predictions this close (a share of the better figure) are a tie: the step predictions' median
error is of this order (bench/predict/fidelity.py), more than a quiet profile's spread, so the better by
less is noise. advise's ranking ties by it (bench/predict/ranking.py `tie`: samples/s within 5% of the
faster's), and under auto an interpolated count predicted within it of the best step (slower by at most
5%) is measured before the choice is made (`close_counts`): closer than this the choice is a tie
anyway. It is not a bound on the interpolation's error: on the loaded 2-core CPU the interpolated
figures were off by as much as measuring the same size again (results/2026-12-01-cpu2-sizes-accuracy),
and a count outside it keeps the interpolated ranking. (A plan's choice among its own counts ties by the
smaller partition/planning/plan_choice.py PROFILE_NOISE: those plans share one profile, and with it the
model's errors, so only the profile's noise separates them.)"""

SIZE_INDEPENDENT = ("params", "param_bytes")
"""LayerProfile figures that do not depend on the micro-batch size: taken from a measured neighbour."""


def counts_to_ask(micro_batches: Iterable[int | None], *, spread: Iterable[int], replicas: Iterable[int] = (),
                  micro_batched: bool = True, batch: int | None = None) -> list[int] | None:
    """The micro-batch counts a run or advise asks its profile for, so that each of its strategies can be
    priced; None (auto: `counts_to_profile`) where a strategy that micro-batches is to choose its count (a
    None in `micro_batches`). Always 1 (the whole batch: single, and the whole step that calibrates every price)
    and each of `spread` (the devices a strategy that does not micro-batch splits the batch over: DDP's
    and DataParallel's replicas run batch / devices samples each); where `micro_batched`, the counts
    `micro_batches` asks of the pipelines, and each of them times each of `replicas` (a replicated pipeline's
    copies each cut batch / r into m micro-batches: m x r of the whole batch). Only counts that split
    `batch` (None: any): a size no strategy can use must not make the profile, and with it every row, fail."""
    micro_batches = list(micro_batches)
    if micro_batched and None in micro_batches:
        return None
    counts = {1, *spread}
    if micro_batched:
        counts |= {*micro_batches, *(m * r for m in micro_batches for r in replicas)}
    return sorted(m for m in counts if not batch or batch % m == 0)


def counts_to_profile(micro_batches: int | Sequence[int] | None, batch: int, devices: int) -> list[int]:
    """The micro-batch counts a request of `batch` on `devices` devices profiles, ascending: the count or
    counts asked (each splits `batch`: the Request checked it, pipebench/request.py split_error), or under auto
    (None) every one of AUTO_COUNTS that splits it and, on several devices, the device count where it
    splits it too (the replicas' share, for DDP and DataParallel; 3 devices too)."""
    if micro_batches is None:
        auto = [m for m in AUTO_COUNTS if m <= batch and batch % m == 0]
        return sorted({*auto, devices}) if devices > 1 and batch % devices == 0 else auto
    asked = micro_batches if isinstance(micro_batches, (tuple, list)) else (micro_batches,)
    return sorted(set(asked))


def anchors(counts: Sequence[int], devices: int = 1) -> list[int]:
    """The micro-batch counts to measure first among auto's `counts` (the others are interpolated between
    them): the fewest (the whole batch, which also times the calibrating whole step), the most (the
    smallest micro-batch), the device count where it is among them (the replicas' share, which DDP and
    DataParallel run), and, unless one of those already lies between the two ends, the middle one (by
    position in the sorted counts, the geometric middle of powers of two)."""
    ordered = sorted(set(counts))
    if len(ordered) <= 2:
        return ordered
    chosen = {ordered[0], ordered[-1], *({devices} & set(ordered))}
    if not any(ordered[0] < m < ordered[-1] for m in chosen):
        chosen.add(ordered[len(ordered) // 2])
    return sorted(chosen)


def _between(a: float | None, b: float | None, t: float) -> float | None:
    if a is None or b is None:
        return None
    return a + (b - a) * t


def _layer_at(lo: LayerProfile, hi: LayerProfile, size: int, lo_size: int, hi_size: int) -> LayerProfile:
    """One layer's figures at `size`, on the straight line between its figures at two measured sizes."""
    t = (size - lo_size) / (hi_size - lo_size)
    values = {}
    for f in fields(LayerProfile):
        a, b = getattr(lo, f.name), getattr(hi, f.name)
        if f.name in SIZE_INDEPENDENT or isinstance(a, (str, bool)) or a is None or b is None:
            values[f.name] = a if f.name in SIZE_INDEPENDENT or isinstance(a, (str, bool)) else None
        elif f.name.endswith("_spread"):  # noise is no line: the noisier neighbour's
            values[f.name] = max(a, b)
        elif isinstance(a, list):  # a shape: its batch dimension follows the size
            values[f.name] = [size if i == 0 and d == lo_size else d for i, d in enumerate(a)]
        elif isinstance(a, int) and isinstance(b, int):
            values[f.name] = max(0, round(_between(a, b, t)))
        else:
            values[f.name] = max(0.0, _between(float(a), float(b), t))
    return LayerProfile(**values)


def interpolate(measured: Sequence[Profile], count: int) -> Profile:
    """The profile at `count` micro-batches of the global batch, every figure of every layer on the
    straight line between the two measured sizes around it. ValueError when no measured size lies on
    each side (no extrapolation), or the measured profiles are of different layers."""
    batch = measured[0].batch
    size = batch // count
    by_size = {p.micro_batch: p for p in measured}
    if size in by_size:
        return by_size[size]
    below = [s for s in by_size if s < size]
    above = [s for s in by_size if s > size]
    if not below or not above:
        raise ValueError(f"micro-batch {size} lies outside the measured sizes {sorted(by_size)}")
    lo, hi = by_size[max(below)], by_size[min(above)]
    if [l.name for l in lo.layers] != [l.name for l in hi.layers]:
        raise ValueError(f"the profiles at micro-batch {lo.micro_batch} and {hi.micro_batch} have other layers")
    layers = [_layer_at(a, b, size, lo.micro_batch, hi.micro_batch) for a, b in zip(lo.layers, hi.layers)]
    shape = [size if i == 0 and d == lo.micro_batch else d for i, d in enumerate(lo.input_shape)]
    return replace(lo, micro_batch=size, layers=layers, input_shape=shape, whole_step_ms=None,
                   whole_step_peak_bytes=None, whole_step_spread=0.0, profile_id=None, interpolated_from=[lo.micro_batch, hi.micro_batch])


def complete(measured: Sequence[Profile], counts: Sequence[int]) -> list[Profile]:
    """A profile for each of `counts` (ascending): the measured one, else one interpolated between its
    measured neighbours; counts outside the measured sizes are left out."""
    out = []
    for m in sorted(set(counts)):
        try:
            out.append(interpolate(measured, m))
        except ValueError:
            continue
    return out


Ranking = Callable[[list[Profile]], Sequence[Sequence[tuple[int | None, float | None]]]]
"""rank(profiles) -> groups, each a choice the caller makes: (micro-batch count, predicted step ms) per
option (count None: an option that depends on no interpolated profile; step None: it does not fit)."""


def close_counts(groups: Sequence[Sequence[tuple[int | None, float | None]]], margin: float = TIE) -> set[int]:
    """The counts whose option is predicted within `margin` of its group's best step."""
    close: set[int] = set()
    for group in groups:
        steps = [step for _, step in group if step is not None and math.isfinite(step) and step > 0]
        if not steps:
            continue
        best = min(steps)
        close |= {m for m, step in group if m is not None and step is not None and step <= best * (1 + margin)}
    return close


def refine(measured: Sequence[Profile], counts: Sequence[int], rank: Ranking | None,
           measure: Callable[[list[int]], Sequence[Profile]], margin: float = TIE) -> list[Profile]:
    """Profiles for `counts`, measured where the choice is close: rank the counts from `measured` and
    the profiles interpolated between them, measure (`measure(counts) -> profiles`, which may leave out
    a size that failed) the interpolated counts within `margin` of their group's best, and rank again,
    until every close count is measured or has failed. A failed count is no longer offered. rank None:
    no ranking, the interpolated profiles as they are."""
    measured = list(measured)
    counts = sorted(set(counts))
    while True:
        profiles = complete(measured, counts)
        if rank is None:
            return profiles
        wanted = sorted(m for m in close_counts(rank(profiles), margin)
                        if any(p.micro_batches == m and p.interpolated_from for p in profiles))
        if not wanted:
            return profiles
        got = list(measure(wanted))
        measured.extend(got)
        done = {p.micro_batches for p in got}
        counts = [m for m in counts if m not in wanted or m in done]
