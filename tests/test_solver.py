"""The solver is exact: on many random chains it matches brute force over every contiguous partition."""
from __future__ import annotations

import itertools
import sys

import pytest
from hypothesis import given, settings, strategies as st

from pipebench.partition.planning import solver
from pipebench.partition.planning.solver import InfeasibleError, bottleneck, solve, stage_memory


def brute_force(costs, stages, speeds=None, memory=None, caps=None, prices=None):
    """(best bottleneck, best bounds) over all partitions, or (None, None) when nothing fits caps.
    Sums each stage directly, independently of the solver's prefix sums."""
    n = len(costs)
    speeds = speeds or [1.0] * stages
    prices = prices or [0.0] * (n - 1)
    if caps is not None and not isinstance(caps, list):
        caps = [caps] * stages
    best = best_bounds = None
    for cuts in itertools.combinations(range(1, n), stages - 1):
        bounds = [0, *cuts, n]
        worst = 0.0
        ok = True
        for s in range(stages):
            a, b = bounds[s], bounds[s + 1]
            if caps is not None and sum(memory[a:b]) > caps[s]:
                ok = False
                break
            t = sum(costs[a:b]) / speeds[s]
            t += prices[a - 1] if a > 0 else 0.0
            t += prices[b - 1] if b < n else 0.0
            worst = max(worst, t)
        if ok and (best is None or worst < best):
            best, best_bounds = worst, bounds
    return best, best_bounds


def check_valid(bounds, n, stages):
    assert bounds[0] == 0 and bounds[-1] == n and len(bounds) == stages + 1
    assert all(a < b for a, b in zip(bounds, bounds[1:])), bounds


# Small integers make ties and zero-cost layers common; floats cover the rest.
layer_cost = st.one_of(st.integers(0, 6).map(float), st.floats(0, 100, allow_nan=False))


@st.composite
def problems(draw, with_speeds=False, with_prices=False, with_caps=False):
    n = draw(st.integers(1, 9))
    stages = draw(st.integers(1, n))
    costs = draw(st.lists(layer_cost, min_size=n, max_size=n))
    kw = {}
    if with_speeds:
        kw["speeds"] = draw(st.lists(st.sampled_from([0.5, 1.0, 1.0, 1.5, 2.0, 3.0]), min_size=stages, max_size=stages))
    if with_prices:
        kw["prices"] = draw(st.lists(st.integers(0, 5).map(float), min_size=n - 1, max_size=n - 1))
    if with_caps:
        kw["memory"] = draw(st.lists(st.integers(0, 8).map(float), min_size=n, max_size=n))
        kw["caps"] = draw(st.one_of(
            st.integers(0, 20).map(float),
            st.lists(st.integers(0, 20).map(float), min_size=stages, max_size=stages),
        ))
    return costs, stages, kw


def run_solver(costs, stages, kw):
    return solve(costs, stages, speeds=kw.get("speeds"), memory=kw.get("memory"), caps=kw.get("caps"),
                 cut_prices=kw.get("prices"))


def assert_optimal(costs, stages, kw):
    expected, _ = brute_force(costs, stages, kw.get("speeds"), kw.get("memory"), kw.get("caps"), kw.get("prices"))
    if expected is None:
        with pytest.raises(InfeasibleError):
            run_solver(costs, stages, kw)
        return
    bounds = run_solver(costs, stages, kw)
    check_valid(bounds, len(costs), stages)
    got = bottleneck(costs, bounds, speeds=kw.get("speeds"), cut_prices=kw.get("prices"))
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    if "caps" in kw:
        caps = kw["caps"] if isinstance(kw["caps"], list) else [kw["caps"]] * stages
        assert all(m <= c for m, c in zip(stage_memory(kw["memory"], bounds), caps))


@settings(max_examples=400, deadline=None)
@given(problems())
def test_matches_brute_force(problem):
    assert_optimal(*problem)


@settings(max_examples=400, deadline=None)
@given(problems(with_speeds=True))
def test_matches_brute_force_with_speeds(problem):
    assert_optimal(*problem)


@settings(max_examples=400, deadline=None)
@given(problems(with_prices=True))
def test_matches_brute_force_with_cut_prices(problem):
    assert_optimal(*problem)


@settings(max_examples=400, deadline=None)
@given(problems(with_caps=True))
def test_matches_brute_force_with_caps(problem):
    assert_optimal(*problem)


@settings(max_examples=600, deadline=None)
@given(problems(with_speeds=True, with_prices=True, with_caps=True))
def test_matches_brute_force_with_everything(problem):
    assert_optimal(*problem)


def test_beats_block_partition_heuristic():
    # torchgpipe's block partition gives a slowest stage of 6 here (docs/architecture.md).
    costs = [1, 1, 1, 5, 1, 1, 1, 1]
    bounds = solve(costs, 3)
    assert bottleneck(costs, bounds) == 5


def test_faster_stage_gets_more_layers():
    costs = [1.0] * 12
    bounds = solve(costs, 2, speeds=[1.0, 2.0])
    assert bounds == [0, 4, 12]


def test_expensive_cut_is_avoided():
    costs = [1.0] * 6
    prices = [0.0, 0.0, 10.0, 0.0, 0.0]  # cutting in the middle costs more than a whole stage
    bounds = solve(costs, 2, cut_prices=prices)
    assert 3 not in bounds
    assert bottleneck(costs, bounds, cut_prices=prices) == 4.0


def test_infeasible_caps_say_what_is_needed():
    memory = [4.0, 4.0, 4.0, 4.0]
    with pytest.raises(InfeasibleError) as err:
        solve([1.0] * 4, 2, memory=memory, caps=7.0)
    assert err.value.needed == 8.0
    assert "needs 8 B" in str(err.value)


def test_infeasible_matches_brute_force_leanest():
    memory = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    with pytest.raises(InfeasibleError) as err:
        solve([1.0] * 8, 3, memory=memory, caps=10.0)
    leanest, _ = brute_force(memory, 3)
    assert err.value.needed == leanest == 14.0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(costs=[1, 2], stages=3), r"more stages than layers \(3 > 2\)"),
        (dict(costs=[1, 2], stages=0), "at least one stage"),
        (dict(costs=[1, -2], stages=1), ">= 0"),
        (dict(costs=[1, 2], stages=2, speeds=[1.0]), r"one speed per stage \(1 != 2\)"),
        (dict(costs=[1, 2], stages=2, speeds=[1.0, 0.0]), "> 0"),
        (dict(costs=[1, 2], stages=2, caps=3.0), "per-layer memory"),
        (dict(costs=[1, 2], stages=2, cut_prices=[1.0, 2.0]), r"\(2 != 1\)"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        solve(**kwargs)


def test_large_chain_is_balanced():
    costs = [float(1 + (i * 7919) % 13) for i in range(1000)]
    bounds = solve(costs, 8, speeds=[1, 1, 2, 2, 1, 1, 0.5, 1], memory=[1.0] * 1000, caps=200.0,
                   cut_prices=[((i * 31) % 5) / 10 for i in range(999)])
    check_valid(bounds, 1000, 8)


def test_solver_imports_no_torch():
    import subprocess
    code = "import sys, partition.planning.solver, partition.planning.schedule_order, partition.planning.simulator; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@st.composite
def launch_bound_problems(draw):
    """A stage costs max(device sum / speed, CPU sum) for forward and for backward: not a sum of layers."""
    n = draw(st.integers(1, 8))
    stages = draw(st.integers(1, n))
    figures = [draw(st.lists(layer_cost, min_size=n, max_size=n)) for _ in range(4)]
    speeds = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=stages, max_size=stages))
    prices = draw(st.lists(st.integers(0, 5).map(float), min_size=n - 1, max_size=n - 1))
    memory = draw(st.lists(st.integers(0, 5).map(float), min_size=n, max_size=n))
    caps = draw(st.one_of(st.none(), st.lists(st.integers(3, 12).map(float), min_size=stages, max_size=stages)))
    return n, stages, figures, speeds, prices, memory, caps


@settings(max_examples=300, deadline=None)
@given(launch_bound_problems())
def test_solve_intervals_matches_brute_force_for_launch_bound_stages(problem):
    n, stages, (fwd, fwd_cpu, bwd, bwd_cpu), speeds, prices, memory, caps = problem

    def cost(s, a, b):
        return (max(sum(fwd[a:b]) / speeds[s], sum(fwd_cpu[a:b]))
                + max(sum(bwd[a:b]) / speeds[s], sum(bwd_cpu[a:b])))

    def value(bounds):
        cut = [0.0, *(prices[b - 1] for b in bounds[1:-1]), 0.0]
        return max(cost(s, a, b) + cut[s] + cut[s + 1] for s, (a, b) in enumerate(zip(bounds, bounds[1:])))

    def fits(bounds):
        return caps is None or all(sum(memory[a:b]) <= caps[s] for s, (a, b) in enumerate(zip(bounds, bounds[1:])))

    every = [[0, *cuts, n] for cuts in itertools.combinations(range(1, n), stages - 1)]
    feasible = [b for b in every if fits(b)]
    if not feasible:
        with pytest.raises(InfeasibleError):
            solver.solve_intervals(n, stages, cost, memory=memory, caps=caps, cut_prices=prices)
        return
    bounds = solver.solve_intervals(n, stages, cost, memory=memory, caps=caps, cut_prices=prices)
    check_valid(bounds, n, stages)
    assert fits(bounds)
    assert value(bounds) == pytest.approx(min(value(b) for b in feasible), rel=1e-9, abs=1e-12)
