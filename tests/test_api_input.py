"""Bad input to the Python API (issue 42, third pass: F3-F8): what `pipebench.run`, `plan` and `profile`
are given, checked as the command line checks it, and the caller's model and torch's state left as found.

Each case ran anyway before (a deep error after work began, failed rows, NaN weights, a probe blamed); now it
is one UserError before any work, or the right result."""
from __future__ import annotations

import math

import pytest

import pipebench
from pipebench.base.errors import UserError


# --------------------------------------------------------------------------------- F6: pipebench.run's options

@pytest.mark.parametrize("option, value, message", [
    ("steps", -1, r"steps takes a positive integer \(got -1\)"),
    ("steps", 0, r"steps takes a positive integer \(got 0\)"),
    ("steps", 2.5, r"steps takes a positive integer \(got float 2.5\)"),
    ("steps", "2", r"steps takes a positive integer \(got str '2'\)"),
    ("steps", 10**7, "steps takes a positive integer up to 1,000,000"),
    ("rounds", 0, r"rounds takes a positive integer \(got 0\)"),
    ("warmup", -1, r"warmup takes an integer from 0 \(got -1\)"),
    ("repeats", 0, r"repeats takes a positive integer \(got 0\)"),
    ("timeout", math.nan, "timeout takes a number from 0.001 to 1e"),
    ("timeout", "10", "timeout takes a number from 0.001 to 1e"),
    ("min_seconds", math.inf, "min_seconds takes a number from 0 to 86400"),
    ("chunks", "2", "chunks takes a list of micro-batch counts"),
    ("chunks", [0], "chunks takes a list of micro-batch counts"),
    ("out", 3, r"out takes a folder's path \(got int 3\)"),
    ("profiles", 5, r"profiles takes a folder's path \(got int 5\)"),
    ("data_dir", 5, r"data_dir takes a folder's path \(got int 5\)"),
    ("data_dir", "/nonexistent-pipebench-folder", "data_dir /nonexistent-pipebench-folder: no such folder"),
    ("training", "bf16", "training takes a pipebench.base.training.Training"),
    ("resume", "no", r"resume takes True or False \(got 'no'\)"),
    ("auto", -1, r"auto takes a positive integer \(got -1\)"),
    ("auto", 10**6, "auto takes a positive integer up to"),
])
def test_run_checks_its_options_as_the_command_does(tmp_path, option, value, message):
    """pipebench.run(steps=-1) ran the case and then failed with a StatisticsError; timeout=nan, chunks="2",
    out=3 and training="bf16" gave deep ValueErrors, TypeErrors and AttributeErrors; repeats=0 and steps=2.5
    wrote failed or unavailable rows; warmup=-1, min_seconds=inf, resume="no" and auto=-1 ran. Each is one
    UserError now, before anything is profiled or written."""
    out = tmp_path / "o"
    options = {"out": out, option: value}
    with pytest.raises(UserError, match=message):
        pipebench.run({"mlp": 8}, strategies=["single"], flavour="tiny", note=None, **options)
    assert not out.exists()


# ----------------------------------------------------------------- F5: a signal during the in-process CPU probe

def test_an_interrupt_during_the_cpu_probe_is_an_interrupt(monkeypatch):
    """Ctrl-C or SIGTERM (the CLI's KeyboardInterrupt) while the CPU processes' probe ran became
    DeviceError "the CPU processes' probe failed: " with no reason (exit 2, not 130); it is the
    KeyboardInterrupt again now, once the peer processes are ended."""
    from pipebench.hardware import cpu_processes as probes

    started = []
    start = probes._start_peers

    def start_peers(*args):
        started.extend(start(*args))
        return started

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(probes, "_start_peers", start_peers)
    monkeypatch.setattr(probes, "_peer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probes.measure_cpu_processes(2)
    assert started and all(peer.poll() is not None for peer in started)


# ------------------------------------------------------------------- F7: API inputs that reached deep errors

def _profiles(model="toy", layers=6, batch=8):
    """Two profiles of `model` (1 and 2 micro-batches), made up: nothing is measured."""
    from pipebench.partition.profiling.profile_record import LayerProfile, Profile

    def one(micro_batch):
        scale = micro_batch / batch
        layer = [LayerProfile(f"l{i}", 250, 1000, 1.0 * scale, 2.0 * scale, 4000, [micro_batch, 8], "float32", 1000)
                 for i in range(layers)]
        return Profile(model, "tiny", "cpu", "x86_64", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "int64", layer)
    return [one(batch), one(batch // 2)]


@pytest.mark.parametrize("costs, message", [
    ([10**400, 1, 1], "costs takes finite numbers; one is too large for a float"),
])
def test_solve_refuses_a_number_no_float_holds(costs, message):
    """solve([10**400, 1, 1], 2) was an OverflowError of float()."""
    with pytest.raises(UserError, match=message):
        pipebench.solve(costs, 2)


def test_solve_takes_any_iterable_once():
    """A generator of costs (or memory, caps, cut prices) was read twice, the second time empty: "max() arg is
    an empty sequence". Each is read once now, and the answer is the list's."""
    costs, memory, prices = [1, 1, 1, 5, 1, 1, 1, 1], [1] * 8, [0.1] * 7
    assert pipebench.solve(iter(costs), 3) == pipebench.solve(costs, 3) == [0, 3, 4, 8]
    assert pipebench.solve(iter(costs), 3, speeds=iter([1, 2, 1]), memory=iter(memory), caps=iter([9, 9, 9]),
                           cut_prices=iter(prices)) == \
        pipebench.solve(costs, 3, speeds=[1, 2, 1], memory=memory, caps=[9, 9, 9], cut_prices=prices)


@pytest.mark.parametrize("save", ["profiles", "plan"])
def test_saving_onto_a_name_too_long_is_one_line(tmp_path, save):
    """save_profiles and Plan.save onto a 300-character name were OSError ENAMETOOLONG; a path ending in /
    wrote a file named like the folder. Both are the command line's line now (fileio.files.writable_file)."""
    profiles = _profiles()
    write = (lambda path: pipebench.save_profiles(profiles, path)) if save == "profiles" else \
        pipebench.plan(profiles=profiles, stages=2).save
    with pytest.raises(UserError, match="the file name is 305 characters; at most 237 fit"):
        write(str(tmp_path / ("a" * 300 + ".json")))
    with pytest.raises(UserError, match=r"names a folder \(it ends with /\); name a file"):
        write(f"{tmp_path}/newdir/")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("settings, message", [
    ([("depth", 2)], "settings takes a dict such as {'loss': 'mse'}, got a list"),
    ({1: 2}, "settings takes a dict such as {'loss': 'mse'} keyed by setting names, got the key 1"),
])
def test_settings_not_a_dict_of_names_is_one_line(settings, message):
    """settings=[("depth", 2)] and {1: 2} for a zoo model were TypeErrors of get_model's **."""
    with pytest.raises(UserError) as caught:
        pipebench.plan("mlp", flavour="tiny", batch=8, stages=2, settings=settings, cache=False)
    assert message in str(caught.value)


def test_an_input_shape_of_text_is_one_line(tmp_path):
    """settings={"input_shape": "4"} for a model file was a TypeError of `<` between str and int."""
    path = tmp_path / "good.py"
    path.write_text("import torch.nn as nn\nclass Net(nn.Sequential):\n"
                    "    def __init__(self):\n        super().__init__(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))\n")
    with pytest.raises(UserError, match=r"input_shape takes a list of positive integers such as \[3, 224, 224\] "
                                        r"\(got '4'\)"):
        pipebench.plan(f"{path}:Net", batch=8, stages=2, settings={"input_shape": "4"}, cache=False)


def test_a_sparse_example_is_one_line():
    """A sparse example tensor was a NotImplementedError of the SparseCPU backend, deep in the batches."""
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with pytest.raises(UserError, match=r"example_inputs are sparse_coo tensors; give dense ones \(x.to_dense\(\)\)"):
        pipebench.plan(net, torch.randn(2, 4).to_sparse(), batch=8, stages=2, cache=False)


def test_a_meta_default_device_is_one_line():
    """torch.set_default_device("meta") in the caller was "Cannot copy out of meta tensor" in the batches."""
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    example = torch.randn(2, 4)
    torch.set_default_device("meta")
    try:
        with pytest.raises(UserError, match=r"torch's default device is meta .*torch.set_default_device\(None\)"):
            pipebench.plan(net, example, batch=8, stages=2, cache=False)
        assert torch.get_default_device().type == "meta"  # the caller's, left as it was
    finally:
        torch.set_default_device(None)


# --------------------------------------------------------------- F8: inconsistent API input accepted silently

@pytest.mark.parametrize("call", ["plan", "advise", "save_profiles"])
def test_profiles_of_two_models_are_refused_as_in_one_file(tmp_path, call):
    """plan(profiles=[an mlp's, a convnet's]) made a Plan of the convnet, advise recommended from the mixture
    and save_profiles wrote a file that load_profiles refuses; each is the profile file's line now."""
    mixed = [_profiles("mlp")[0], _profiles("convnet")[1]]
    with pytest.raises(UserError, match=r"^profiles\[1\] is for another model or batch than profiles\[0\]$"):
        if call == "save_profiles":
            pipebench.save_profiles(mixed, tmp_path / "p.json")
        else:
            getattr(pipebench, call)(profiles=mixed, stages=2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("devices", [("tpu:0", "tpu:1"), ("cuda:-1", "cuda:-1"), ("gpu0",)])
def test_a_request_checks_its_device_names_as_the_devices_keyword_does(devices):
    """Request(devices=("tpu:0", "tpu:1")) and ("cuda:-1", ...) were planned, a stage on 'tpu:0', while
    pipebench.plan(devices=...) refused them: one rule now (text.parse.parse_device), in the Request."""
    with pytest.raises(UserError, match=rf"devices takes cpu, cuda or cuda:N \(got '{devices[0]}'\)"):
        pipebench.Request(devices=devices, batch=8)
    with pytest.raises(UserError, match=r"takes cpu, cuda or cuda:N"):
        pipebench.plan(profiles=_profiles(), devices=devices)


def test_speeds_beyond_the_commands_range_are_refused_by_the_request():
    """speeds=(0.001, 1000.0) was planned while --speeds refused them: one rule (text.parse.speeds_error),
    asked by the Request."""
    with pytest.raises(UserError, match=r"speeds factors lie between 0.001 and 1000 and within 1000x of each other"):
        pipebench.plan(profiles=_profiles(), stages=2, speeds=(0.001, 1000.0))
    assert pipebench.Request(devices=("cpu", "cpu"), speeds=(0.5, 1.0)).speeds == (0.5, 1.0)
