"""The Training settings (precision, optimizer, activation checkpointing): checked, profiled, priced by the
planner and advise, trained the same by every strategy as by one device, and kept in plans, profiles and
every row `pipebench run` writes."""
from __future__ import annotations

import csv
import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pipebench import models
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.run_job import launch
from pipebench.bench.strategies.planned.pipeline import PipelineTrainer
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.base.errors import UserError
from pipebench.bench.strategies.pricing import replica_memory
from pipebench.partition.planning.plan import Plan, hand_plan
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.base.training import Training
from pipebench.request import Request
from helpers import profile_file, row
from pipebench.bench.cases import run_options
from pipebench.bench.cli import main
from pipebench.bench.store.results import append, case_key, load


BF16_ADAMW = Training(precision="bf16", optimizer="adamw")


def assert_adamw_step_close(state, ref, lr):
    """AdamW's first step moves every weight by lr * g / (|g| + eps), about lr * sign(g): where a gradient
    is near zero, rounding (bf16 above all) may flip its sign and move the weight the other way. So: no
    element differs by more than 2 lr (one full step each way), and at most 1% differ by more than lr / 10.
    A wrong gradient (not averaged, a missing micro-batch) flips far more than 1% of the signs."""
    assert state.keys() == ref.keys()
    total = off = 0
    for name in ref:
        diff = (state[name].float() - ref[name].float()).abs()
        assert diff.max() <= 2 * lr * 1.01, name
        total += diff.numel()
        off += int((diff > lr / 10).sum())
    assert off <= 0.01 * total, f"{off} of {total} elements moved differently"


def one_device(model, training, batch=8):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker computes: the same reduction order
    try:
        trainer = SingleTrainer(model, ["cpu"], training=training)
        inputs, targets = model.make_batch(batch, seed=1)
        return trainer.step(inputs, targets), trainer.state_dict()
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------- the record

@pytest.mark.parametrize("settings, message", [
    (dict(precision="fp16"), "unknown precision 'fp16'"),
    (dict(optimizer="lion"), "unknown optimizer 'lion'"),
    (dict(checkpoint="sometimes"), "unknown checkpoint 'sometimes'"),
])
def test_unknown_settings_are_one_line(settings, message):
    with pytest.raises(UserError, match=message):
        Training(**settings)


@pytest.mark.parametrize("strategy", ["pp-zbv", "pp-zb", "dataparallel"])
def test_checkpointing_with_a_strategy_that_cannot_is_refused(strategy):
    with pytest.raises(UserError, match="checkpoint"):
        Job.by_hand("gpt", strategy, flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=4,
                    training=Training(checkpoint="always"))


def test_checkpointing_a_zero_bubble_plan_is_refused_always_and_planned_without_for_auto():
    profile = profile_of([1.0, 1.0, 1.0, 1.0])
    with pytest.raises(UserError, match="backward in one piece"):
        make_plan([profile], Request(devices=["cpu"] * 2, schedule="zbv", virtual_stages=2, link_gbps=0.0, training=Training(checkpoint="always")))
    auto = make_plan([profile], Request(devices=["cpu"] * 2, schedule="zbv", virtual_stages=2, link_gbps=0.0, training=Training(checkpoint="auto")))
    assert auto.training.checkpoint == "never" and not any(s.recompute for s in auto.stages)


@pytest.mark.parametrize("strategy", ["dataparallel", "device-map", "pp-zbv"])
def test_checkpoint_auto_runs_a_strategy_that_cannot_recompute_without(strategy):
    """auto recomputes where memory needs it and the strategy can: the others run as with never."""
    job = Job.by_hand("gpt", strategy, flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=4,
                      training=Training(checkpoint="auto"))
    assert job.training.checkpoint == "auto"


# ------------------------------------------------------------------------------------------------ profiles

def test_a_bf16_profile_keeps_the_weights_copies_apart_from_the_activations():
    """Under autocast the saved tensors of a linear layer include the bf16 copy of its weight, made once
    per step: the profile counts it once (cast_bytes), not per micro-batch, and the activations shrink."""
    from pipebench.partition.profiling.measure import profile_model

    model = models.get_model("gpt", "tiny")
    with torch.random.fork_rng():
        fp32 = profile_model(model, "cpu", 4, repeats=1, warmup=0, training=Training("fp32"))
        bf16 = profile_model(model, "cpu", 4, repeats=1, warmup=0, training=BF16_ADAMW)
    assert (fp32.training.precision, bf16.training) == ("fp32", BF16_ADAMW)
    assert sum(l.cast_bytes for l in fp32.layers) == 0
    cast = sum(l.cast_bytes for l in bf16.layers)
    params = sum(l.param_bytes for l in bf16.layers)
    # Half the bytes of the weights that matmuls use (not the embeddings' lookups nor the norms').
    assert 0.1 * params < cast <= 0.5 * params
    assert sum(l.saved_bytes for l in bf16.layers) < 0.9 * sum(l.saved_bytes for l in fp32.layers)


def test_a_bf16_profile_feeds_each_segment_what_autocast_makes():
    """A convolution's output under autocast is bf16, so the BatchNorm after it receives and saves bf16, as
    in the trainers' step. Fed the fp32 inputs of an fp32 run, ResNet-101's bf16 profile overstated its
    activations by 36-44% on an H200."""
    from pipebench.partition.profiling.measure import profile_model

    model = models.get_model("resnet18", "tiny")
    with torch.random.fork_rng():
        fp32 = profile_model(model, "cpu", 4, repeats=1, warmup=0, training=Training("fp32"))
        bf16 = profile_model(model, "cpu", 4, repeats=1, warmup=0, training=BF16_ADAMW)
    conv, norm = bf16.layers[0], bf16.layers[1]
    assert (conv.name, conv.output_dtype, norm.name) == ("conv1", "bfloat16", "bn1")
    assert conv.output_bytes == fp32.layers[0].output_bytes // 2
    assert norm.saved_bytes < 0.6 * fp32.layers[1].saved_bytes
    assert sum(l.saved_bytes for l in bf16.layers) < 0.6 * sum(l.saved_bytes for l in fp32.layers)


# ------------------------------------------------------------------------------------------------- pricing

def profile_of(forward_ms, micro_batch=2, batch=8, param_bytes=4000, saved=1000, out=100, cast=0, shared=0):
    layers = [LayerProfile(f"l{i}", param_bytes // 4, param_bytes, f, 2 * f, out, [micro_batch, 25], "float32", saved,
                           cast_bytes=cast, shared_bytes=shared if i else 0) for i, f in enumerate(forward_ms)]
    return Profile("mlp", "tiny", "cpu", "cpu", "x", batch, micro_batch, 1, 0, [micro_batch, 4], "float32", layers)


def test_the_memory_prices_adamw_and_the_cast_copies_in_closed_form():
    profile = profile_of([1.0] * 4, cast=500)
    for optimizer, states in (("sgd", 0), ("adamw", 2)):
        plan = make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4, link_gbps=0.0, training=Training(optimizer=optimizer)))
        for stage in plan.stages:
            layers = stage.end_layer - stage.first_layer
            # parameters + gradients + states, the cast copies once, activations of every micro-batch in flight
            assert stage.predicted_memory_bytes == layers * (4000 * (2 + states) + 500 + 1000 * stage.peak_in_flight)


def test_a_tensor_two_layers_keep_counts_once_within_a_stage_and_on_both_sides_of_a_cut():
    plan = make_plan([profile_of([1.0] * 4, shared=300)], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4))
    for stage in plan.stages:
        layers = stage.end_layer - stage.first_layer
        # the tensor between two of its layers once: layers - 1 of them within it; a cut's is kept by both
        activations = 1000 * layers - 300 * (layers - 1)
        assert stage.predicted_memory_bytes == layers * 2 * 4000 + activations * stage.peak_in_flight
    whole = profile_of([1.0] * 4, shared=300).layers
    assert replica_memory(whole, 2) == 4 * 2 * 4000 + 4 * 1000 - 3 * 300


def test_checkpoint_always_prices_the_recompute_and_keeps_only_what_each_stage_received():
    profile = profile_of([1.0] * 4)
    keep = make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4))
    again = make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4, link_gbps=0.0, training=Training(checkpoint="always")))
    assert all(s.recompute for s in again.stages) and not any(s.recompute for s in keep.stages)
    for k, r in zip(keep.stages, again.stages):
        assert r.forward_ms == pytest.approx(k.forward_ms)
        assert r.backward_ms == pytest.approx(k.backward_ms + k.forward_ms)  # the forward runs again
        layers = r.end_layer - r.first_layer
        received = 100 if r.first_layer > 0 else 0
        assert r.predicted_memory_bytes == layers * (2 * 4000 + 1000) + received * r.peak_in_flight
    assert again.predicted_step_ms > keep.predicted_step_ms


def test_checkpoint_always_on_one_device_keeps_each_layers_input():
    plan = make_plan([profile_of([1.0] * 4, micro_batch=8)], Request(devices=["cpu"], schedule="gpipe", micro_batches=1, link_gbps=0.0, training=Training(checkpoint="always")))
    # parameters and gradients, every layer's input but the first's, one layer's activations
    assert plan.stages[0].predicted_memory_bytes == 4 * 2 * 4000 + 3 * 100 + 1000


def test_checkpoint_auto_recomputes_only_the_stages_that_need_it():
    profile = profile_of([1.0] * 4)
    keep = make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4))
    assert make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4, max_memory=max(keep.memory_per_device()), link_gbps=0.0, training=Training(checkpoint="auto"))).training.checkpoint == "auto"
    roomy = make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4, max_memory=max(keep.memory_per_device()), link_gbps=0.0, training=Training(checkpoint="auto")))
    assert not any(s.recompute for s in roomy.stages)
    # Room for one stage's activations but not the other's: only that one recomputes.
    caps = [keep.memory_per_device()[0], keep.memory_per_device()[1] - 1]
    tight = make_plan([profile], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=4, max_memory=caps, link_gbps=0.0, training=Training(checkpoint="auto")))
    assert [s.recompute for s in tight.stages] == [False, True]
    assert all(m <= c for m, c in zip(tight.memory_per_device(), caps))
    assert keep.predicted_step_ms < tight.predicted_step_ms


# -------------------------------------------------------------------------------------------------- advise

def two_sizes(entry):
    """The profile at the whole batch and at the replicas' share (advise prices both)."""
    entry["micro_batch"] = 8


def advise_profile(tmp_path):
    """A profile of batch 8 at micro-batches of 8 and 4: every strategy on two devices has a figure."""
    whole = json.loads(profile_file(tmp_path / "a.json", two_sizes).read_text())["profiles"][0]
    half = json.loads(profile_file(tmp_path / "b.json").read_text())["profiles"][0]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "pipebench-profile", "version": 1, "profiles": [whole, half]}))
    return path


CANNOT = ("dataparallel", "device-map", "pp-zb", "pp-zbv")


@pytest.mark.usefixtures("nothing_runs")
def test_advise_never_fits_a_strategy_that_cannot_recompute(capsys, tmp_path):
    """advise --checkpoint always called dataparallel, device-map, pp-zb and pp-zbv "fits", and its check
    command named them, which `run` refuses."""
    import pipebench

    profiles = pipebench.load_profiles(str(advise_profile(tmp_path)))
    advice = pipebench.advise(profiles=profiles, stages=2, checkpoint="always")
    by_name = {p.strategy: p for p in advice.predictions}
    for name in CANNOT:
        assert not by_name[name].fits and f"{name} cannot recompute activations" in by_name[name].reason
    assert advice.recommended not in CANNOT
    only = pipebench.advise(profiles=profiles, stages=2, strategies=["pp-zbv"], checkpoint="always")
    assert only.recommended is None
    assert main(["advise", "--profile", str(advise_profile(tmp_path)), "--stages", "2", "--device", "cpu",
                 "--checkpoint", "always"]) == 0
    out = capsys.readouterr().out
    check = out.split("check it with: ")[1].split()
    strategies = check[check.index("--strategies") + 1].split(",")
    assert not set(strategies) & set(CANNOT), out


# ------------------------------------------------------------------------------------------------ training

@pytest.mark.parametrize("training", [Training("fp32"), BF16_ADAMW], ids=["fp32-sgd", "bf16-adamw"])
def test_a_recomputing_pipeline_trains_like_one_device(training):
    model = models.get_model("gpt", "tiny")
    ref_loss, ref = one_device(model, training)
    plan = hand_plan(model.name, model.layer_names, batch=8, devices=["cpu", "cpu"], micro_batches=2, recompute=True)
    trainer = PipelineTrainer(model, ["cpu", "cpu"], plan=plan, training=training)
    inputs, targets = model.make_batch(8, seed=1)
    loss = trainer.step(inputs, targets)
    if training.optimizer == "sgd":
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        for name, value in trainer.state_dict().items():
            torch.testing.assert_close(value, ref[name], atol=1e-5, rtol=1e-4)
    else:
        assert loss == pytest.approx(ref_loss, rel=2e-2)
        assert_adamw_step_close(trainer.state_dict(), ref, training.lr)


def test_single_recomputing_layer_by_layer_trains_like_one_device():
    model = models.get_model("gpt", "tiny")
    ref_loss, ref = one_device(model, Training())
    plan = hand_plan(model.name, model.layer_names, batch=8, devices=["cpu"], recompute=True)
    trainer = SingleTrainer(model, ["cpu"], plan=plan)
    inputs, targets = model.make_batch(8, seed=1)
    assert trainer.step(inputs, targets) == pytest.approx(ref_loss, rel=1e-6)
    assert trainer.state_dict().keys() == ref.keys()  # the wrappers' names are not the model's
    for name, value in trainer.state_dict().items():
        torch.testing.assert_close(value, ref[name], atol=1e-6, rtol=1e-5)


def bf16_adamw_job(strategy, micro_batches, stages):
    return Job.by_hand("gpt", strategy, flavour="tiny", batch=8, devices=2, device_type="cpu",
                       micro_batches=micro_batches, stages_per_device=(stages or 2) // 2, steps=1, warmup=0, seed=0,
                       save_params=True, training=Training(precision="bf16", optimizer="adamw"))


@pytest.mark.parametrize("strategy, micro_batches, stages", [
    ("dataparallel", 1, None), ("modelparallel", 1, None), ("pipeline", 4, None), ("ddp", 1, None),
    ("pp-1f1b", 4, None),
    pytest.param("pp-zbv", 4, 4, marks=pytest.mark.slow),  # the zero-bubble runtime: tests/test_distributed.py
    pytest.param("pp-gpipe", 4, None, marks=pytest.mark.slow),  # the same runtime as pp-1f1b
    pytest.param("pp-interleaved", 4, 4, marks=pytest.mark.slow),
    pytest.param("pp-zb", 4, 4, marks=pytest.mark.slow),  # zero-bubble, as pp-zbv
])
def test_bf16_and_adamw_through_every_strategy(tmp_path, groups, strategy, micro_batches, stages):
    """First losses within bf16's tolerance of one device's, updated parameters within AdamW's (see
    assert_adamw_step_close). One-process strategies run here; the others in gloo processes."""
    model = models.get_model("gpt", "tiny", seed=0)
    job = bf16_adamw_job(strategy, micro_batches, stages)
    if job.processes == 1:
        from pipebench.bench.launch.worker import build_trainer

        trainer = build_trainer(job, model, 0)
        inputs, targets = model.make_batch(8, seed=1)
        first_loss, params = trainer.step(inputs, targets), trainer.state_dict()
    else:
        first_loss = launch(job, keep=tmp_path, timeout=300, groups=groups).first_loss
        params = {}
        for rank in range(job.processes):
            params.update(torch.load(tmp_path / f"params-rank{rank}.pt"))
    ref_loss, ref = one_device(model, BF16_ADAMW)
    assert first_loss == pytest.approx(ref_loss, rel=2e-2)
    assert_adamw_step_close(params, ref, BF16_ADAMW.lr)


# ---------------------------------------------------------------- the Training in plans, profiles and rows

GIB = 2**30


RESULTS = Path(__file__).resolve().parent.parent / "results"


def test_plans_and_profiles_written_with_three_flat_strings_still_load():
    """A Plan or Profile that holds precision, optimizer and checkpoint as flat strings (or only the
    optimizer), as every one under results/ does, loads with its Training whole, the values it holds, and a
    saved plan keeps the plan_id its rows name it by."""
    from pipebench.partition.profiling.profile_record import load_profiles

    plans = sorted(RESULTS.rglob("*.plan.json"))
    assert plans
    kept = 0
    for path in plans:
        written = json.loads(path.read_text())
        plan = Plan.load(path)
        expected = (Training(**written["training"]) if "training" in written  # written since, as one object
                    else Training(**{name: written[name] for name in ("precision", "optimizer", "checkpoint")
                                     if name in written}))
        assert plan.training == expected, path
        every = {f.name for f in dataclasses.fields(Plan)} - {"training"} | {"precision", "optimizer", "checkpoint"}
        if path.parent.name.endswith("-plans") and every <= set(written):  # no field added since it was written
            assert plan.plan_id == path.name.removesuffix(".plan.json"), path  # the name its rows carry
            kept += 1
    assert kept > 10
    profiles = sorted(RESULTS.rglob("*.profile.json"))
    assert profiles
    for path in profiles[:20]:
        for profile in load_profiles(path):
            assert profile.training.checkpoint == "never" and profile.training.precision in ("fp32", "tf32", "bf16")


def test_a_plan_writes_its_training_as_one_object_and_refuses_both_forms(tmp_path):
    profile = profile_of([1.0] * 4)
    plan = make_plan([profile], Request(devices=["cpu"] * 2, training=Training(optimizer="adamw", checkpoint="auto")))
    plan.save(tmp_path / "plan.json")
    written = json.loads((tmp_path / "plan.json").read_text())
    assert written["training"] == {"precision": "tf32", "optimizer": "adamw", "checkpoint": "auto", "compile": None}
    assert not {"precision", "optimizer", "checkpoint", "compile"} & set(written)
    assert Plan.load(tmp_path / "plan.json") == plan
    written["optimizer"] = "sgd"  # both forms at once: which one holds?
    with pytest.raises(UserError, match="unknown field 'optimizer'"):
        Plan.from_dict(written)


def test_rows_keep_the_training_through_json_and_csv(paths):
    ran = row(precision="bf16", optimizer="adamw", checkpoint="always")
    skipped = row(status="predicted-oom", reason="predicted to need 20.00 GiB per GPU, cap 10.00 GiB",
                  samples_per_s=None, step_ms=None, predicted_memory_bytes=[20 * GIB, 20 * GIB], max_memory="10;10")
    append(ran, *paths)
    append(skipped, *paths)
    for path in paths:
        assert load(path) == [ran, skipped]


def test_files_from_before_the_training_fields_load_as_tf32_sgd(paths):
    """A file without the training fields is of a TF32 run with SGD, keeping every activation, and loads as
    one."""
    append(row(), *paths)
    data = json.loads(paths[1].read_text())
    for name in ("precision", "optimizer", "checkpoint"):
        del data["rows"][0][name]
    paths[1].write_text(json.dumps(data))
    with open(paths[0], newline="") as f:
        table = list(csv.reader(f))
    keep = [i for i, name in enumerate(table[0]) if name not in ("precision", "optimizer", "checkpoint")]
    with open(paths[0], "w", newline="") as f:
        csv.writer(f).writerows([cells[i] for i in keep] for cells in table)
    for path in paths:
        (old,) = load(path)
        assert (old.precision, old.optimizer, old.checkpoint) == ("tf32", "sgd", "never")


def test_the_training_is_part_of_the_case():
    plain = case_key(row())
    assert case_key(row(precision="bf16")) != plain
    assert case_key(row(precision="fp32")) != case_key(row(precision="bf16"))
    assert case_key(row(optimizer="adamw")) != plain
    assert case_key(row(checkpoint="auto")) != plain
    with pytest.raises(ValueError, match="Row.precision: 'fp8' is not one of: fp32, tf32, bf16"):
        row(precision="fp8")


def test_describe_options_names_the_training_when_not_the_default():
    options = run_options.RunOptions(models={"mlp": 8}, strategies=["ddp"], micro_batches=[None], flavour="tiny",
                                   overrides={}, out=Path("."), resume=False, steps=2, warmup=1, timeout=60)
    assert "sgd" not in run_options.describe_options(options)
    options = replace(options, training=Training("bf16", "adamw", "auto"))
    assert "bf16 adamw, recompute auto" in run_options.describe_options(options)


@pytest.fixture
def cpu_only(monkeypatch):
    import torch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.slow  # the rows' fields are checked without a run above; this is the whole path on the CPU
def test_a_cpu_run_in_bf16_with_adamw_writes_rows_that_say_so(capsys, tmp_path, cpu_only):
    code = main(["run", "--models", "mlp", "--strategies", "single,ddp", "--quick", "--precision", "bf16",
                 "--optimizer", "adamw", "--steps", "1", "--warmup", "0", "--micro-batches", "2", "--repeats", "1",
                 "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "bf16 adamw" in err
    rows = load(sorted(tmp_path.glob("*.json")))
    assert [r.strategy for r in rows] == ["single", "ddp"]
    assert all(r.status == "ok" and (r.precision, r.optimizer, r.checkpoint) == ("bf16", "adamw", "never")
               for r in rows), [r.reason for r in rows]
    assert any(p.name.endswith("-bf16-adamw.profile.json") for p in tmp_path.rglob("*.profile.json"))
