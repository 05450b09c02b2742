"""The library API: pipebench.plan / pipebench.profile, and a Plan handing itself to torchgpipe's balance
and torch.distributed.pipelining's split_spec."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import pipebench
from pipebench import models
from pipebench.base.errors import UserError


@pytest.mark.parametrize("name", [pytest.param("resnet18", marks=pytest.mark.ci), "gpt", "convnet"])
def test_split_spec_makes_pipeline_build_exactly_the_planned_stages(name):
    from torch.distributed.pipelining import pipeline

    torch.set_num_threads(1)
    model = models.get_model(name, "tiny")
    plan = pipebench.plan(model, batch=8, stages=3, micro_batches=2, repeats=1)
    assert sum(plan.balance) == len(model) and len(plan.balance) == 3
    inputs, _ = model.make_batch(plan.micro_batch_size)
    pipe = pipeline(model.layers, mb_args=(inputs,), split_spec=plan.split_spec())
    assert pipe.num_stages == len(plan.stages)
    for k, stage in enumerate(plan.stages):
        module = pipe.get_stage_module(k)
        assert sum(p.numel() for p in module.parameters()) == stage.params
        owners = {name.split(".")[0] for name, _ in module.named_parameters()}
        assert owners <= set(stage.layers), (k, owners, stage.layers)


def test_plan_from_saved_profiles_and_a_round_trip(tmp_path):
    profiles = pipebench.profile("mlp", batch=8, flavour="tiny", micro_batches=2, repeats=1)
    assert [p.micro_batch for p in profiles] == [4] and profiles[0].link_gbps is None
    pipebench.save_profiles(profiles, tmp_path / "p.json")
    plan = pipebench.plan(profiles=pipebench.load_profiles(tmp_path / "p.json"), stages=2, schedule="gpipe")
    plan.save(tmp_path / "plan.json")
    again = pipebench.Plan.load(tmp_path / "plan.json")
    assert again == plan and again.plan_id == plan.plan_id and again.placement == [0, 1]
    zbv = pipebench.plan(profiles=profiles, stages=2, schedule="zbv")
    assert zbv.placement == [0, 1, 1, 0] and zbv.stages_on(0) == [0, 3]


def test_plan_takes_the_training_whole_or_in_parts():
    from pipebench.base.training import Training

    profiles = pipebench.profile("mlp", batch=8, flavour="tiny", micro_batches=2, repeats=1)
    whole = pipebench.plan(profiles=profiles, stages=2, training=Training(optimizer="adamw", checkpoint="always"))
    parts = pipebench.plan(profiles=profiles, stages=2, optimizer="adamw", checkpoint="always")
    assert whole == parts and whole.training == Training(optimizer="adamw", checkpoint="always")
    assert all(s.recompute for s in whole.stages)
    plain = pipebench.plan(profiles=profiles, stages=2)
    assert plain.training == Training() and not any(s.recompute for s in plain.stages)
    with pytest.raises(UserError, match="give training or optimizer, not both"):
        pipebench.plan(profiles=profiles, stages=2, training=Training(), optimizer="sgd")


@pytest.mark.parametrize("kwargs, message", [
    (dict(model="nosuch", batch=8), "unknown model 'nosuch'"),
    (dict(model="mlp", flavour="tiny", batch=8, precision="fp16"), "unknown precision 'fp16'"),
    (dict(model="mlp", flavour="tiny", batch=8, micro_batches=3), "batch 8 does not split into 3"),
    (dict(model="mlp", flavour="tiny", batch=8, schedule="nope"), "unknown schedule 'nope'"),
    (dict(model="mlp", flavour="tiny", batch=8, stages=0), "stages takes a positive integer"),
    (dict(model="mlp", flavour="tiny", batch=8, stages=2, gpus=[0, 1]), "give gpus or stages, not both"),
])
def test_bad_input_is_a_user_error(kwargs, message):
    with pytest.raises(UserError, match=message):
        pipebench.plan(**kwargs)


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_plan_fills_the_defaults_the_command_line_fills():
    """pipebench.plan("mlp") fills what `pipebench plan --model mlp` fills, in one place
    (Request.measured_here): the batch (8 on the CPU, 256 on GPUs) unless given, and the caps from what NVML
    says is free on the GPUs named."""
    from pipebench.hardware.gpus import GpuInfo, free_memory_caps
    from pipebench.request import DEFAULT_BATCH, Request

    plan = pipebench.plan("mlp", flavour="tiny")
    assert plan.batch == DEFAULT_BATCH["cpu"] == 8 and len(plan.stages) == 2
    gpus = [GpuInfo(i, i, "H200", 140 * 2**30, 40 * 2**30, 100 * 2**30, 0, 0) for i in (0, 1)]
    measured = Request(devices=("cuda:0", "cuda:1")).measured_here(gpus)
    assert measured.batch == 256 and measured.max_memory == tuple(free_memory_caps(gpus))
    asked = Request(devices=("cuda:0", "cuda:1"), batch=64, max_memory=5e9).measured_here(gpus)
    assert (asked.batch, asked.max_memory) == (64, 5e9)
    assert Request(devices=("cuda:0", "cuda:0")).measured_here().max_memory is None  # no GPU named by id


def test_every_device_spelling_torch_accepts_is_one_name_or_one_line(monkeypatch):
    from pipebench.hardware.devices import resolve_device

    assert resolve_device("cpu") == "cpu" and resolve_device(torch.device("cpu")) == "cpu"
    assert pipebench.plan_devices(stages=2, device="cuda") == ["cuda:0", "cuda:0"]  # saved profiles: no GPU needed
    with monkeypatch.context() as gpu_less:  # as on a machine without GPUs, also where this test runs on one
        gpu_less.setattr(torch.cuda, "is_available", lambda: False)
        gpu_less.setattr("pipebench.hardware.gpus.query_gpus", lambda *a, **k: [])
        with pytest.raises(UserError, match="no CUDA GPU is visible here"):
            pipebench.profile("mlp", batch=8, flavour="tiny", device="cuda")
    with pytest.raises(UserError, match="takes cpu, cuda or cuda:N \\(got 'gpu'\\)"):
        pipebench.plan("mlp", batch=8, flavour="tiny", device="gpu")
    # Bare "cuda" is the current GPU, with its index: many torch calls refuse a CUDA device without one.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_device("cuda") == "cuda:1" and resolve_device("cuda:0") == "cuda:0"
    assert resolve_device(torch.device("cuda", 1)) == "cuda:1"
    with pytest.raises(UserError, match="GPU 2 does not exist: GPUs 0-1 visible"):
        resolve_device("cuda:2")


def test_importing_pipebench_loads_neither_torch_nor_pandas():
    code = "import sys, pipebench; sys.exit(any(m in sys.modules for m in ('torch', 'pandas', 'matplotlib')))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_public_api_is_listed_and_documented():
    for name in pipebench.__all__:
        assert getattr(pipebench, name).__doc__, name


def _tiny_net():
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch=2.5, stages=2), r"batch takes a positive integer \(got float 2.5\)"),
    (dict(batch="8", stages=2), r"batch takes a positive integer \(got str '8'\)"),
    (dict(batch=True, stages=2), r"batch takes a positive integer \(got bool True\)"),
    (dict(batch=8, stages=1.5), r"stages takes a positive integer \(got float 1.5\)"),
    (dict(batch=8, stages=2, micro_batches="bogus"), r"micro_batches takes a positive integer, a list of them or 'auto'"),
    (dict(batch=8, stages=2, micro_batches=2.0), r"micro_batches takes a positive integer"),
    (dict(batch=8, stages=2, link_gbps=float("nan")), r"link_gbps takes a finite number of at least 0 \(got nan\)"),
    (dict(batch=8, stages=2, link_gbps=-1.0), r"link_gbps takes a finite number of at least 0"),
    (dict(batch=8, stages=2, max_memory=float("inf")), r"max_memory takes a finite number above 0"),
    (dict(batch=8, stages=2, speeds=[1.0, float("nan")]), r"speeds takes a finite number above 0"),
    (dict(batch=8, stages=2, speeds=[1.0]), r"need one speed per device \(1 != 2\)"),
    (dict(batch=8, stages=2, repeats=0), r"repeats takes a positive integer \(got 0\)"),
    (dict(batch=8, stages=2, virtual_stages="2", schedule="interleaved"), r"virtual_stages takes a positive integer"),
    (dict(batch=8, stages=2, virtual_stages=True, schedule="interleaved"), r"virtual_stages takes a positive integer"),
    (dict(batch=8, stages=2, virtual_stages=10**6, schedule="interleaved"), r"virtual_stages takes a positive integer up to 64"),
    (dict(batch=8, stages=2, virtual_stages=2, schedule="1f1b"), r"2 virtual stages: 1f1b runs one stage per device"),
    (dict(batch=8, gpus="0,1"), r"gpus takes a list of GPU ids"),
])
def test_wrong_types_are_refused_before_anything_is_measured(kwargs, message, monkeypatch):
    """The Python API checks its arguments as the command line does: one UserError each, before
    any model is built or timed (a measurement here would fail the test)."""
    from pipebench.partition.profiling import measure

    monkeypatch.setattr(measure, "profile_sizes", lambda *a, **k: pytest.fail("measured before refusing"))
    with pytest.raises(UserError, match=message):
        pipebench.plan(_tiny_net(), torch.randn(2, 8), **kwargs)


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch=8, micro_batches="bogus"), r"micro_batches takes a positive integer, a list of them or 'auto'"),
    (dict(batch=8, micro_batches=[2, "x"]), r"micro_batches takes a positive integer \(got str 'x'\)"),
    (dict(batch=8.0), r"batch takes a positive integer"),
    (dict(batch=8, fresh="yes"), r"fresh takes True or False"),
])
def test_profile_refuses_wrong_types(kwargs, message):
    with pytest.raises(UserError, match=message):
        pipebench.profile("mlp", flavour="tiny", **kwargs)


def test_an_unknown_keyword_is_a_type_error_naming_the_fields():
    with pytest.raises(TypeError, match=r"unknown argument 'chunks'; a request takes devices, gpus, stages"):
        pipebench.plan("mlp", flavour="tiny", batch=8, chunks=2)


@pytest.mark.parametrize("call", ["plan", "advise"])
@pytest.mark.parametrize("profiles, message", [
    ([], "need at least one profile"),
    ("p.json", "need at least one profile"),
])
def test_plan_or_advise_from_no_profiles_is_refused(call, profiles, message):
    """plan and advise check given profiles alike (pipebench/api.py _given_profiles): one line for none."""
    with pytest.raises(UserError, match=message):
        getattr(pipebench, call)(profiles=profiles, stages=2)


@pytest.mark.parametrize("example, message", [
    (torch.randn(0, 8), "an empty batch"),
    (torch.randn(2, 8, device="meta"), "on the meta device"),
    ({}, "needs example_inputs"),
])
def test_an_empty_or_meta_example_is_refused(example, message):
    """An empty example, and one on the meta device, returned a Plan of nothing measured."""
    with pytest.raises(UserError, match=message):
        pipebench.plan(_tiny_net(), example, batch=8, stages=2, repeats=1)


def test_a_request_is_built_once_and_taken_whole():
    from pipebench.request import Request

    request = Request(devices=("cpu", "cpu"), batch=8, micro_batches=2, repeats=1)
    plan = pipebench.plan("mlp", flavour="tiny", request=request)
    assert (plan.batch, plan.micro_batches, len(plan.stages)) == (8, 2, 2)
    with pytest.raises(UserError, match="give request or batch, not both"):
        pipebench.plan("mlp", flavour="tiny", request=request, batch=8)


def test_advise_ranks_every_strategy_from_one_profile_and_refuses_bad_input():
    """pipebench.advise is `pipebench advise` in Python: every usable strategy priced from the profile, the
    recommendation one that fits; from saved profiles too, with the same answer."""
    from pipebench.bench.predict.ranking import usable_strategies

    net = _tiny_net()
    advice = pipebench.advise(net, torch.randn(4, 8), batch=8, stages=2, device="cpu", link_gbps=1.0, repeats=1)
    assert {p.strategy for p in advice.predictions} == set(usable_strategies(["cpu", "cpu"]))
    assert advice.recommended in {p.strategy for p in advice.predictions if p.fits}
    profiles = pipebench.profile(net, torch.randn(4, 8), batch=8, devices=["cpu", "cpu"], link_gbps=1.0, repeats=1,
                                 micro_batches=[1, 2])
    again = pipebench.advise(profiles=profiles, stages=2, device="cpu", strategies=["single", "ddp"])
    assert {p.strategy for p in again.predictions} == {"single", "ddp"}
    with pytest.raises(UserError, match="unknown strategy 'nope'"):
        pipebench.advise(profiles=profiles, stages=2, strategies=["nope"])
    with pytest.raises(UserError, match="takes a non-empty list of names"):
        pipebench.advise(profiles=profiles, stages=2, strategies="ddp")
    with pytest.raises(UserError, match="batch 16 does not match the profile's batch 8"):
        pipebench.advise(profiles=profiles, stages=2, batch=16)
    with pytest.raises(UserError, match="need at least one profile"):
        pipebench.advise(profiles=[], stages=2)
    too_many = len(profiles[0].layers) + 1  # refused as `pipebench advise` refuses it, not ranked
    with pytest.raises(UserError, match=rf"more stages than layers \({too_many} > {too_many - 1}\)"):
        pipebench.advise(profiles=profiles, stages=too_many)
    with pytest.raises(UserError, match=rf"more stages than layers \({too_many} > {too_many - 1}\)"):
        pipebench.advise(net, torch.randn(4, 8), batch=8, stages=too_many, device="cpu", repeats=1)


def test_run_takes_numpy_numbers_and_writes_python_ones(tmp_path):
    """steps=np.int64(1) passes the checks and the run writes its JSON, rows and all: every number option is
    kept as Python's own, which json writes (numpy's int64 is "not JSON serializable")."""
    import json

    import numpy as np

    rows, csv_path, json_path = pipebench.run({"mlp": np.int64(8)}, strategies=["single"], flavour="tiny",
                                              out=tmp_path, steps=np.int64(1), warmup=np.int64(0),
                                              rounds=np.int32(1), min_seconds=np.float64(0.0),
                                              micro_batches=[np.int64(2)], note=None)
    assert [(r.strategy, r.status, r.batch) for r in rows] == [("single", "ok", 8)]
    assert json.loads(json_path.read_text())  # plain numbers: json wrote it whole


def test_run_measures_the_cases_as_the_command_does_and_refuses_bad_input(tmp_path):
    """pipebench.run is `pipebench run` in Python: one row per case in the results files it names."""
    rows, csv_path, json_path = pipebench.run({"mlp": 8}, strategies=["single"], flavour="tiny", out=tmp_path,
                                              steps=1, warmup=1, rounds=1, note=None)
    assert [(r.strategy, r.status, r.batch) for r in rows] == [("single", "ok", 8)]
    assert csv_path.parent == tmp_path and json_path.exists()
    for bad, message in [(dict(models="mlp"), "models takes names"), (dict(models={"nope": 8}), "unknown model 'nope'"),
                         (dict(models={"mlp": 2.5}), r"batch takes a positive integer \(got float 2.5\)"),
                         (dict(models=["mlp"], strategies="ddp"), "strategies takes a non-empty list of names"),
                         (dict(models=["mlp"], strategies=["nope"]), "unknown strategy 'nope'"),
                         (dict(models=["mlp"], bogus=1), "run takes no option bogus"),
                         (dict(models=["mlp"], machine=3), "machine takes a Machine"),
                         (dict(models=["mlp"], out=tmp_path / "csv" / "x", steps=1), None)]:
        if message is None:  # a folder in the way is refused before anything is profiled
            (tmp_path / "csv").write_text("")
            message = "cannot create the folder"
        with pytest.raises(UserError, match=message):
            pipebench.run(**bad)
