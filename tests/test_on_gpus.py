"""On real GPUs: profiling synchronises and measures, plans span the GPUs. Skipped without GPUs."""
from __future__ import annotations

import pytest
import torch

from pipebench import models
from pipebench.bench.cli import main
from pipebench.partition.profiling.measure import profile_model
from pipebench.request import Request
from pipebench.base.training import Training


@pytest.mark.gpu
def test_profile_on_gpu_returns_model_home():
    model = models.get_model("resnet18", "tiny")
    profile = profile_model(model, "cuda", micro_batch=8, repeats=2, warmup=1)
    assert profile.device.startswith("cuda:") and profile.device_name
    assert all(layer.forward_ms > 0 for layer in profile.layers)
    assert next(model.layers.parameters()).device.type == "cpu"


@pytest.mark.multigpu
def test_plan_across_two_gpus(tmp_path, capsys):
    plan_file = tmp_path / "plan.json"
    code = main(["plan", "--model", "gpt", "--flavour", "tiny", "--gpus", "0,1", "--batch", "16",
                 "--json", str(plan_file)])
    assert code == 0
    out = capsys.readouterr().out
    assert "cuda:1" in out and torch.cuda.device_count() >= 2


@pytest.mark.multigpu
@pytest.mark.parametrize("strategy, micro_batches", [("ddp", 1), ("pp-1f1b", 2), ("pp-zbv", 4), ("pipeline", 2)])
def test_strategies_on_two_gpus_agree_with_one(strategy, micro_batches):
    """NCCL process groups through torchrun on real GPUs: same first loss as one GPU (tiny GPT)."""
    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.run_job import launch

    common = dict(flavour="tiny", batch=16, steps=1, warmup=0)
    single = launch(Job.by_hand("gpt", "single", devices=1, **common), gpus=[0], timeout=300)
    bounds = [0, 2, 4, 5, 7] if strategy == "pp-zbv" else [0, 4, 7]
    other = launch(Job.by_hand("gpt", strategy, devices=2, micro_batches=micro_batches, bounds=bounds, **common),
                   gpus=[0, 1], timeout=300)
    assert other.first_loss == pytest.approx(single.first_loss, rel=1e-4)
    assert len(other.peak_memory_bytes) == 2 and all(b > 0 for b in other.peak_memory_bytes)


@pytest.mark.gpu
def test_gpu_memory_caps_a_worker_for_real(tmp_path):
    """--gpu-memory: the worker's allocator refuses past the cap, as a smaller card would; the same job runs
    without it."""
    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.run_job import launch
    from pipebench.bench.launch.spawn import WorkerError

    common = dict(flavour="tiny", batch=8, devices=1, steps=1, warmup=0, training=Training(precision="bf16", optimizer="adamw"))
    assert launch(Job.by_hand("gpt", "single", **common), gpus=[0], timeout=300).first_loss > 0
    with pytest.raises(WorkerError) as caught:
        launch(Job.by_hand("gpt", "single", gpu_memory=2**16, **common), gpus=[0], timeout=300)
    assert caught.value.oom


@pytest.mark.gpu
def test_the_single_baseline_predicts_the_peak_it_measures():
    """The profile measures the whole step's peak; the single baseline's prediction is within 10% of the
    peak the trainer then measures."""
    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.run_job import launch
    from pipebench.partition.planning.plan_choice import make_plan

    model = models.get_model("resnet18", "full")
    profile = profile_model(model, "cuda", micro_batch=32, batch=32, repeats=2, warmup=1)
    assert profile.whole_step_peak_bytes and profile.whole_step_peak_bytes > 0
    predicted = make_plan([profile], Request(devices=["cuda:0"], micro_batches=1)).memory_per_device()[0]
    measured = launch(Job.by_hand("resnet18", "single", flavour="full", batch=32, devices=1, steps=2, warmup=1),
                      gpus=[0], timeout=300).peak_memory_bytes[0]
    assert abs(predicted - measured) / measured < 0.10, (predicted, measured)
