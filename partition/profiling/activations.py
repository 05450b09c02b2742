"""What a micro-batch's activations take, estimated before the size is measured; the sizes with no room.

Profiling runs the whole model at each micro-batch size on one device. A size whose activations exceed the
device's free memory is, on the CPU, no out-of-memory error but the kernel's OOM killer, which ends
pipebench without a line (and may pick another process of a shared machine). So each size is judged first,
from one forward and loss on fake tensors (torch's FakeTensorMode: shapes and dtypes, no data), which
allocates nothing: the bytes of every tensor autograd keeps for backward, and of the batch itself. In fp32
even where the training runs bf16 (more than it takes), and without the backward's own buffers, the
gradients and the optimizer's states (less): a guard against sizes far beyond the memory, not a prediction
(partition/planning/memory.py predicts what a stage holds).
"""
from __future__ import annotations

from typing import Any

import torch

from pipebench.hardware.free_memory import free_bytes
from pipebench.base.text.units import format_bytes

__all__ = ["activation_bytes", "oversized"]


def activation_bytes(model: Any, micro_batch: int, device: torch.device) -> int | None:
    """The bytes one training forward and loss of `model` keep at `micro_batch` samples on `device`, the
    batch included (module docstring); None where the model does not run on fake tensors (data-dependent
    code, a batch maker that reads real data): the measurement then says what it does.
    model: as profile_model takes it (.module, .make_batch, .loss_fn)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    module = model.module
    kept: dict[int, int] = {}  # storage -> bytes: a tensor saved twice, or a view of one saved, counts once
    try:
        with FakeTensorMode(allow_non_fake_inputs=True) as mode, torch.enable_grad():
            # Fake copies of the weights and buffers: a BatchNorm's running statistics stay untouched.
            state = {name: mode.from_tensor(t).to(device)
                     for name, t in (*module.named_parameters(), *module.named_buffers())}
            weights = {_storage(t) for t in state.values()}  # in memory already: the free memory excludes them
            inputs, targets = model.make_batch(micro_batch, seed=0, device=device)
            args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
            for t in (*args, targets):
                if isinstance(t, torch.Tensor):
                    kept[_storage(t)] = t.untyped_storage().nbytes()

            def pack(t: torch.Tensor) -> torch.Tensor:
                if _storage(t) not in weights:
                    kept[_storage(t)] = t.untyped_storage().nbytes()
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                model.loss_fn(torch.func.functional_call(module, state, args), targets)
    except Exception:  # noqa: BLE001 - not judged here; the measurement runs it and says why it fails
        return None
    return sum(kept.values())


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def oversized(model: Any, device: torch.device, sizes: list[int]) -> dict[int, str]:
    """The micro-batch sizes among `sizes` whose activations need more than `device`'s free memory, each
    with the reason in words. Judged from the largest down, until one fits: a smaller one needs less, so
    a size sweep that fits costs one estimate."""
    free = free_bytes(device)
    found = {}
    for size in sorted(set(sizes), reverse=True):
        need = activation_bytes(model, size, device)
        if need is None or need <= free:
            break
        found[size] = (f"its activations need about {format_bytes(need)}, more than the {format_bytes(free)} "
                       f"free on {device} (a smaller --batch or model settings, or more --micro-batches)")
    return found
