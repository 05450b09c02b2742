"""A user's own model, named as `path/to/file.py:NAME` or `package.module:NAME`, made ready to train.

NAME is an nn.Module class that takes no arguments, or a function that returns a module
(models/imports.py finds and builds it). What pipebench also needs, the batch and the loss, comes from the
same file when it defines them, else from options:

- `make_batch(batch_size)` in the file returns `(inputs, targets)`: inputs a tensor, a tuple of them, or a
  dict of them by forward's keywords (`{"input_ids": ..., "attention_mask": ...}`). pipebench seeds
  torch's RNG around the call, so every process gets the same batch. A tuple goes to a plain module by
  position; to a Hugging Face model the task's inputs first (input_ids; T5's and BART's decoder_input_ids
  next), then forward's other parameters in forward's order (models/hugging_face.py: input_names).
  Without make_batch the batch is synthetic (models/batches.py): `input_shape` per sample (the batch
  dimension is added) of `input_dtype`; integer inputs are token ids below `token_range` (default: the
  model's vocabulary, the rows of its input embedding; 1000 for a model that embeds no tokens).
- `loss_fn(outputs, targets)` in the file, else `loss`: cross_entropy (default), nll, mse or bce. Outputs of
  shape (B, T, C) are flattened to (B*T, C) for cross_entropy and nll.

A Hugging Face model (a `transformers.PreTrainedModel`) is trained as people train it, for its task
(models/hugging_face.py): fed by its own main input (`input_ids`, `pixel_values`, `input_features`; the
dtype follows, int64 for token ids), the KV cache off (`use_cache=False`), the logits taken from the
ModelOutput, and its synthetic targets those of its task: the next tokens (causal LM), masked tokens
(masked LM), labels below `config.num_labels` (sequence, token and image classification), an encoder-
decoder's labels with decoder_input_ids shifted from them (T5, BART). Any other forward that returns a
tuple, dict or ModelOutput trains its logits, else its first tensor (`output`, recorded). Models passed as
objects from Python (object_model) are fed and trained the same way.

Workers are fresh processes: each imports the model again from the same name; nothing is pickled.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn

from pipebench.base.errors import UserError, first_line
from pipebench.base.fileio.files import check_regular
from pipebench.base.text.parse import count_of
from pipebench.models import hugging_face as hf
from pipebench.models.batches import (DEFAULT_TOKEN_RANGE, LOSSES, ExampleInputs, SyntheticInputs, TaskBatches,
                                      UserBatches, loss as named_loss, not_finite, vocabulary)
from pipebench.models.hugging_face import AsTrained, as_trained, is_hugging_face
from pipebench.models.imports import build, forward_guarded, import_target, raised, where
from pipebench.model_spec import absolute_target, class_source  # torch-free: a saved profile is checked without torch

__all__ = ["ModelSource", "absolute_target", "UserModel", "load_user_model", "object_model", "AsTrained", "LOSSES",
           "OUTPUTS"]

OUTPUTS = ("tensor", "logits", "first")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32")


@dataclass(frozen=True)
class ModelSource:
    """Where a user model comes from and how it is fed: plain data, recorded in plans, jobs and rows."""

    target: str
    """`path/to/file.py:NAME` (the path made absolute) or `package.module:NAME`."""
    input_shape: list[int] = field(default_factory=list)
    """Per sample, without the batch dimension; empty when the file has make_batch."""
    input_dtype: str | None = None
    """None: what the model takes, int64 for a Hugging Face model's token ids, else float32; recorded."""
    num_classes: int | None = None
    token_range: int | None = None
    loss: str | None = None
    """None: the task's (mse for a regression head, bce for a multi-label one), else cross_entropy; recorded."""
    granularity: int | None = None
    """Module depth of the cut candidates (1: top-level submodules); None: partition/capture/graph.py's default."""
    output: str | None = None
    """What of the forward's output is trained (OUTPUTS): tensor (it returns one), logits (of a ModelOutput
    or dict), first (the first tensor of a tuple or dict); None: found by a forward, and recorded."""
    task: str | None = None
    """A Hugging Face model's task (models/hugging_face.py TASKS); None: read from its class, and recorded."""

    def __post_init__(self):
        file, sep, _ = self.target.rpartition(":")
        if sep and file.endswith(".py") and os.path.exists(file):  # a link to a FIFO or /dev/zero resolved to a
            check_regular(file, kind="model", label=self.target)   # name without .py: a module's
        object.__setattr__(self, "target", absolute_target(self.target))
        if self.loss is not None and self.loss not in LOSSES:
            raise UserError(f"unknown loss {self.loss!r}; choose one of: {', '.join(LOSSES)} (or define loss_fn "
                            "in the model's file)")
        if self.output is not None and self.output not in OUTPUTS:
            raise UserError(f"unknown output {self.output!r}; choose one of: {', '.join(OUTPUTS)}")
        if self.task is not None and self.task not in hf.TASKS:
            raise UserError(f"unknown task {self.task!r}; choose one of: {', '.join(hf.TASKS)}")
        if self.input_dtype is not None and self.input_dtype not in DTYPES:
            raise UserError(f"unknown input dtype {self.input_dtype!r}; choose one of: {', '.join(DTYPES)}")
        shape = self.input_shape
        if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence) or not all(
                isinstance(d, Integral) and not isinstance(d, bool) for d in shape):  # "4": a TypeError of `<`
            raise UserError(f"input_shape takes a list of positive integers such as [3, 224, 224] "
                            f"(got {shape!r:.40})")
        object.__setattr__(self, "input_shape", list(shape))
        if any(d < 1 for d in self.input_shape):
            raise UserError(f"input shape dimensions must be positive (got {self.input_shape})")
        for name in ("granularity", "num_classes", "token_range"):  # settings={"num_classes": "x"}: a TypeError of `<`
            if getattr(self, name) is not None:
                object.__setattr__(self, name, count_of(getattr(self, name), name))

    @property
    def label(self) -> str:
        """A short name for tables and file names: NAME, or the file's stem and NAME."""
        file, _, name = self.target.rpartition(":")
        return f"{Path(file).stem}:{name}" if file.endswith(".py") else f"{file.rpartition('.')[2]}:{name}"


@dataclass
class UserModel:
    """A user module with what training needs: seeded batches and a loss."""

    name: str
    module: nn.Module
    make_batch: Callable[..., tuple[Any, torch.Tensor]]
    """`make_batch(batch_size, seed=0, device="cpu") -> (inputs, targets)`."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    source: ModelSource
    flavour: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    """The settings it was loaded with (input shape, dtype, loss...): what a Plan records and a worker
    passes back to get_model."""
    granularity: int | None = None
    """Module depth of the cut candidates; None: the finest that stays fast to profile (partition/capture/graph.py)."""
    model_class: str | None = None
    """An nn.Module object's class, where it is defined (pipebench/model_spec.py class_source), as its profile
    records it; None: a model named by its target, which says it."""


def load_user_model(source: ModelSource, *, seed: int = 0, device: torch.device | str | None = None) -> UserModel:
    """Import the model named by `source`, build it with weights seeded by `seed`, and check that a batch
    goes through its forward; every problem is one UserError line."""
    namespace, name = import_target(source.target)
    factory = namespace.get(name)
    if factory is None:
        raise UserError(f"{source.target}: no {name!r} in {where(source.target)}")
    built = _seeded_build(factory, source.target, seed, device)
    source = with_token_range(resolved(source, built), built)
    try:
        make_batch, source, keywords = _fed(namespace, source, built)
    except RejectedInput:
        if not _on_meta(built):
            raise
        # The meta device cannot run every forward (Tensor.item() in a Hugging Face mask, a data-dependent
        # shape): a model is refused only for what it does on a real device, here the CPU at two samples.
        make_batch, source, keywords = _fed(namespace, source, _seeded_build(factory, source.target, seed, "cpu"))
    module = as_trained(built, source.output, keywords)
    module.train()
    loss_fn = namespace.get("loss_fn") or named_loss(source.loss)
    _check_loss(module, make_batch, loss_fn, source.target)
    settings = {k: v for k, v in dataclasses.asdict(source).items() if k != "target"}
    return UserModel(source.target, module, make_batch, loss_fn, source, config=settings,
                     granularity=source.granularity)


def module_for_sizes(source: ModelSource) -> nn.Module:
    """The model of `source` built on the meta device and wrapped as it trains, never run: what reads only
    its modules' sizes (accelerate's device map) needs no weights and no forward, which for a 1B model
    built on the CPU take tens of seconds."""
    namespace, name = import_target(source.target)
    factory = namespace.get(name)
    if factory is None:
        raise UserError(f"{source.target}: no {name!r} in {where(source.target)}")
    return as_trained(_seeded_build(factory, source.target, 0, "meta"), source.output)


def _seeded_build(factory: Any, target: str, seed: int, device) -> nn.Module:
    """The module `factory` builds on `device` with weights seeded by `seed`. A constructor that reads tensor
    values (torchvision's RegNet rounds its widths with torch ops) cannot run on the meta device, which holds
    none: asked for meta, such a model is built on the CPU (models/imports.py check_fits_in_memory judged its
    size before where it could)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            return build(factory, target, device)
        except UserError:
            if device is None or torch.device(device).type != "meta":
                raise
        torch.manual_seed(seed)
        return build(factory, target, "cpu")


def resolved(source: ModelSource, module: nn.Module) -> ModelSource:
    """`source` with what the model says where the user left it out: a Hugging Face model's task, the
    dtype of its main input (int64 for token ids, else float32) and its task's loss."""
    task = source.task or hf.task_of(module)
    dtype, loss = source.input_dtype, source.loss
    if is_hugging_face(module):
        main = hf.task_inputs(module, task)[0]
        tokens = main == "input_ids"
        if dtype is None:
            dtype = "int64" if tokens else "float32"
        elif tokens and getattr(torch, dtype).is_floating_point:
            raise UserError(f"{source.target}: {hf.describe(module, task)}, token ids: give --input-dtype int64, "
                            f"or leave it out (got {dtype})")
        if loss is None:
            loss = {"regression": "mse", "multi_label_classification": "bce"}.get(hf.problem_type(module, task),
                                                                                  "cross_entropy")
    return dataclasses.replace(source, task=task, input_dtype=dtype or "float32", loss=loss or "cross_entropy")


def check_settings(settings: dict[str, Any], name: str, taken: tuple[str, ...] = ()) -> None:
    """Refuse a setting that ModelSource does not have (or one in `taken`: an nn.Module object's input
    shape and dtype are its example's), in one line naming the valid ones: `settings={"depth": 3}` for an
    nn.Module would otherwise be a TypeError of ModelSource's constructor."""
    valid = [f.name for f in dataclasses.fields(ModelSource) if f.name != "target" and f.name not in taken]
    unknown = sorted(set(settings) - set(valid))
    if unknown:
        raise UserError(f"unknown setting(s) {', '.join(map(str, unknown))} for {name}; valid settings: "
                        f"{', '.join(valid)}")


def object_model(module: nn.Module, example_inputs: Any, settings: dict[str, Any] | None = None,
                 loss_fn: Callable | None = None) -> UserModel:
    """An nn.Module object from Python (pipebench.plan and pipebench.profile), trained as a model named on
    the command line is: fed synthetic batches like `example_inputs`, a batch of any size that is a tensor,
    a tuple of them, or a dict of them by forward's keywords. The first tensor (a Hugging Face model's main
    input) is made up as --input-shape and --input-dtype make one, its token ids below the model's
    vocabulary, else below the example's largest + 1, and a Hugging Face model's targets (and T5's decoder
    inputs) those of its task; the others are the example's own samples, repeated to the batch size (an
    attention mask stays one the model accepts). `loss_fn(outputs, targets)` replaces settings' loss."""
    check_settings(settings or {}, f"python:{type(module).__name__}", taken=("input_shape", "input_dtype"))
    if not any(p.requires_grad for p in module.parameters()):
        raise UserError(f"{type(module).__name__}: has no parameters that require grad; there is nothing to train")
    inputs, keywords = _example(module, example_inputs)
    first = inputs[0]
    source = ModelSource(f"python:{type(module).__name__}", list(first.shape[1:]),
                         str(first.dtype).removeprefix("torch."), **dict(settings or {}))
    source = resolved(source, module)
    high = int(first.max()) + 1 if not first.is_floating_point() and first.numel() else None
    source = with_token_range(source, module, high)
    made, made_keywords = _synthetic(source, module, [1])
    if made_keywords:  # a Hugging Face task: its own inputs made up, the example's others repeated
        rest = [(k, t) for k, t in zip(keywords, inputs) if k not in made_keywords]
        keywords, inputs = (*made_keywords, *(k for k, _ in rest)), (first, *(t for _, t in rest))
        others = tuple(t for _, t in rest)
    else:
        others = inputs[1:]
    probe = (ExampleInputs(made, others) if others else made)(2, seed=0)[0]
    output, output_shape = _probe_output(module, probe, source, keywords)
    source = dataclasses.replace(source, output=output)
    made, _ = _synthetic(source, module, output_shape)
    settings = {k: v for k, v in dataclasses.asdict(source).items() if k != "target"}
    trained, batches = as_trained(module, output, keywords), ExampleInputs(made, others) if others else made
    loss_fn = loss_fn or named_loss(source.loss)
    _check_loss(trained, batches, loss_fn, type(module).__name__, finite=True)  # one number, as for a model file
    return UserModel(type(module).__name__, trained, batches, loss_fn, source, config=settings,
                     granularity=source.granularity, model_class=class_source(type(module)))


def _example(module: nn.Module, example_inputs: Any) -> tuple[tuple[torch.Tensor, ...], tuple[str, ...]]:
    """(the example's tensors, forward's keywords for them: none when they go by position to a module that
    is not a Hugging Face model). A dict's main input (input_ids, else a Hugging Face model's own) first."""
    keywords: tuple[str, ...] = ()
    inputs = example_inputs
    if isinstance(example_inputs, dict):
        main = hf.task_inputs(module)[0] if is_hugging_face(module) else "input_ids"
        keywords = tuple(sorted(example_inputs, key=lambda k: k != main))
        inputs = tuple(example_inputs[k] for k in keywords)
    elif isinstance(example_inputs, torch.Tensor):
        inputs = (example_inputs,)
    if not isinstance(inputs, (tuple, list)) or not inputs or not all(
            isinstance(t, torch.Tensor) and t.dim() >= 1 and len(t) == len(inputs[0]) for t in inputs):
        raise UserError("an nn.Module needs example_inputs: a batch tensor such as torch.randn(2, 3, 224, 224), a "
                        "tuple of them, or a dict such as {'input_ids': ids, 'attention_mask': mask}, all with the "
                        "same batch size")
    if len(inputs[0]) == 0 or any(t.numel() == 0 for t in inputs):
        raise UserError(f"example_inputs is an empty batch (shape {list(inputs[0].shape)}); give at least one sample, "
                        "e.g. torch.randn(2, 8)")
    if sparse := [t.layout for t in inputs if t.layout != torch.strided]:
        raise UserError(f"example_inputs are {str(sparse[0]).removeprefix('torch.')} tensors; give dense ones "
                        "(x.to_dense())")
    if any(t.device.type == "meta" for t in inputs):
        raise UserError("example_inputs are on the meta device: they hold no values to run; give real tensors "
                        "(on the CPU or the GPU you profile on)")
    if any(not_finite(t) for t in inputs):
        raise UserError("example_inputs hold NaN or infinite values; give finite numbers (what a step of them "
                        "measures is not the model's arithmetic)")
    if is_hugging_face(module):
        if not keywords:
            keywords = hf.input_names(module, len(inputs))
        main = hf.task_inputs(module)[0]
        if keywords[0] != main:
            raise UserError(f"{hf.describe(module)}: example_inputs has no {main} (it has {', '.join(keywords)})")
    return tuple(inputs), keywords


def _on_meta(module: nn.Module) -> bool:
    first = next(module.parameters(), None)
    return first is not None and first.device.type == "meta"


def with_token_range(source: ModelSource, module: nn.Module, example_high: int | None = None) -> ModelSource:
    """`source` with the range its synthetic token ids are drawn from, for integer inputs and an encoder-
    decoder's labels: the one given, else the model's vocabulary, else `example_high` (an example batch's
    largest id + 1), else DEFAULT_TOKEN_RANGE. One given beyond the vocabulary is refused: the embedding
    would index out of range."""
    if getattr(torch, source.input_dtype).is_floating_point and source.task != "seq2seq":
        return source
    vocab = vocabulary(module)
    if source.token_range is not None:
        if vocab is not None and source.token_range > vocab:
            raise UserError(f"{source.target}: token_range {source.token_range} exceeds the model's vocabulary of "
                            f"{vocab} token ids; give at most {vocab}, or leave it out")
        return source
    return dataclasses.replace(source, token_range=vocab or example_high or DEFAULT_TOKEN_RANGE)


def _synthetic(source: ModelSource, module: nn.Module, output_shape: list[int]):
    """(synthetic batches for `source`, the keywords they feed: a Hugging Face task's inputs, else none)."""
    if source.task is None or not is_hugging_face(module):
        return SyntheticInputs(list(source.input_shape), source.input_dtype, source.num_classes, source.token_range,
                               source.loss, output_shape), ()
    task, inputs = source.task, hf.task_inputs(module, source.task)
    tokens = not getattr(torch, source.input_dtype).is_floating_point
    if tokens and len(source.input_shape) != 1:
        raise UserError(f"{source.target}: {hf.describe(module, task)} of shape (batch, length): give --input-shape "
                        f"LENGTH (got {','.join(map(str, source.input_shape))})")
    labels = hf.num_labels(module)
    if source.num_classes is not None and task.endswith("classification"):
        if source.num_classes > labels:
            raise UserError(f"{source.target}: num_classes {source.num_classes} exceeds the model's num_labels "
                            f"{labels}; give at most {labels}, or leave it out")
        labels = source.num_classes
    config = module.wrapped.config if isinstance(module, AsTrained) else module.config
    batches = TaskBatches(task, list(source.input_shape), source.input_dtype, source.token_range, labels,
                          hf.problem_type(module, task), getattr(config, "mask_token_id", None),
                          hf.decoder_start(module) if task == "seq2seq" else 0,
                          hf.target_length(module, source.input_shape[-1]) if task == "seq2seq" else None)
    return batches, inputs


def _fed(namespace: dict[str, Any], source: ModelSource, module: nn.Module):
    """(make_batch, `source` with its output recorded, forward's keywords for the batch's inputs) for the
    module as built, from the file's make_batch or synthetic batches; the latter probe the forward, which
    finds an input the model rejects before any profiling, what of its output is trained, and that output's
    shape, which targets are made to fit."""
    own = namespace.get("make_batch")
    if own is not None:
        default = "logits" if is_hugging_face(module) else "tensor"
        keywords = _batch_keywords(UserBatches(own, source.target), module, source)
        return (UserBatches(own, source.target, keywords), dataclasses.replace(source, output=source.output or default),
                keywords)
    if not source.input_shape:
        raise UserError(f"{source.target}: say what the model takes: --input-shape C,H,W (per sample) and "
                        "--input-dtype, or define make_batch(batch_size) in the file")
    probe, keywords = _synthetic(source, module, [1])
    output, shape = _probe_output(module, probe(2, seed=0)[0], source, keywords)
    return _synthetic(source, module, shape)[0], dataclasses.replace(source, output=output), keywords


def _batch_keywords(make_batch: UserBatches, module: nn.Module, source: ModelSource) -> tuple[str, ...]:
    """Forward's keywords for the inputs the file's make_batch gives: a dict's own keys (a Hugging Face
    model's main input first); a tuple's, for a Hugging Face model, by input_names; none for a plain module's
    tuple, which goes by position."""
    inputs = make_batch(2, seed=0, device=None)[0]
    if isinstance(inputs, dict):
        main = hf.task_inputs(module, source.task)[0] if is_hugging_face(module) else None
        return tuple(sorted(inputs, key=lambda k: k != main))
    if not is_hugging_face(module):
        return ()
    return hf.input_names(module, len(inputs) if isinstance(inputs, (tuple, list)) else 1, source.task)


def _probe_output(module: nn.Module, inputs: Any, source: ModelSource, keywords: tuple[str, ...] = ()):
    """(what of the output is trained, one sample's shape of it), from one forward of `inputs`."""
    outputs = run_forward(as_trained(module, None, keywords), inputs, source.target)
    output = source.output or hf.output_kind(outputs, source.target)
    trained = hf.pick_output(outputs, output)
    if not isinstance(trained, torch.Tensor):
        raise UserError(f"{source.target}: output {output!r} is a {type(trained).__name__}, not a tensor")
    return output, list(trained.shape[1:])


class RejectedInput(UserError):
    """The model's forward raised on a probe batch."""


def run_forward(module: nn.Module, inputs: Any, target: str) -> Any:
    """One forward without gradients, the model's own error as one RejectedInput line; for a Hugging Face
    model, with what it takes."""
    first = next(module.parameters(), None)
    device = first.device if first is not None else torch.device("cpu")
    args = tuple(i.to(device) for i in inputs) if isinstance(inputs, tuple) else (inputs.to(device),)
    try:
        with torch.no_grad(), forward_guarded(target):
            outputs = module(*args)
    except UserError:  # forward_guarded's own line
        raise
    except Exception as exc:  # noqa: BLE001 - the model rejected the input: its own words
        shapes = ", ".join(str(list(a.shape)) for a in args)
        hint = ""
        if any(a.is_floating_point() for a in args) and "indices" in str(exc) and ("Long" in str(exc) or "Int" in str(exc)):
            hint = " (a model that takes token ids needs --input-dtype int64)"
        hint = hint or _dtype_hint(module, args, exc)
        inner = module.wrapped if isinstance(module, AsTrained) else module
        if is_hugging_face(inner):
            given = ", ".join(module.keywords) if isinstance(module, AsTrained) and module.keywords else "by position"
            hint = (f" ({hf.describe(inner)}; it was given {given}; a make_batch in the model's file may give its "
                    "inputs as a dict by forward's keywords)")
        raise RejectedInput(f"{target} rejects an input of shape {shapes}: {type(exc).__name__}: {first_line(exc)}"
                            f"{hint}") from None
    return outputs


def _dtype_hint(module: nn.Module, args: tuple, exc: Exception) -> str:
    """The fix for a type error from floating-point inputs whose dtype is not the parameters' (a file that
    sets torch.set_default_dtype(torch.float64) builds float64 parameters; the made-up inputs are float32)."""
    dtype = next((p.dtype for p in module.parameters() if p.is_floating_point()), None)
    name = str(dtype).removeprefix("torch.")
    if (dtype is None or name not in DTYPES or "type" not in str(exc).lower()
            or not any(a.is_floating_point() and a.dtype != dtype for a in args)):
        return ""
    return f"; its parameters are {name}: give --input-dtype {name} (the API's settings={{'input_dtype': '{name}'}})"


def _check_loss(module: nn.Module, make_batch, loss_fn, target: str, *, finite: bool = False) -> None:
    """A batch of two through the forward and the loss: the trained output must be floating point
    (gradients flow only through those) and the loss one number (backward() needs a scalar); `finite` (an
    nn.Module given to pipebench.profile/plan, which only profile it) a finite one too. A model file's
    loss may be NaN: a run or a train records that as `diverged`, a result, and the caller's weights come
    back as given whatever the profile's update wrote (pipebench/base/snapshot.py). On the meta
    device (checking settings before any work) what cannot run there is not judged: a forward or a loss
    may read values, which meta tensors lack."""
    inputs, targets = make_batch(2, seed=0)
    try:
        outputs = run_forward(module, inputs, target)
    except RejectedInput:
        if _on_meta(module):
            return
        raise
    if not isinstance(outputs, torch.Tensor):
        return  # as_trained's pick said so already
    if not outputs.is_floating_point():
        raise UserError(f"{target} returns {str(outputs.dtype).removeprefix('torch.')} outputs; gradients flow "
                        "only through floating-point ones, so there is nothing to train")
    try:
        with torch.no_grad():
            loss = loss_fn(outputs, targets.to(outputs.device))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's loss: its own words
        if outputs.device.type == "meta":
            return
        raise UserError(f"{target}: the loss fails on the model's outputs {list(outputs.shape)}: {raised(exc)}") from None
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = list(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise UserError(f"{target}: the loss must be one number (a scalar tensor), got {shape}; reduce it, "
                        "e.g. with .mean()")
    if finite and loss.device.type != "meta" and not torch.isfinite(loss).all():  # every gradient, and so the timed
        # update at lr 0, would be NaN: nothing of it is a training step
        raise UserError(f"{target}: the loss is {loss.item()} on a batch of two made up as profiling makes them; "
                        "pipebench profiles a loss that is a finite number")
