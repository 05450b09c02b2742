"""How a model is trained, besides where it runs: numeric precision, optimizer, activation checkpointing,
torch.compile.

One small record, `Training`, travels in every Job, Plan and results row, so that every strategy trains
the same way and the case key tells a bf16 + AdamW run from a TF32 + SGD one. Nothing here imports torch
at import (the planner and the CLI read it); `autocast`, `set_precision` and
`make_optimizer` / `optimizer_settings` (for the trainers and the profiler's whole step alike) import it when called.

Precision:
    fp32  full float32 everywhere (TF32 off).
    tf32  float32 storage, TensorFloat-32 matmuls and convolutions on GPUs, cuDNN autotuning: how
          pipebench's earlier figures were measured, and the default. On a CPU the same as fp32.
    bf16  automatic mixed precision as people train today: fp32 master weights and optimizer state,
          forward and backward under `torch.autocast(dtype=bfloat16)` (TF32 for what stays float32).
          FSDP casts its gathered parameters to bf16 instead (its MixedPrecisionPolicy), reducing
          gradients in fp32.
Optimizer:
    sgd    plain SGD, lr 0.1, no state: the earlier figures.
    adamw  AdamW, lr 1e-3, two fp32 states per parameter (fused on GPUs).
Checkpoint (activation recomputation, as torchgpipe's modes):
    never   keep every activation;
    auto    the planner recomputes a stage's activations only where memory requires it;
    always  every stage recomputes (replica strategies: every layer of the model).
Compile (torch.compile of what each strategy runs: the model, each replica, each shard unit, each stage):
    None          eager, the default;
    default       torch.compile's default mode (inductor);
    max-autotune  inductor's autotuned kernels (mode "max-autotune");
    cudagraphs    inductor with CUDA graphs (mode "reduce-overhead"): GPUs only.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pipebench.base.errors import UserError

__all__ = ["PRECISIONS", "OPTIMIZERS", "CHECKPOINT_MODES", "COMPILE_MODES", "compile_module", "DEFAULT_PRECISION", "LEARNING_RATES", "OPTIMIZER_STATES", "Training",
           "TRAINING_PARTS", "nest_training", "flat_training", "autocast", "set_precision", "make_optimizer", "optimizer_settings"]

PRECISIONS = ("fp32", "tf32", "bf16")
OPTIMIZERS = ("sgd", "adamw")
CHECKPOINT_MODES = ("never", "auto", "always")
COMPILE_MODES = {"default": "default", "max-autotune": "max-autotune", "cudagraphs": "reduce-overhead"}
"""--compile's names and the torch.compile mode each one is."""
LEARNING_RATES = {"sgd": 0.1, "adamw": 1e-3}
"""SGD's is large enough that a wrong gradient shows; AdamW's is the usual one."""
DEFAULT_PRECISION = "tf32"
"""The precision of every record that does not say (files written before precision was recorded)."""
OPTIMIZER_STATES = {"sgd": 0, "adamw": 2}
"""Tensors of parameter size (fp32) an optimizer keeps per parameter, besides the parameter and its
gradient."""


@dataclass(frozen=True)
class Training:
    precision: str = DEFAULT_PRECISION
    optimizer: str = "sgd"
    checkpoint: str = "never"
    compile: str | None = None
    """A COMPILE_MODES name, or None: eager."""

    def __post_init__(self):
        for name, allowed in (("precision", PRECISIONS), ("optimizer", OPTIMIZERS), ("checkpoint", CHECKPOINT_MODES)):
            value = getattr(self, name)
            if value not in allowed:
                raise UserError(f"unknown {name} {value!r}; choose one of: {', '.join(allowed)}")
        if self.compile is not None and self.compile not in COMPILE_MODES:
            raise UserError(f"unknown compile mode {self.compile!r}; choose one of: {', '.join(COMPILE_MODES)}")

    def check_device(self, device_type: str) -> None:
        """Refuse, in one line, a compile mode that cannot run on `device_type` ("cuda" or "cpu")."""
        if self.compile == "cudagraphs" and device_type != "cuda":
            raise UserError("--compile cudagraphs records CUDA graphs and needs a GPU; on the CPU use --compile "
                            "default or max-autotune")

    @property
    def lr(self) -> float:
        return LEARNING_RATES[self.optimizer]

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16"

    @property
    def states(self) -> int:
        return OPTIMIZER_STATES[self.optimizer]

    def label(self) -> str:
        """"bf16 adamw", with ", recompute always" unless never and ", compiled default" unless eager: for
        titles and progress lines."""
        text = f"{self.precision} {self.optimizer}"
        if self.checkpoint != "never":
            text += f", recompute {self.checkpoint}"
        return text if self.compile is None else f"{text}, compiled {self.compile}"


TRAINING_PARTS = ("precision", "optimizer", "checkpoint", "compile")
"""The Training's fields, which records written before it was one field held flat."""


def nest_training(data: dict) -> dict:
    """A record's fields with its Training as one nested object, `{"training": {"precision": ...}}`: files
    written before held the three as flat strings, which are gathered here (the Training's defaults for
    those absent). A record that has both is returned as it is, for its check to refuse."""
    if not isinstance(data, dict) or not any(name in data for name in TRAINING_PARTS) or "training" in data:
        return data
    values = dict(data)
    values["training"] = {name: values.pop(name) for name in TRAINING_PARTS if name in values}
    return values


def flat_training(data: dict) -> dict:
    """The other way: a record's fields with the Training's three in place of the nested one (a CSV's
    columns; the hash that names a Plan, the same as it was before the Training was one field)."""
    values = dict(data)
    training = values.pop("training", None) or {}
    parts = dict(dataclasses.asdict(training) if dataclasses.is_dataclass(training) else training)
    if parts.get("compile", "eager") is None:  # eager: as it was before compile was a part (a Plan's hash)
        del parts["compile"]
    return {**values, **parts}


def autocast(training: Training, device_type: str):
    """bf16 automatic mixed precision on `device_type` ("cuda" or "cpu"), or a context that does nothing."""
    import contextlib

    import torch

    if not training.bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=torch.bfloat16)


def compile_module(module, training: Training):
    """Compile `module` in place as the training says (`nn.Module.compile`, which torch recommends over
    `torch.compile(module)`: the module keeps its class, its parameters' names and its hooks; it compiles
    at its first call). Returns the module; nothing happens when the training is eager."""
    if training.compile is not None:
        module.compile(mode=COMPILE_MODES[training.compile])
    return module


def make_optimizer(params, training: Training, lr: float | None = None):
    """The training's optimizer over `params` (see optimizer_settings)."""
    params = list(params)
    cls, settings = optimizer_settings(params, training, lr)
    return cls(params, **settings)


def optimizer_settings(params, training: Training, lr: float | None = None) -> tuple[type, dict]:
    """The training's optimizer class and its settings for `params`: SGD, or AdamW (fused where every
    parameter is on a GPU, as people run it; foreach on the CPU), for a wrapper that builds it itself
    (ZeroRedundancyOptimizer). lr: the training's own unless given (the profiler times an update that
    changes nothing with 0)."""
    import torch

    params = list(params)
    lr = training.lr if lr is None else lr
    if training.optimizer == "sgd":
        return torch.optim.SGD, {"lr": lr}
    fused = bool(params) and all(p.device.type == "cuda" for p in params)
    return torch.optim.AdamW, {"lr": lr, "fused": fused or None}


def set_precision(training: Training) -> None:
    """Process-wide numerics for the precision: TF32 matmuls and cuDNN autotuning for tf32 and bf16 (what
    stays float32 under autocast), neither for fp32. Workers and the profiler call it alike."""
    import torch

    fast = training.precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = fast
    torch.backends.cudnn.allow_tf32 = fast
    torch.backends.cudnn.benchmark = fast
