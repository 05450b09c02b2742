"""Models given to the Python API: a module, its example inputs, its loss, callbacks and settings are checked
before anything is profiled, one UserError, and the caller's module and torch's state are left as found
(tests marked nothing_runs prove the "before": there, profiling fails the test)."""
from __future__ import annotations

import pytest

import pipebench
from pipebench.base.errors import UserError


# ------------------------------------------------------------------------------ modules and example inputs

@pytest.mark.usefixtures("nothing_runs")
def test_the_api_refuses_a_module_without_parameters_and_profiles_that_are_not_profiles():
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    with pytest.raises(UserError, match="ReLU: has no parameters that require grad"):
        pipebench.plan(nn.ReLU(), torch.randn(2, 4), batch=8, stages=2)
    with pytest.raises(UserError, match="profiles takes Profile objects .*, got a NoneType"):
        pipebench.plan(profiles=[None], stages=2)  # an AttributeError before


@pytest.mark.usefixtures("nothing_runs")
def test_the_api_refuses_nan_example_inputs():
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    x = torch.randn(2, 4)
    x[1, 2] = float("nan")
    with pytest.raises(UserError, match="example_inputs hold NaN or infinite values"):
        pipebench.plan(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), x, batch=8, stages=2)


def test_a_sparse_example_is_one_line():
    """A sparse example tensor is one line, not a NotImplementedError of the SparseCPU backend deep in the
    batches."""
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with pytest.raises(UserError, match=r"example_inputs are sparse_coo tensors; give dense ones \(x.to_dense\(\)\)"):
        pipebench.plan(net, torch.randn(2, 4).to_sparse(), batch=8, stages=2, cache=False)


def test_a_meta_default_device_is_one_line():
    """torch.set_default_device("meta") in the caller is one line, not "Cannot copy out of meta tensor" in the
    batches."""
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


def test_an_input_shape_of_text_is_one_line(tmp_path):
    """settings={"input_shape": "4"} for a model file is one line, not a TypeError of `<` between str and int.
    """
    path = tmp_path / "good.py"
    path.write_text("import torch.nn as nn\nclass Net(nn.Sequential):\n"
                    "    def __init__(self):\n        super().__init__(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))\n")
    with pytest.raises(UserError, match=r"input_shape takes a list of positive integers such as \[3, 224, 224\] "
                                        r"\(got '4'\)"):
        pipebench.plan(f"{path}:Net", batch=8, stages=2, settings={"input_shape": "4"}, cache=False)


def test_an_exit_in_the_builder_is_a_user_error_from_python():
    """pipebench.plan("builtins:exit") let SystemExit through to the caller."""
    import pipebench
    from pipebench.base.errors import UserError

    with pytest.raises(UserError, match="it calls sys.exit"):
        pipebench.plan("builtins:exit", batch=8, stages=2)


# -------------------------------------------------------------------------- losses, callbacks and settings

@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("kwargs, message", [
    ({"loss_fn": 3}, "loss_fn takes a function loss_fn(outputs, targets), got a int"),
    ({"loss_fn": lambda outputs, targets: outputs.sum(1)}, "the loss must be one number (a scalar tensor), got [2]"),
    ({"settings": [1]}, "settings takes a dict such as {'loss': 'mse'}, got a list"),
])
def test_the_api_checks_a_modules_loss_and_settings(kwargs, message):
    """A loss_fn of 3, a loss of one number per sample and settings=[1] are each one line, before profiling:
    no TypeError deep in the profiler or from dict(), no plan of a loss that is not one number."""
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    with pytest.raises(UserError, match=None) as caught:
        pipebench.plan(net, torch.randn(2, 4), batch=8, stages=2, **kwargs)
    assert message in str(caught.value)


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_loss_that_is_not_finite_is_refused_and_the_callers_weights_stay(value):
    """A loss of NaN (or inf) is refused before profiling, and the caller's module keeps its weights: the
    timed update at lr 0 would write 0 * nan = nan into every weight, and the profile would time NaN
    arithmetic."""
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(UserError, match=f"Sequential: the loss is {value} on a batch of two"):
        pipebench.profile(model, torch.randn(2, 4), batch=8, micro_batches=1, repeats=1, cache=False,
                          loss_fn=lambda out, target: out.sum() * float(value))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("kwargs, message", [
    ({"note": 3}, "note takes a function, got a int"),
    ({"progress": "x"}, "progress takes a function, got a str"),
    ({"settings": {"depth": 3}}, "unknown setting(s) depth for python:Sequential; valid settings: num_classes"),
    ({"settings": {"input_shape": [4]}}, "unknown setting(s) input_shape for python:Sequential"),
    ({"settings": {"num_classes": "x"}}, "num_classes takes a positive integer (got str 'x')"),
    ({"settings": {"granularity": 1.5}}, "granularity takes a positive integer (got float 1.5)"),
])
def test_the_api_checks_a_modules_callbacks_and_settings(kwargs, message):
    """A TypeError each: 'int' object is not callable deep in the profiler, ModelSource's unexpected keyword,
    `'<' not supported between str and int`."""
    import torch
    from torch import nn

    import pipebench

    with pytest.raises(pipebench.UserError) as caught:
        pipebench.plan(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), torch.randn(2, 4), batch=8, stages=2,
                       **kwargs)
    assert message in str(caught.value), caught.value


@pytest.mark.parametrize("settings, message", [
    ([("depth", 2)], "settings takes a dict such as {'loss': 'mse'}, got a list"),
    ({1: 2}, "settings takes a dict such as {'loss': 'mse'} keyed by setting names, got the key 1"),
])
def test_settings_not_a_dict_of_names_is_one_line(settings, message):
    """settings=[("depth", 2)] and {1: 2} for a zoo model are one line, not TypeErrors of get_model's **."""
    with pytest.raises(UserError) as caught:
        pipebench.plan("mlp", flavour="tiny", batch=8, stages=2, settings=settings, cache=False)
    assert message in str(caught.value)


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("kwargs, message", [
    (dict(stages=10**6, batch=8), "stages takes a positive integer up to 1,024 (got 1000000)"),
    (dict(batch=2**63), "batch takes a positive integer up to 16,777,216 (got 9223372036854775808)"),
    (dict(micro_batches=10**9, batch=8), "micro_batches takes a positive integer up to 65,536 (got 1000000000)"),
    (dict(micro_batches=[2, 10**9], batch=8), "micro_batches takes a positive integer up to 65,536"),
    (dict(repeats=10**9, batch=8), "repeats takes a positive integer up to 1,000 (got 1000000000)"),
    (dict(devices=["cpu"] * 2000, batch=8), "devices takes up to 1,024 devices (got 2,000)"),
])
def test_the_api_bounds_counts_as_the_cli_does(kwargs, message):
    """plan(stages=10**6) is refused at once, as the CLI refuses --stages 1000000, instead of building a
    million-device plan; plan(batch=2**63) is refused before any profiling."""
    import torch
    from torch import nn

    import pipebench

    with pytest.raises(pipebench.UserError, match=None) as caught:
        pipebench.plan(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), torch.randn(2, 4), device="cpu", **kwargs)
    assert message in str(caught.value), caught.value
