"""Which model families pipebench can split and train: one row per family, measured on the CPU.

    python scripts/coverage.py [NAME...]  # measures with the installed torch, writes results/coverage/<torch>.json
    python scripts/coverage.py --table    # docs/coverage.md from every results/coverage/*.json

Each family is a small model built from its config (random weights, nothing downloaded), named as a user
names it (`scripts/coverage.py:llama`). A row says whether torch.export captures it, whether `pipebench plan`
makes 2 stages of it, and whether pp-1f1b on 2 gloo processes trains it like one device (first loss and
every updated weight). A failure keeps its one-line reason, the line the tool itself prints.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "coverage"
DOC = ROOT / "docs" / "coverage.md"
VOCAB = 128
TOKENS = dict(input_shape=[16], token_range=VOCAB)  # the dtype, int64, is the model's: it takes input_ids
IMAGES = dict(input_shape=[3, 32, 32])


def _hf(model_class: str, config_class: str, **config):
    import transformers

    return getattr(transformers, model_class)(getattr(transformers, config_class)(**config))


_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=32, use_cache=False)


def gpt2():
    return _hf("GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
               resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=None, eos_token_id=None)


def llama():
    return _hf("LlamaForCausalLM", "LlamaConfig", **_DECODER)


def mistral():
    return _hf("MistralForCausalLM", "MistralConfig", sliding_window=8, **_DECODER)


def gemma2():
    return _hf("Gemma2ForCausalLM", "Gemma2Config", head_dim=8, sliding_window=8, **_DECODER)


def phi3():
    return _hf("Phi3ForCausalLM", "Phi3Config", pad_token_id=0, **_DECODER)


_BERT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
             max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def bert():
    return _hf("BertForMaskedLM", "BertConfig", **_BERT)


def bert_classifier():
    return _hf("BertForSequenceClassification", "BertConfig", num_labels=3, classifier_dropout=0.0, **_BERT)


def bert_tagger():
    return _hf("BertForTokenClassification", "BertConfig", num_labels=5, classifier_dropout=0.0, **_BERT)


def t5():
    """As its config builds it: no decoder_start_token_id, so the decoder starts from the pad token."""
    return _hf("T5ForConditionalGeneration", "T5Config", vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
               num_heads=4, dropout_rate=0.0, use_cache=False)


def bart():
    return _hf("BartForConditionalGeneration", "BartConfig", vocab_size=VOCAB, d_model=32, encoder_layers=2,
               decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
               decoder_ffn_dim=64, max_position_embeddings=32, dropout=0.0, attention_dropout=0.0,
               activation_dropout=0.0, use_cache=False)


def vit():
    return _hf("ViTForImageClassification", "ViTConfig", image_size=32, patch_size=8, hidden_size=32,
               num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_labels=10,
               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def whisper():
    """Speech to text: input_features (mel bins x frames, twice the encoder's positions) to the encoder."""
    return _hf("WhisperForConditionalGeneration", "WhisperConfig", vocab_size=VOCAB, num_mel_bins=8, encoder_layers=2,
               decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
               decoder_ffn_dim=64, d_model=32, max_source_positions=16, max_target_positions=32, dropout=0.0,
               pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, use_cache=False)


def wav2vec2():
    """Audio classification: raw samples as input_values, a label per clip."""
    return _hf("Wav2Vec2ForSequenceClassification", "Wav2Vec2Config", vocab_size=32, hidden_size=32,
               num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4),
               conv_kernel=(10, 4), num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, num_labels=4,
               hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, feat_proj_dropout=0.0,
               final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0)


FAMILIES = {  # name: (label, the inputs a user gives on the command line)
    "gpt2": ("causal LM: Hugging Face GPT-2 (tied embeddings)", TOKENS),
    "llama": ("causal LM: Hugging Face Llama (RoPE)", TOKENS),
    "mistral": ("causal LM: Hugging Face Mistral (RoPE, GQA, sliding window)", TOKENS),
    "gemma2": ("causal LM: Hugging Face Gemma2 (RoPE, GQA, soft-capping, tied)", TOKENS),
    "phi3": ("causal LM: Hugging Face Phi-3 (RoPE, GQA)", TOKENS),
    "bert": ("masked LM: Hugging Face BertForMaskedLM", TOKENS),
    "bert_classifier": ("sequence classification: Hugging Face BertForSequenceClassification", TOKENS),
    "bert_tagger": ("token classification: Hugging Face BertForTokenClassification", TOKENS),
    "vit": ("image classification: Hugging Face ViTForImageClassification (pixel_values)", IMAGES),
    "t5": ("seq2seq: Hugging Face T5ForConditionalGeneration (encoder-decoder)", TOKENS),
    "bart": ("seq2seq: Hugging Face BartForConditionalGeneration (encoder-decoder)", TOKENS),
    "whisper": ("seq2seq: Hugging Face WhisperForConditionalGeneration (input_features)", dict(input_shape=[8, 32])),
    "wav2vec2": ("audio classification: Hugging Face Wav2Vec2ForSequenceClassification (input_values)",
                 dict(input_shape=[1600])),
}


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:360]


def _flags(settings: dict) -> list[str]:
    flags = ["--input-shape", ",".join(map(str, settings["input_shape"]))]
    if "token_range" in settings:
        flags += ["--token-range", str(settings["token_range"])]
    return flags


def measure(name: str) -> dict:
    """One family's row: captures, plans, trains (True, or the one-line reason it does not)."""
    import contextlib
    import io

    import torch

    from pipebench import models
    from pipebench.bench.cli import main
    from pipebench.partition.capture.graph import capture

    spec, settings = f"{Path(__file__).resolve()}:{name}", FAMILIES[name][1]
    row = {"family": FAMILIES[name][0], "name": name}
    try:
        model = models.get_model(spec, None, seed=0, **settings)
        row["task"] = model.config.get("task")
        inputs, _ = model.make_batch(2, seed=0)
        capture(model.module, inputs if isinstance(inputs, tuple) else (inputs,))
        row["captures"] = True
    except Exception as exc:  # noqa: BLE001 - the row is the result
        row["captures"] = _line(exc)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["plan", "--model", spec, *_flags(settings), "--stages", "2", "--device", "cpu", "--batch", "8",
                     "--micro-batches", "2", "--repeats", "1"])
    row["plans"] = True if code == 0 else err.getvalue().strip().splitlines()[-1].removeprefix("pipebench: error: ")
    row["trains_pp_1f1b"] = _trains(spec, settings) if row["plans"] is True else "not planned"
    row["torch"], row["transformers"] = torch.__version__.split("+")[0], _transformers_version()
    return row


def _trains(spec: str, settings: dict):
    """pp-1f1b on 2 gloo processes, one step, against one device from the same weights."""
    import torch

    from pipebench import models
    from pipebench.bench.launch.job import Job
    from pipebench.bench.launch.run_job import launch
    from pipebench.bench.strategies.planned.single import SingleTrainer

    try:
        job = Job.by_hand(spec, "pp-1f1b", flavour=None, overrides=settings, batch=8, devices=2, device_type="cpu",
                          micro_batches=2, steps=1, warmup=0, seed=0, save_params=True)
        with tempfile.TemporaryDirectory() as keep:
            result = launch(job, keep=Path(keep), timeout=600)
            params = {}
            for rank in range(2):
                params.update(torch.load(Path(keep) / f"params-rank{rank}.pt"))
        model = models.get_model(spec, None, seed=0, **settings)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as each worker computes
        try:
            reference = SingleTrainer(model, ["cpu"])
            loss = reference.step(*model.make_batch(8, seed=1))
        finally:
            torch.set_num_threads(threads)
        expected = reference.state_dict()
        if abs(result.first_loss - loss) > 1e-5 * abs(loss):
            return f"first loss {result.first_loss:.6f}, one device {loss:.6f}"
        for key, value in params.items():
            if not torch.allclose(value, expected[key], atol=1e-5, rtol=1e-4):
                return f"{key} differs from one device after a step"
        return True
    except Exception as exc:  # noqa: BLE001 - the row is the result
        return _line(exc)


def _transformers_version() -> str:
    try:
        import transformers
    except ImportError:
        return "-"
    return transformers.__version__


def table() -> str:
    """docs/coverage.md from every measured torch version."""
    runs = [json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))]
    head = ["family"] + [f"torch {r[0]['torch']} + transformers {r[0]['transformers']}" for r in runs if r]
    lines = ["# Coverage", "",
             "One row per model family, small configs on the CPU: **captures** (torch.export), **plans** (`pipebench "
             "plan ... --stages 2`), **trains** (pp-1f1b on 2 gloo processes equal to one device after a step). "
             "A failure gives the line the tool prints. Measured by `python scripts/coverage.py` with each torch, "
             "then `python scripts/coverage.py --table`. torchvision's families are trained the same way by "
             "tests/test_distributed.py, and its whole catalogue is captured and split by the slow tests of "
             "tests/test_graph.py (docs/own-model.md); timm is not installed on the machines that measured this.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    steps = (("captures", "captures"), ("plans", "plans"), ("trains", "trains_pp_1f1b"))
    for name in FAMILIES:
        cells = [FAMILIES[name][0]]
        for run in runs:
            row = next((r for r in run if r["name"] == name), None)
            cells.append("not measured" if row is None else _cell(row, steps))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Each Hugging Face model is fed by its own `main_input_name` and trained for its task, read from its "
              "class (models/hugging_face.py): the next tokens (causal LM), masked tokens (masked LM), labels below "
              "`config.num_labels` (sequence, token and image classification), and for an encoder-decoder the "
              "labels with `decoder_input_ids` shifted right from them, captured as one graph and cut anywhere, "
              "between the encoder and the decoder too. BART, Whisper and wav2vec2 are not captured with transformers "
              "before 5.23, whose LayerDrop draws a random number and branches on it in training even at layerdrop 0 "
              "(5.23 skips the draw at 0): a data-dependent branch, which torch.export refuses. A family not "
              "measured on a version says `not measured`."]
    return "\n".join(lines) + "\n"


def _cell(row: dict, steps) -> str:
    """"captures, plans, trains", or the steps that pass and the first that fails, with its reason."""
    passed = [what for what, key in steps if row[key] is True]
    failed = next(((what, row[key]) for what, key in steps if row[key] is not True), None)
    if failed is None:
        return ", ".join(passed)
    reason = str(failed[1]).replace(f"{ROOT}/", "").replace("|", "\\|")
    return ", ".join(passed + [f"**{failed[0]}: no**, {reason}"])


def main_(argv: list[str]) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("PIPEBENCH_CACHE", "off")
    if argv[:1] == ["--table"]:
        DOC.write_text(table())
        print(f"wrote {DOC}")
        return
    import torch

    names = argv or list(FAMILIES)
    rows = []
    for name in names:
        rows.append(measure(name))
        print(json.dumps(rows[-1]), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"torch-{torch.__version__.split('+')[0]}.json"
    measured = {row["name"] for row in rows}  # families named on the command line replace their rows only
    kept = [row for row in json.loads(path.read_text()) if row["name"] not in measured] if path.exists() else []
    rows = sorted(kept + rows, key=lambda row: list(FAMILIES).index(row["name"]))
    path.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main_(sys.argv[1:])
