"""A batch as the strategies hand it on: equal micro-batches, forward's positional arguments, on a device."""
from __future__ import annotations

from pipebench.base.errors import UserError

__all__ = ["split", "as_args", "to_device", "only_output"]


def split(inputs, micro_batches: int) -> list:
    """Equal micro-batches along dimension 0 (of each tensor of a tuple); an uneven split is an error,
    not a silent remainder."""
    if isinstance(inputs, (tuple, list)):
        parts = [split(t, micro_batches) for t in inputs]
        return [tuple(p[i] for p in parts) for i in range(micro_batches)]
    if micro_batches < 1 or inputs.shape[0] % micro_batches:
        raise ValueError(f"batch {inputs.shape[0]} does not split into {micro_batches} equal micro-batches")
    return list(inputs.chunk(micro_batches))


def as_args(inputs) -> tuple:
    """A model's inputs as forward's positional arguments (one tensor, or a tuple of them)."""
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def to_device(inputs, device):
    """Tensors (or a tuple of them) on `device`."""
    if isinstance(inputs, (tuple, list)):
        return tuple(t.to(device, non_blocking=True) for t in inputs)
    return inputs.to(device, non_blocking=True)


def only_output(outputs):
    """What the loss takes: a Pipe returns its single output as a one-element tuple."""
    if isinstance(outputs, (tuple, list)):
        if len(outputs) != 1:
            raise UserError(f"the model returns {len(outputs)} outputs; pipebench trains a model that returns one tensor")
        return outputs[0]
    return outputs
