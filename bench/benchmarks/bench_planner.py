"""How fast the planner answers: the exact solver and the micro-batch search on a large chain.

Run: pytest bench/benchmarks/bench_planner.py   (a benchmark, not a test: it prints times, asserts only validity)
Target: 1,000 layers into 8 stages with speeds, caps and cut prices, plus the micro-batch
search, well under a second on a 2-core CPU.
"""
from __future__ import annotations

import random

import pytest

from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.partition.planning.solver import solve

LAYERS, STAGES = 1000, 8
SPEEDS = [1.0, 1.0, 1.5, 1.5, 1.0, 1.0, 0.5, 1.0]


def _chain(seed=0):
    rng = random.Random(seed)
    costs = [rng.uniform(0.1, 2.0) for _ in range(LAYERS)]
    memory = [rng.uniform(1.0, 3.0) for _ in range(LAYERS)]
    prices = [rng.uniform(0.0, 0.2) for _ in range(LAYERS - 1)]
    return costs, memory, prices


def _profiles(batch=256):
    """Synthetic profiles at 7 micro-batch sizes: per-sample time falls as micro-batches grow."""
    rng = random.Random(1)
    base = [rng.uniform(0.01, 0.2) for _ in range(LAYERS)]
    profiles = []
    for m in (1, 2, 4, 8, 16, 32, 64):
        mb = batch // m
        layers = [
            LayerProfile(f"layer_{i}", 1000, 4000, t * mb + 0.02, 2 * t * mb + 0.04, 4096 * mb, [mb, 1024],
                         "float32", 8192 * mb)
            for i, t in enumerate(base)
        ]
        profiles.append(Profile("synthetic", "bench", "cpu", "cpu", "-", batch, mb, 1, 0, [mb, 1024], "float32", layers))
    return profiles


@pytest.mark.benchmark(group="planner")
def test_solve_1000_layers_into_8_stages(benchmark):
    costs, memory, prices = _chain()
    cap = 1.3 * sum(memory) / STAGES
    bounds = benchmark(solve, costs, STAGES, speeds=SPEEDS, memory=memory, caps=cap, cut_prices=prices)
    assert len(bounds) == STAGES + 1
    benchmark.extra_info.update(layers=LAYERS, stages=STAGES, bounds=bounds)


@pytest.mark.benchmark(group="planner")
def test_plan_with_micro_batch_search(benchmark):
    profiles = _profiles()
    plan = benchmark(make_plan, profiles, ["cpu"] * STAGES, speeds=SPEEDS, max_memory=400 * 2**20, link_gbps=100.0)
    assert all("samples_per_s" in c for c in plan.candidates)  # every candidate was solved, none skipped
    benchmark.extra_info.update(layers=LAYERS, stages=STAGES, candidates=len(profiles),
                                micro_batches=plan.micro_batches)
