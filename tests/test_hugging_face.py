"""Hugging Face models as people hold them: named in a file on `run`'s command line, or passed as objects to
pipebench.plan and pipebench.profile. Small configs from tests/fixtures/hf_models.py, on the CPU."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipebench import models
from pipebench.bench.cli import main
from pipebench.errors import UserError

HF_MODELS = Path(__file__).parent / "fixtures" / "hf_models.py"
FIXTURES = ("gpt2", "gpt2_tied", "llama", "bert")

pytestmark = pytest.mark.usefixtures("one_thread")


def test_run_trains_every_hugging_face_fixture_from_the_command_line(capsys, tmp_path):
    # The early check runs each model on the meta device, where their masks' Tensor.item() cannot run:
    # a model is refused only for what it does on a real device. One run: transformers is imported once.
    models = ",".join(f"{HF_MODELS}:{name}" for name in FIXTURES)
    code = main(["run", "--models", models, "--input-shape", "16", "--input-dtype", "int64", "--strategies", "single",
                 "--batch", "2", "--steps", "1", "--warmup", "0", "--repeats", "1", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0, err
    [results] = tmp_path.glob("*.json")
    rows = json.loads(results.read_text())["rows"]
    assert sorted(r["model"].rpartition(":")[2] for r in rows) == sorted(FIXTURES)
    assert all(r["status"] == "ok" and r["first_loss"] > 0 for r in rows), rows


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
