"""Hugging Face decoders (tests/fixtures/hf_models.py: GPT-2 with tied embeddings, Llama with RoPE, Qwen2 with
RoPE, grouped-query attention and tied embeddings) plan from the command line, and pipebench's own split of
them computes what the model computes, gradients included. tests/test_distributed.py trains them with
pp-1f1b. These are the model tests that CI also runs on the oldest torch and transformers pipebench
declares (.ci/oldest)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from pipebench.bench.cli import main
from pipebench.partition.capture.graph import capture
from pipebench.partition.capture.split import split_model

transformers = pytest.importorskip("transformers")

FIXTURES = Path(__file__).parent / "fixtures"


def _load_fixtures():
    import importlib.util

    spec = importlib.util.spec_from_file_location("hf_models_for_tests", FIXTURES / "hf_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hf_models = _load_fixtures()
DECODERS = ["gpt2_tied", "llama", "qwen2"]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", DECODERS)
def test_decoders_plan_two_stages_from_the_command_line(capsys, tmp_path, monkeypatch, name):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = main(["plan", "--model", f"{FIXTURES / 'hf_models.py'}:{name}", "--input-shape", "16",
                 "--input-dtype", "int64", "--token-range", "128", "--stages", "2", "--device", "cpu",
                 "--batch", "8", "--micro-batches", "2", "--repeats", "1", "--json", str(tmp_path / "plan.json")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    from pipebench import Plan

    plan = Plan.load(tmp_path / "plan.json")
    assert len(plan.stages) == 2 and plan.stages[1].layers[0] in captured.out


def test_a_decoder_splits_in_bf16_as_it_runs():
    """Under bf16 the graph is captured in the autocast its stages run in: torch 2.11 replays the region a
    Hugging Face model runs with autocast off (its RoPE) with the dtypes it was captured with, and refuses a
    graph captured in fp32 ('Tensor dtype mismatch')."""
    from pipebench.base.training import Training, autocast

    model = hf_models.llama().train()
    ids = torch.randint(0, hf_models.VOCAB, (2, 16))
    layers = [n for n in capture(model, (ids,), granularity=2).candidates if ".layers.1" in n]
    split = split_model(model, (ids,), None, layers, run_in=lambda: autocast(Training("bf16"), "cpu"))
    with autocast(Training("bf16"), "cpu"):
        logits = split(ids).logits
        reference = model(ids).logits
    logits.float().square().mean().backward()
    torch.testing.assert_close(logits, reference)
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name", DECODERS)
def test_the_split_computes_the_models_logits_and_gradients(name):
    model = getattr(hf_models, name)().train()
    ids = torch.randint(0, hf_models.VOCAB, (2, 16))
    layers = [n for n in capture(model, (ids,), granularity=2).candidates if ".layers.1" in n or ".h.1" in n]
    split = split_model(model, (ids,), None, layers)  # the cut between the two decoder layers
    assert split.num_stages == 2
    reference = model(ids).logits
    reference.square().mean().backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    logits = split(ids).logits
    logits.square().mean().backward()
    assert torch.equal(logits, reference)
    for n, p in model.named_parameters():  # a tied weight: one parameter, the gradients of both stages summed
        torch.testing.assert_close(p.grad, expected[n], atol=1e-7, rtol=1e-6, msg=lambda m: f"{n}: {m}")
    tied = model.get_input_embeddings().weight is model.get_output_embeddings().weight
    assert bool(split.shared()) == tied


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_failure_inside_the_split_is_one_line_and_exit_2(capsys, monkeypatch):
    import torch.fx.passes.split_utils as split_utils

    def broken(*args, **kwargs):
        raise StopIteration  # what torch's own IR code raised on transformers 5.17

    monkeypatch.setattr(split_utils, "split_by_tags", broken)
    code = main(["plan", "--model", f"{FIXTURES / 'hf_models.py'}:llama", "--input-shape", "16", "--input-dtype",
                 "int64", "--token-range", "128", "--stages", "2", "--device", "cpu", "--batch", "8", "--micro-batches", "2",
                 "--repeats", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "interrupted" not in err and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pipebench: error:")
    assert re.search(r"torch.fx cannot split \w+ into \d+ stages: StopIteration", last)  # the finest split
