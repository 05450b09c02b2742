"""The Python API's arguments: what pipebench.run, solve, plan, advise, save_profiles, load_profiles and a
Request are given is checked as the command line checks it, one UserError before any work (tests marked
nothing_runs prove the "before": there, profiling or a run fails the test)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import pipebench
from helpers import profile_file
from pipebench.base.errors import UserError


# ------------------------------------------------------------------------------------------- pipebench.run

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
    ("micro_batches", "2", "micro_batches takes a list of micro-batch counts"),
    ("micro_batches", [0], "micro_batches takes a list of micro-batch counts"),
    ("chunks", [0], "micro_batches takes a list of micro-batch counts"),  # the old name: the same check
    ("out", 3, r"out takes a folder's path \(got int 3\)"),
    ("profiles", 5, r"profiles takes a folder's path \(got int 5\)"),
    ("data_dir", 5, r"data_dir takes a folder's path \(got int 5\)"),
    ("data_dir", "/nonexistent-pipebench-folder", "data_dir /nonexistent-pipebench-folder: no such folder"),
    ("training", "bf16", r"training takes a Training \(pipebench.base.training\), not str 'bf16'"),
    ("resume", "no", r"resume takes True or False \(got 'no'\)"),
    ("auto", -1, r"auto takes a positive integer \(got -1\)"),
    ("auto", 10**6, "auto takes a positive integer up to"),
    ("note", 3, "note takes a function, got a int"),
])
def test_run_checks_its_options_as_the_command_does(tmp_path, option, value, message):
    """pipebench.run refuses steps=-1, timeout=nan, chunks="2", out=3, training="bf16", repeats=0, steps=2.5,
    warmup=-1, min_seconds=inf, resume="no", auto=-1 and note=3, each in one UserError before anything is
    profiled or written: no case runs, no failed or unavailable row is written, and no StatisticsError,
    ValueError, TypeError or AttributeError comes from deep inside."""
    out = tmp_path / "o"
    options = {"note": None, "out": out, option: value}
    with pytest.raises(UserError, match=message):
        pipebench.run({"mlp": 8}, strategies=["single"], flavour="tiny", **options)
    assert not out.exists()


# --------------------------------------------------------------------------------------------------- solve

@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("costs, speeds", [
    ([1.0, 2.0, 3.0], [float("nan"), 1.0]),
    ([1.0, 2.0, 3.0], [float("inf"), 1.0]),
    ([1.0, float("nan"), 3.0], None),
])
def test_the_solver_refuses_nan_and_infinity(costs, speeds):
    """From Python too: speeds=[nan, 1] is one line, not an AssertionError deep in the solver's bisection."""
    from pipebench.partition.planning.solver import solve

    with pytest.raises(ValueError, match="must be finite"):
        solve(costs, 2, speeds=speeds)


@pytest.mark.parametrize("costs, message", [
    ([10**400, 1, 1], "costs takes finite numbers; one is too large for a float"),
])
def test_solve_refuses_a_number_no_float_holds(costs, message):
    """solve([10**400, 1, 1], 2) is one line, not an OverflowError of float()."""
    with pytest.raises(UserError, match=message):
        pipebench.solve(costs, 2)


def test_solve_takes_any_iterable_once():
    """A generator of costs (or memory, caps, cut prices) is read once, and the answer is the list's: read
    twice, the second time empty, it would fail with "max() arg is an empty sequence"."""
    costs, memory, prices = [1, 1, 1, 5, 1, 1, 1, 1], [1] * 8, [0.1] * 7
    assert pipebench.solve(iter(costs), 3) == pipebench.solve(costs, 3) == [0, 3, 4, 8]
    assert pipebench.solve(iter(costs), 3, speeds=iter([1, 2, 1]), memory=iter(memory), caps=iter([9, 9, 9]),
                           cut_prices=iter(prices)) == \
        pipebench.solve(costs, 3, speeds=[1, 2, 1], memory=memory, caps=[9, 9, 9], cut_prices=prices)


@pytest.mark.usefixtures("nothing_runs")
def test_the_solver_still_takes_tuples_and_numpy():
    import numpy as np

    import pipebench

    assert pipebench.solve(np.array([1.0, 2, 3, 4]), np.int64(2)) == pipebench.solve((1, 2, 3, 4), 2) == [0, 3, 4]


# ---------------------------------------------------------------------------- profiles, plans and requests

def _profiles(model="toy", layers=6, batch=8):
    """Two profiles of `model` (1 and 2 micro-batches), made up: nothing is measured."""
    from pipebench.partition.profiling.profile_record import LayerProfile, Profile

    def one(micro_batch):
        scale = micro_batch / batch
        layer = [LayerProfile(f"l{i}", 250, 1000, 1.0 * scale, 2.0 * scale, 4000, [micro_batch, 8], "float32", 1000)
                 for i in range(layers)]
        return Profile(model, "tiny", "cpu", "x86_64", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "int64", layer)
    return [one(batch), one(batch // 2)]


@pytest.mark.parametrize("save", ["profiles", "plan"])
def test_saving_onto_a_name_too_long_is_one_line(tmp_path, save):
    """save_profiles and Plan.save onto a 300-character name, or onto a path ending in /, are the command
    line's one line (fileio.files.writable_file): no OSError ENAMETOOLONG, no file named like the folder."""
    profiles = _profiles()
    write = (lambda path: pipebench.save_profiles(profiles, path)) if save == "profiles" else \
        pipebench.plan(profiles=profiles, stages=2).save
    with pytest.raises(UserError, match="the file name is 305 characters; at most 237 fit"):
        write(str(tmp_path / ("a" * 300 + ".json")))
    with pytest.raises(UserError, match=r"names a folder \(it ends with /\); name a file"):
        write(f"{tmp_path}/newdir/")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("call", ["plan", "advise", "save_profiles"])
def test_profiles_of_two_models_are_refused_as_in_one_file(tmp_path, call):
    """plan, advise and save_profiles given the profiles of two models (an mlp's and a convnet's) refuse them
    with the profile file's line: no Plan of one of them, no recommendation from the mixture, no file that
    load_profiles refuses."""
    mixed = [_profiles("mlp")[0], _profiles("convnet")[1]]
    with pytest.raises(UserError, match=r"^profiles\[1\] is for another model or batch than profiles\[0\]$"):
        if call == "save_profiles":
            pipebench.save_profiles(mixed, tmp_path / "p.json")
        else:
            getattr(pipebench, call)(profiles=mixed, stages=2)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("edit, message", [
    (dict(repeats=0), "profiles[0].repeats: must be at least 1, got 0"),
    (dict(batch="8"), "profiles[0].batch: expected int, got '8'"),
    (dict(layer=dict(params="x")), "profiles[0].layers[0].params: expected int, got 'x'"),
    (dict(layer=dict(forward_ms=float("nan"))), "profiles[0].layers[0].forward_ms: expected a finite number"),
])
def test_profiles_a_caller_edited_are_checked_as_a_files_are(tmp_path, edit, message):
    """plan(profiles=...) and save_profiles check a Profile as a file's is checked: no repeats, batch='8' or a
    layer's params='x' are refused in one line, not planned, saved or a TypeError of `//` and `+`."""
    import dataclasses

    import pipebench

    profile = pipebench.load_profiles(profile_file(tmp_path / "p.json"))[0]
    layer = edit.pop("layer", None)
    if layer:
        edit["layers"] = [dataclasses.replace(profile.layers[0], **layer), *profile.layers[1:]]
    edited = dataclasses.replace(profile, **edit)
    for call in (lambda: pipebench.plan(profiles=[edited], stages=2),
                 lambda: pipebench.save_profiles([edited], tmp_path / "q.json")):
        with pytest.raises(pipebench.UserError) as caught:
            call()
        assert message in str(caught.value), caught.value
    assert not (tmp_path / "q.json").exists()
    assert pipebench.plan(profiles=[profile], stages=2).batch == 8


@pytest.mark.parametrize("devices", [("tpu:0", "tpu:1"), ("cuda:-1", "cuda:-1"), ("gpu0",)])
def test_a_request_checks_its_device_names_as_the_devices_keyword_does(devices):
    """Request(devices=("tpu:0", "tpu:1")) and ("cuda:-1", ...) are refused as pipebench.plan(devices=...)
    refuses them: one rule (text.parse.parse_device), in the Request; no stage lands on 'tpu:0'."""
    with pytest.raises(UserError, match=rf"devices takes cpu, cuda or cuda:N \(got '{devices[0]}'\)"):
        pipebench.Request(devices=devices, batch=8)
    with pytest.raises(UserError, match=r"takes cpu, cuda or cuda:N"):
        pipebench.plan(profiles=_profiles(), devices=devices)


def test_speeds_beyond_the_commands_range_are_refused_by_the_request():
    """speeds=(0.001, 1000.0) is refused as --speeds refuses it: one rule (text.parse.speeds_error), asked by
    the Request."""
    with pytest.raises(UserError, match=r"speeds factors lie between 0.001 and 1000 and within 1000x of each other"):
        pipebench.plan(profiles=_profiles(), stages=2, speeds=(0.001, 1000.0))
    assert pipebench.Request(devices=("cpu", "cpu"), speeds=(0.5, 1.0)).speeds == (0.5, 1.0)


def test_the_api_refuses_a_device_that_is_no_name():
    with pytest.raises(UserError, match=r"device takes a device name such as 'cpu' or a torch.device \(got PosixPath\)"):
        pipebench.plan("mlp", flavour="tiny", stages=2, batch=8, device=Path("cpu"))


def test_the_api_refuses_no_strategies(tmp_path):
    profiles = pipebench.load_profiles(profile_file(tmp_path / "p.json"))
    with pytest.raises(UserError, match="strategies takes a non-empty list of names"):
        pipebench.advise(profiles=profiles, stages=2, strategies=[])


# ---------------------------------------------------------------------------------- wrong types and values

@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("call, message", [
    (lambda pb: pb.solve(None, 2), "costs takes a list of numbers, got 'None' (NoneType)"),
    (lambda pb: pb.solve(["a", 1], 2), "costs takes a list of numbers"),
    (lambda pb: pb.solve([1, 2], "2"), "stages takes a positive integer, got '2' (str)"),
    (lambda pb: pb.solve([1, 2], 2, speeds=[1, None]), "speeds takes a list of numbers"),
    (lambda pb: pb.solve([1, 2], 2, memory=[1, 2], caps="x"), "caps takes a list of numbers, got 'x' (str)"),
    (lambda pb: pb.load_profiles(123), "the profile file's path must be a str or a pathlib.Path, got 123 (int)"),
    (lambda pb: pb.load_profiles(None), "the profile file's path must be a str or a pathlib.Path, got None"),
    (lambda pb: pb.Plan.load(5), "the plan file's path must be a str or a pathlib.Path, got 5 (int)"),
    (lambda pb: pb.save_profiles("x", [1]), "save_profiles(profiles, path) takes the profiles first, then the path"),
    (lambda pb: pb.save_profiles(3, "x"), "need at least one profile (pipebench.profile makes them), got int"),
    (lambda pb: pb.save_profiles([3], "x"), "profiles takes Profile objects (pipebench.profile makes them), got a int"),
])
def test_the_api_refuses_wrong_types_in_one_line(tmp_path, monkeypatch, call, message):
    """Each wrong type is one line, not a raw TypeError or AttributeError from deep inside (len(None),
    os.open(123), 'str' has no to_dict)."""
    import pipebench

    monkeypatch.chdir(tmp_path)
    with pytest.raises(pipebench.UserError) as caught:
        call(pipebench)
    assert message in str(caught.value), caught.value
    assert not (tmp_path / "x").exists()


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("call, message", [
    (lambda pb, p: pb.make_plan(p, None), "make_plan(profiles, request) takes a pipebench Request, got a NoneType"),
    (lambda pb, p: pb.make_plan(p, {"batch": 8}), "takes a pipebench Request, got a dict"),
    (lambda pb, p: pb.save_profiles(p, p.folder), "{t}: is a folder; name a file"),
    (lambda pb, p: pb.plan(profiles=p, stages=2).save(p.folder), "{t}: is a folder; name a file"),
    (lambda pb, p: pb.plan(profiles=p, stages=2).export("megatron", "x"), "need at least one profile"),
    (lambda pb, p: pb.plan(profiles=p, stages=2, precision="bf16"), "precision bf16 does not match the profiles' tf32"),
    (lambda pb, p: pb.solve([float("nan"), 1], 2), "layer costs must be finite and >= 0"),
    (lambda pb, p: pb.solve([1, 2], 2, speeds=[1]), "need one speed per stage (1 != 2)"),
    (lambda pb, p: pb.solve([1, 2], 2, memory=[1, 2], caps=[float("nan"), 5]), "memory caps must be numbers >= 0"),
    (lambda pb, p: pb.solve([1, 2], 2, memory=[float("nan"), 2], caps=[5, 5]), "layer memory must be finite"),
    (lambda pb, p: pb.solve([1, 2, 3], 2, cut_prices=[float("nan"), 0]), "cut prices must be finite and >= 0"),
    (lambda pb, p: pb.profile("mlp", [1], batch=8), "example_inputs is for an nn.Module object"),
    (lambda pb, p: pb.profile("convnet", flavour="tiny", data_dir=3, batch=8), "data_dir's path must be a str"),
])
def test_the_api_refuses_wrong_values_in_one_user_error(tmp_path, call, message):
    """Each wrong value is one UserError, not an AttributeError, an IsADirectoryError, a plain ValueError or a
    TypeError of pathlib, nor taken: a NaN cap does not fit everything, an example for a zoo model is not
    ignored, a tf32 profile is not planned as bf16 (the CLI refuses `--precision bf16` with a tf32 --profile).
    """
    import pipebench

    class Profiles(list):
        folder = str(tmp_path)

    profiles = Profiles(pipebench.load_profiles(profile_file(tmp_path / "p.json")))
    with pytest.raises(pipebench.UserError) as caught:
        call(pipebench, profiles)
    assert message.format(t=tmp_path) in str(caught.value), caught.value
    assert pipebench.plan(profiles=profiles, stages=2, precision="tf32").batch == 8  # the profile's own: taken


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("call, message", [
    (lambda pb, p: pb.plan("gpt", profiles=p, stages=2), "model gpt does not match the profile's model mlp"),
    (lambda pb, p: pb.advise("gpt", profiles=p, stages=2), "model gpt does not match the profile's model mlp"),
    (lambda pb, p: pb.plan("m.py:Net", profiles=p, stages=2), "m.py:Net does not match the profile's model mlp"),
    (lambda pb, p: pb.plan(profiles=p, stages=2, flavour="small"), "flavour small does not match the profile's tiny"),
    (lambda pb, p: pb.plan("mlp", profiles=p, stages=2, settings={"depth": 8}),
     "settings depth=8 does not match the profile's depth=3"),
    (lambda pb, p: pb.plan(torch.nn.Linear(4, 4), torch.randn(2, 4), profiles=p, stages=2),
     "model torch.nn.modules.linear.Linear does not match the profile's model mlp"),
])
def test_given_profiles_are_checked_against_the_model_named(tmp_path, call, message):
    """plan("gpt", profiles=an mlp's) is refused, as `pipebench plan --model gpt --profile FILE` is, and so
    are the profiles of another flavour or setting: none is planned as the model named."""
    config = {"in_features": 64, "hidden": 64, "depth": 3, "classes": 10}
    profiles = pipebench.load_profiles(profile_file(tmp_path / "p.json", lambda e: e.update(config=config)))
    with pytest.raises(UserError) as caught:
        call(pipebench, profiles)
    assert message in str(caught.value), caught.value
    assert pipebench.plan("mlp", profiles=profiles, stages=2, flavour="tiny", settings={"depth": 3}).batch == 8
    assert pipebench.advise("mlp", profiles=profiles, stages=2).recommended


def imported(path: Path, monkeypatch):
    """The module of the file at `path`, imported as a script's `import NAME` imports it (into sys.modules)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)
    spec.loader.exec_module(module)
    return module


NET_FILE = """import torch


class Net(torch.nn.Sequential):
    def __init__(self):
        super().__init__(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
"""


@pytest.mark.usefixtures("nothing_runs")
def test_given_profiles_of_a_model_file_or_object_are_taken_with_it(tmp_path, monkeypatch):
    """The profile of a model file records its path made absolute, and an object's the class's file and name
    (a profile made before records its name alone): the model given as it was profiled matches them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text(NET_FILE)
    file = pipebench.load_profiles(profile_file(tmp_path / "f.json", lambda e: e.update(
        model=f"{tmp_path}/m.py:Net", flavour="", config={"input_shape": [4]})))
    assert pipebench.plan("m.py:Net", profiles=file, stages=2, settings={"input_shape": (4,)}).batch == 8
    with pytest.raises(UserError, match=r"settings input_shape=\[5\] does not match the profile's input_shape=\[4\]"):
        pipebench.plan("m.py:Net", profiles=file, stages=2, settings={"input_shape": [5]})
    net = pipebench.load_profiles(profile_file(tmp_path / "n.json", lambda e: e.update(model="Sequential", flavour="")))
    assert pipebench.plan(torch.nn.Sequential(torch.nn.Linear(4, 4)), torch.randn(2, 4), profiles=net,
                          stages=2).batch == 8
    # an object of the class a model file's profile names (FILE.py:Net) is that model, as is one of the class
    # an object's profile records
    good = imported(tmp_path / "m.py", monkeypatch)
    assert pipebench.plan(good.Net(), torch.randn(2, 4), profiles=file, stages=2).batch == 8
    recorded = pipebench.load_profiles(profile_file(tmp_path / "o.json", lambda e: e.update(
        model="Net", flavour="", model_class=f"{tmp_path}/m.py:Net")))
    assert pipebench.plan(good.Net(), torch.randn(2, 4), profiles=recorded, stages=2).batch == 8


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("call", [pipebench.plan, pipebench.advise])
def test_another_class_of_the_same_name_is_not_the_model_profiled(tmp_path, monkeypatch, call):
    """A class Net of another file, or of the caller's own, is not the Net a profile records, whether the
    profile is of m.py:Net or of an object of m.py's Net: planned from it, the plan would be of another model
    (the command line refuses `--model other.py:Net` against it)."""
    (tmp_path / "m.py").write_text(NET_FILE)
    (tmp_path / "other.py").write_text(NET_FILE)
    file = pipebench.load_profiles(profile_file(tmp_path / "f.json", lambda e: e.update(
        model=f"{tmp_path}/m.py:Net", flavour="", config={"input_shape": [4]})))
    recorded = pipebench.load_profiles(profile_file(tmp_path / "o.json", lambda e: e.update(
        model="Net", flavour="", model_class=f"{tmp_path}/m.py:Net")))

    class Net(torch.nn.Sequential):
        pass

    for model in (imported(tmp_path / "other.py", monkeypatch).Net(), Net(torch.nn.Linear(4, 4))):
        for profiles in (file, recorded):
            asked = f"{type(model).__module__}.{type(model).__qualname__}"
            with pytest.raises(UserError, match=re.escape(f"model {asked} does not match the profile's model "
                                                          f"{tmp_path}/m.py:Net")):
                call(model, torch.randn(2, 4), profiles=profiles, stages=2)


def test_a_profile_of_an_object_records_where_its_class_is_defined(tmp_path, monkeypatch):
    """An object's profile records its class's file and name beside the name itself, in its file too: planned
    from it, an object of that class is taken and one of another file's class Net refused."""
    (tmp_path / "m.py").write_text(NET_FILE)
    (tmp_path / "other.py").write_text(NET_FILE)
    good, other = (imported(tmp_path / name, monkeypatch) for name in ("m.py", "other.py"))
    profiles = pipebench.profile(good.Net(), torch.randn(2, 4), batch=8, micro_batches=1, repeats=1, cache=False)
    assert (profiles[0].model, profiles[0].model_class) == ("Net", f"{tmp_path}/m.py:Net")
    pipebench.save_profiles(profiles, tmp_path / "p.json")
    saved = pipebench.load_profiles(tmp_path / "p.json")
    assert pipebench.plan(good.Net(), torch.randn(2, 4), profiles=saved, stages=2).batch == 8
    with pytest.raises(UserError, match="model other.Net does not match the profile's model"):
        pipebench.plan(other.Net(), torch.randn(2, 4), profiles=saved, stages=2)


@pytest.mark.usefixtures("nothing_runs")
def test_schedule_none_is_the_default_schedule(tmp_path):
    """None is the default of every keyword a request takes (batch, micro_batches, link_gbps, ...), schedule
    too: schedule=None plans the default schedule, not "unknown schedule None"."""
    from pipebench.base.schedules import DEFAULT_SCHEDULE

    profiles = pipebench.load_profiles(profile_file(tmp_path / "p.json"))
    assert pipebench.Request(schedule=None).schedule == DEFAULT_SCHEDULE
    assert pipebench.plan(profiles=profiles, stages=2, schedule=None) == pipebench.plan(profiles=profiles, stages=2)


def test_a_request_takes_numpy_arrays_where_it_takes_lists():
    """micro_batches=np.array([1, 2]) or np.array([2]), and speeds and max_memory as arrays, are taken: an
    array (a sequence other than a list or tuple too) is read as the list it holds, its numbers as Python's
    own, with no ValueError of an array's truth value."""
    request = pipebench.Request(devices=("cpu", "cpu"), batch=8, micro_batches=np.array([1, 2]),
                                speeds=np.array([1.0, 0.5]), max_memory=np.array([2e9, 3e9]))
    assert request.micro_batches == (1, 2) and type(request.micro_batches[0]) is int
    assert request.speeds == (1.0, 0.5) and type(request.speeds[0]) is float
    assert request.max_memory == (2e9, 3e9)
    assert pipebench.Request(micro_batches=np.array([2])).micro_batches == (2,)
    assert pipebench.Request(micro_batches=range(1, 3)).micro_batches == (1, 2)
    assert pipebench.Request.from_keywords(None, {"gpus": np.array([0, 1])}).devices == ("cuda:0", "cuda:1")
    with pytest.raises(UserError, match="a plan takes one micro-batch count or auto"):
        pipebench.plan(profiles=_profiles(), stages=2, micro_batches=np.array([1, 2]))


@pytest.mark.parametrize("name, value", [
    ("micro_batches", np.array([[1, 2]])),
    ("micro_batches", "12"),
    ("speeds", np.array([[1.0, 0.5]])),
    ("speeds", "12"),
    ("max_memory", np.array([[1e9], [1e9]])),
])
def test_a_request_refuses_a_table_or_text_for_a_list_in_one_line(name, value):
    with pytest.raises(UserError, match=name):
        pipebench.Request(devices=("cpu", "cpu"), **{name: value})
