"""The model zoo: every model builds, trains a step, can be cut anywhere and is reproducible."""
from __future__ import annotations

import json
import math
import pickle
import struct

import pytest
import torch
import torchvision
from torchvision.models.vision_transformer import VisionTransformer

from pipebench.models import LayeredModel, ModelInfo, UnknownModelError, get_model, list_models, model_names
from pipebench.models.resnet import flatten_resnet
from pipebench.models.vit import flatten_vit

LAYER_COUNTS = {
    ("convnet", "tiny"): 10,
    ("convnet", "full"): 10,
    ("mlp", "tiny"): 4,
    ("mlp", "full"): 9,
    ("resnet18", "tiny"): 15,
    ("resnet18", "full"): 15,
    ("resnet50", "tiny"): 23,
    ("resnet50", "full"): 23,
    ("resnet101", "tiny"): 40,
    ("resnet101", "full"): 40,
    ("resnet152", "tiny"): 57,
    ("resnet152", "full"): 57,
    ("vit_b_16", "tiny"): 7,
    ("vit_b_16", "full"): 17,
    ("gpt", "tiny"): 7,
    ("gpt", "125m"): 27,
    ("gpt", "800m"): 35,
}


def expected_output_shape(model: LayeredModel, batch_size: int) -> tuple[int, ...]:
    if model.name == "gpt":
        return (batch_size, model.config["seq_len"], model.config["vocab"])
    return (batch_size, model.config["classes"])


def test_registry_lists_every_model_with_a_tiny_and_a_default_flavour():
    infos = list_models()
    assert [info.name for info in infos] == model_names() == sorted(model_names())
    assert {name for name, _ in LAYER_COUNTS} == set(model_names())
    for info in infos:
        assert isinstance(info, ModelInfo)
        assert "tiny" in info.flavours and info.default_flavour in info.flavours
        assert info.description and "\n" not in info.description


@pytest.mark.parametrize(("name", "flavour"), sorted(LAYER_COUNTS))
def test_layer_counts_and_json_config_on_meta(name, flavour):
    model = get_model(name, flavour, device="meta")
    assert (model.name, model.flavour) == (name, flavour)
    assert len(model) == LAYER_COUNTS[name, flavour]
    assert len(set(model.layer_names)) == len(model)
    assert all(p.is_meta for p in model.layers.parameters())
    assert json.loads(json.dumps(model.config)) == model.config


def test_a_model_whose_constructor_reads_tensor_values_is_built_on_the_cpu_where_meta_is_asked():
    # torchvision's RegNet rounds its widths with torch ops, which the meta device cannot: a run's checks
    # build every model on meta, and refused it ("Cannot copy out of meta tensor") before this.
    model = get_model("torchvision.models:regnet_y_400mf", device="meta", input_shape=[3, 32, 32], num_classes=10)
    assert next(model.module.parameters()).device.type == "cpu"


def test_default_flavour_is_the_full_size_one():
    assert get_model("resnet101", device="meta").flavour == "full"
    assert get_model("gpt", device="meta").flavour == "800m"


@pytest.mark.parametrize("name", model_names())
def test_tiny_flavour_trains_a_step_and_can_be_cut_between_any_layers(name):
    model = get_model(name, "tiny")
    inputs, targets = model.make_batch(4, seed=1)

    model.layers.zero_grad(set_to_none=True)
    outputs = model.forward(inputs)
    loss = model.loss_fn(outputs, targets)
    loss.backward()

    assert outputs.shape == expected_output_shape(model, 4)
    assert loss.ndim == 0 and math.isfinite(loss.item())
    for param_name, param in model.layers.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), param_name

    with torch.no_grad():
        whole = model.layers(inputs)
        chained = inputs
        for layer in model.layers:  # each child takes exactly one tensor and returns one
            chained = layer(chained)
    torch.testing.assert_close(chained, whole)


@pytest.mark.parametrize("name", model_names())
def test_make_batch_is_deterministic_in_seed_for_any_batch_size(name):
    model = get_model(name, "tiny")
    inputs, targets = model.make_batch(3, seed=7)
    again_inputs, again_targets = model.make_batch(3, seed=7)
    other_inputs, _ = model.make_batch(3, seed=8)
    assert torch.equal(inputs, again_inputs) and torch.equal(targets, again_targets)
    assert not torch.equal(inputs, other_inputs)
    single_inputs, single_targets = model.make_batch(1)
    assert model.forward(single_inputs).shape == expected_output_shape(model, 1)
    assert targets.dtype == torch.int64
    with pytest.raises(ValueError, match="batch_size"):
        model.make_batch(0)


def test_make_batch_leaves_the_global_rng_alone():
    model = get_model("mlp", "tiny")
    state = torch.get_rng_state()
    model.make_batch(2, seed=3)
    assert torch.equal(torch.get_rng_state(), state)


def test_same_seed_gives_identical_weights_and_restores_the_global_rng():
    state = torch.get_rng_state()
    first = get_model("resnet18", "tiny", seed=5).layers.state_dict()
    assert torch.equal(torch.get_rng_state(), state)
    second = get_model("resnet18", "tiny", seed=5).layers.state_dict()
    other = get_model("resnet18", "tiny", seed=6).layers.state_dict()
    assert first.keys() == second.keys()
    assert all(torch.equal(first[key], second[key]) for key in first)
    assert not torch.equal(first["conv1.weight"], other["conv1.weight"])


def test_model_pickles_for_worker_processes():
    model = get_model("gpt", "tiny")
    copy = pickle.loads(pickle.dumps(model))
    inputs, _ = copy.make_batch(2)
    with torch.no_grad():
        torch.testing.assert_close(copy.forward(inputs), model.forward(inputs))


def test_unknown_model_flavour_or_setting_is_a_clear_value_error():
    with pytest.raises(UnknownModelError, match=r"unknown model 'foo'; choose one of: convnet, gpt, mlp, resnet101"):
        get_model("foo")
    assert issubclass(UnknownModelError, ValueError)
    with pytest.raises(ValueError, match=r"unknown flavour 'huge'.*tiny, full"):
        get_model("resnet18", "huge")
    with pytest.raises(ValueError, match=r"unknown setting\(s\) colour.*valid settings: vocab, width, depth"):
        get_model("gpt", "tiny", colour="red")
    with pytest.raises(ValueError, match="data_dir works only with: convnet"):
        get_model("mlp", "tiny", data_dir="/nowhere")


def test_resnet101_full_has_forty_layers_named_by_block():
    model = get_model("resnet101", device="meta")
    names = model.layer_names
    assert len(names) == 40
    assert names[:4] == ["conv1", "bn1", "relu", "maxpool"]
    assert names[-3:] == ["avgpool", "flatten", "fc"]
    assert "layer3_22" in names and "layer3_23" not in names
    assert model.config == {"width": 64, "image_size": 224, "classes": 1000}
    assert 44e6 < model.num_parameters() < 45e6


def test_flattened_resnet_computes_what_torchvision_computes():
    net = torchvision.models.resnet18(weights=None, num_classes=7).eval()
    images = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(flatten_resnet(net)(images), net(images))


def test_flattened_vit_computes_what_torchvision_computes():
    vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=5)
    torch.nn.init.normal_(vit.heads.head.weight)  # torchvision zero-inits the head, which would hide a mismatch
    vit.eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(flatten_vit(vit)(images), vit(images))


def test_gpt_800m_has_about_0_84_billion_parameters():
    model = get_model("gpt", "800m", device="meta")
    assert model.config["ffn"] == 8192
    assert 0.82e9 < model.num_parameters() < 0.86e9


def test_gpt_overrides_change_the_config_and_the_layers():
    model = get_model("gpt", "tiny", depth=3, vocab=100)
    assert len(model) == 3 + 2 * 3
    assert model.layer_names == ["embed", "block_0_attn", "block_0_mlp", "block_1_attn", "block_1_mlp",
                                 "block_2_attn", "block_2_mlp", "norm", "head"]
    assert model.config == {"vocab": 100, "width": 64, "depth": 3, "heads": 2, "ffn": 256, "seq_len": 32, "split": 2}
    whole = get_model("gpt", "tiny", depth=3, vocab=100, split=1)
    assert whole.layer_names == ["embed", "block_0", "block_1", "block_2", "norm", "head"]
    assert model.layers.head.weight.data_ptr() != model.layers.embed.tokens.weight.data_ptr()  # not tied
    inputs, targets = model.make_batch(2)
    assert int(inputs.max()) < 100 and int(targets.max()) < 100
    assert model.forward(inputs).shape == (2, 32, 100)


def test_gpt_is_causal_and_targets_are_the_next_tokens():
    model = get_model("gpt", "tiny").layers.eval()
    tokens, targets = get_model("gpt", "tiny").make_batch(1)
    assert torch.equal(tokens[:, 1:], targets[:, :-1])
    changed = tokens.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 256
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :-1], model(tokens)[:, :-1])


# --- real MNIST from a local folder ---------------------------------------------------------


def write_idx_mnist(root, train_count=5, test_count=3):
    """Write tiny IDX files where torchvision.datasets.MNIST(root) looks; returns train (pixels, labels)."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    generator = torch.Generator().manual_seed(0)
    train = None
    for split, count in (("train", train_count), ("t10k", test_count)):
        pixels = torch.randint(0, 256, (count, 28, 28), dtype=torch.uint8, generator=generator)
        labels = torch.arange(count, dtype=torch.uint8) % 10
        (raw / f"{split}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, count, 28, 28) + pixels.numpy().tobytes())
        (raw / f"{split}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, count) + labels.numpy().tobytes())
        train = train or (pixels, labels.long())
    return train


def test_convnet_draws_normalised_mnist_images_from_a_local_folder(tmp_path):
    pixels, labels = write_idx_mnist(tmp_path)
    model = get_model("convnet", "tiny", data_dir=str(tmp_path))
    images, targets = model.make_batch(4, seed=2)
    assert images.shape == (4, 1, 28, 28) and images.dtype == torch.float32
    assert targets.dtype == torch.int64
    for image, target in zip(images, targets):  # each drawn image is one of the file's, with its label
        index = int(target)  # labels are 0..4, one per image
        torch.testing.assert_close(image[0], (pixels[index].float() / 255 - 0.1307) / 0.3081)
    again, _ = model.make_batch(4, seed=2)
    assert torch.equal(images, again)
    assert len(set(targets.tolist())) == 4  # a permutation: no repeats within the data set size
    wrapped, wrapped_targets = model.make_batch(7, seed=2)  # larger than the data set: wraps around
    assert wrapped.shape == (7, 1, 28, 28) and torch.equal(wrapped_targets[:5].sort().values, labels)
    loss = model.loss_fn(model.forward(images), targets)
    assert math.isfinite(loss.item())


def test_missing_mnist_folder_names_the_file_and_never_downloads(tmp_path):
    with pytest.raises(ValueError, match=r"missing file .*train-images-idx3-ubyte.*never downloads") as error:
        get_model("convnet", data_dir=str(tmp_path))
    assert "\n" not in str(error.value)


def test_broken_mnist_file_is_a_value_error(tmp_path):
    write_idx_mnist(tmp_path)
    images_file = tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte"
    images_file.write_bytes(images_file.read_bytes()[:100])  # truncated
    with pytest.raises(ValueError, match="unusable.*never downloads"):
        get_model("convnet", data_dir=str(tmp_path))


def test_gpt_halves_are_the_same_model_as_whole_blocks():
    halves, whole = get_model("gpt", "tiny"), get_model("gpt", "tiny", split=1)
    assert [p.detach().tolist() for p in halves.layers.parameters()] == \
        [p.detach().tolist() for p in whole.layers.parameters()]
    tokens, targets = halves.make_batch(3)
    torch.testing.assert_close(halves.layers(tokens), whole.layers(tokens))
    with pytest.raises(ValueError, match="gpt split is 1 .* or 2"):
        get_model("gpt", "tiny", split=3)
