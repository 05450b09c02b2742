"""The batches and losses a user's model trains on: seeded, so that every process draws the same batch.

- SyntheticInputs: `input_shape` per sample of `input_dtype`. Token ids (integer inputs) are drawn below
  `token_range` and their targets are the next tokens; float inputs get class targets below `num_classes`
  (default: the output's last dimension), or, for `loss="mse"`, Gaussian targets shaped like the output.
- TaskBatches: a Hugging Face model's, by its task (models/hugging_face.py's table).
- ExampleInputs: an example's further tensors (an attention mask) repeated to the batch size.
- UserBatches: the file's own make_batch(batch_size); inputs given as a dict by forward's keywords come
  out as a tuple in the order the trained model takes them.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from pipebench.base.errors import UserError
from pipebench.models.hugging_face import AsTrained
from pipebench.models.imports import raised
from pipebench.base.text.units import format_bytes

__all__ = ["DEFAULT_TOKEN_RANGE", "LOSSES", "vocabulary", "SyntheticInputs", "TaskBatches", "ExampleInputs",
           "UserBatches", "not_finite", "loss", "cross_entropy", "nll", "mse", "bce", "MASKED_SHARE"]

DEFAULT_TOKEN_RANGE = 1000
"""Token ids are drawn below this for a model with integer inputs and no embedding to read a vocabulary from."""
MASKED_SHARE = 0.15
"""Of a masked LM's tokens, the share masked (BERT's). Every sample masks as many, so that the mean loss of
equal micro-batches is the batch's: a pipeline trains as one device does."""


def vocabulary(module: nn.Module) -> int | None:
    """How many token ids `module` embeds: the rows of its input embedding (a Hugging Face model's
    get_input_embeddings(), else its first nn.Embedding), None when it has none. Read from the module's
    structure, so a model on the meta device says it too."""
    import contextlib

    inner = module.wrapped if isinstance(module, AsTrained) else module
    embedding = None
    if callable(getattr(inner, "get_input_embeddings", None)):
        with contextlib.suppress(NotImplementedError, AttributeError):
            embedding = inner.get_input_embeddings()
    if not isinstance(embedding, nn.Embedding):
        embedding = next((m for m in inner.modules() if isinstance(m, nn.Embedding)), None)
    return embedding.num_embeddings if embedding is not None else None


def _check_size(batch_size: int, shape: list[int], dtype: torch.dtype, name: str) -> None:
    if batch_size < 1:
        raise UserError(f"batch_size must be at least 1, got {batch_size}")
    size = batch_size * math.prod(shape) * dtype.itemsize * 2  # and the targets, at most as large
    if size > _memory():
        raise UserError(f"an input batch of {batch_size} x {shape} {name} takes {format_bytes(size)}, "
                        f"more than this machine's {format_bytes(_memory())}; lower --input-shape or --batch")


def _memory() -> int:
    """This machine's memory in bytes, which a synthetic batch is made in before it moves to a GPU."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no bound here
        return 2**62


@dataclass(frozen=True)
class SyntheticInputs:
    """Seeded synthetic batches for a user model (see the module docstring)."""

    shape: list[int]
    dtype: str
    classes: int | None
    token_range: int | None
    loss: str
    output_shape: list[int]
    """One sample's output shape, probed: targets are shaped to fit it."""

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu"):
        dtype = getattr(torch, self.dtype)
        _check_size(batch_size, self.shape, dtype, self.dtype)
        generator = torch.Generator(device="cpu").manual_seed(seed)
        if not dtype.is_floating_point:  # token ids: the targets are the next tokens
            high = self.token_range or DEFAULT_TOKEN_RANGE
            stream = torch.randint(0, high, (batch_size, *self.shape[:-1], self.shape[-1] + 1), generator=generator)
            return stream[..., :-1].to(dtype).contiguous().to(device), stream[..., 1:].contiguous().to(device)
        inputs = torch.randn((batch_size, *self.shape), generator=generator).to(dtype)
        if self.loss == "mse":
            targets = torch.randn((batch_size, *self.output_shape), generator=generator)
        else:  # class ids for every position of the output but its last (class) dimension
            classes = self.classes or (self.output_shape[-1] if self.output_shape else 10)
            targets = torch.randint(0, classes, (batch_size, *self.output_shape[:-1]), generator=generator)
        return inputs.to(device), targets.to(device)


@dataclass(frozen=True)
class TaskBatches:
    """Seeded batches for a Hugging Face model's task (models/hugging_face.py): its main input of `shape`
    per sample (token ids below `token_range`, or floats) and the targets its task trains against."""

    task: str
    shape: list[int]
    dtype: str
    token_range: int | None
    labels: int
    """Classes of a classifier's labels (config.num_labels, or num_classes where given)."""
    problem_type: str = "single_label_classification"
    mask_token: int | None = None
    """What a masked LM's masked tokens become: the config's mask_token_id, else random tokens."""
    decoder_start: int = 0
    target_length: int | None = None
    """An encoder-decoder's labels per sample: the input's length, at most the decoder's positions."""

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu"):
        dtype = getattr(torch, self.dtype)
        _check_size(batch_size, self.shape, dtype, self.dtype)
        generator = torch.Generator(device="cpu").manual_seed(seed)
        high = self.token_range or DEFAULT_TOKEN_RANGE
        if self.task == "causal-lm" and not dtype.is_floating_point:  # the next tokens, as SyntheticInputs
            stream = torch.randint(0, high, (batch_size, *self.shape[:-1], self.shape[-1] + 1), generator=generator)
            inputs, targets = stream[..., :-1].to(dtype).contiguous(), stream[..., 1:].contiguous()
            return inputs.to(device), targets.to(device)
        if dtype.is_floating_point:
            inputs = torch.randn((batch_size, *self.shape), generator=generator).to(dtype)
        else:
            inputs = torch.randint(0, high, (batch_size, *self.shape), generator=generator).to(dtype)
        if self.task == "masked-lm":
            inputs, targets = self._masked(inputs, high, generator)
        elif self.task == "token-classification":
            targets = torch.randint(0, self.labels, tuple(inputs.shape), generator=generator)
        elif self.task == "seq2seq":
            labels = torch.randint(0, high, (batch_size, self.target_length or self.shape[-1]), generator=generator)
            return (inputs.to(device), shift_right(labels, self.decoder_start).to(device)), labels.to(device)
        elif self.problem_type == "regression":
            targets = torch.randn((batch_size, self.labels), generator=generator)
        elif self.problem_type == "multi_label_classification":
            targets = torch.randint(0, 2, (batch_size, self.labels), generator=generator).float()
        else:  # a label per sample
            targets = torch.randint(0, self.labels, (batch_size,), generator=generator)
        return inputs.to(device), targets.to(device)

    def _masked(self, ids: torch.Tensor, high: int, generator: torch.Generator):
        """(ids with MASKED_SHARE of each sample's tokens masked, their original ids there and -100 elsewhere)."""
        length = ids.shape[-1]
        count = max(1, round(MASKED_SHARE * length))
        where = torch.rand(ids.shape, generator=generator).argsort(dim=-1)[..., :count]
        targets = torch.full_like(ids, -100, dtype=torch.long)
        targets.scatter_(-1, where, ids.gather(-1, where).long())
        if self.mask_token is not None:
            masked = torch.full(where.shape, self.mask_token, dtype=ids.dtype)
        else:
            masked = torch.randint(0, high, tuple(where.shape), generator=generator).to(ids.dtype)
        return ids.scatter(-1, where, masked), targets


def shift_right(labels: torch.Tensor, start: int) -> torch.Tensor:
    """decoder_input_ids from labels, as transformers' own shift_tokens_right (BART) and T5's _shift_right
    make them: the start token, then the labels but the last (no label is -100 here, so no pad to put back)."""
    shifted = labels.new_empty(labels.shape)
    shifted[..., 1:] = labels[..., :-1]
    shifted[..., 0] = start
    return shifted


@dataclass(frozen=True)
class ExampleInputs:
    """Batches for a model of several inputs (object_model): those `first` makes (one tensor or a tuple),
    then the example's samples repeated to the batch size."""

    first: Callable[..., tuple[Any, torch.Tensor]]
    rest: tuple[torch.Tensor, ...]

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu"):
        inputs, targets = self.first(batch_size, seed, device)
        made = inputs if isinstance(inputs, tuple) else (inputs,)
        rows = [i % len(self.rest[0]) for i in range(batch_size)] if self.rest else []
        return (*made, *(t[rows].to(device) for t in self.rest)), targets


@dataclass(frozen=True)
class UserBatches:
    """The file's make_batch(batch_size), under a seeded RNG so that every process draws the same batch.
    Inputs given as a dict come out as a tuple by `keywords` (the trained model's order); None: as given."""

    make: Callable[[int], Any]
    target: str
    keywords: tuple[str, ...] | None = None

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str | None = "cpu"):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            try:
                made = self.make(batch_size)
            except (Exception, SystemExit) as exc:  # noqa: BLE001
                raise UserError(f"{self.target}: make_batch({batch_size}) failed: {raised(exc)}") from None
        inputs, targets = _checked_batch(self.target, batch_size, made)
        if isinstance(inputs, dict) and self.keywords is not None:
            if set(inputs) != set(self.keywords):
                raise UserError(f"{self.target}: make_batch({batch_size}) gives inputs {sorted(inputs)}, another time "
                                f"{sorted(self.keywords)}; give the same keywords every time")
            inputs = tuple(inputs[k] for k in self.keywords)
        move = (lambda t: t.to(device) if t is not None else t) if device is not None else (lambda t: t)
        if isinstance(inputs, dict):
            inputs = {k: move(v) for k, v in inputs.items()}
        else:
            inputs = tuple(move(i) for i in inputs) if isinstance(inputs, (tuple, list)) else move(inputs)
        return inputs, move(targets)


def _checked_batch(target: str, batch_size: int, made: Any) -> tuple[Any, Any]:
    """(inputs, targets) of what make_batch returned, refused in one line unless it is a pair of a tensor,
    a tuple or list of tensors, or a dict of them by name, and a tensor of targets (or None)."""
    said = f"{target}: make_batch({batch_size}) must return (inputs, targets)"
    if not isinstance(made, (tuple, list)) or len(made) != 2:
        raise UserError(f"{said}, got {_kind(made)}")
    inputs, targets = made
    parts = list(inputs.values()) if isinstance(inputs, dict) else \
        list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    if not parts or not all(isinstance(t, torch.Tensor) for t in parts) or \
            isinstance(inputs, dict) and not all(isinstance(k, str) for k in inputs):
        raise UserError(f"{said}: inputs a tensor, a tuple of tensors or a dict of them by forward's keywords; "
                        f"got {_kind(inputs)}")
    if targets is not None and not isinstance(targets, torch.Tensor):
        raise UserError(f"{said}: targets a tensor; got {_kind(targets)}")
    _check_samples(target, batch_size, inputs, targets)
    return inputs, targets


def _kind(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {', '.join(type(v).__name__ for v in value[:4])}" + \
            (", ..." if len(value) > 4 else "") if value else f"an empty {type(value).__name__}"
    if isinstance(value, torch.Tensor):
        return f"one tensor of shape {list(value.shape)}"
    return f"a {type(value).__name__}"


def _check_samples(target: str, batch_size: int, inputs: Any, targets: Any) -> None:
    """Every tensor make_batch returns holds `batch_size` samples along its first dimension: one that
    returns another number would be profiled, planned and timed as the batch asked for, with every
    figure per sample wrong. Its floats are finite: NaN inputs make a NaN loss, and what is timed is no
    longer the model's arithmetic (NaN and denormal paths differ)."""
    tensors = list(inputs.values()) if isinstance(inputs, dict) else \
        list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    tensors += [targets] if targets is not None else []
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            continue
        samples = tensor.shape[0] if tensor.dim() else None
        if samples != batch_size:
            got = "a tensor without a batch dimension" if samples is None else f"{samples} samples"
            raise UserError(f"{target}: make_batch({batch_size}) returned {got} (shape {list(tensor.shape)}); it "
                            f"must return batch_size ({batch_size}) samples in every tensor")
    for tensor in tensors:
        if not_finite(tensor):
            raise UserError(f"{target}: make_batch({batch_size}) returned NaN or infinite values (in the tensor of "
                            f"shape {list(tensor.shape)}); a step of them measures nothing, give finite numbers")


def not_finite(tensor: torch.Tensor) -> bool:
    """Whether the float tensor `tensor` holds a NaN or an infinity (one on the meta device holds nothing)."""
    return (tensor.is_floating_point() or tensor.is_complex()) and tensor.device.type != "meta" and \
        not bool(torch.isfinite(tensor).all())


# ---------------------------------------------------------------------------------------------- losses

LOSSES = ("cross_entropy", "nll", "mse", "bce")


def loss(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return {"cross_entropy": cross_entropy, "nll": nll, "mse": mse, "bce": bce}[name]


def cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Over every position; targets of -100 (a masked LM's unmasked tokens) are left out, as transformers does."""
    return F.cross_entropy(outputs.flatten(0, -2).float(), targets.flatten())


def nll(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.nll_loss(outputs.flatten(0, -2).float(), targets.flatten())


def mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(outputs.float(), targets.float())


def bce(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy of logits: a multi-label classifier's."""
    return F.binary_cross_entropy_with_logits(outputs.float(), targets.float())
