"""Activation checkpointing as the strategies use it: torch.utils.checkpoint around a stage, torch's
checkpoint_wrapper around each layer of a replica, and the name it adds to the parameters it wraps."""
from __future__ import annotations

__all__ = ["CHECKPOINT_WRAPPER", "checkpoint", "checkpoint_layers"]


CHECKPOINT_WRAPPER = "_checkpoint_wrapped_module"
"""What torch's checkpoint_wrapper inserts in the names of the parameters it wraps."""


def checkpoint(function, *args, **kwargs):
    """torch.utils.checkpoint.checkpoint, imported when first needed."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    return torch_checkpoint(function, *args, **kwargs)


def checkpoint_layers(model) -> None:
    """Activation checkpointing layer by layer, in place: each of the model's layers (the zoo's, or a
    model of your own's top-level children) keeps only its input and runs again in the backward. How the
    replica strategies (single, ddp) recompute: they have no stages to choose from."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl,
                                                                             apply_activation_checkpointing,
                                                                             checkpoint_wrapper)

    layers = {id(child) for child in model.module.children()}
    apply_activation_checkpointing(
        model.module, check_fn=lambda m: id(m) in layers,
        checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT))
