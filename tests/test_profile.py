"""The profiler measures every segment of the captured graph (for the zoo: every layer), prices each cut at
every tensor crossing it, handles in-place layers and several inputs, and leaves the model as it found it."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from pipebench import models
from pipebench.partition.profiling.profile_record import (LayerProfile, Profile, ProfileError, kept_bytes, load_profiles,
                                         relative_spread, save_profiles, step_spread)
from pipebench.partition.profiling.measure import profile_model, profile_sizes


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


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
    conv1 = profile.layers[0]  # the images need no gradient (as in a pipeline): its backward is all W
    assert conv1.backward_input_ms == 0 and conv1.backward_weight_ms == conv1.backward_ms > 0
    for layer in profile.layers[1:]:
        assert layer.backward_input_ms is not None and layer.backward_input_ms > 0
        assert layer.backward_weight_ms is not None and layer.backward_weight_ms >= 0
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
    # torch's I is not called where no input needs a gradient (the first layer): there it is all W
    assert all(l.backward_input_ms is None for l in profile.layers[1:])
    assert profile.layers[0].backward_input_ms == 0
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
    # pipeline() replaces forward on the modules it splits at; capture puts them back
    assert not any("forward" in m.__dict__ or "_orig_forward" in m.__dict__ for m in model.layers.modules())
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


def test_a_profile_committed_before_spreads_were_kept_loads_with_no_spread():
    path = Path(__file__).parent.parent / "results/2026-11-30-cpu2-quick-suite/profiles/gpt-tiny-b8.profile.json"
    assert "spread" not in path.read_text()
    profiles = load_profiles(path)
    assert all(l.forward_spread == l.backward_spread == 0.0 for p in profiles for l in p.layers)
    assert all(p.whole_step_spread == 0.0 for p in profiles) and step_spread(profiles) == 0.0


def test_each_figure_keeps_its_spread_over_the_repeats():
    model = models.get_model("mlp", "tiny")
    profile = profile_model(model, "cpu", micro_batch=8, batch=8, repeats=4, warmup=0)
    assert any(l.forward_spread > 0 for l in profile.layers) and any(l.backward_spread > 0 for l in profile.layers)
    assert all(l.forward_spread >= 0 and l.backward_spread >= 0 for l in profile.layers)
    assert profile.whole_step_ms and profile.whole_step_spread > 0
    once = profile_model(model, "cpu", micro_batch=8, batch=8, repeats=1, warmup=0)
    assert all(l.forward_spread == l.backward_spread == 0.0 for l in once.layers) and once.whole_step_spread == 0.0


def test_a_spread_is_half_the_interquartile_range_over_the_median():
    assert relative_spread([10.0, 11.0, 12.0, 13.0, 50.0]) == pytest.approx((13 - 11) / 2 / 12)  # 50: no matter
    assert relative_spread([5.0]) == 0.0 and relative_spread([]) == 0.0 and relative_spread([0.0, 0.0]) == 0.0


def test_a_step_spread_weighs_the_segments_by_time_and_takes_the_whole_step_where_larger():
    def profile(micro_batch, spreads, whole=None, whole_spread=0.0):
        layers = [LayerProfile(f"l{i}", 1, 4, fwd, 2 * fwd, 8, [1], "float32", 8, forward_spread=s, backward_spread=s)
                  for i, (fwd, s) in enumerate(spreads)]
        return Profile("m", "", "cpu", "cpu", "x", 8, micro_batch, 3, 0, [1], "float32", layers,
                       whole_step_ms=whole, whole_step_spread=whole_spread)

    small, whole = profile(4, [(1.0, 0.1), (3.0, 0.3)]), profile(8, [(2.0, 0.02), (2.0, 0.04)])
    assert step_spread([small, whole], 4) == pytest.approx((1 * 0.1 + 3 * 0.3) / 4)
    assert step_spread([small, whole], 8) == pytest.approx(0.03)
    assert step_spread([small, whole], 2) == pytest.approx((3 * 0.1 + 9 * 0.3 + 6 * 0.02 + 6 * 0.04) / 24)  # none of 2
    timed = profile(8, [(2.0, 0.02), (2.0, 0.04)], whole=12.0, whole_spread=0.2)
    assert step_spread([small, timed], 4) == pytest.approx(0.25) and step_spread([small, timed], 8) == pytest.approx(0.2)
    for p in (small, timed):  # CPU stand-ins on a machine whose speed moved ±30%: no interval narrower
        p.machine_drift = 0.3
    assert step_spread([small, timed], 4) == step_spread([small, timed], 8) == pytest.approx(0.3)


def test_the_machine_drift_is_seen_in_windows_spread_over_time():
    """A burst of someone else's load that slows every piece of work in its windows widens the drift; the
    same work on a quiet machine keeps it at the repeats' few percent."""
    from pipebench.hardware.drift import drift_of, measure_machine_drift

    drift = measure_machine_drift(1, seconds=0.3, window_ms=5.0)
    assert 0 < drift < 10
    # windows of 1 and of 2 units (half of them in a burst): p10 1, p90 2, median 1.5 -> ±1/3
    assert drift_of([1.0] * 5 + [2.0] * 5) == pytest.approx((2.0 - 1.0) / 2 / 1.5)
    assert drift_of([1.0] * 10) == pytest.approx(1e-4)


def test_unreadable_profile(tmp_path):
    with pytest.raises(ProfileError, match="no such file"):
        load_profiles(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "pipebench-profile", ')
    with pytest.raises(ProfileError, match="not JSON"):
        load_profiles(broken)


# ------------------------------------------------------------------------------ through the graph
def _old_profiler_structure(model, micro_batch):
    """What the per-layer profiler recorded: one entry per child, its parameters and its output bytes."""
    x, _ = model.make_batch(micro_batch, seed=0)
    names, params, out_bytes = [], [], []
    with torch.no_grad():
        for name, layer in model.layers.named_children():
            x = layer(x)
            names.append(name)
            params.append(sum(p.numel() for p in layer.parameters()))
            out_bytes.append(x.numel() * x.element_size())
    return names, params, out_bytes


@pytest.mark.parametrize("name", ["gpt", "resnet18", "convnet", "vit_b_16"])
def test_zoo_models_profile_as_the_per_layer_profiler_did(name):
    model = models.get_model(name, "tiny")
    names, params, out_bytes = _old_profiler_structure(model, 2)
    profile = profile_model(model, "cpu", micro_batch=2, repeats=1, warmup=0)
    assert profile.granularity == 1
    assert [l.name for l in profile.layers] == names
    assert [l.params for l in profile.layers] == params
    assert [l.output_bytes for l in profile.layers] == out_bytes
    assert all(l.forward_ms > 0 for l in profile.layers)


class _Wrapped:
    """A user's nn.Module as the profiler receives it."""

    def __init__(self, module, make_batch, name="user"):
        self.module, self.make_batch, self.name = module, make_batch, name
        self.flavour, self.config, self.granularity = "user", {}, None


def _seed_convnet():
    path = Path(__file__).parent / "fixtures" / "seed_convnet.py"
    spec = importlib.util.spec_from_file_location("seed_convnet", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ConvNet()


def test_the_seeds_functional_convnet_is_profiled_in_four_segments():
    def make_batch(batch_size, seed=0, device="cpu"):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(batch_size, 1, 28, 28, generator=g).to(device),
                torch.randint(0, 10, (batch_size,), generator=g).to(device))

    net = _seed_convnet()
    model = _Wrapped(net, make_batch, "seed-convnet")
    profile = profile_model(model, "cpu", micro_batch=4, repeats=1, warmup=0)
    assert [l.name for l in profile.layers] == ["conv1", "conv2", "fc1", "fc2"]
    assert [l.params for l in profile.layers] == [260, 1820, 1000500, 5010]
    assert profile.input_shape == [4, 1, 28, 28] and profile.granularity == 1
    # relu and max-pool run in conv1's segment; the flattened conv2 activation crosses before fc1
    assert profile.layers[0].output_shape == [4, 10, 12, 12]
    assert profile.layers[1].output_bytes == 4 * 2000 * 4 and profile.layers[1].output_shape == [4, 2000]
    assert profile.layers[-1].output_shape == [4, 10]
    assert all(l.backward_ms > 0 and l.backward_weight_ms > 0 for l in profile.layers)
    assert "forward" not in net.fc1.__dict__ and net.training  # left as found
    # the graph keeps the micro-batch size (view(in_size, -1)): each size is captured anew
    (small, big) = profile_sizes(model, "cpu", 8, [4, 2], repeats=1, warmup=0)
    assert (small.micro_batch, big.micro_batch) == (2, 4)
    assert small.layers[1].output_shape == [2, 2000] and big.layers[1].output_shape == [4, 2000]


class _Skip(nn.Module):
    """x -> a -> b -> c -> d, with the model input and a's output used again later."""

    def __init__(self, n=8):
        super().__init__()
        self.a, self.b, self.c, self.d = (nn.Linear(n, n) for _ in range(4))

    def forward(self, x):
        a = self.a(x)
        b = self.b(a)
        c = self.c(b) + x  # x lives across cuts b and c
        return self.d(c) * a  # a lives across cuts b, c and d


def test_a_cut_is_priced_at_every_tensor_crossing_it():
    model = _Wrapped(_Skip(), lambda b, seed=0, device="cpu": (torch.randn(b, 8, device=device), None))
    profile = profile_model(model, "cpu", micro_batch=3, repeats=1, warmup=0)
    assert [l.name for l in profile.layers] == ["a", "b", "c", "d"]
    t = 3 * 8 * 4  # one (3, 8) float32 tensor
    # after a: a_out, x; after b: b_out, a_out, x; after c: c_out, a_out; after d: the output
    assert [l.output_bytes for l in profile.layers] == [2 * t, 3 * t, 2 * t, t]
    assert all(l.output_shape == [3, 8] for l in profile.layers)
    assert all(l.params == 72 for l in profile.layers)
    # x is a model input (no gradient), a_out an activation (gradient): d's backward has an I part
    assert profile.layers[0].backward_input_ms == 0 and profile.layers[3].backward_input_ms > 0


class _Masked(nn.Module):
    """Two inputs: token ids and a float mask, the mask used by a later segment."""

    def __init__(self):
        super().__init__()
        self.embed, self.mix, self.head = nn.Embedding(16, 8), nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, ids, mask):
        h = self.embed(ids)
        h = self.mix(h) * mask.unsqueeze(-1)
        return self.head(h)


def test_a_model_with_two_inputs_is_profiled():
    def make_batch(batch_size, seed=0, device="cpu"):
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 16, (batch_size, 5), generator=g)
        mask = (torch.rand(batch_size, 5, generator=g) > 0.5).float()
        return (ids.to(device), mask.to(device)), None

    profile = profile_model(_Wrapped(_Masked(), make_batch), "cpu", micro_batch=2, repeats=1, warmup=0)
    assert [l.name for l in profile.layers] == ["embed", "mix", "head"]
    assert profile.input_shape == [2, 5] and profile.input_dtype == "int64"
    # the mask (a model input) crosses the cut before mix with the embedding
    assert profile.layers[0].output_bytes == 2 * 5 * 8 * 4 + 2 * 5 * 4
    assert profile.layers[0].output_shape == [2, 5, 8]
    assert profile.layers[-1].output_shape == [2, 5, 4]
    assert all(l.backward_ms > 0 for l in profile.layers)
    assert profile.layers[0].backward_input_ms == 0 and profile.layers[1].backward_input_ms > 0


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_what_neighbouring_layers_both_keep_counts_once_as_in_the_eager_model(precision):
    """A ResNet block's last ReLU keeps its result, and the next block's first convolution keeps the same
    tensor as its input: profiled apart each counts it, the eager model holds it once. kept_bytes equals
    the saved bytes of the eager model's own forward (less autocast's weight copies, counted apart)."""
    from pipebench.base.training import Training

    model = models.get_model("resnet18", "tiny", seed=0)
    with torch.random.fork_rng():
        profile = profile_model(model, "cpu", 4, repeats=1, warmup=0, training=Training(precision))
    params = {p.untyped_storage().data_ptr() for p in model.module.parameters()}
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t.detach()

    inputs, _ = model.make_batch(4, seed=0)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model.module(inputs)
    eager = sum(seen.values()) - sum(l.cast_bytes for l in profile.layers)
    assert kept_bytes(profile.layers) == eager
    assert sum(l.saved_bytes for l in profile.layers) > 1.15 * eager  # what the sum alone overstated
    assert profile.layers[0].shared_bytes == 0


def test_a_figure_timed_while_the_machine_was_slow_is_taken_to_its_unloaded_speed():
    """The gauge read 2 ms around a segment where its fastest quarter of readings took 1 ms: the machine ran
    at half speed in that window, so the segment's times are halved; its spreads and bytes are not times.
    The reference is the unloaded speed, not the median: most readings slow (a long burst) leave it be, and
    one lucky fast reading does not set it."""
    from pipebench.hardware.cpu import SpeedGauge
    from pipebench.partition.profiling.measure import _at_speed

    gauge = SpeedGauge(settle=0)
    gauge.readings = [2.0] * 6 + [1.0] * 4
    assert gauge.rescale(2.0, 2.0) == pytest.approx(0.5) and gauge.factors == [pytest.approx(0.5)]
    gauge.readings = [0.2] + [1.0] * 20
    assert gauge.unloaded() == 1.0
    figures = {"forward_ms": 10.0, "forward_cpu_ms": None, "backward_weight_ms": 4.0, "forward_spread": 0.1,
               "saved_bytes": 8}
    assert _at_speed(figures, 0.5) == {"forward_ms": 5.0, "forward_cpu_ms": None, "backward_weight_ms": 2.0,
                                       "forward_spread": 0.1, "saved_bytes": 8}
    assert 0 < gauge.read() < 1000 and len(gauge.readings) == 22
    torch.manual_seed(1)
    before = torch.rand(1)
    torch.manual_seed(1)
    SpeedGauge(settle=2)
    assert torch.rand(1) == before  # the profiled model's random stream is not the gauge's


def test_how_long_the_machine_is_watched_is_a_number_of_seconds(monkeypatch):
    from pipebench.base.errors import UserError
    from pipebench.hardware.drift import DRIFT_SECONDS, drift_seconds

    monkeypatch.setenv("PIPEBENCH_DRIFT_SECONDS", "0.5")
    assert drift_seconds() == 0.5
    for bad in ("abc", "0", "-1", "nan"):
        monkeypatch.setenv("PIPEBENCH_DRIFT_SECONDS", bad)
        with pytest.raises(UserError, match="PIPEBENCH_DRIFT_SECONDS"):
            drift_seconds()
    monkeypatch.delenv("PIPEBENCH_DRIFT_SECONDS")
    assert drift_seconds() == DRIFT_SECONDS == 2.0


class _Bursty(nn.Module):
    """A step that takes 30 ms but for one in five, 5 ms: a host whose other load leaves it now and then."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1))
        self.calls = 0

    def forward(self, x):
        import time

        self.calls += 1
        time.sleep(0.005 if self.calls % 5 == 0 else 0.03)
        return x * self.weight


class _BurstyModel:
    name, flavour, config = "bursty", None, {}

    def __init__(self):
        self.module = _Bursty()

    def make_batch(self, size, seed=0, device=None):
        return torch.ones(size, 1), torch.zeros(size, 1)

    def loss_fn(self, out, target):
        return (out - target).pow(2).mean()


def test_a_cpu_whole_step_is_the_fastest_of_seconds_of_steps_and_a_gpu_one_the_median_of_its_repeats():
    from pipebench.partition.profiling.measure import _whole_step
    from pipebench.base.training import Training

    model = _BurstyModel()
    median, _, _, _ = _whole_step(model, model.module, torch.device("cpu"), 4, 3, 0, Training())
    assert model.module.calls == 3 and median == pytest.approx(30, abs=15)
    model = _BurstyModel()
    fastest, spread, _, _ = _whole_step(model, model.module, torch.device("cpu"), 4, 3, 1, Training(), seconds=0.4)
    assert model.module.calls >= 1 + 10  # the warm-up, then steps until 0.4 s had passed
    assert fastest == pytest.approx(5, abs=4) and spread >= 0


@pytest.mark.parametrize("device, whole, share", [("cuda:0", 12.0, 0.25), ("cuda:0", 8.0, 0.0), ("cpu", 12.0, 0.0)])
def test_a_gpu_step_that_waits_on_its_host_gets_the_hosts_spread_between_runs(device, whole, share):
    """A whole step of 12 ms over 9 ms of the segments' device work waits on the host for a quarter of it,
    and that part moves as the host's CPU does between runs (HOST_BETWEEN_RUNS): the interval shown widens
    by it; one the device's work explains (8 ms: fused below the segments), or a CPU profile (one clock),
    keeps BETWEEN_RUNS alone. The profile's own spread, by which predictions are told apart, never moves."""
    import math

    from pipebench.partition.profiling.profile_record import BETWEEN_RUNS, HOST_BETWEEN_RUNS, launch_share, step_spread

    layers = [LayerProfile(f"l{i}", 10, 40, 1.0, 2.0, 100, [8, 4], "float32", 100, forward_spread=0.01,
                           backward_spread=0.01) for i in range(3)]
    profile = Profile("m", "x", device, "x", "x", 8, 8, 1, 0, [8, 4], "float32", layers, whole_step_ms=whole)
    assert launch_share([profile]) == pytest.approx(share)
    kind = "cpu" if device == "cpu" else "gpu"
    own = step_spread([profile])
    assert step_spread([profile], between_runs=True) == pytest.approx(
        math.hypot(own, BETWEEN_RUNS[kind], HOST_BETWEEN_RUNS * share))
