"""accelerate's device_map="auto" (bench/strategies/devicemap/): the map accelerate computes, training
equal to one device, a launched job, and its prediction (bench/strategies/devicemap/price.py)."""
from __future__ import annotations

import pytest
import torch

from pipebench import models
from pipebench.bench.predict.ranking import predict
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.run_job import launch
from pipebench.bench.strategies import get_strategy
from pipebench.bench.strategies.devicemap.trainer import DeviceMapTrainer, device_map_bounds, layer_bounds
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.base.errors import UserError
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.partition.profiling.measure import profile_model
from pipebench.base.training import Training
from pipebench.request import Request

CPUS = ["cpu", "cpu"]
FP32_SGD = Training("fp32", "sgd")


def one_step(trainer, model, batch=8):
    inputs, targets = model.make_batch(batch, seed=1)
    return trainer.step(inputs, targets), trainer.state_dict()


@pytest.mark.parametrize("name", ["gpt", "convnet"])
@pytest.mark.parametrize("strategy", ["device-map"])
def test_trains_like_one_device(strategy, name):
    model = models.get_model(name, "tiny")
    ref_loss, ref = one_step(SingleTrainer(model, ["cpu"], training=FP32_SGD), model)
    loss, state = one_step(get_strategy(strategy).trainer_class()(model, CPUS, training=FP32_SGD), model)
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    assert state.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(state[key], ref[key], atol=1e-6, rtol=1e-5, msg=key)
    start = dict(model.module.named_parameters())
    assert any(not torch.equal(ref[k], start[k].detach()) for k in ref)  # the step moved the weights


def test_bf16_adamw_trains_like_one_device():
    """AdamW's first step moves each weight by about lr * sign(grad): a bf16 rounding that flips a tiny
    gradient's sign moves that weight by 2 lr. So: every weight within 2 lr, 99% within 1e-4."""
    training = Training("bf16", "adamw")
    model = models.get_model("gpt", "tiny")
    ref_loss, ref = one_step(SingleTrainer(model, ["cpu"], training=training), model)
    loss, state = one_step(DeviceMapTrainer(model, CPUS, training=training), model)
    assert loss == pytest.approx(ref_loss, rel=1e-3)
    diff = torch.cat([(state[k] - ref[k]).abs().flatten() for k in ref])
    assert diff.max() <= 2 * training.lr and (diff <= 1e-4).float().mean() >= 0.99
    start = dict(model.module.named_parameters())
    assert all(not torch.equal(ref[k], start[k].detach()) for k in ref if k.endswith("weight"))


def test_accelerate_cuts_the_gpt_into_two_contiguous_parts_in_layer_order():
    model = models.get_model("gpt", "tiny")
    trainer = DeviceMapTrainer(model, CPUS)
    layers = model.layer_names
    assert set(trainer.device_map) == set(layers)  # every layer whole (no split classes), placed by accelerate
    devices = [trainer.device_map[name] for name in layers]
    cut = devices.index(1)
    assert 0 < cut < len(layers) and devices == [0] * cut + [1] * (len(layers) - cut)
    assert hasattr(trainer.model.module, "_hf_hook")  # accelerate's hooks run the forward
    assert not hasattr(model.module, "_hf_hook")  # on a copy: the caller's model is left alone
    # The prediction's helper reads the same cut off the model built on the meta device.
    assert device_map_bounds(models.get_model("gpt", "tiny", device="meta"), 2) == [0, cut, len(layers)]


def test_accelerate_keeps_the_convnet_on_one_device():
    """fc1 holds 99% of the ConvNet's parameters: accelerate's balancing buffer (1.25 x the first block of
    each class, fc1 among them) makes GPU 0's share larger than the whole model."""
    convnet = models.get_model("convnet", "tiny", device="meta")
    assert device_map_bounds(convnet, 2) == [0, len(convnet)]


def test_parameters_that_fit_nowhere_are_out_of_memory():
    gpt = models.get_model("gpt", "tiny", device="meta")
    with pytest.raises(torch.cuda.OutOfMemoryError, match="out of memory: accelerate's device_map"):
        device_map_bounds(gpt, 2, max_memory_bytes=10_000)


def test_a_layer_without_parameters_runs_where_the_layer_before_it_does():
    """Llama's rotary table runs before the first block but is registered after the norm, where accelerate
    puts it: it holds no parameters, so the chain of stages is still one cut."""
    device_map = {"embed": 0, "layers.0": 0, "layers.1": 1, "norm": 1, "rotary": 1}
    names = ["embed", "rotary", "layers.0", "layers.1", "norm"]
    assert layer_bounds(device_map, names, [8, 0, 4, 4, 1]) == [0, 3, 5]
    with pytest.raises(UserError, match="goes back to an earlier device"):
        layer_bounds(device_map, names, [8, 1, 4, 4, 1])


def test_a_hugging_face_model_keeps_its_no_split_modules_whole():
    pytest.importorskip("transformers")
    from pathlib import Path

    target = f"{Path(__file__).parent / 'fixtures' / 'hf_models.py'}:llama"
    model = models.get_model(target, input_shape=[16], input_dtype="int64", token_range=128)
    ref_loss, ref = one_step(SingleTrainer(model, ["cpu"], training=FP32_SGD), model, batch=4)
    trainer = DeviceMapTrainer(model, CPUS, training=FP32_SGD)
    assert {"model.layers.0", "model.layers.1"} <= set(trainer.device_map)  # LlamaDecoderLayer
    loss, state = one_step(trainer, model, batch=4)
    assert loss == pytest.approx(ref_loss, rel=1e-6)
    for key in ref:
        torch.testing.assert_close(state[key], ref[key], atol=1e-6, rtol=1e-5, msg=key)


def test_checkpointing_is_refused():
    model = models.get_model("gpt", "tiny")
    with pytest.raises(UserError, match="device-map does not recompute activations"):
        DeviceMapTrainer(model, CPUS, training=Training(checkpoint="always"))


def test_a_launched_job_trains_like_one_device(tmp_path, one_thread):
    """In one child process (a one-process strategy starts no torchrun), its steps after its warm-up; the
    parameters are saved after the first step, warm-up or not."""
    job = Job.by_hand("gpt", "device-map", flavour="tiny", batch=8, devices=2, device_type="cpu", steps=2, warmup=1,
                      save_params=True)
    result = launch(job, keep=tmp_path, timeout=300)
    assert result.world_size == 1 and len(result.step_ms) == 2 and result.samples_per_s > 0
    params = torch.load(tmp_path / "params-rank0.pt")
    model = models.get_model("gpt", "tiny")
    inputs, targets = model.make_batch(8, seed=job.seed + 1)
    single = SingleTrainer(model, ["cpu"])
    assert result.first_loss == pytest.approx(single.step(inputs, targets), rel=1e-6)
    assert result.strategy == "device-map" and result.devices == CPUS
    ref = single.state_dict()
    assert params.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(params[key], ref[key], atol=1e-6, rtol=1e-5, msg=key)


# ------------------------------------------------------------------------------------------ prediction

def test_the_prediction_cuts_where_accelerate_does(one_thread):
    model = models.get_model("gpt", "tiny")
    profile = profile_model(model, "cpu", micro_batch=8, batch=8, repeats=1, warmup=0)
    prediction = predict("device-map", [profile], Request(devices=CPUS))
    meta = models.get_model("gpt", "tiny", device="meta")
    assert prediction.plan.bounds == device_map_bounds(meta, 2) and prediction.plan.balanced_by == "accelerate"
    assert prediction.micro_batches == 1 and prediction.schedule == "gpipe" and prediction.reason == ""
    stages = prediction.plan.stages  # one CPU process runs the stages in turn
    assert prediction.predicted_step_ms == pytest.approx(sum(s.forward_ms + s.backward_ms for s in stages))
    assert len(prediction.peak_memory_bytes) == 2 and prediction.fits


def layer(name, param_bytes, output_bytes=4000):
    return LayerProfile(name, param_bytes // 4, param_bytes, 1.0, 2.0, output_bytes, [8, 125], "float32", 1000)


def test_on_gpus_the_whole_batch_goes_one_device_at_a_time_and_the_output_comes_back():
    """A profile of a model that cannot be built here (named "m"): accelerate cuts a stand-in of its
    layers' parameter bytes, and the reason says it is an estimate. Six layers of 1 ms forward and 2 ms
    backward run one after another; the cut's activation and its gradient cross the 100 GB/s link, and so
    do the output (back to GPU 0) and its gradient."""
    layers = [layer(f"l{i}", 2 * 10**6) for i in range(6)]
    profile = Profile("m", "x", "cuda:0", "gpu", "x", 64, 64, 1, 0, [64, 8], "float32", layers, link_gbps=100.0)
    prediction = predict("device-map", [profile], Request(devices=["cuda:0", "cuda:1"]))
    assert prediction.plan.bounds == [0, 3, 6]
    crossing = 4000 / 100e9 * 1e3  # ms per crossing
    assert prediction.predicted_step_ms == pytest.approx(6 * 3.0 + 4 * crossing)
    assert "estimated from the layers' parameter bytes" in prediction.reason
    capped = predict("device-map", [profile], Request(devices=["cuda:0", "cuda:1"], max_memory=[10**6, 10**6]))
    assert not capped.fits and capped.predicted_step_ms is None and "out of memory" in capped.reason


def test_the_prediction_of_a_hugging_face_model_cuts_where_accelerate_does_from_a_meta_build(monkeypatch):
    """A model of your own is built on the meta device for accelerate's sizes, never run (a 1.1B Llama takes
    tens of seconds built and run on the CPU): the cuts are those of the trainer's real model."""
    pytest.importorskip("transformers")
    from pathlib import Path

    from pipebench.bench.strategies.devicemap.price import _model_for_sizes
    from pipebench.models import source

    target = f"{Path(__file__).parent / 'fixtures' / 'hf_models.py'}:llama"
    model = models.get_model(target, input_shape=[16], input_dtype="int64", token_range=128)
    profile = profile_model(model, "cpu", micro_batch=4, batch=4, repeats=1, warmup=0)
    monkeypatch.setattr(source, "_check_loss", lambda *a, **k: pytest.fail("the model was run"))
    sized, why_not = _model_for_sizes(profile)
    assert why_not is None and next(sized.module.parameters()).device.type == "meta"
    names = [layer.name for layer in profile.layers]
    assert device_map_bounds(sized, 2, layers=names) == device_map_bounds(model, 2, layers=names)
