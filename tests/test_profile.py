"""The profiler measures every layer, handles in-place layers, and leaves the model as it found it."""
from __future__ import annotations

import json

import pytest
import torch

from pipebench import models
from pipebench.partition.profile import LayerProfile, Profile, ProfileError, load_profiles, save_profiles
from pipebench.partition.profiler import profile_model


@pytest.fixture(scope="module")
def resnet_profile():
    model = models.get_model("resnet101", "tiny")
    return model, profile_model(model, "cpu", micro_batch=4, batch=8, repeats=1, warmup=0)


def test_every_layer_is_measured(resnet_profile):
    model, profile = resnet_profile
    assert [layer.name for layer in profile.layers] == model.layer_names
    assert len(profile.layers) == 40
    assert profile.micro_batch == 4 and profile.batch == 8 and profile.micro_batches == 2
    assert profile.torch_version == torch.__version__
    assert profile.input_shape[0] == 4
    conv1 = profile.layers[0]
    assert conv1.forward_ms > 0 and conv1.backward_ms > 0
    assert conv1.params == sum(p.numel() for p in model.layers[0].parameters())
    assert conv1.param_bytes == 4 * conv1.params
    for layer in profile.layers:
        assert layer.output_bytes == 4 * int(torch.Size(layer.output_shape).numel())
        assert layer.output_shape[0] == 4
    # A convolution keeps its input for backward; flatten keeps nothing.
    assert conv1.saved_bytes >= 4 * int(torch.Size(profile.input_shape).numel())
    assert profile.layers[model.layer_names.index("flatten")].saved_bytes == 0
    assert sum(layer.params for layer in profile.layers) == model.num_parameters()


def test_the_zero_bubble_backward_parts_are_measured(resnet_profile):
    """I and W are timed with torch's own stage_backward_input / stage_backward_weight, layer by layer:
    W is positive where there are weights and I wherever the input needs a gradient."""
    model, profile = resnet_profile
    for layer in profile.layers:
        assert layer.backward_input_ms is not None and layer.backward_input_ms > 0
        assert layer.backward_weight_ms is not None and layer.backward_weight_ms >= 0
    assert profile.layers[0].backward_weight_ms > 0  # conv1 has weights
    gpt = profile_model(models.get_model("gpt", "tiny"), "cpu", micro_batch=2, repeats=1, warmup=0)
    embed = gpt.layers[0]  # token ids need no gradient: its backward is all weight gradient
    assert embed.backward_input_ms == 0 and embed.backward_weight_ms == embed.backward_ms > 0
    assert all(l.backward_weight_ms > 0 for l in gpt.layers)


def test_the_backward_split_falls_back_with_a_warning_when_torch_refuses(monkeypatch):
    import torch.distributed.pipelining._backward as backward

    def refuse(*args, **kwargs):
        raise RuntimeError("\n  Failed to run stage backward input:") from ValueError("no grad here")

    monkeypatch.setattr(backward, "stage_backward_input", refuse)
    model = models.get_model("mlp", "tiny")
    with pytest.warns(RuntimeWarning, match=r"I and W not measured.*ValueError: no grad here"):
        profile = profile_model(model, "cpu", micro_batch=2, repeats=1, warmup=0)
    assert all(l.backward_input_ms is None for l in profile.layers)
    assert all(l.backward_ms > 0 for l in profile.layers)


def test_in_place_relu_is_profiled(resnet_profile):
    model, profile = resnet_profile
    relu = model.layers[model.layer_names.index("relu")]
    assert isinstance(relu, torch.nn.ReLU) and relu.inplace
    assert profile.layers[model.layer_names.index("relu")].backward_ms > 0


def test_model_is_left_as_found():
    model = models.get_model("resnet18", "tiny")
    params = list(model.layers.parameters())
    values = [p.detach().clone() for p in params]
    buffers = {n: b.clone() for n, b in model.layers.named_buffers()}
    params[0].grad = torch.full_like(params[0], 3.0)
    model.layers.eval()
    profile_model(model, "cpu", micro_batch=2, repeats=1, warmup=1)
    assert list(model.layers.parameters()) == params  # the same Parameter objects
    assert all(torch.equal(p, v) for p, v in zip(params, values))
    assert all(torch.equal(b, buffers[n]) for n, b in model.layers.named_buffers())  # BatchNorm statistics
    assert torch.equal(params[0].grad, torch.full_like(params[0], 3.0))
    assert all(p.grad is None for p in params[1:])
    assert not model.layers.training


def test_integer_inputs_and_large_head():
    model = models.get_model("gpt", "tiny")
    profile = profile_model(model, "cpu", micro_batch=2, repeats=1, warmup=0)
    cfg = model.config
    assert profile.input_dtype == "int64"
    head = profile.layers[-1]
    assert head.output_shape == [2, cfg["seq_len"], cfg["vocab"]]
    assert profile.layers[0].backward_ms > 0  # the embedding's weights get gradients from integer input


def test_json_round_trip(tmp_path, resnet_profile):
    _, profile = resnet_profile
    path = tmp_path / "profile.json"
    save_profiles([profile], path)
    data = json.loads(path.read_text())
    assert data["format"] == "pipebench-profile" and data["version"] == 1
    assert data["profiles"][0]["device_name"] and data["profiles"][0]["micro_batch"] == 4
    assert load_profiles(path) == [profile]


def _profile_dict():
    layer = LayerProfile("l0", 10, 40, 1.0, 2.0, 64, [4, 4], "float32", 64)
    return Profile("m", "tiny", "cpu", "cpu", "2.x", 8, 4, 1, 0, [4, 4], "float32", [layer]).to_dict()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["profiles"][0]["layers"][0].pop("forward_ms"), r"profiles\[0\]\.layers\[0\]: missing field 'forward_ms'"),
    (lambda d: d["profiles"][0]["layers"][0].update(params="many"), r"layers\[0\]\.params: expected int"),
    (lambda d: d["profiles"][0]["layers"][0].update(backward_ms=-1), r"backward_ms: must be >= 0"),
    (lambda d: d["profiles"][0]["layers"][0].update(backward_input_ms="fast"), r"backward_input_ms: expected float"),
    (lambda d: d["profiles"][0].pop("device_name"), r"profiles\[0\]: missing field 'device_name'"),
    (lambda d: d["profiles"][0].update(micro_batch=3), r"micro_batch: 3 does not divide batch 8"),
    (lambda d: d["profiles"][0].update(layers=[]), r"layers: expected a non-empty list"),
    (lambda d: d.update(version=99), r"version 99 is not supported"),
    (lambda d: d.update(format="other"), r"not a pipebench profile"),
    (lambda d: d.update(profiles=[]), r"'profiles' should be a non-empty list"),
])
def test_malformed_profile_names_the_field(tmp_path, edit, message):
    data = {"format": "pipebench-profile", "version": 1, "profiles": [_profile_dict()]}
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=message):
        load_profiles(path)


def test_profiles_from_before_the_backward_split_still_load(tmp_path):
    data = {"format": "pipebench-profile", "version": 1, "profiles": [_profile_dict()]}
    layer = data["profiles"][0]["layers"][0]
    assert layer["backward_input_ms"] is None
    del layer["backward_input_ms"], layer["backward_weight_ms"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    (profile,) = load_profiles(path)
    assert profile.layers[0].backward_input_ms is None and profile.layers[0].backward_weight_ms is None


def test_unreadable_profile(tmp_path):
    with pytest.raises(ProfileError, match="no such file"):
        load_profiles(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "pipebench-profile", ')
    with pytest.raises(ProfileError, match="not JSON"):
        load_profiles(broken)
