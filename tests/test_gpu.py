"""On real GPUs: profiling synchronises and measures, plans span the GPUs. Skipped without GPUs."""
from __future__ import annotations

import pytest
import torch

import models
from bench.cli import main
from partition.profiler import profile_model


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
