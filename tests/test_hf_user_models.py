"""Hugging Face models as people hold them: named in a file on `run`'s command line, or passed as objects to
pipebench.plan and pipebench.profile. Small configs from tests/fixtures/hf_models.py, on the CPU."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pipebench import models
from pipebench.bench.cli import main
from pipebench.base.errors import UserError

HF_MODELS = Path(__file__).parent / "fixtures" / "hf_models.py"
FIXTURES = ("gpt2", "gpt2_tied", "llama", "bert")

pytestmark = pytest.mark.usefixtures("one_thread")


def run_from_the_command_line(capsys, tmp_path, names):
    # The early check runs each model on the meta device, where their masks' Tensor.item() cannot run:
    # a model is refused only for what it does on a real device. One run: transformers is imported once.
    models = ",".join(f"{HF_MODELS}:{name}" for name in names)
    code = main(["run", "--models", models, "--input-shape", "16", "--input-dtype", "int64", "--strategies", "single",
                 "--batch", "2", "--steps", "1", "--warmup", "0", "--repeats", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    [results] = tmp_path.glob("*.json")
    rows = json.loads(results.read_text())["rows"]
    assert sorted(r["model"].rpartition(":")[2] for r in rows) == sorted(names)
    assert all(r["status"] == "ok" and r["first_loss"] > 0 for r in rows), rows


@pytest.mark.ci  # a whole run or train through the command line, 10-20 s: CI runs it after the default set
def test_run_trains_a_hugging_face_fixture_from_the_command_line(capsys, tmp_path):
    run_from_the_command_line(capsys, tmp_path, ["llama"])


@pytest.mark.ci  # a sweep: a process to profile and one to run each model; llama stands for them above
def test_run_trains_every_hugging_face_fixture_from_the_command_line(capsys, tmp_path):
    run_from_the_command_line(capsys, tmp_path, FIXTURES)


def test_token_ids_are_drawn_from_the_models_vocabulary(capsys):
    # Built on the meta device, as run's early check builds it: the vocabulary is read off the embedding.
    gpt2 = models.get_model(f"{HF_MODELS}:gpt2", input_shape=[16], input_dtype="int64", device="meta")
    assert gpt2.config["token_range"] == 128
    inputs, targets = gpt2.make_batch(64, seed=0)
    assert int(inputs.max()) < 128 and int(targets.max()) < 128 and int(inputs.max()) > 100
    with pytest.raises(UserError, match="token_range 1000 exceeds the model's vocabulary of 128 token ids"):
        models.get_model(f"{HF_MODELS}:gpt2", input_shape=[16], input_dtype="int64", token_range=1000, device="meta")
    assert main(["run", "--models", f"{HF_MODELS}:llama", "--input-shape", "16", "--input-dtype", "int64",
                 "--token-range", "1000", "--strategies", "single"]) == 2
    assert "exceeds the model's vocabulary of 128" in capsys.readouterr().err


# --------------------------------------------------------------------------------------- model objects

def gpt2_object():
    """GPT-2 as its config builds it (tied embeddings), 4 layers, vocabulary 512."""
    import transformers

    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=512, n_positions=32, n_embd=32, n_layer=4, n_head=2, bos_token_id=None, eos_token_id=None))


def llama_object():
    import transformers

    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=32))


@pytest.mark.parametrize("build", [gpt2_object, pytest.param(llama_object, marks=pytest.mark.ci)])
def test_plan_takes_a_hugging_face_model_object_and_its_split_spec_builds_those_stages(build):
    from torch.distributed.pipelining import pipeline

    import pipebench

    model = build()
    example = torch.randint(0, 512, (2, 32))
    plan = pipebench.plan(model, example, stages=2, device="cpu", batch=8, micro_batches=2, repeats=1)
    assert plan.config["output"] == "logits" and plan.config["token_range"] == 512
    # The cuts name the model's own submodules: the object the user holds splits at them.
    trace = dict(mb_args=(example[:1],), mb_kwargs={"use_cache": False})
    try:
        pipe = pipeline(model, **trace, split_spec=plan.split_spec())
    except AssertionError:
        try:
            pipeline(model, **trace)
        except AssertionError as unsplit:  # torch 2.11 with a Llama: unflatten's "unexpected placeholder node"
            pytest.skip(f"torch {torch.__version__}'s pipeline() cannot trace this model even unsplit: {unsplit}")
        raise
    assert pipe.num_stages == 2
    # Each of pipeline()'s stages holds the parameters of the plan's stage (by name; a tied weight, GPT-2's
    # embedding and head, may sit in either stage that uses it).
    by_tensor: dict[int, set[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        by_tensor.setdefault(id(param), set()).add(name)
    tied = {n for names in by_tensor.values() if len(names) > 1 for n in names}
    held = set()
    for k, stage in enumerate(plan.stages):
        names = {n for n, _ in pipe.get_stage_module(k).named_parameters()}
        assert all(n in tied or any(n.startswith(layer + ".") for layer in stage.layers) for n in names), k
        held |= names
    assert {n for n, _ in model.named_parameters()} - tied <= held


def test_the_object_trains_as_the_command_line_trains_it():
    from pipebench.models.source import object_model

    model = gpt2_object()
    trained = object_model(model, torch.randint(0, 512, (2, 32)))
    inputs, targets = trained.make_batch(4, seed=0)
    assert torch.equal(inputs[:, 1:], targets[:, :-1]) and int(inputs.max()) < 512  # the next tokens
    trained.module.eval()  # the model's dropout off too: the view trains and evaluates the model it shows
    assert not model.training and not model.transformer.h[0].training
    logits = trained.module(inputs)
    assert logits.shape == (4, 32, 512)  # logits, not a ModelOutput; no KV cache asked for
    torch.testing.assert_close(logits, model(input_ids=inputs, use_cache=False).logits)
    # Hugging Face's own loss against shifted labels, over the positions whose next token is in the batch.
    loss = trained.loss_fn(logits[:, :-1], targets[:, :-1])
    torch.testing.assert_close(loss, model(input_ids=inputs, labels=inputs, use_cache=False).loss)
    assert dict(trained.module.named_parameters()).keys() == dict(model.named_parameters()).keys()


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_dict_example_feeds_the_model_by_keyword():
    import pipebench

    model = llama_object()
    ids = torch.randint(0, 300, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # left padding in the second sample
    profiles = pipebench.profile(model, {"attention_mask": mask, "input_ids": ids}, batch=4, micro_batches=1,
                                 repeats=1)
    assert profiles[0].config["output"] == "logits" and profiles[0].config["token_range"] == 512

    from pipebench.models.source import object_model

    trained = object_model(model, {"attention_mask": mask, "input_ids": ids})
    (batch_ids, batch_mask), _ = trained.make_batch(3, seed=0)
    assert torch.equal(batch_mask, mask[[0, 1, 0]])  # the example's own masks, repeated
    torch.testing.assert_close(trained.module(batch_ids, batch_mask),
                               model(input_ids=batch_ids, attention_mask=batch_mask, use_cache=False).logits)


class Pair(torch.nn.Module):
    """Returns (logits, hidden) or {"hidden": ..., "logits": ...}: not one tensor."""

    def __init__(self, as_dict: bool):
        super().__init__()
        self.body, self.head, self.as_dict = torch.nn.Linear(8, 8), torch.nn.Linear(8, 3), as_dict

    def forward(self, x):
        hidden = self.body(x).relu()
        return {"hidden": hidden, "logits": self.head(hidden)} if self.as_dict else (self.head(hidden), hidden)


@pytest.mark.parametrize("as_dict, output", [(False, "first"), (True, "logits")])
def test_outputs_that_are_tuples_or_dicts_train_their_logits_or_first_tensor(as_dict, output):
    import pipebench

    seen = []

    def loss_fn(outputs, targets):
        seen.append(outputs.shape)
        return torch.nn.functional.cross_entropy(outputs, targets)

    profiles = pipebench.profile(Pair(as_dict), torch.randn(2, 8), batch=4, micro_batches=1, repeats=1)
    assert profiles[0].config["output"] == output
    profiles = pipebench.profile(Pair(as_dict), torch.randn(2, 8), batch=4, micro_batches=1, repeats=1,
                                 loss_fn=loss_fn)
    assert seen and all(shape[-1] == 3 for shape in seen)  # the loss_fn is given the logits
    with pytest.raises(UserError, match="loss_fn is for an nn.Module object"):
        pipebench.profile("mlp", flavour="tiny", batch=4, loss_fn=loss_fn)


def test_token_ids_without_an_embedding_stay_below_the_examples_largest():
    from pipebench.models.source import object_model

    class Lookup(torch.nn.Module):  # indexes a table of its own: no nn.Embedding to read a vocabulary from
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(50, 50))

        def forward(self, ids):
            return self.table[ids]

    trained = object_model(Lookup(), torch.tensor([[3, 49], [7, 0]]))
    assert trained.config["token_range"] == 50
    inputs, targets = trained.make_batch(64, seed=0)
    assert int(inputs.max()) < 50 and int(targets.max()) < 50
