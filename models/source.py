"""A user's own model, named as `path/to/file.py:NAME` or `package.module:NAME`, made ready to train.

NAME is an nn.Module class that takes no arguments, or a function that returns a module. What pipebench
also needs, the batch and the loss, comes from the same file when it defines them, else from options:

- `make_batch(batch_size)` in the file returns `(inputs, targets)` (inputs a tensor or a tuple of them);
  pipebench seeds torch's RNG around the call, so every process gets the same batch. Without it the
  batch is synthetic: `input_shape` per sample (the batch dimension is added) of `input_dtype`; integer
  inputs are token ids below `token_range` (default: the model's vocabulary, the rows of its input
  embedding; 1000 for a model that embeds no tokens) and the targets are the next tokens (the
  language-model convention); float inputs get class targets below `num_classes` (default: the size of
  the output's last dimension), or, for `loss="mse"`, Gaussian targets shaped like the output.
- `loss_fn(outputs, targets)` in the file, else `loss`: cross_entropy (default), nll or mse. Outputs of
  shape (B, T, C) are flattened to (B*T, C) for cross_entropy and nll.

Hugging Face models (a `transformers.PreTrainedModel`) are trained as people train them: the KV cache
off (`use_cache=False`), the logits taken from the ModelOutput, and the loss against shifted labels. Any
forward that returns a tuple, dict or ModelOutput trains its logits, else its first tensor (`output`,
recorded). Models passed as objects from Python (object_model) are fed and trained the same way.

Workers are fresh processes: each imports the model again from the same name; nothing is pickled.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from pipebench.errors import UserError, first_line
from pipebench.units import format_bytes

__all__ = ["ModelSource", "UserModel", "load_user_model", "object_model", "AsTrained", "LOSSES",
           "OUTPUTS"]

LOSSES = ("cross_entropy", "nll", "mse")
OUTPUTS = ("tensor", "logits", "first")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32")


@dataclass(frozen=True)
class ModelSource:
    """Where a user model comes from and how it is fed: plain data, recorded in plans, jobs and rows."""

    target: str
    """`path/to/file.py:NAME` (the path made absolute) or `package.module:NAME`."""
    input_shape: list[int] = field(default_factory=list)
    """Per sample, without the batch dimension; empty when the file has make_batch."""
    input_dtype: str = "float32"
    num_classes: int | None = None
    token_range: int | None = None
    loss: str = "cross_entropy"
    granularity: int | None = None
    """Module depth of the cut candidates (1: top-level submodules); None: partition/graph.py's default."""
    output: str | None = None
    """What of the forward's output is trained (OUTPUTS): tensor (it returns one), logits (of a ModelOutput
    or dict), first (the first tensor of a tuple or dict); None: found by a forward, and recorded."""

    def __post_init__(self):
        where, sep, name = self.target.rpartition(":")
        if sep and where.endswith(".py"):  # workers start elsewhere: record where the file is
            object.__setattr__(self, "target", f"{Path(where).resolve()}:{name}")
        if self.loss not in LOSSES:
            raise UserError(f"unknown loss {self.loss!r}; choose one of: {', '.join(LOSSES)} (or define loss_fn "
                            "in the model's file)")
        if self.output is not None and self.output not in OUTPUTS:
            raise UserError(f"unknown output {self.output!r}; choose one of: {', '.join(OUTPUTS)}")
        if self.input_dtype not in DTYPES:
            raise UserError(f"unknown input dtype {self.input_dtype!r}; choose one of: {', '.join(DTYPES)}")
        object.__setattr__(self, "input_shape", list(self.input_shape))
        if any(d < 1 for d in self.input_shape):
            raise UserError(f"input shape dimensions must be positive (got {self.input_shape})")
        if self.granularity is not None and self.granularity < 1:
            raise UserError(f"granularity is a module depth, at least 1 (got {self.granularity})")
        for name in ("num_classes", "token_range"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{name} must be at least 1 (got {value})")

    @property
    def label(self) -> str:
        """A short name for tables and file names: NAME, or the file's stem and NAME."""
        where, _, name = self.target.rpartition(":")
        return f"{Path(where).stem}:{name}" if where.endswith(".py") else f"{where.rpartition('.')[2]}:{name}"


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
    """Module depth of the cut candidates; None: the finest that stays fast to profile (partition/graph.py)."""


def load_user_model(source: ModelSource, *, seed: int = 0, device: torch.device | str | None = None) -> UserModel:
    """Import the model named by `source`, build it with weights seeded by `seed`, and check that a batch
    goes through its forward; every problem is one UserError line."""
    namespace, name = _import_target(source.target)
    factory = namespace.get(name)
    if factory is None:
        raise UserError(f"{source.target}: no {name!r} in {_where(source.target)}")
    built = _seeded_build(factory, source.target, seed, device)
    source = with_token_range(source, built)
    try:
        make_batch, source = _fed(namespace, source, built)
    except RejectedInput:
        if not _on_meta(built):
            raise
        # The meta device cannot run every forward (Tensor.item() in a Hugging Face mask, a data-dependent
        # shape): a model is refused only for what it does on a real device, here the CPU at two samples.
        make_batch, source = _fed(namespace, source, _seeded_build(factory, source.target, seed, "cpu"))
    module = as_trained(built, source.output)
    module.train()
    loss_fn = namespace.get("loss_fn") or _loss(source.loss)
    _check_loss(module, make_batch, loss_fn, source.target)
    settings = {k: v for k, v in dataclasses.asdict(source).items() if k != "target"}
    return UserModel(source.target, module, make_batch, loss_fn, source, config=settings,
                     granularity=source.granularity)


def module_for_sizes(source: ModelSource) -> nn.Module:
    """The model of `source` built on the meta device and wrapped as it trains, never run: what reads only
    its modules' sizes (accelerate's device map) needs no weights and no forward, which for a 1B model
    built on the CPU take tens of seconds."""
    namespace, name = _import_target(source.target)
    factory = namespace.get(name)
    if factory is None:
        raise UserError(f"{source.target}: no {name!r} in {_where(source.target)}")
    return as_trained(_seeded_build(factory, source.target, 0, "meta"), source.output)


def _seeded_build(factory: Any, target: str, seed: int, device) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _build(factory, target, device)


def object_model(module: nn.Module, example_inputs: Any, settings: dict[str, Any] | None = None,
                 loss_fn: Callable | None = None) -> UserModel:
    """An nn.Module object from Python (pipebench.plan and pipebench.profile), trained as a model named on
    the command line is: fed synthetic batches like `example_inputs`, a batch of any size that is a tensor,
    a tuple of them, or a dict of them by forward's keywords (input_ids first). The first tensor is made up
    as --input-shape and --input-dtype make one, its token ids below the model's vocabulary, else below the
    example's largest + 1; the others are the example's own samples, repeated to the batch size (an attention
    mask stays one the model accepts). `loss_fn(outputs, targets)` replaces settings' loss."""
    inputs, keywords = _example(example_inputs)
    first = inputs[0]
    source = ModelSource(f"python:{type(module).__name__}", list(first.shape[1:]),
                         str(first.dtype).removeprefix("torch."), **dict(settings or {}))
    high = int(first.max()) + 1 if not first.is_floating_point() and first.numel() else None
    source = with_token_range(source, module, high)
    ids = SyntheticInputs(source.input_shape, source.input_dtype, 1, source.token_range, "cross_entropy", [1])
    probe = ExampleInputs(ids, inputs[1:])(2, seed=0)[0]
    output, output_shape = _probe_output(module, probe, source, keywords)
    source = dataclasses.replace(source, output=output)
    ids = SyntheticInputs(source.input_shape, source.input_dtype, source.num_classes, source.token_range,
                          source.loss, output_shape)
    settings = {k: v for k, v in dataclasses.asdict(source).items() if k != "target"}
    return UserModel(type(module).__name__, as_trained(module, output, keywords),
                     ExampleInputs(ids, inputs[1:]) if len(inputs) > 1 else ids, loss_fn or _loss(source.loss),
                     source, config=settings, granularity=source.granularity)


def _example(example_inputs: Any) -> tuple[tuple[torch.Tensor, ...], tuple[str, ...]]:
    """(the example's tensors, forward's keywords for them: none when they go by position)."""
    keywords: tuple[str, ...] = ()
    inputs = example_inputs
    if isinstance(example_inputs, dict):
        keywords = tuple(sorted(example_inputs, key=lambda k: k != "input_ids"))
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
    if any(t.device.type == "meta" for t in inputs):
        raise UserError("example_inputs are on the meta device: they hold no values to run; give real tensors "
                        "(on the CPU or the GPU you profile on)")
    return tuple(inputs), keywords


def _on_meta(module: nn.Module) -> bool:
    first = next(module.parameters(), None)
    return first is not None and first.device.type == "meta"


# --------------------------------------------------------------------------------------------- import

def _import_target(target: str) -> tuple[dict[str, Any], str]:
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise UserError(f"--model {target!r}: write it as path/to/file.py:NAME or package.module:NAME")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise UserError(f"{target}: no such file {where}")
        module_name = f"pipebench_user_{abs(hash(str(path.resolve())))}"
        if module_name not in sys.modules:
            spec = importlib.util.spec_from_file_location(module_name, path)
            loaded = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = loaded
            try:
                spec.loader.exec_module(loaded)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's file: what it raised, in one line
                del sys.modules[module_name]
                raise UserError(f"{target}: importing {where} failed: {_raised(exc)}") from None
        return vars(sys.modules[module_name]), name
    try:
        loaded = importlib.import_module(where)
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise UserError(f"{target}: cannot import {where}: {_raised(exc)}") from None
    return vars(loaded), name


def _raised(exc: BaseException) -> str:
    """What a user's code raised, in one line; sys.exit() and exit() in a model file too, which would
    otherwise end pipebench with no word."""
    if isinstance(exc, SystemExit):
        return f"it calls sys.exit({exc.code!r}) or exit() when imported; a model file must only define things"
    return f"{type(exc).__name__}: {first_line(exc)}"


def _where(target: str) -> str:
    return target.rpartition(":")[0]


def _build(factory: Any, target: str, device) -> nn.Module:
    if isinstance(factory, nn.Module):
        raise UserError(f"{target}: is a module instance; name its class or a function that returns one, so "
                        "that every worker process can build it")
    if not callable(factory):
        raise UserError(f"{target}: is a {type(factory).__name__}, not an nn.Module class or a function")
    required = [p.name for p in _parameters(factory) if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        raise UserError(f"{target}: needs argument(s) {', '.join(required)}; pipebench builds it with none (write a "
                        "function without arguments that returns the module)")
    context = torch.device(device) if device is not None else contextlib.nullcontext()
    try:
        with context:
            module = factory()
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise UserError(f"{target}: building it failed: {_raised(exc)}") from None
    if not isinstance(module, nn.Module):
        raise UserError(f"{target}: returned a {type(module).__name__}, not an nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise UserError(f"{target}: has no parameters that require grad; there is nothing to train")
    return module


def _parameters(factory) -> list[inspect.Parameter]:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return []
    params = list(signature.parameters.values())
    return params[1:] if params and params[0].name == "self" else params


# ------------------------------------------------------------------------------------- Hugging Face

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
        self.keywords = keywords
        self.options = {"use_cache": False, "return_dict": True} if hugging_face else {}

    def train(self, mode: bool = True) -> "AsTrained":
        self.wrapped.training = mode
        return super().train(mode)

    def forward(self, *inputs: torch.Tensor) -> Any:
        if self.keywords:
            outputs = self.wrapped(**dict(zip(self.keywords, inputs)), **self.options)
        else:
            outputs = self.wrapped(*inputs, **self.options)
        return outputs if self.output is None else pick_output(outputs, self.output)


def is_hugging_face(module: nn.Module) -> bool:
    transformers = sys.modules.get("transformers")
    return transformers is not None and isinstance(module, transformers.PreTrainedModel)


def as_trained(module: nn.Module, output: str | None, keywords: tuple[str, ...] = ()) -> nn.Module:
    """`module` as pipebench trains it: itself when it takes its tensors by position and returns one, else
    in AsTrained. A Hugging Face model always goes in AsTrained (token ids as input_ids unless `keywords`
    say otherwise, no KV cache), so that its cut candidates are named alike however it came."""
    hugging_face = is_hugging_face(module)
    if not hugging_face and output == "tensor" and not keywords:
        return module
    return AsTrained(module, output, keywords or (("input_ids",) if hugging_face else ()), hugging_face)


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


# ------------------------------------------------------------------------------------ batches, loss

DEFAULT_TOKEN_RANGE = 1000
"""Token ids are drawn below this for a model with integer inputs and no embedding to read a vocabulary from."""


def vocabulary(module: nn.Module) -> int | None:
    """How many token ids `module` embeds: the rows of its input embedding (a Hugging Face model's
    get_input_embeddings(), else its first nn.Embedding), None when it has none. Read from the module's
    structure, so a model on the meta device says it too."""
    inner = module.wrapped if isinstance(module, AsTrained) else module
    embedding = None
    if callable(getattr(inner, "get_input_embeddings", None)):
        with contextlib.suppress(NotImplementedError, AttributeError):
            embedding = inner.get_input_embeddings()
    if not isinstance(embedding, nn.Embedding):
        embedding = next((m for m in inner.modules() if isinstance(m, nn.Embedding)), None)
    return embedding.num_embeddings if embedding is not None else None


def with_token_range(source: ModelSource, module: nn.Module, example_high: int | None = None) -> ModelSource:
    """`source` with the range its synthetic token ids are drawn from, for integer inputs: the one given,
    else the model's vocabulary, else `example_high` (an example batch's largest id + 1), else
    DEFAULT_TOKEN_RANGE. One given beyond the vocabulary is refused: the embedding would index out of range."""
    if getattr(torch, source.input_dtype).is_floating_point:
        return source
    vocab = vocabulary(module)
    if source.token_range is not None:
        if vocab is not None and source.token_range > vocab:
            raise UserError(f"{source.target}: token_range {source.token_range} exceeds the model's vocabulary of "
                            f"{vocab} token ids; give at most {vocab}, or leave it out")
        return source
    return dataclasses.replace(source, token_range=vocab or example_high or DEFAULT_TOKEN_RANGE)


def _fed(namespace: dict[str, Any], source: ModelSource, module: nn.Module):
    """(make_batch, `source` with its output recorded) for the module as built, from the file's make_batch or
    synthetic batches; the latter probe the forward, which finds an input the model rejects before any
    profiling, what of its output is trained, and that output's shape, which targets are made to fit."""
    own = namespace.get("make_batch")
    if own is not None:
        default = "logits" if is_hugging_face(module) else "tensor"
        return _SeededUserBatches(own, source.target), dataclasses.replace(source, output=source.output or default)
    if not source.input_shape:
        raise UserError(f"{source.target}: say what the model takes: --input-shape C,H,W (per sample) and "
                        "--input-dtype, or define make_batch(batch_size) in the file")
    probe = SyntheticInputs(list(source.input_shape), source.input_dtype, 1, source.token_range, "cross_entropy", [1])
    output, shape = _probe_output(module, probe(2, seed=0)[0], source)
    return (SyntheticInputs(list(source.input_shape), source.input_dtype, source.num_classes, source.token_range,
                            source.loss, shape), dataclasses.replace(source, output=output))


def _probe_output(module: nn.Module, inputs: Any, source: ModelSource, keywords: tuple[str, ...] = ()):
    """(what of the output is trained, one sample's shape of it), from one forward of `inputs`."""
    outputs = run_forward(as_trained(module, None, keywords), inputs, source.target)
    output = source.output or output_kind(outputs, source.target)
    trained = pick_output(outputs, output)
    if not isinstance(trained, torch.Tensor):
        raise UserError(f"{source.target}: output {output!r} is a {type(trained).__name__}, not a tensor")
    return output, list(trained.shape[1:])


class RejectedInput(UserError):
    """The model's forward raised on a probe batch."""


def run_forward(module: nn.Module, inputs: Any, target: str) -> Any:
    """One forward without gradients, the model's own error as one RejectedInput line."""
    first = next(module.parameters(), None)
    device = first.device if first is not None else torch.device("cpu")
    args = tuple(i.to(device) for i in inputs) if isinstance(inputs, tuple) else (inputs.to(device),)
    try:
        with torch.no_grad():
            outputs = module(*args)
    except Exception as exc:  # noqa: BLE001 - the model rejected the input: its own words
        shapes = ", ".join(str(list(a.shape)) for a in args)
        hint = ""
        if any(a.is_floating_point() for a in args) and "indices" in str(exc) and ("Long" in str(exc) or "Int" in str(exc)):
            hint = " (a model that takes token ids needs --input-dtype int64)"
        raise RejectedInput(f"{target} rejects an input of shape {shapes}: {type(exc).__name__}: {first_line(exc)}"
                            f"{hint}") from None
    return outputs


def _check_loss(module: nn.Module, make_batch, loss_fn, target: str) -> None:
    """A batch of two through the forward and the loss: the trained output must be floating point
    (gradients flow only through those) and the loss one number (backward() needs a scalar). On the meta
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
        raise UserError(f"{target}: the loss fails on the model's outputs {list(outputs.shape)}: {_raised(exc)}") from None
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        shape = list(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise UserError(f"{target}: the loss must be one number (a scalar tensor), got {shape}; reduce it, "
                        "e.g. with .mean()")


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
        if batch_size < 1:
            raise UserError(f"batch_size must be at least 1, got {batch_size}")
        dtype = getattr(torch, self.dtype)
        size = batch_size * math.prod(self.shape) * dtype.itemsize * 2  # and the targets, at most as large
        if size > _memory():
            raise UserError(f"an input batch of {batch_size} x {self.shape} {self.dtype} takes {format_bytes(size)}, "
                            f"more than this machine's {format_bytes(_memory())}; lower --input-shape or --batch")
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


def _memory() -> int:
    """This machine's memory in bytes, which a synthetic batch is made in before it moves to a GPU."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: no bound here
        return 2**62


@dataclass(frozen=True)
class ExampleInputs:
    """Batches for a model of several inputs (object_model): the first made by `first`, the others the
    example's samples repeated to the batch size."""

    first: SyntheticInputs
    rest: tuple[torch.Tensor, ...]

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu"):
        inputs, targets = self.first(batch_size, seed, device)
        rows = [i % len(self.rest[0]) for i in range(batch_size)] if self.rest else []
        return (inputs, *(t[rows].to(device) for t in self.rest)), targets


@dataclass(frozen=True)
class _SeededUserBatches:
    """The file's make_batch(batch_size), under a seeded RNG so that every process draws the same batch."""

    make: Callable[[int], Any]
    target: str

    def __call__(self, batch_size: int, seed: int = 0, device: torch.device | str = "cpu"):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            try:
                inputs, targets = self.make(batch_size)
            except (Exception, SystemExit) as exc:  # noqa: BLE001
                raise UserError(f"{self.target}: make_batch({batch_size}) failed: {_raised(exc)}") from None
        move = (lambda t: t.to(device)) if device is not None else (lambda t: t)
        inputs = tuple(move(i) for i in inputs) if isinstance(inputs, (tuple, list)) else move(inputs)
        return inputs, move(targets)


def _loss(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    return {"cross_entropy": cross_entropy, "nll": nll, "mse": mse}[name]


def cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(outputs.flatten(0, -2).float(), targets.flatten())


def nll(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.nll_loss(outputs.flatten(0, -2).float(), targets.flatten())


def mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(outputs.float(), targets.float())
