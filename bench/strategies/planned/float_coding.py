"""Integer tensors crossing between pipeline stages as floats.

torch 2.11's PipelineStage makes every tensor it receives require a gradient, which only floating-point
tensors can: an integer or bool tensor (positions, a mask) crosses as floats that hold it exactly (64- and
32-bit integers bit for bit, narrower ones by value), the receiving stage turns it back, and its backward
sends a gradient of zeros for it, since those stages refuse a missing one."""
from __future__ import annotations

import torch

__all__ = ["as_floats", "from_floats", "is_coded", "ZeroGradients"]


def as_floats(value):
    """A tensor as a stage sends it: a floating-point one as it is, an integer or bool one as floats that
    hold it exactly, which the receiving stage turns back (`from_floats`)."""
    if not isinstance(value, torch.Tensor) or value.is_floating_point() or value.is_complex():
        return value
    if value.element_size() in (4, 8):
        return value.contiguous().view(torch.float32 if value.element_size() == 4 else torch.float64)
    return value.to(torch.float32)


def from_floats(value, dtype: torch.dtype | None):
    """A received tensor in the dtype it was made in (see `as_floats`)."""
    if not isinstance(value, torch.Tensor) or dtype is None or value.dtype == dtype:
        return value
    value = value.detach()
    return value.view(dtype) if value.element_size() == torch.empty((), dtype=dtype).element_size() else value.to(dtype)


class ZeroGradients(torch.autograd.Function):
    """The identity on a stage's output whose backward also gives each received integer tensor (as floats,
    `as_floats`) a gradient of zeros."""

    @staticmethod
    def forward(ctx, output, *received):
        ctx.like = [(t.shape, t.dtype, t.device) for t in received]
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad, *_):
        return (grad, *(torch.zeros(shape, dtype=dtype, device=device) for shape, dtype, device in ctx.like))


def is_coded(value, dtype) -> bool:
    """A received tensor that crossed as floats (`as_floats`) but was made an integer or bool one."""
    return (isinstance(value, torch.Tensor) and value.requires_grad and dtype is not None
            and not (dtype.is_floating_point or dtype.is_complex))
