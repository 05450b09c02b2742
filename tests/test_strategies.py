"""Every single-process strategy trains the same numbers as one device, from the same weights."""
from __future__ import annotations

import ast
import re

import pytest
import torch

from pipebench import models
from pipebench.bench.strategies import STRATEGIES
from pipebench.bench.strategies.dataparallel.trainer import DataParallelTrainer
from pipebench.bench.strategies.devicemap.trainer import DeviceMapTrainer
from pipebench.bench.strategies.planned.modelparallel import ModelParallelTrainer
from pipebench.bench.strategies.planned.pipeline import PipelineTrainer
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.partition.planning.plan import hand_plan

DEVICES = ["cpu", "cpu"]


def make(strategy, model, devices=DEVICES, micro_batches=1, stages=None, batch=8):
    if strategy in (SingleTrainer, DataParallelTrainer, DeviceMapTrainer):  # no Plan
        return strategy(model, devices)
    plan = hand_plan(model.name, model.layer_names, batch=batch, devices=devices[:stages or len(devices)],
                     micro_batches=micro_batches if strategy is PipelineTrainer else 1)
    return strategy(model, devices, plan=plan)


def after_one_step(trainer, model, batch=8):
    inputs, targets = model.make_batch(batch, seed=1)
    loss = trainer.step(inputs, targets)
    return loss, trainer.state_dict()


def assert_same_training(model, other, atol=1e-5):
    ref_loss, ref = after_one_step(SingleTrainer(model, ["cpu"]), model)
    loss, state = after_one_step(other, model)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert state.keys() == ref.keys()
    for name in ref:
        torch.testing.assert_close(state[name], ref[name], atol=atol, rtol=1e-4, msg=name)
    # The update really moved the weights (so equality above is not trivially true).
    start = dict(model.layers.named_parameters())
    assert any(not torch.equal(ref[n], start[n].detach()) for n in ref)


@pytest.mark.parametrize("name", ["gpt", "resnet18", "convnet", "vit_b_16", "mlp"])
@pytest.mark.parametrize("strategy", ["dataparallel", "modelparallel"])
def test_whole_batch_strategies_match_single(name, strategy):
    model = models.get_model(name, "tiny")
    assert_same_training(model, make(STRATEGIES[strategy].trainer_class(), model))


@pytest.mark.parametrize("name", ["gpt", "mlp", "convnet"])
@pytest.mark.parametrize("micro_batches, stages", [(1, 2), (2, 2), (4, 2), (8, 3)])
@pytest.mark.parametrize("strategy", ["pipeline"])
def test_pipeline_matches_single(strategy, name, micro_batches, stages):
    model = models.get_model(name, "tiny")
    trainer = make(STRATEGIES[strategy].trainer_class(), model, devices=["cpu"] * stages, micro_batches=micro_batches)
    assert_same_training(model, trainer)


def test_pipeline_with_batchnorm():
    """BatchNorm normalises each micro-batch on its own: with one micro-batch the pipeline equals one
    device; with several, the loss is an average of micro-batch losses and only close."""
    model = models.get_model("resnet18", "tiny")
    assert_same_training(model, make(PipelineTrainer, model, micro_batches=1))
    ref_loss, _ = after_one_step(SingleTrainer(model, ["cpu"]), model)
    loss, _ = after_one_step(make(PipelineTrainer, model, micro_batches=4), model)
    assert loss == pytest.approx(ref_loss, rel=0.2) and loss != pytest.approx(ref_loss, rel=1e-6)


def test_strategies_leave_the_callers_model_alone():
    model = models.get_model("gpt", "tiny")
    before = {n: p.detach().clone() for n, p in model.layers.named_parameters()}
    for name, strategy in STRATEGIES.items():
        if not strategy.process_per_device:
            after_one_step(make(strategy.trainer_class(), model), model)
    assert all(torch.equal(p, before[n]) for n, p in model.layers.named_parameters())


def test_first_loss_is_recorded():
    model = models.get_model("mlp", "tiny")
    trainer = SingleTrainer(model, ["cpu"])
    inputs, targets = model.make_batch(8)
    first = trainer.step(inputs, targets)
    trainer.step(inputs, targets)
    assert trainer.first_loss == first


def test_uneven_micro_batches_are_an_error():
    model = models.get_model("mlp", "tiny")
    with pytest.raises(ValueError, match="batch 8 does not split into 3 equal micro-batches"):
        make(PipelineTrainer, model, micro_batches=3)  # refused when the plan is made, before any step


def test_the_registry_declares_every_strategy_once():
    """Every entry holds its package's function that returns its Trainer (the worker builds it from the
    entry alone) and a schedule the planner simulates; pp-* entries name a torch.distributed.pipelining
    class."""
    from pipebench.bench.strategies.trainers import Trainer
    from pipebench.base.schedules import SCHEDULES

    assert list(STRATEGIES) == ["single", "dataparallel", "ddp", "zero1", "fsdp", "device-map", "modelparallel", "pipeline",
                                "pp-gpipe", "pp-1f1b", "pp-interleaved", "pp-zb", "pp-zbv", "hybrid"]
    for name, strategy in STRATEGIES.items():
        assert strategy.name == name and issubclass(strategy.trainer_class(), Trainer)
        assert strategy.import_trainer.__module__.startswith("pipebench.bench.strategies.")  # a function, not a name
        assert strategy.schedule is None or SCHEDULES[strategy.schedule.name] is strategy.schedule
        assert (strategy.torch_schedule is not None) == (name.startswith("pp-") or name == "hybrid")
        assert not strategy.micro_batched or strategy.needs_plan
        assert callable(strategy.price)


LIKE_ONE_DEVICE = re.compile(r"like_one_device|match(es)?_single")
"""How a test that checks a strategy's step against one device's is named (tests/test_distributed.py and
the strategies' own test files)."""


def strategies_shown_equal(source: str, names) -> set[str]:
    """The names of `names` in the `strategy` parameter lists of `source`'s tests named LIKE_ONE_DEVICE
    (read with ast, whatever each case's marks: CI runs the slow and ci ones)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and LIKE_ONE_DEVICE.search(node.name)):
            continue
        for mark in node.decorator_list:
            if not (isinstance(mark, ast.Call) and getattr(mark.func, "attr", None) == "parametrize" and len(mark.args) > 1):
                continue
            argnames = mark.args[0]
            argnames = ([n.strip() for n in argnames.value.split(",")] if isinstance(argnames, ast.Constant)
                        else [getattr(e, "value", None) for e in getattr(argnames, "elts", [])])
            if "strategy" in argnames:
                found |= {c.value for c in ast.walk(mark.args[1]) if isinstance(c, ast.Constant) and c.value in names}
    return found


def test_the_lists_of_strategies_are_read_as_meant():
    source = ("@pytest.mark.parametrize('strategy, stages', [('ddp', 1), pytest.param('hybrid', 4, marks=SLOW)])\n"
              "def test_x_trains_like_one_device(strategy, stages): pass\n"
              "@pytest.mark.parametrize('strategy', ['fsdp'])\ndef test_fsdp_is_priced(strategy): pass\n"
              "@pytest.mark.parametrize('name', ['zero1'])\ndef test_y_matches_single(name): pass\n")
    assert strategies_shown_equal(source, STRATEGIES) == {"ddp", "hybrid"}


def test_every_registry_strategy_has_a_test_that_it_trains_like_one_device():
    """A new registry entry fails here until a test named like one (LIKE_ONE_DEVICE) takes it in its
    `strategy` parameter list; single is the one device the others are compared with."""
    from pathlib import Path

    from pipebench.bench.strategies import BASELINE

    shown = set()
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        shown |= strategies_shown_equal(path.read_text(encoding="utf-8"), STRATEGIES)
    assert sorted(set(STRATEGIES) - shown - {BASELINE}) == []


def test_the_registry_imports_no_torch_until_a_trainer_is_asked_for():
    """The report, the results store and a cached advise read the registry without torch; the Trainer's
    class, asked for, brings it."""
    import subprocess
    import sys

    code = ("import sys; from pipebench.bench.strategies import STRATEGIES; assert 'torch' not in sys.modules; "
            "STRATEGIES['ddp'].trainer_class(); assert 'torch' in sys.modules")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["single", "dataparallel", "modelparallel", "pipeline"])
def test_one_process_strategies_run_a_plan_as_given(name):
    """The worker's path: registry entry + Plan -> Trainer; the Plan's cuts and micro-batches are used."""
    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.worker import build_trainer

    model = models.get_model("mlp", "tiny")
    job = Job.by_hand("mlp", name, flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=4,
                      bounds=None if name in ("single", "dataparallel") else [0, 2, len(model)])
    trainer = build_trainer(job, model, local_rank=0)
    if name in ("modelparallel", "pipeline"):
        owners = [{n.split(".")[1] for n, _ in stage.named_parameters()} for stage in trainer.stages]
        assert owners[0] <= set(model.layer_names[:2]) and owners[1] <= set(model.layer_names[2:])
    if name == "pipeline":
        assert trainer.micro_batches == 4
    assert_same_training(model, trainer)


def test_a_weight_tied_across_stages_trains_as_one_parameter():
    """GPT-2's LM head shares the token embedding: torch's split copies it into both stages, and the
    one-process pipeline sums the copies' gradients, as one device does."""
    pytest.importorskip("transformers")
    from pathlib import Path

    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.worker import build_trainer

    name = f"{Path(__file__).parent / 'fixtures' / 'hf_models.py'}:gpt2_tied"
    settings = dict(input_shape=[16], input_dtype="int64", token_range=128)
    model = models.get_model(name, **settings)
    job = Job.by_hand(name, "pipeline", batch=8, devices=2, device_type="cpu", micro_batches=2, overrides=settings)
    trainer = build_trainer(job, model, local_rank=0)
    assert trainer.shared, "the split should have copied the tied weight into both stages"
    whole = PipelineTrainer(model, ["cpu"], plan=hand_plan(model.name, ["whole model"], batch=8, devices=["cpu"],
                                                          micro_batches=2))
    ref_loss, ref = after_one_step(whole, model)
    loss, state = after_one_step(trainer, model)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for key in ref:
        torch.testing.assert_close(state[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")
