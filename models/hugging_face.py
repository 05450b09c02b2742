"""Models as pipebench trains them: tensors in by position, one tensor out; and what a Hugging Face model
says it takes.

A Hugging Face model (a `transformers.PreTrainedModel`) is fed by its own `main_input_name` (`input_ids`,
`pixel_values`, `input_features`) and trained for its task, read from its class as transformers' own
auto classes list it (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` and its kin, in transformers since 4.x), else from
`config.architectures` or the class name's suffix (`...ForSequenceClassification`):

| task | inputs | targets |
|---|---|---|
| causal-lm | main input | the next tokens |
| masked-lm | main input, some tokens masked | the masked tokens' ids, -100 (ignored) elsewhere |
| sequence-classification | main input | a label per sample below `config.num_labels` |
| token-classification | main input | a label per token below `config.num_labels` |
| image-classification | main input | a label per image below `config.num_labels` |
| seq2seq | main input, `decoder_input_ids` | the labels; decoder_input_ids are the labels shifted right |

(models/batches.py makes those batches.) Sequence and image classification follow the config's
`problem_type` as transformers' own loss does: regression (or num_labels 1) trains mse against real
targets, multi-label binary cross-entropy.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from pipebench.base.errors import UserError
from pipebench.models.imports import parameters

__all__ = ["TASKS", "AsTrained", "as_trained", "is_hugging_face", "task_of", "task_inputs", "input_names",
           "describe", "decoder_start", "target_length", "problem_type", "num_labels", "output_kind", "pick_output"]

TASKS = {  # task: transformers' auto mappings that list its classes, the class-name suffixes that say it
    "seq2seq": (("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES"),
                ("ForConditionalGeneration", "ForSeq2SeqLM")),
    "causal-lm": (("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",), ("ForCausalLM", "LMHeadModel")),
    "masked-lm": (("MODEL_FOR_MASKED_LM_MAPPING_NAMES",), ("ForMaskedLM",)),
    "sequence-classification": (("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
                                 "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"), ("ForSequenceClassification",)),
    "token-classification": (("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",), ("ForTokenClassification",)),
    "image-classification": (("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",), ("ForImageClassification",)),
}
"""In the order they are tried: a class in both an encoder-decoder and another mapping is an encoder-decoder."""

_TARGETS = {
    "causal-lm": "the next tokens",
    "masked-lm": "the masked tokens (-100 elsewhere)",
    "sequence-classification": "a label per sample",
    "token-classification": "a label per token",
    "image-classification": "a label per image",
    "seq2seq": "the decoder's tokens (labels; decoder_input_ids are them shifted right)",
}


def is_hugging_face(module: nn.Module) -> bool:
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(module, transformers.PreTrainedModel)


def _unwrapped(module: nn.Module) -> nn.Module:
    return module.wrapped if isinstance(module, AsTrained) else module


def task_of(module: nn.Module) -> str | None:
    """The task of a Hugging Face model (TASKS), None for other models and heads pipebench does not know
    (a bare LlamaModel): those are fed and trained as any module is."""
    module = _unwrapped(module)
    if not is_hugging_face(module):
        return None
    from transformers.models.auto import modeling_auto

    names = [c.__name__ for c in type(module).__mro__]
    names += list(getattr(module.config, "architectures", None) or [])
    for name in names:
        for task, (mappings, _) in TASKS.items():
            for mapping in mappings:
                listed = getattr(modeling_auto, mapping, {}).values()
                if any(name == value or (isinstance(value, tuple) and name in value) for value in listed):
                    return task
    for task, (_, suffixes) in TASKS.items():  # a class of its own (remote code): its name says it
        if any(name.endswith(suffixes) for name in names[:1]):
            if task != "seq2seq" or getattr(module.config, "is_encoder_decoder", False):
                return task
    return None


def task_inputs(module: nn.Module, task: str | None = None) -> tuple[str, ...]:
    """The keywords a Hugging Face model's task feeds, in the order pipebench's batches give them: its
    main input, and an encoder-decoder's decoder_input_ids."""
    module = _unwrapped(module)
    task = task or task_of(module)
    main = getattr(module, "main_input_name", None) or "input_ids"
    return (main, "decoder_input_ids") if task == "seq2seq" else (main,)


def input_names(module: nn.Module, count: int, task: str | None = None) -> tuple[str, ...]:
    """Forward's keywords for a batch of `count` tensors given as a tuple: the task's inputs first (those
    pipebench's own batches give), then attention_mask, then forward's other inputs in forward's order
    (not its labels nor its KV cache), so that (input_ids, attention_mask) feeds any decoder its mask and
    (input_ids, decoder_input_ids) feeds T5 its decoder. Refused when forward takes fewer."""
    module = _unwrapped(module)
    first = task_inputs(module, task)
    rest = [p.name for p in parameters(module.forward)
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name not in first
            and p.name != "labels" and "cache" not in p.name and not p.name.startswith("past")]
    rest.sort(key=lambda name: name != "attention_mask")
    names = (*first, *rest)
    if count > len(names):
        raise UserError(f"{type(module).__name__} takes at most {len(names)} input tensors ({', '.join(names)}); "
                        f"make_batch gives {count}")
    return names[:count]


def describe(module: nn.Module, task: str | None = None) -> str:
    """What a Hugging Face model takes, for an error line: 'BertForSequenceClassification (sequence-
    classification) takes input_ids; trained against a label per sample below num_labels=3'."""
    module = _unwrapped(module)
    task = task or task_of(module)
    name = type(module).__name__
    inputs = " and ".join(task_inputs(module, task))
    if task is None:
        return f"{name} (no task head pipebench knows) takes {inputs}"
    against = _TARGETS[task]
    if task.endswith("classification"):
        against += f" below num_labels={num_labels(module)}"
    return f"{name} ({task}) takes {inputs}; trained against {against}"


def num_labels(module: nn.Module) -> int:
    return int(getattr(_unwrapped(module).config, "num_labels", 2))


def problem_type(module: nn.Module, task: str | None) -> str:
    """single_label_classification, multi_label_classification or regression, as transformers' own loss
    reads a classifier's config (regression where num_labels is 1 and the config says nothing)."""
    if task not in ("sequence-classification", "image-classification"):
        return "single_label_classification"
    given = getattr(_unwrapped(module).config, "problem_type", None)
    if given:
        return given
    return "regression" if num_labels(module) == 1 else "single_label_classification"


def decoder_start(module: nn.Module) -> int:
    """The token an encoder-decoder's decoder starts from: the config's decoder_start_token_id (BART: 2),
    else its generation config's, else its pad token (T5's, whose configs built in code may not say it)."""
    module = _unwrapped(module)
    for holder in (module.config, getattr(module, "generation_config", None)):
        start = getattr(holder, "decoder_start_token_id", None)
        if start is not None:
            return int(start)
    pad = getattr(module.config, "pad_token_id", None)
    if pad is None:
        raise UserError(f"{type(module).__name__}: its config has no decoder_start_token_id nor pad_token_id, so "
                        "decoder_input_ids cannot be made from the labels; set decoder_start_token_id in the config")
    return int(pad)


def target_length(module: nn.Module, length: int) -> int:
    """An encoder-decoder's labels per sample: `length` (the input's last dimension: its tokens, a speech
    model's frames), at most the positions its decoder has (Whisper's max_target_positions)."""
    config = _unwrapped(module).config
    limit = getattr(config, "max_target_positions", None) or getattr(config, "max_position_embeddings", None)
    return min(length, int(limit)) if limit else length


# ------------------------------------------------------------------------------------ the trained view

class AsTrained(nn.Module):
    """A model as pipebench trains it: tensors in by position, one tensor out. Its inputs go to the model by
    `keywords` where there are any; a Hugging Face model runs without its KV cache and returns a ModelOutput,
    from which `output` (OUTPUTS) picks the trained tensor; None returns whatever the model does.

    It is a view of the model, not its parent: it holds the model's own parameters, buffers and submodules
    under the model's own names, so that a plan's cuts, its split_spec() and a state dict name what the user
    holds (pipeline(model, ...) takes them), and moving or training it moves and trains the model."""

    def __init__(self, model: nn.Module, output: str | None, keywords: tuple[str, ...] = (),
                 hugging_face: bool = False):
        super().__init__()
        self._parameters, self._buffers, self._modules = model._parameters, model._buffers, model._modules
        self._non_persistent_buffers_set = model._non_persistent_buffers_set
        object.__setattr__(self, "wrapped", model)  # not a submodule: its contents are this module's
        self.output = output
        self.keywords = tuple(keywords)
        self.options = {"use_cache": False, "return_dict": True} if hugging_face else {}

    def train(self, mode: bool = True) -> "AsTrained":
        self.wrapped.training = mode
        return super().train(mode)

    def forward(self, *inputs: torch.Tensor) -> Any:
        if self.keywords:
            if len(inputs) != len(self.keywords):
                raise TypeError(f"takes {len(self.keywords)} inputs ({', '.join(self.keywords)}), got {len(inputs)}")
            outputs = self.wrapped(**dict(zip(self.keywords, inputs)), **self.options)
        else:
            outputs = self.wrapped(*inputs, **self.options)
        return outputs if self.output is None else pick_output(outputs, self.output)


def as_trained(module: nn.Module, output: str | None, keywords: tuple[str, ...] = ()) -> nn.Module:
    """`module` as pipebench trains it: itself when it takes its tensors by position and returns one, else
    in AsTrained. A Hugging Face model always goes in AsTrained (fed by its task's inputs, task_inputs,
    unless `keywords` say otherwise; no KV cache), so that its cut candidates are named alike however it came."""
    hugging_face = is_hugging_face(module)
    if not hugging_face and output == "tensor" and not keywords:
        return module
    return AsTrained(module, output, keywords or (task_inputs(module) if hugging_face else ()), hugging_face)


def output_kind(outputs: Any, target: str) -> str:
    """Which of OUTPUTS a forward's `outputs` train by default: the tensor itself, else the logits of a
    ModelOutput or dict, else the first tensor of a tuple or dict."""
    if isinstance(outputs, torch.Tensor):
        return "tensor"
    values = list(outputs.values()) if isinstance(outputs, Mapping) else outputs
    if isinstance(outputs, Mapping) and isinstance(outputs.get("logits"), torch.Tensor):
        return "logits"
    if isinstance(values, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in values):
        return "first"
    raise UserError(f"{target} returns a {type(outputs).__name__} with no tensor in it; pipebench trains a tensor "
                    "(return the logits, or a tuple or dict that holds them)")


def pick_output(outputs: Any, output: str) -> torch.Tensor:
    """The tensor `output` names in a forward's `outputs` (see output_kind)."""
    if output == "tensor":
        return outputs
    if output == "logits":
        return outputs["logits"]
    values = outputs.values() if isinstance(outputs, Mapping) else outputs
    return next(v for v in values if isinstance(v, torch.Tensor))
