"""A model of the user's own, named on the command line: plans by file path, and every mistake is one line
with exit status 2 before anything is profiled. (tests/test_distributed.py trains them.)"""
from __future__ import annotations

from pathlib import Path

import pytest

from pipebench.bench.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
CONVNET = f"{FIXTURES / 'seed_convnet.py'}:ConvNet"
BAD = FIXTURES / "bad_models.py"


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_the_seeds_convnet_plans_from_the_command_line_by_file_path(capsys, tmp_path):
    code = main(["plan", "--model", CONVNET, "--input-shape", "1,28,28", "--loss", "nll", "--stages", "2",
                 "--batch", "8", "--micro-batches", "2", "--repeats", "1", "--json", str(tmp_path / "plan.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "conv1" in out and "fc2" in out  # stages named by the submodules where they begin and end
    from pipebench import Plan

    plan = Plan.load(tmp_path / "plan.json")
    assert plan.model == CONVNET and plan.config["input_shape"] == [1, 28, 28] and plan.config["loss"] == "nll"
    assert [s.layers for s in plan.stages][0][0] == "conv1" and sum(plan.balance) == 4


@pytest.mark.parametrize("model, extra, message", [
    (f"{FIXTURES / 'nosuch.py'}:Net", [], "no such file"),
    (f"{BAD}:Missing", [], "no 'Missing' in"),
    (f"{BAD}:NOT_A_MODEL", [], "is a int, not an nn.Module class or a function"),
    (f"{BAD}:not_a_module", [], "returned a str, not an nn.Module"),
    (f"{BAD}:NeedsArguments", [], "needs argument(s) width"),
    (CONVNET, ["--input-shape", "3,28,28"], "rejects an input of shape [2, 3, 28, 28]: RuntimeError: Given groups=1"),
    (CONVNET, [], "say what the model takes: --input-shape"),
    (f"{BAD}:DataDependent", ["--input-shape", "8"], "torch.export cannot capture"),
    (f"{BAD}:TwoLinear", ["--input-shape", "8", "--stages", "3"], "more stages than layers (3 > 2)"),
    ("no/colon/here", [], "unknown model"),
    (f"{BAD}:TwoLinear", ["--input-shape", "8", "--loss", "hinge"], "unknown loss 'hinge'"),
])
def test_bad_models_are_one_line_and_exit_2(capsys, model, extra, message):
    argv = ["plan", "--model", model, "--batch", "8", "--micro-batches", "2", "--repeats", "1", *extra]
    if "--stages" not in extra:
        argv += ["--stages", "2"]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    errors = [line for line in err.splitlines() if line.startswith("pipebench: error: ")]
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0] and "Traceback" not in err, err  # progress notes, then one line
    assert message in errors[0], err


def test_more_stages_than_layers_is_refused_before_the_links_are_timed(capsys, monkeypatch):
    """A model of your own is counted once captured: more stages than its layers is refused there, not
    after the link figures between 3 CPU processes are timed (30 s). The API refuses it as early."""
    import torch

    import pipebench
    from pipebench.base.errors import UserError
    from pipebench.partition import profile_session

    monkeypatch.setattr(profile_session, "_links", lambda *a, **k: pytest.fail("timed the links before refusing"))
    assert main(["plan", "--model", f"{BAD}:TwoLinear", "--input-shape", "8", "--batch", "8", "--chunks", "2",
                 "--repeats", "1", "--stages", "3", "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "pipebench: error: more stages than layers (3 > 2)"
    with pytest.raises(UserError, match=r"more stages than layers \(3 > 2\)"):
        pipebench.plan(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)), torch.randn(2, 4),
                       stages=3, batch=6, micro_batches=2, repeats=1)


def test_model_options_are_for_models_of_your_own(capsys):
    assert main(["plan", "--model", "convnet", "--input-shape", "1,28,28", "--stages", "2"]) == 2
    assert "--input-shape is for a model of your own" in capsys.readouterr().err
