"""--compile: compiled training computes what eager training does (inductor builds C++ on the CPU), on one
device and on two gloo processes; the mode travels from the command line to the row; a compiler's
failure and its graph breaks are said as such; the report sets compiled beside eager."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from pipebench import models
from pipebench.bench.launch.job import Job
from pipebench.bench.report.tables import frame, summarise
from pipebench.bench.report.report_notes import compile_notes
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.bench.launch.worker import graph_breaks
from pipebench.bench.launch.worker_report import WorkerResult, error_record
from pipebench.base.errors import UserError
from pipebench.base.training import Training
from test_distributed import SEED, trained_params
from test_results_file import make_row

SLOW = pytest.mark.slow


def two_steps(training: Training, name: str = "mlp") -> tuple[list[float], dict[str, torch.Tensor]]:
    """Two steps of the single trainer on one CPU thread: both losses (the second is the loss after a
    step) and the parameters after them."""
    model = models.get_model(name, "tiny", seed=SEED)
    inputs, targets = model.make_batch(8, seed=SEED + 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = SingleTrainer(model, ["cpu"], training=training)
        losses = [trainer.step(inputs, targets) for _ in range(2)]
    finally:
        torch.set_num_threads(threads)
    return losses, trainer.state_dict()


@pytest.mark.parametrize("precision, tolerance", [pytest.param("fp32", 1e-5, marks=pytest.mark.ci), pytest.param("bf16", 2e-2, marks=SLOW)])
def test_compiled_single_trains_as_eager(precision, tolerance):
    """The loss after a step and the parameters after two: fp32 within reordered float sums, bf16 within
    bf16's rounding (inductor fuses what eager rounds op by op)."""
    eager_losses, eager = two_steps(Training(precision, "adamw"))
    compiled_losses, compiled = two_steps(Training(precision, "adamw", compile="default"))
    assert compiled_losses == pytest.approx(eager_losses, rel=tolerance)
    assert compiled_losses[1] != compiled_losses[0]  # it trained
    for key in eager:
        torch.testing.assert_close(compiled[key], eager[key], atol=tolerance, rtol=tolerance * 10,
                                   msg=lambda m: f"{key}: {m}")


def compiled_job(strategy: str, **settings) -> Job:
    return Job.by_hand("mlp", strategy, flavour="tiny", batch=8, devices=2, device_type="cpu", steps=1, warmup=0,
                       seed=SEED, save_params=True, training=Training("fp32", compile="default"), **settings)


def check_against_eager(tmp_path, job: Job, groups) -> WorkerResult:
    """The compiled job's first loss and its parameters after the step equal one eager device's."""
    model = models.get_model(job.model, job.flavour, seed=SEED)
    result, params = trained_params(tmp_path, job, groups)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer = SingleTrainer(model, ["cpu"], training=Training("fp32"))
        loss = trainer.step(*model.make_batch(job.batch, seed=SEED + 1))
    finally:
        torch.set_num_threads(threads)
    ref = trainer.state_dict()
    assert result.first_loss == pytest.approx(loss, rel=1e-5)
    assert params.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(params[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")
    return result


@pytest.mark.parametrize("strategy, micro_batches", [
    pytest.param("pp-1f1b", 2, marks=pytest.mark.ci),  # each stage's submodule compiled; CI runs it after the default set
    pytest.param("ddp", 1, marks=SLOW), pytest.param("zero1", 1, marks=SLOW), pytest.param("fsdp", 1, marks=SLOW),
    pytest.param("pp-gpipe", 2, marks=SLOW), pytest.param("pp-zbv", 4, marks=SLOW),
    pytest.param("modelparallel", 1, marks=SLOW), pytest.param("pipeline", 2, marks=SLOW),
    pytest.param("device-map", 1, marks=SLOW), pytest.param("dataparallel", 1, marks=SLOW),
])
def test_every_strategy_compiled_trains_as_one_eager_device(tmp_path, groups, strategy, micro_batches):
    result = check_against_eager(tmp_path, compiled_job(strategy, micro_batches=micro_batches), groups)
    # The zoo's MLP compiles whole; FSDP2's gathers run eagerly around each compiled block, a break each.
    assert result.graph_breaks == 0 if strategy != "fsdp" else result.graph_breaks >= 1


def test_compile_seconds_are_the_warm_up_beyond_the_timed_steps():
    from pipebench.bench.launch.worker import compile_seconds

    assert compile_seconds([2500.0, 12.0], [10.0, 11.0]) == pytest.approx((2490 + 2) / 1e3)
    assert compile_seconds([], [10.0]) is None



@pytest.mark.parametrize("compile_mode, cold", [("default", True), (None, False)])
def test_a_measured_compiled_case_compiles_cold(monkeypatch, tmp_path, compile_mode, cold):
    """Its profile has just compiled the same graphs into inductor's caches: a case that read them would
    report a cache hit's seconds as its compile time. The caches are off for the case alone."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    from pipebench.bench.launch import worker

    seen = {}
    monkeypatch.setattr(worker, "_run", lambda *a, **k: seen.update(
        graphs=inductor_config.fx_graph_cache, autograd=functorch_config.enable_autograd_cache))
    before = (inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache)
    worker.run(SimpleNamespace(training=Training(compile=compile_mode)), tmp_path, 0, 1, 0)  # only _run reads more
    assert (seen["graphs"] is False and seen["autograd"] is False) == cold
    assert (inductor_config.fx_graph_cache, functorch_config.enable_autograd_cache) == before

class _Breaks(nn.Module):
    """A graph break: .item() leaves the graph, the rest of forward runs in a graph of its own."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        y = self.linear(x)
        if y.sum().item() > 1e9:  # data-dependent control flow: dynamo breaks the graph here
            y = y * 2
        return self.linear(y)


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_graph_break_is_counted_not_failed():
    from torch import _dynamo

    _dynamo.reset()
    _dynamo.utils.counters.clear()
    module = _Breaks()
    expected = module(torch.ones(2, 4))
    module.compile()
    torch.testing.assert_close(module(torch.ones(2, 4)), expected)
    assert graph_breaks() >= 1


def test_a_compiler_error_is_named_as_the_compilers():
    from torch._dynamo.exc import Unsupported

    try:
        try:
            raise Unsupported("call_function UserDefinedObjectVariable(widget) [] {}")
        except Unsupported as inner:
            raise RuntimeError("the step failed") from inner
    except RuntimeError as exc:
        record = error_record(exc, 0)
    assert record["message"] == "torch.compile failed: call_function UserDefinedObjectVariable(widget) [] {}"


def test_training_refuses_unknown_and_impossible_modes():
    with pytest.raises(UserError, match="unknown compile mode 'fast'"):
        Training(compile="fast")
    with pytest.raises(UserError, match="cudagraphs .* needs a GPU"):
        Training(compile="cudagraphs").check_device("cpu")
    Training(compile="cudagraphs").check_device("cuda")
    assert Training(compile="max-autotune").label() == "tf32 sgd, compiled max-autotune"
    with pytest.raises(UserError, match="needs a GPU"):
        Job.by_hand("mlp", "single", flavour="tiny", batch=8, devices=1, device_type="cpu",
                    training=Training(compile="cudagraphs"))


@pytest.mark.parametrize("args, message", [
    (["run", "--device", "cpu", "--models", "mlp", "--compile", "cudagraphs"], "--compile cudagraphs records CUDA"),
    (["run", "--device", "cpu", "--models", "mlp", "--compile", "eager,fastest"], "--compile 'fastest': choose"),
    (["run", "--device", "cpu", "--models", "mlp", "--compile", "default", "--warmup", "0"], "needs a warm-up step"),
    (["plan", "--model", "mlp", "--compile", "default,eager"], "--compile takes one mode here"),
    (["advise", "--model", "mlp", "--flavour", "tiny", "--batch", "8", "--compile", "cudagraphs"],
     "--compile cudagraphs records CUDA"),
])
def test_command_line_refuses_in_one_line(tmp_path, capsys, monkeypatch, args, message):
    """Before anything is profiled or run (both would fail the test)."""
    from pipebench.bench.cases import run_suite
    from pipebench.partition.profiling import measure
    from helpers import refused

    def too_far(*args, **kwargs):
        raise AssertionError("got as far as profiling or running")

    monkeypatch.setattr(measure, "profile_sizes", too_far)
    monkeypatch.setattr(run_suite, "run_suite", too_far)
    refused(capsys, [*args, *(["--out", str(tmp_path)] if args[0] == "run" else [])], message)


def test_report_sets_compiled_beside_eager():
    rows = [make_row(strategy="single", gpus="0", world_size=1, micro_batches=1, schedule="", step_ms=100.0,
                     samples_per_s=80.0, predicted_step_ms=None, bounds=[]),
            make_row(strategy="single", gpus="0", world_size=1, micro_batches=1, schedule="", step_ms=80.0,
                     samples_per_s=100.0, predicted_step_ms=82.0, bounds=[], compile="default", compile_s=41.5,
                     graph_breaks=2)]
    summary = summarise(frame(rows))
    assert list(summary["training"]) == ["tf32 sgd", "tf32 sgd, compiled default"]
    (line,) = compile_notes(summary)
    assert "default 1.25x eager (step 80.0 ms against 100.0, predicted 82.0 ms), compiled in 41.5 s, 2 graph break" in line
