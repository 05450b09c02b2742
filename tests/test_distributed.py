"""Multi-process strategies on the CPU: real torch.distributed process groups (gloo) started through
torch.distributed.run, checked against one device after one step from the same weights."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from pipebench import models
from pipebench.bench.launch.job import Job, cut_candidates
from pipebench.base.errors import UserError
from pipebench.bench.launch.run_job import launch
from pipebench.bench.launch.loopback import free_port
from pipebench.bench.launch.spawn import WorkerError, visible_devices
from pipebench.bench.launch.worker_report import WorkerResult
from pipebench.bench.strategies.planned.pipeline import PipelineTrainer
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.partition.planning.plan import hand_plan
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.measure import profile_model
from pipebench.request import Request

SEED = 0


def trained_params(tmp_path, job: Job, groups=None) -> tuple[WorkerResult, dict[str, torch.Tensor]]:
    """Launch `job` for one step (in fresh processes, or as the next case of the session's warm `groups`:
    tests/conftest.py); its result and every process's updated parameters, merged."""
    result = launch(job, keep=tmp_path, timeout=300, groups=groups)
    parts = [torch.load(tmp_path / f"params-rank{rank}.pt") for rank in range(job.processes)]
    if job.strategy in ("ddp", "fsdp"):  # replicas (FSDP: gathered whole): every process holds the same model
        for part in parts[1:]:
            assert part.keys() == parts[0].keys()
            assert all(torch.equal(part[k], parts[0][k]) for k in part)
        return result, parts[0]
    params = {}
    for part in parts:  # pipelines: each process holds its own stages
        for key in params.keys() & part.keys():  # only a tied weight's copies, which must stay equal
            torch.testing.assert_close(params[key], part[key], atol=1e-6, rtol=1e-6, msg=lambda m: f"{key}: {m}")
        params.update(part)
    return result, params


def reference(model, micro_batches: int, batch: int):
    """One device; with m > 1 the batch goes through as m micro-batches (what BatchNorm sees)."""
    if micro_batches == 1:
        trainer = SingleTrainer(model, ["cpu"])
    else:
        plan = hand_plan(model.name, ["whole model"], batch=batch, devices=["cpu"], micro_batches=micro_batches)
        trainer = PipelineTrainer(model, ["cpu"], plan=plan)
    inputs, targets = model.make_batch(batch, seed=SEED + 1)
    loss = trainer.step(inputs, targets)
    return loss, trainer.state_dict()


def job_for(name, strategy, procs, *, micro_batches=1, stages=None, batch=8, flavour="tiny", **overrides) -> Job:
    """One step of `strategy` on `procs` CPU processes, saving the updated parameters."""
    return Job.by_hand(name, strategy, flavour=flavour, overrides=overrides, batch=batch, devices=procs,
                       device_type="cpu", micro_batches=micro_batches,
                       stages_per_device=(stages or procs) // procs, steps=1, warmup=0, seed=SEED, save_params=True)


def check(tmp_path, job: Job, groups=None):
    model = models.get_model(job.model, job.flavour, seed=SEED, **job.overrides)
    result, params = trained_params(tmp_path, job, groups)
    # BatchNorm normalises each process's slice (DDP) or each micro-batch (pipelines) on its own:
    # the equal reference is one device taking the batch in those same pieces.
    has_batchnorm = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.module.modules())
    pieces = (job.devices if job.strategy in ("ddp", "fsdp") else job.micro_batches) if has_batchnorm else 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker computes: the same reduction order
    try:
        ref_loss, ref = reference(model, pieces, job.batch)
    finally:
        torch.set_num_threads(threads)
    assert result.first_loss == pytest.approx(ref_loss, rel=1e-5)
    start = dict(model.module.named_parameters())
    unused = ref.keys() - params.keys()  # in no stage: the forward never uses them (BERT's spare bias)
    assert params.keys() <= ref.keys() and all(torch.equal(ref[k], start[k].detach()) for k in unused), unused
    for key in params:
        torch.testing.assert_close(params[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")
    assert any(not torch.equal(ref[k], start[k].detach()) for k in ref)  # the step moved the weights
    assert result.world_size == job.processes and len(result.peak_memory_bytes) in (job.processes, job.devices)
    return result


SLOW = pytest.mark.slow


def two_processes(name, strategy, micro_batches, stages):
    return job_for(name, strategy, 2, micro_batches=micro_batches, stages=stages)


@pytest.mark.parametrize("name, strategy, micro_batches, stages", [
    *[("gpt", *case) for case in [("ddp", 1, None), ("pp-gpipe", 4, None), ("pp-1f1b", 4, None),
                                  ("pp-interleaved", 4, 4), ("pp-zb", 4, 4), ("pp-zbv", 4, 4)]],
    # torchvision's ResNet with pp-1f1b (below) covers BatchNorm in a pipeline; the GPT and the ConvNet, pp-zbv.
    pytest.param("resnet18", "pp-1f1b", 4, None, marks=SLOW), pytest.param("resnet18", "pp-zbv", 4, 4, marks=SLOW),
    pytest.param("resnet18", "ddp", 1, None, marks=SLOW),  # the GPT's and the seed's ConvNet's DDP cover it
    pytest.param("resnet18", "pp-gpipe", 4, None, marks=SLOW),  # the seed's ConvNet and the GPT cover these
    pytest.param("resnet18", "pp-interleaved", 4, 4, marks=SLOW), pytest.param("resnet18", "pp-zb", 4, 4, marks=SLOW),
])
def test_two_processes_train_like_one_device(tmp_path, groups, name, strategy, micro_batches, stages):
    check(tmp_path, two_processes(name, strategy, micro_batches, stages), groups)


UNUSED = '''
import torch
from torch import nn


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.pooler, self.b = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
'''


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "fsdp"])
def test_a_parameter_the_forward_never_uses_trains_like_one_device(tmp_path, groups, strategy):
    """A model with a parameter its forward never uses (a pooler, an aux head) trains as one device does under
    DDP, ZeRO-1 (which is DDP) and FSDP: torch's DDP waits for every parameter's gradient ("Expected to have
    finished reduction in the prior iteration") unless told to look for unused ones
    (bench/strategies/ddp/trainer.py)."""
    (tmp_path / "unused.py").write_text(UNUSED)
    job = Job.by_hand(f"{tmp_path / 'unused.py'}:Unused", strategy, overrides={"input_shape": [4]}, batch=8,
                      devices=2, device_type="cpu", steps=1, warmup=0, seed=SEED, save_params=True)
    check(tmp_path, job, groups)


@pytest.mark.slow
@pytest.mark.parametrize("strategy, micro_batches, stages", [
    ("ddp", 1, None), ("pp-gpipe", 4, None), ("pp-1f1b", 8, None),
    ("pp-interleaved", 4, 8), ("pp-zb", 4, 8), ("pp-zbv", 8, 8),
])
def test_four_processes_gpt(tmp_path, strategy, micro_batches, stages):
    check(tmp_path, job_for("gpt", strategy, 4, micro_batches=micro_batches, stages=stages, depth=6))


@pytest.mark.slow
@pytest.mark.parametrize("strategy, micro_batches", [("ddp", 1), ("pp-1f1b", 4)])
def test_four_processes_resnet(tmp_path, strategy, micro_batches):
    check(tmp_path, job_for("resnet18", strategy, 4, micro_batches=micro_batches))


def test_pipeline_from_a_profiled_plan(tmp_path, groups):
    """The real path: profile, plan, and hand torch the stage input shapes from the profile."""
    model = models.get_model("gpt", "tiny", seed=SEED)
    profiles = [profile_model(model, "cpu", micro_batch=2, batch=8, repeats=1, warmup=0)]
    plan = make_plan(profiles, Request(devices=["cpu", "cpu"], schedule="1f1b"))
    job = Job.from_plan(plan, "pp-1f1b", device_type="cpu", steps=1, warmup=0, seed=SEED, save_params=True)
    stages = job.the_plan.stages
    assert (stages[0].input_shape, stages[0].input_dtype) == ([2, 32], "int64") and stages[1].input_shape == [2, 32, 64]
    result, params = trained_params(tmp_path, job, groups)
    ref_loss, ref = reference(model, 1, 8)
    assert result.first_loss == pytest.approx(ref_loss, rel=1e-5)
    for key in ref:
        torch.testing.assert_close(params[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


@pytest.mark.ci  # process handling, run by CI after the default run
def test_a_failing_worker_ends_the_group_with_its_error(tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.setattr("pipebench.bench.launch.spawn.free_port", lambda: port)
    job = Job.by_hand("gpt", "pp-1f1b", flavour="tiny", batch=8, devices=2, device_type="cpu",
              micro_batches=2, steps=50, warmup=0, fail_on_rank=1)
    # Had the survivors hung on, launch would have waited out the timeout and raised "no result within"
    # instead: the failing rank's own error is what proves the group ended with it (no clock needed).
    with pytest.raises(WorkerError, match="rank 1: RuntimeError: injected failure on rank 1") as info:
        launch(job, keep=tmp_path, timeout=120)
    assert not info.value.oom
    assert _processes_mentioning(str(tmp_path)) == []  # no worker or torchrun left
    import socket

    with socket.socket() as s:  # the rendezvous port is free again
        s.bind(("127.0.0.1", port))


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_worker_exception_names_the_cause(tmp_path):
    job = Job.by_hand("gpt", "ddp", flavour="tiny", batch=8, devices=2, device_type="cpu",
              overrides={"width": 63}, steps=1, warmup=0)  # 63 does not divide into 2 heads
    # Both processes fail alike; whichever reports first is named.
    with pytest.raises(WorkerError, match=r"rank [01]: UserError: gpt width \(63\) must be divisible by heads \(2\)") as info:
        launch(job, keep=tmp_path, timeout=120)
    assert "Traceback" not in str(info.value)
    assert _processes_mentioning(str(tmp_path)) == []


@pytest.mark.ci  # process handling, run by CI after the default run
def test_timeout_stops_everything(tmp_path):
    job = Job.by_hand("gpt", "ddp", flavour="tiny", batch=8, devices=2, device_type="cpu",
              steps=100000, warmup=0)
    with pytest.raises(WorkerError, match="no result within"):
        launch(job, keep=tmp_path, timeout=8)
    assert _processes_mentioning(str(tmp_path)) == []


@pytest.mark.ci  # process handling, run by CI after the default run
def test_workers_ignore_a_models_py_in_the_current_folder(tmp_path, monkeypatch):
    (tmp_path / "models.py").write_text("raise SystemExit('the wrong models module')\n")
    monkeypatch.chdir(tmp_path)
    result = launch(Job.by_hand("mlp", "ddp", flavour="tiny", batch=8, devices=2, device_type="cpu",
                        steps=1, warmup=0), timeout=120)
    assert result.first_loss > 0


def test_visible_devices_count_within_the_users_choice():
    assert visible_devices([0, 2], "3,4,5") == "3,5"
    assert visible_devices([1], None) == "1"
    assert visible_devices(None, "2,3") == "2,3"
    assert visible_devices([0], "GPU-aaa,GPU-bbb") == "GPU-aaa"
    with pytest.raises(ValueError, match="GPU 2 does not exist: CUDA_VISIBLE_DEVICES=4,5 makes 2 visible"):
        visible_devices([2], "4,5")


@pytest.mark.parametrize("settings, message", [
    (dict(strategy="nope"), "unknown strategy 'nope'"),
    (dict(strategy="ddp", batch=9), "batch 9 does not split evenly over 2 ddp replicas"),
    (dict(strategy="pp-1f1b", micro_batches=3), "batch 8 does not split into 3 equal micro-batches"),
])
def test_bad_jobs_are_refused_before_anything_starts(settings, message):
    base = dict(flavour="tiny", batch=8, devices=2, device_type="cpu")
    settings = {**base, **settings}
    with pytest.raises(UserError, match=message):
        Job.by_hand("gpt", settings.pop("strategy"), **settings)


def test_a_job_refuses_a_plan_for_other_devices_or_batch():
    plan = Job.by_hand("gpt", "pp-1f1b", flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=2).plan
    with pytest.raises(UserError, match="the plan is for 2 device"):
        Job(model="gpt", flavour="tiny", strategy="pp-1f1b", batch=8, devices=4, device_type="cpu", plan=plan)
    with pytest.raises(UserError, match="the plan is for batch 8"):
        Job(model="gpt", flavour="tiny", strategy="pp-1f1b", batch=16, devices=2, device_type="cpu", plan=plan)
    with pytest.raises(UserError, match="pp-1f1b runs a Plan; the job has none"):
        Job(model="gpt", flavour="tiny", strategy="pp-1f1b", batch=8, devices=2, device_type="cpu")


@pytest.mark.slow
@pytest.mark.parametrize("strategy, micro_batches", [("ddp", 1), ("pp-1f1b", 8)])
def test_eight_processes_gpt(tmp_path, strategy, micro_batches):
    check(tmp_path, job_for("gpt", strategy, 8, micro_batches=micro_batches, depth=4))


# ------------------------------------------------------------------------- models of the user's own

FIXTURES = Path(__file__).parent / "fixtures"
SEED_CONVNET = f"{FIXTURES / 'seed_convnet.py'}:ConvNet"
"""The seed's ConvNet exactly as the seed writes it: functional forward, .view, log_softmax, nll_loss."""


def seeds_convnet(strategy, micro_batches, stages):
    return job_for(SEED_CONVNET, strategy, 2, micro_batches=micro_batches, stages=stages, flavour=None,
                   input_shape=[1, 28, 28], loss="nll")


@pytest.mark.parametrize("strategy, micro_batches, stages", [
    ("ddp", 1, None), ("pp-1f1b", 2, None), ("pp-zbv", 2, 4),
    # The GPT's cases cover these schedules in the default run:
    pytest.param("pp-gpipe", 2, None, marks=SLOW), pytest.param("pp-interleaved", 2, 4, marks=SLOW),
    pytest.param("pp-zb", 2, 4, marks=SLOW),
])
def test_the_seeds_convnet_as_written_trains_like_one_device(tmp_path, groups, strategy, micro_batches, stages):
    check(tmp_path, seeds_convnet(strategy, micro_batches, stages), groups)


def hugging_face(name, strategy, stages):
    settings = {"vit": dict(input_shape=[3, 32, 32]), "whisper": dict(input_shape=[8, 32]),
                "wav2vec2": dict(input_shape=[1600])}.get(name, dict(input_shape=[16], token_range=128))
    return job_for(f"{FIXTURES / 'hf_models.py'}:{name}", strategy, 2, micro_batches=2, stages=stages, flavour=None,
                   **settings)


CI = pytest.mark.ci


@pytest.mark.parametrize("name, strategy, stages", [
    ("gpt2_tied", "pp-1f1b", None),  # GPT-2 with its embeddings tied across the cut
    ("llama", "pp-1f1b", None),  # RoPE tables, the mask and integer positions cross the cut
    ("qwen2", "pp-1f1b", None),  # RoPE, grouped-query attention, tied embeddings
    ("t5", "pp-1f1b", None),  # an encoder-decoder: the encoder's states and the decoder's inputs cross the cut
    # One of every other task head (tests/test_hf_tasks.py), swept by CI:
    pytest.param("bert", "pp-1f1b", None, marks=CI), pytest.param("bert_classifier", "pp-1f1b", None, marks=CI),
    pytest.param("bert_tagger", "pp-1f1b", None, marks=CI), pytest.param("vit", "pp-1f1b", None, marks=CI),
    pytest.param("bart", "pp-1f1b", None, marks=CI), pytest.param("wav2vec2", "pp-1f1b", None, marks=CI),
    # Speech to text: input_features; the gradient of an attention's transposed key crosses the cut back
    ("whisper", "pp-1f1b", None),
    pytest.param("gpt2", "pp-1f1b", None, marks=SLOW), pytest.param("llama", "pp-zbv", 4, marks=SLOW),
    pytest.param("qwen2", "pp-zbv", 4, marks=SLOW), pytest.param("gpt2", "pp-zbv", 4, marks=pytest.mark.slow),
    pytest.param("bert", "pp-zbv", 4, marks=pytest.mark.slow), pytest.param("t5", "pp-zbv", 4, marks=SLOW),
])
def test_hugging_face_models_train_like_one_device(tmp_path, groups, name, strategy, stages):
    transformers = pytest.importorskip("transformers")
    if name in ("bart", "whisper", "wav2vec2") and tuple(map(int, transformers.__version__.split(".")[:2])) < (5, 23):
        pytest.skip("transformers before 5.23: the LayerDrop of BART, Whisper and wav2vec2 branches on a random "
                    "number in training, which torch.export cannot capture (tests/test_hf_tasks.py checks the line)")
    check(tmp_path, hugging_face(name, strategy, stages), groups)


def test_integer_positions_crossing_the_first_cut_train_like_one_device(tmp_path, groups):
    """GPT-2 cut after its token embedding (stages [1, n - 1]): the first stage makes the position ids, which
    cross the cut as floats (bench/strategies/planned/float_coding.py) to the position embedding on the second.
    torch 2.14's schedule first runs each stage on tensors made from the shapes alone (torch.empty): such
    positions would index the embedding out of range unless the stage gets zeros, as torch 2.11 gives it."""
    model = f"{FIXTURES / 'hf_models.py'}:gpt2"
    layers = len(cut_candidates(model, None, {"input_shape": [16], "token_range": 128}))
    job = Job.by_hand(model, "pp-1f1b", overrides={"input_shape": [16], "token_range": 128}, batch=8, devices=2,
                      device_type="cpu", micro_batches=2, bounds=[0, 1, layers], steps=1, warmup=0, seed=SEED,
                      save_params=True)
    assert job.the_plan.stages[0].layers == ["transformer.wte"]
    assert job.the_plan.stages[1].layers[0] == "transformer.wpe"
    check(tmp_path, job, groups)


USER_FILE = '''
import torch
from hf_models import VOCAB, t5 as model  # a file beside this one


def make_batch(batch_size):
    ids, labels = torch.randint(0, VOCAB, (2, batch_size, 16))
    mask = torch.ones_like(ids)
    mask[:, :3] = 0  # padded on the left
    decoder_ids = torch.cat([torch.zeros_like(labels[:, :1]), labels[:, :-1]], 1)
    return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": decoder_ids}, labels
'''


def test_a_model_file_that_imports_a_file_beside_it_trains_in_every_worker(tmp_path, groups):
    """As Python runs a script: the file's folder on the path of the parent and of each worker. Its batch
    is a dict by forward's keywords: T5's mask and decoder inputs reach their arguments on either stage."""
    import shutil

    pytest.importorskip("transformers")
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(FIXTURES / "hf_models.py", folder / "hf_models.py")
    (folder / "seq2seq.py").write_text(USER_FILE)
    check(tmp_path, job_for(f"{folder / 'seq2seq.py'}:model", "pp-1f1b", 2, micro_batches=2, flavour=None), groups)


def torchvision_family(name):
    size = 32 if name == "vit" else 64
    return job_for(f"{FIXTURES / 'vision_models.py'}:{name}", "pp-1f1b", 2, micro_batches=2, flavour=None,
                   input_shape=[3, size, size])


@pytest.mark.parametrize("name", [
    "resnet", *[pytest.param(name, marks=pytest.mark.slow) for name in
                ("googlenet", "densenet", "mobilenet_v3", "efficientnet", "convnext", "regnet", "vit", "swin")]])
def test_torchvision_families_train_with_pp_1f1b_like_one_device(tmp_path, groups, name):
    check(tmp_path, torchvision_family(name), groups)
