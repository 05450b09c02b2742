"""Exact contiguous partitioning: cut a chain of layers into stages so that the slowest stage is fastest.

Pure Python, no torch: the planner hands it plain numbers and the tests prove it against brute force.

The time of stage s holding layers [a, b) is

    T(s, a, b) = (costs[a] + ... + costs[b-1]) / speeds[s] + price[a-1] + price[b-1]

where price[i] is the price of cutting between layer i and layer i+1 (moving activations forward and
gradients back); a stage pays for the cut it receives from and the cut it sends to, and the ends of the
chain are free. Its memory is memory[a] + ... + memory[b-1], which must not exceed caps[s].

The solver minimises max_s T(s, a_s, b_s) over all contiguous partitions with one or more layers per
stage. It searches over bottleneck values: `_fits(B)` decides exactly whether some partition keeps every
stage within B (greedy when there are no cut prices, a sliding-window scan when there are), and a
bisection between a proven lower bound and the value of a partition that is known to fit narrows down
to the optimum. Every upper bound it keeps is the value of a real partition, so the answer is always
attained, and it stops once no better value can lie between the bounds except by rounding (relative
gap 1e-12). Unlike block-partition heuristics (torchgpipe's gives 6 on [1,1,1,5,1,1,1,1] into 3 stages
where 5 is possible) this is optimal.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass
from itertools import accumulate
from numbers import Integral, Real
from typing import Sequence
from pipebench.base.errors import UserError
from pipebench.request import check_stage_count
from pipebench.base.text.units import format_bytes

__all__ = ["InfeasibleError", "solve", "solve_intervals", "stage_times", "stage_memory", "bottleneck"]

_REL_GAP = 1e-12


class InfeasibleError(UserError):
    """No partition fits the memory caps.

    `needed` is the memory of the largest stage in the partition that needs least memory: caps of at
    least that much on every stage would make a plan possible.
    """

    def __init__(self, message: str, needed: float):
        super().__init__(message)
        self.needed = needed


@dataclass(frozen=True)
class _Problem:
    n: int
    stages: int
    costs: list[float]
    prefix: list[float]  # prefix[i] = costs[0] + ... + costs[i-1]
    speeds: list[float]
    memory: list[float] | None
    mem_prefix: list[float] | None
    caps: list[float] | None
    in_price: list[float]  # in_price[a] = price of the cut before layer a (0 for a = 0)
    out_price: list[float]  # out_price[b] = price of the cut after layer b-1 (0 for b = n)

    def time(self, s: int, a: int, b: int) -> float:
        return (self.prefix[b] - self.prefix[a]) / self.speeds[s] + self.in_price[a] + self.out_price[b]

    def bottleneck(self, bounds: Sequence[int]) -> float:
        return max(self.time(s, bounds[s], bounds[s + 1]) for s in range(len(bounds) - 1))

    def fits_memory(self, s: int, a: int, b: int) -> bool:
        return self.mem_prefix is None or self.mem_prefix[b] - self.mem_prefix[a] <= self.caps[s]


def solve(
    costs: Sequence[float],
    stages: int,
    *,
    speeds: Sequence[float] | None = None,
    memory: Sequence[float] | None = None,
    caps: float | Sequence[float] | None = None,
    cut_prices: Sequence[float] | None = None,
) -> list[int]:
    """Stage boundaries [0, b1, ..., n] of the partition whose slowest stage is fastest.

    costs: time of each layer on a reference device (any unit, >= 0).
    stages: number of stages, 1 <= stages <= len(costs).
    speeds: per-stage speed factor (> 0); a stage on a device twice as fast has speed 2.
    memory: bytes each layer needs on its stage; with caps, a stage may hold at most caps[s] bytes.
    caps: one cap for all stages or one per stage.
    cut_prices: len(costs) - 1 prices, cut_prices[i] for cutting between layers i and i+1.
    Stage s holds layers bounds[s]:bounds[s+1].
    """
    problem = _make_problem(costs, stages, speeds, memory, caps, cut_prices)  # each argument read once:
    n = problem.n  # a generator is consumed there, so only the problem's lists are read below
    if problem.caps is not None:
        _check_memory_feasible(problem)

    # Lower bound: no stage can do better than sharing the work perfectly or than its largest layer.
    total = problem.prefix[n]
    lo = total / sum(problem.speeds)
    lo = max(lo, max(problem.costs) / max(problem.speeds))
    best = _fits(problem, lo)
    if best is not None:  # the lower bound is attained
        return best
    best = _fits(problem, float("inf"))
    assert best is not None  # memory feasibility was checked above
    hi = problem.bottleneck(best)
    while hi - lo > _REL_GAP * max(hi, 1e-300):
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        found = _fits(problem, mid)
        if found is None:
            lo = mid
        else:
            best = found
            hi = problem.bottleneck(best)
    return best


def solve_intervals(
    n: int,
    stages: int,
    cost,
    *,
    memory: Sequence[float] | None = None,
    caps: Sequence[float] | None = None,
    cut_prices: Sequence[float] | None = None,
) -> list[int]:
    """Stage boundaries of the partition of n layers whose slowest stage is fastest, for any stage cost.

    cost(s, a, b): the time of stage s holding layers [a, b), without cut prices; it must not shrink when
    a stage takes more layers. The planner uses it when a stage costs the larger of its CPU and its
    device time (what the CPU launches and what the device runs overlap), which is no sum of per-layer
    figures. Exact by dynamic programming over (stage, end): O(stages x n^2) calls of `cost`, fine for
    the at most a few hundred cut candidates a model has; `solve` is the fast path for additive costs."""
    check_stage_count(stages, n)
    prices = [0.0] * max(n - 1, 0) if cut_prices is None else [float(c) for c in cut_prices]
    price_in = [0.0, *prices, 0.0]  # price_in[a]: the cut before layer a; price_in[b] also the cut after b - 1
    mem_prefix = None if memory is None else [0.0, *accumulate(float(m) for m in memory)]
    inf = float("inf")
    best = [0.0] + [inf] * n  # best[b]: slowest stage of the best split of layers [0, b) so far
    parents: list[list[int]] = []
    for s in range(stages):
        last = n - (stages - 1 - s)
        new = [inf] * (n + 1)
        parent = [-1] * (n + 1)
        for b in range(s + 1, last + 1) if s < stages - 1 else (n,):
            for a in range(s, b):
                if best[a] == inf:
                    continue
                if mem_prefix is not None and caps is not None and mem_prefix[b] - mem_prefix[a] > caps[s]:
                    continue
                value = max(best[a], cost(s, a, b) + price_in[a] + (price_in[b] if b < n else 0.0))
                if value < new[b]:
                    new[b], parent[b] = value, a
        parents.append(parent)
        best = new
    if best[n] == inf:
        raise InfeasibleError(f"no split into {stages} stages fits the memory caps", 0.0)
    return _walk_back(parents, n)


def stage_times(
    costs: Sequence[float],
    bounds: Sequence[int],
    *,
    speeds: Sequence[float] | None = None,
    cut_prices: Sequence[float] | None = None,
) -> list[float]:
    """Time of each stage of the partition `bounds`, by the formula in the module docstring."""
    problem = _make_problem(costs, len(bounds) - 1, speeds, None, None, cut_prices)
    return [problem.time(s, bounds[s], bounds[s + 1]) for s in range(len(bounds) - 1)]


def bottleneck(costs, bounds, *, speeds=None, cut_prices=None) -> float:
    """Time of the slowest stage of the partition `bounds`."""
    return max(stage_times(costs, bounds, speeds=speeds, cut_prices=cut_prices))


def stage_memory(memory: Sequence[float], bounds: Sequence[int]) -> list[float]:
    """Memory of each stage of the partition `bounds`."""
    return [sum(memory[bounds[s]:bounds[s + 1]]) for s in range(len(bounds) - 1)]


def _numbers(values, name: str) -> list[float]:
    """`values` as a list of floats, or one UserError line naming the argument (solve(None, 2)
    would otherwise be a TypeError of len())."""
    try:
        items = None if isinstance(values, (str, bytes, dict)) else list(values)
    except TypeError:
        items = None
    if items is None or not all(isinstance(v, Real) and not isinstance(v, bool) for v in items):
        raise UserError(f"{name} takes a list of numbers, got {str(values)[:40]!r} ({type(values).__name__})")
    try:
        return [float(v) for v in items]
    except OverflowError:  # an int such as 10**400: float() cannot hold it
        raise UserError(f"{name} takes finite numbers; one is too large for a float "
                        f"({max(items, key=abs)!s:.20}...)") from None


def _make_problem(costs, stages, speeds, memory, caps, cut_prices) -> _Problem:
    costs = _numbers(costs, "costs")
    if isinstance(stages, bool) or not isinstance(stages, Integral):
        raise UserError(f"stages takes a positive integer, got {str(stages)[:40]!r} ({type(stages).__name__})")
    n = len(costs)
    check_stage_count(stages, n)
    if not all(0 <= c < float("inf") for c in costs):  # NaN too: it fails every comparison
        raise UserError("layer costs must be finite and >= 0")
    speeds = [1.0] * stages if speeds is None else _numbers(speeds, "speeds")
    if len(speeds) != stages:
        raise UserError(f"need one speed per stage ({len(speeds)} != {stages})")
    if not all(0 < v < float("inf") for v in speeds):  # NaN left the bisection without a bound
        raise UserError("stage speeds must be finite and > 0")
    mem_prefix = cap_list = None
    if caps is not None:
        if memory is None:
            raise UserError("memory caps need per-layer memory")
        memory = _numbers(memory, "memory")
        if len(memory) != n:
            raise UserError(f"need one memory figure per layer ({len(memory)} != {n})")
        if not all(0 <= m < float("inf") for m in memory):  # a NaN figure fitted every cap
            raise UserError("layer memory must be finite and >= 0")
        cap_list = _numbers([caps], "caps") * stages if isinstance(caps, Real) and not isinstance(caps, bool) \
            else _numbers(caps, "caps")
        if len(cap_list) != stages:
            raise UserError(f"need one memory cap per stage ({len(cap_list)} != {stages})")
        if not all(0 <= c <= float("inf") for c in cap_list):  # NaN: every stage fitted it
            raise UserError("memory caps must be numbers >= 0 (inf: no cap)")
        mem_prefix = [0.0, *accumulate(memory)]
    prices = [0.0] * max(n - 1, 0) if cut_prices is None else _numbers(cut_prices, "cut_prices")
    if len(prices) != max(n - 1, 0):
        raise UserError(f"need one cut price between each pair of layers ({len(prices)} != {n - 1})")
    if not all(0 <= c < float("inf") for c in prices):  # NaN passed `c < 0`
        raise UserError("cut prices must be finite and >= 0")
    return _Problem(
        n=n,
        stages=stages,
        costs=costs,
        prefix=[0.0, *accumulate(costs)],
        speeds=speeds,
        memory=memory if caps is not None else None,
        mem_prefix=mem_prefix,
        caps=cap_list,
        in_price=[0.0, *prices, 0.0],  # index a: price of the cut before layer a
        out_price=[0.0, *prices, 0.0],  # index b: price of the cut after layer b-1; b = n is free
    )


def _fits(problem: _Problem, limit: float) -> list[int] | None:
    """Boundaries of a partition whose every stage takes at most `limit` and fits its cap, or None."""
    identical = len(set(problem.speeds)) == 1 and (problem.caps is None or len(set(problem.caps)) == 1)
    if identical and not any(problem.in_price):
        return _fits_greedy(problem, limit)
    return _fits_scan(problem, limit)


def _fits_greedy(problem: _Problem, limit: float) -> list[int] | None:
    """For identical stages without cut prices, letting each stage reach as far as it can (leaving one
    layer for each later stage) is never worse: a stage's time and memory only grow with its layers, and
    any layer a later stage is forced to take alone fits, since some stage of any fitting plan holds it.
    (Unequal speeds or caps break the second half: a slow stage forced to take a costly layer.)"""
    n, p = problem.n, problem.stages
    prefix, mem = problem.prefix, problem.mem_prefix
    bounds = [0]
    a = 0
    for s in range(p):
        last = n - (p - 1 - s)  # furthest end that leaves a layer to every later stage
        if s == p - 1:
            b = n
        else:
            b = bisect_right(prefix, prefix[a] + limit * problem.speeds[s], a + 1, last + 1) - 1
            if mem is not None:
                b = min(b, bisect_right(mem, mem[a] + problem.caps[s], a + 1, last + 1) - 1)
            while b > a and problem.time(s, a, b) > limit:  # rounding in the prefix sums
                b -= 1
            if b <= a:
                return None
        if problem.time(s, a, b) > limit or not problem.fits_memory(s, a, b):
            return None
        bounds.append(b)
        a = b
    return bounds


def _fits_scan(problem: _Problem, limit: float) -> list[int] | None:
    """With cut prices, a longer stage may be cheaper (it ends at a cheaper cut), and with unequal
    stages a slow stage may be better off ending early, so keep every end a stage can reach.

    Stage s can end at b if some reachable start a in a window satisfies
    prefix[a]/v - in_price[a] >= prefix[b]/v + out_price[b] - limit; the window's ends only move right
    as b grows (time and memory bounds), so a monotone deque gives the best a for every b in O(n).
    Only ends inside a band are scanned: the stages up to s cannot have done more than limit x their
    speeds, and the stages after s cannot do more either. Near the optimum that band is narrow.
    """
    n = problem.n
    speed_before = list(accumulate(problem.speeds))  # speed_before[s] = speeds[0] + ... + speeds[s]
    reachable = [False] * (n + 1)
    reachable[0] = True
    reach_lo = 0  # reachable ends of the previous stage lie in [reach_lo, n]
    parents: list[list[int]] = []
    for s in range(problem.stages):
        ends = _end_band(problem, s, limit, reach_lo, speed_before)
        parent, reachable, reach_lo = _reachable_ends(problem, s, limit, reachable, reach_lo, ends)
        if reach_lo > n:
            return None
        parents.append(parent)
    if not reachable[n]:
        return None
    return _walk_back(parents, n)


_BAND_SLACK = 1 + 1e-9
"""_end_band's band is only a shortcut: keep it wider than rounding could matter."""


def _end_band(problem: _Problem, s: int, limit: float, reach_lo: int, speed_before: list[float]) -> range:
    """The ends stage s may have: past the previous stage's first reachable end, leaving a layer to each
    later stage (the last stage ends the chain); under a finite limit, no more work done by the stages up
    to s, nor left for those after it, than `limit` x their speeds allows."""
    n, p, prefix = problem.n, problem.stages, problem.prefix
    first_end = max(n if s == p - 1 else s + 1, reach_lo + 1)
    last_end = n - (p - 1 - s)
    if limit != float("inf"):
        done_at_most = limit * speed_before[s] * _BAND_SLACK
        left_at_most = limit * (speed_before[-1] - speed_before[s]) * _BAND_SLACK
        last_end = min(last_end, bisect_right(prefix, done_at_most) - 1)
        first_end = max(first_end, bisect_left(prefix, prefix[n] - left_at_most))
    return range(first_end, last_end + 1)


def _reachable_ends(problem: _Problem, s: int, limit: float, reachable: list[bool], reach_lo: int,
                    ends: range) -> tuple[list[int], list[bool], int]:
    """Which of `ends` stage s reaches within `limit` from the previous stage's `reachable` ends: per end,
    the start it comes from (-1: none) and whether it is reached, and the first end reached (n + 1:
    none). The candidate starts wait in a deque, best (most time left to stage s) first."""
    n, prefix, in_price, v = problem.n, problem.prefix, problem.in_price, problem.speeds[s]

    def score(a: int) -> float:  # the larger, the more of `limit` a start at a leaves stage s
        return prefix[a] / v - in_price[a]

    parent = [-1] * (n + 1)
    next_reachable = [False] * (n + 1)
    next_lo = n + 1
    window: deque[int] = deque()  # candidate starts, score decreasing
    pushed = reach_lo  # starts < pushed have been considered
    low = reach_lo  # starts < low are too far back for time or memory
    for b in ends:
        while pushed < b:  # starts a < b become candidates
            if reachable[pushed]:
                while window and score(window[-1]) <= score(pushed):
                    window.pop()
                window.append(pushed)
            pushed += 1
        low = _first_start_in_reach(problem, s, limit, low, b)
        while window and window[0] < low:
            window.popleft()
        if window and problem.time(s, window[0], b) <= limit:  # window[0]: the start that leaves most time
            next_reachable[b] = True
            parent[b] = window[0]
            next_lo = min(next_lo, b)
    return parent, next_reachable, next_lo


def _first_start_in_reach(problem: _Problem, s: int, limit: float, low: int, b: int) -> int:
    """The first start from `low` on from which stage s can end at b: out of reach are the starts whose
    work to b exceeds `limit` even without cut prices, or whose memory exceeds the stage's cap."""
    prefix, mem, v = problem.prefix, problem.mem_prefix, problem.speeds[s]
    while low < b and (prefix[b] - prefix[low]) / v > limit:
        low += 1
    if mem is not None:
        while low < b and mem[b] - mem[low] > problem.caps[s]:
            low += 1
    return low


def _walk_back(parents: list[list[int]], n: int) -> list[int]:
    """The bounds [0, ..., n] that the stages' parents lead to, from the last stage's end at n back."""
    bounds = [n]
    for s in range(len(parents) - 1, -1, -1):
        bounds.append(parents[s][bounds[-1]])
    return bounds[::-1]


def _check_memory_feasible(problem: _Problem) -> None:
    """Raise InfeasibleError, saying what the leanest partition needs, when nothing fits the caps."""
    if _fits(problem, float("inf")) is not None:
        return
    leanest = solve(problem.memory, problem.stages)
    per_stage = stage_memory(problem.memory, leanest)
    needed = max(per_stage)
    worst = per_stage.index(needed)
    caps = sorted(set(problem.caps))
    shown = format_bytes(caps[0]) if len(caps) == 1 else "from " + " to ".join(map(format_bytes, (caps[0], caps[-1])))
    raise InfeasibleError(
        f"no split into {problem.stages} stages fits the memory cap ({shown} per stage): "
        f"the leanest split needs {format_bytes(needed)} on its largest stage "
        f"(stage {worst}: layers {leanest[worst]}-{leanest[worst + 1] - 1}, cap {format_bytes(problem.caps[worst])})",
        needed,
    )
