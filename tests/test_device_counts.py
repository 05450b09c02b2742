"""Every strategy of the registry on every device count: it trains equal to one device, or it is
`unavailable` with a reason, never failed.

Each case goes the way `pipebench run` takes it (bench/cases/prepare.py prepare: predicted from a profile,
planned, a Job or CaseUnavailable), then runs in the session's warm worker groups (CPU processes
through gloo, as GPUs through NCCL) and is checked against one device after a step. Planning and
prediction alone (no processes) sweep 1 to 8 devices."""
from __future__ import annotations

import dataclasses

import pytest

from pipebench import models
from pipebench.bench.predict.ranking import rank_strategies, predict
from pipebench.bench.launch.spawn import WorkerError
from pipebench.bench.strategies import STRATEGIES
from pipebench.bench.cases.case import Case, CaseUnavailable
from pipebench.bench.cases.prepare import CaseProfiles, prepare
from pipebench.bench.cases.machine import Machine
from pipebench.partition.profiling.measure import profile_model

from test_distributed import SEED, check

DEPTH = 9
"""The zoo's tiny MLP with 9 hidden layers: 10 layers, enough for 2 stages on each of 5 devices."""


def profiles_for(batch: int, counts):
    """The tiny MLP profiled at each micro-batch count in `counts` (one timed repeat: the figures steer
    the planner's choices, which any figure makes valid)."""
    model = models.get_model("mlp", "tiny", seed=SEED, depth=DEPTH)
    return [profile_model(model, "cpu", micro_batch=batch // m, batch=batch, repeats=1, warmup=0) for m in counts]


@pytest.fixture(scope="module")
def sixty():
    """Batch 60 splits over 1 to 5 replicas and into micro-batches for every schedule on them."""
    return CaseProfiles(profiles_for(60, [1, 2, 3, 4, 5, 6, 10, 12, 15, 20]), path=None)


def prepared(strategy: str, devices: int, profiled: CaseProfiles, batch: int):
    case = Case("mlp", "tiny", batch, strategy, overrides=(("depth", DEPTH),))
    return prepare(case, Machine(None, devices, "cpu"), profiled, steps=1, warmup=0)


def runs_here(strategy: str, devices: int) -> bool:
    """What the registry promises: hybrid needs 2 or more copies of its 2 stages; every other strategy
    runs on any count (a multi-process one on one device as a group of one)."""
    return strategy != "hybrid" or (devices >= 4 and devices % 2 == 0)


def sweep(tmp_path, groups, profiled, devices: int, strategy: str) -> None:
    try:
        job = prepared(strategy, devices, profiled, 60).job
    except CaseUnavailable as exc:
        assert not runs_here(strategy, devices), f"{strategy} on {devices}: unavailable: {exc}"
        assert str(exc).strip(), "an unavailable case says why"
        return
    assert runs_here(strategy, devices), f"{strategy} on {devices} devices should be unavailable"
    job = dataclasses.replace(job, save_params=True, seed=SEED)
    try:
        result = check(tmp_path, job, groups)
    except WorkerError as exc:  # a schedule the installed torch lacks: unavailable, said by the worker
        assert exc.unavailable, f"{strategy} on {devices} devices failed: {exc}"
        return
    assert result.world_size == STRATEGIES[strategy].processes(devices)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("devices", [1, 2])
def test_every_strategy_trains_like_one_device_or_is_unavailable(tmp_path, groups, sixty, devices, strategy):
    sweep(tmp_path, groups, sixty, devices, strategy)


@pytest.mark.slow
@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("devices", [3, 4, 5])
def test_every_strategy_on_three_to_five_devices(tmp_path, groups, sixty, devices, strategy):
    sweep(tmp_path, groups, sixty, devices, strategy)


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_every_strategy_is_predicted_and_planned_on_one_to_eight_devices():
    """No processes: on 1 to 8 devices each strategy has a predicted figure and a Job, or a reason and
    an unavailable case, the two alike; advise ranks them on every count."""
    batch = 840  # splits over 1 to 8 replicas
    profiled = CaseProfiles(profiles_for(batch, [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 15, 20, 24]), path=None)
    for devices in range(1, 9):
        machine = Machine(None, devices, "cpu")
        for name, strategy in STRATEGIES.items():
            prediction = predict(name, profiled.profiles, machine.request())
            try:
                job = prepared(name, devices, profiled, batch).job
            except CaseUnavailable as exc:
                assert prediction.predicted_step_ms is None and str(exc).strip(), (name, devices)
                assert not runs_here(name, devices) or (  # more stages than the MLP's 10 layers
                    strategy.needs_plan and strategy.devices_used(devices) * strategy.stages_per_device > DEPTH + 1)
                continue
            assert runs_here(name, devices), (name, devices)
            assert prediction.predicted_step_ms > 0 and job.processes == strategy.processes(devices), (name, devices)
        advice = rank_strategies(profiled.profiles, machine.request())
        assert advice.recommended is not None
        ranked = {p.strategy for p in advice.predictions}
        assert "ddp" in ranked and "fsdp" in ranked and "pp-1f1b" in ranked, devices  # on one device too


@pytest.mark.ci  # a whole run or train through the command line, 10-20 s: CI runs it after the default set
def test_run_on_one_device_with_local_mnist(tmp_path):
    """`run --device cpu --cpu-processes 1 --data-dir DIR`: DDP on one device trains as a group of one, on the
    folder's images (the first loss is the one of the data, not of synthetic batches)."""
    import json

    from pipebench.bench.cli import main
    from pipebench.bench.strategies.planned.single import SingleTrainer

    from test_models import write_idx_mnist

    write_idx_mnist(tmp_path / "mnist", train_count=20, test_count=4)
    out = tmp_path / "out"
    assert main(["run", "--device", "cpu", "--cpu-processes", "1", "--models", "convnet", "--strategies", "single,ddp",
                 "--data-dir", str(tmp_path / "mnist"), "--out", str(out), "--repeats", "1"]) == 0
    rows = json.loads(next(out.glob("*.json")).read_text())["rows"]
    assert [(r["strategy"], r["status"], r["world_size"]) for r in rows] == [("single", "ok", 1), ("ddp", "ok", 1)]
    assert all("data_dir=" in r["settings"] for r in rows)
    model = models.get_model("convnet", "tiny", seed=0, data_dir=str(tmp_path / "mnist"))
    inputs, targets = model.make_batch(8, seed=1)
    loss = SingleTrainer(model, ["cpu"]).step(inputs, targets)
    assert rows[0]["first_loss"] == pytest.approx(loss, rel=1e-4) and rows[1]["first_loss"] == pytest.approx(loss, rel=1e-4)
