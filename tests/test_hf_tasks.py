"""Every Hugging Face task head, fed by what the model says it takes (its main input, an encoder-decoder's
decoder inputs) and trained for its task, as transformers' own loss trains it: causal and masked LM,
sequence, token and image classification, sequence-to-sequence. Small configs from
tests/fixtures/hf_models.py, named from the command line as a user names them. tests/test_distributed.py
trains each with pp-1f1b on two gloo processes; CI runs these on the oldest versions too (.ci/oldest)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from pipebench import models
from pipebench.bench.cli import main
from pipebench.models import hugging_face as hf

transformers = pytest.importorskip("transformers")

HF_MODELS = Path(__file__).parent / "fixtures" / "hf_models.py"
TOKENS = dict(input_shape=[16])  # the dtype (int64) and the range (the vocabulary) come from the model
TASKS = {  # fixture: (task, what it is fed, settings)
    "llama": ("causal-lm", ("input_ids",), TOKENS),
    "bert": ("masked-lm", ("input_ids",), TOKENS),
    "bert_classifier": ("sequence-classification", ("input_ids",), TOKENS),
    "bert_tagger": ("token-classification", ("input_ids",), TOKENS),
    "vit": ("image-classification", ("pixel_values",), dict(input_shape=[3, 32, 32])),
    "t5": ("seq2seq", ("input_ids", "decoder_input_ids"), TOKENS),
    "bart": ("seq2seq", ("input_ids", "decoder_input_ids"), TOKENS),
    "whisper": ("seq2seq", ("input_features", "decoder_input_ids"), dict(input_shape=[8, 32])),
    "wav2vec2": ("sequence-classification", ("input_values",), dict(input_shape=[1600])),
}
FLOATS = ("vit", "whisper", "wav2vec2")  # fed floats: pixels, mel features, samples

pytestmark = pytest.mark.usefixtures("one_thread")

LAYERDROP_BRANCH = tuple(int(p) for p in transformers.__version__.split(".")[:2]) < (5, 23)
"""transformers before 5.23: the LayerDrop of BART, Whisper and wav2vec2 branches on a random number in
training, which torch.export cannot capture (partition/capture/graph.py says so in the line)."""
LAYERDROP = ("bart", "whisper", "wav2vec2")


def loaded(name, **settings):
    return models.get_model(f"{HF_MODELS}:{name}", **{**TASKS[name][2], **settings})


@pytest.mark.parametrize("name", TASKS)
def test_each_task_trains_as_transformers_own_loss_does(name):
    """The task read from the class, the inputs by forward's names, and the loss on pipebench's batch what
    the model's own `labels=` loss is: for T5 and BART the model shifts the labels itself, so the decoder
    inputs pipebench made must be those."""
    task, inputs, _ = TASKS[name]
    model = loaded(name)
    assert model.config["task"] == task and model.module.keywords == inputs
    assert model.config["input_dtype"] == ("float32" if name in FLOATS else "int64")
    batch, targets = model.make_batch(4, seed=0)
    batch = batch if isinstance(batch, tuple) else (batch,)
    model.module.eval()
    ours = model.loss_fn(model.module(*batch), targets)
    given = {inputs[0]: batch[0]}  # an encoder-decoder's decoder inputs: made by the model from the labels
    labels = targets
    if task == "causal-lm":  # pipebench's targets are the next tokens; transformers shifts the labels itself,
        labels = batch[0]  # over the positions whose next token is in the batch
        ours = model.loss_fn(model.module(*batch)[:, :-1], targets[:, :-1])
    theirs = model.module.wrapped(**given, labels=labels, use_cache=False).loss
    torch.testing.assert_close(ours, theirs)


def test_the_batches_are_those_of_each_task():
    bert = loaded("bert")
    ids, targets = bert.make_batch(8, seed=0)
    masked = targets != -100
    assert masked.sum(1).tolist() == [2] * 8  # 15% of 16 tokens, as many in every sample
    assert int(targets[masked].max()) < 128
    classifier, tagger, vit = loaded("bert_classifier"), loaded("bert_tagger"), loaded("vit")
    assert classifier.make_batch(64, seed=0)[1].shape == (64,) and int(classifier.make_batch(64)[1].max()) == 2
    assert tagger.make_batch(64, seed=0)[1].shape == (64, 16) and int(tagger.make_batch(64)[1].max()) == 4
    pixels, labels = vit.make_batch(64, seed=0)
    assert pixels.shape == (64, 3, 32, 32) and pixels.is_floating_point() and int(labels.max()) == 9
    for name in ("t5", "bart"):  # the decoder starts from T5's pad token, from BART's own start token
        model = loaded(name)
        (ids, decoder_ids), labels = model.make_batch(4, seed=0)
        torch.testing.assert_close(decoder_ids, model.module.wrapped.prepare_decoder_input_ids_from_labels(
            labels=labels))
        assert decoder_ids[0, 0] == (0 if name == "t5" else 2)


def test_a_t5_config_without_a_decoder_start_starts_from_its_pad_token():
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2, pad_token_id=5))
    assert getattr(model.config, "decoder_start_token_id", None) is None and hf.decoder_start(model) == 5


@pytest.mark.parametrize("name", ["vit", *[pytest.param(name, marks=pytest.mark.ci) for name in
                                          ("t5", "bert_classifier", "bert_tagger", "bart", "whisper", "wav2vec2")]])
def test_each_task_plans_two_stages_from_the_command_line(capsys, tmp_path, monkeypatch, name):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    shape = ",".join(map(str, TASKS[name][2]["input_shape"]))
    code = main(["plan", "--model", f"{HF_MODELS}:{name}", "--input-shape", shape, "--stages", "2", "--device",
                 "cpu", "--batch", "8", "--micro-batches", "2", "--repeats", "1", "--json", str(tmp_path / "plan.json")])
    captured = capsys.readouterr()
    if name in LAYERDROP and LAYERDROP_BRANCH:  # one line that says why, and what to do
        assert code == 2 and "transformers before 5.23 draws LayerDrop's random number" in captured.err
        return
    assert code == 0, captured.err
    from pipebench import Plan

    plan = Plan.load(tmp_path / "plan.json")
    assert len(plan.stages) == 2 and plan.config["task"] == TASKS[name][0]
    if TASKS[name][0] == "seq2seq":  # the cut between the encoder and the decoder is one of the candidates
        assert any(layer.startswith("decoder") or ".decoder." in layer for layer in plan.stages[1].layers)


# ------------------------------------------------------------------------- a make_batch of the user's own

MAKE_BATCH = '''
import torch
from hf_models import VOCAB, {name} as model


def make_batch(batch_size):
    ids = torch.randint(0, VOCAB, (batch_size, 16))
    mask = torch.ones_like(ids)
    mask[:, :{pad}] = 0  # padded on the left
    targets = {targets}
    return {inputs}, targets
'''


def user_file(tmp_path, name, inputs, targets="torch.randint(0, VOCAB, (batch_size, 16))", pad=4):
    """A model file in a folder of its own that imports the model from a file beside it, as users write."""
    shutil.copy(HF_MODELS, tmp_path / "hf_models.py")
    path = tmp_path / f"{name}_with_batches.py"
    path.write_text(MAKE_BATCH.format(name=name, inputs=inputs, targets=targets, pad=pad))
    return f"{path}:model"


def test_a_tuple_from_make_batch_feeds_a_decoder_its_attention_mask(tmp_path):
    model = models.get_model(user_file(tmp_path, "llama", "(ids, mask)"))
    assert model.module.keywords == ("input_ids", "attention_mask")
    (ids, mask), _ = model.make_batch(2, seed=0)
    model.module.eval()
    wrapped = model.module.wrapped
    torch.testing.assert_close(model.module(ids, mask), wrapped(input_ids=ids, attention_mask=mask).logits)
    assert not torch.allclose(model.module(ids, mask), wrapped(input_ids=ids).logits)  # the mask reached it


@pytest.mark.parametrize("inputs, keywords", [
    ("(ids, targets)", ("input_ids", "decoder_input_ids")),
    ("(ids, targets, mask)", ("input_ids", "decoder_input_ids", "attention_mask")),
    ("{'attention_mask': mask, 'decoder_input_ids': targets, 'input_ids': ids}",
     ("input_ids", "attention_mask", "decoder_input_ids")),
])
def test_a_t5_make_batch_gives_its_decoder_inputs_by_position_or_by_keyword(tmp_path, inputs, keywords):
    model = models.get_model(user_file(tmp_path, "t5", inputs))
    assert model.module.keywords == keywords and model.config["task"] == "seq2seq"
    batch, targets = model.make_batch(2, seed=0)
    model.module.eval()
    given = dict(zip(keywords, batch))
    torch.testing.assert_close(model.module(*batch), model.module.wrapped(**given).logits)


def test_a_plain_module_takes_a_dict_from_make_batch_by_forwards_keywords(tmp_path):
    path = tmp_path / "scaled.py"
    path.write_text("""
import torch


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 3)

    def forward(self, x, scale=None):
        return self.linear(x) * scale


def make_batch(batch_size):
    return {"scale": torch.full((batch_size, 1), 2.0), "x": torch.randn(batch_size, 8)}, torch.zeros(batch_size).long()
""")
    model = models.get_model(f"{path}:Scaled")
    assert model.module.keywords == ("scale", "x")  # the dict's own order, each to its keyword
    (scale, x), _ = model.make_batch(4, seed=0)
    torch.testing.assert_close(model.module(scale, x), model.module.wrapped(x, scale=scale))


# ------------------------------------------------------------------------------------- what is refused

@pytest.mark.parametrize("name, extra, message", [
    ("bert_classifier", ["--input-dtype", "float32"], "BertForSequenceClassification (sequence-classification) "
     "takes input_ids; trained against a label per sample below num_labels=3, token ids: give --input-dtype int64"),
    ("bert_classifier", ["--num-classes", "7"], "num_classes 7 exceeds the model's num_labels 3"),
    ("vit", ["--input-shape", "16"], "rejects an input of shape [2, 16]: ValueError"),
    ("vit", ["--input-shape", "16"], "(ViTForImageClassification (image-classification) takes pixel_values;"),
    ("t5", ["--input-shape", "4,4"], "of shape (batch, length): give --input-shape LENGTH (got 4,4)"),
])
def test_what_a_model_cannot_take_is_one_line_that_says_what_it_takes(capsys, name, extra, message):
    argv = ["plan", "--model", f"{HF_MODELS}:{name}", "--stages", "2", "--batch", "8", "--micro-batches", "2"]
    if "--input-shape" not in extra:
        argv += ["--input-shape", ",".join(map(str, TASKS[name][2]["input_shape"]))]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1].startswith("pipebench: error: ") and "Traceback" not in err
    assert message in err.splitlines()[-1], err


def test_a_model_object_is_fed_for_its_task_too():
    """pipebench.plan(model, example_inputs): the example gives the main input and any mask; T5's decoder
    inputs and every task's targets are made as for the command line."""
    from pipebench.models.source import object_model

    t5 = models.get_model(f"{HF_MODELS}:t5", **TOKENS).module.wrapped
    ids = torch.randint(0, 128, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    trained = object_model(t5, {"attention_mask": mask, "input_ids": ids})
    assert trained.config["task"] == "seq2seq" and trained.module.keywords == (
        "input_ids", "decoder_input_ids", "attention_mask")
    (batch_ids, decoder_ids, batch_mask), labels = trained.make_batch(3, seed=0)
    assert torch.equal(batch_mask, mask[[0, 1, 0]]) and torch.equal(decoder_ids[:, 1:], labels[:, :-1])
    vit = models.get_model(f"{HF_MODELS}:vit", **TASKS["vit"][2]).module.wrapped
    trained = object_model(vit, torch.randn(2, 3, 32, 32))
    assert trained.config["task"] == "image-classification" and trained.module.keywords == ("pixel_values",)
    pixels, labels = trained.make_batch(4, seed=0)
    assert pixels.shape == (4, 3, 32, 32) and labels.shape == (4,)
