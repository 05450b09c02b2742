"""DistributedDataParallel: one process per device, each with a whole replica and an equal share of the
global batch; gradients are averaged across processes during the backward.

Every process makes the same global batch from the same seed and takes its own slice, so the averaged
gradient is that of the whole batch's mean loss, as on one device. BatchNorm normalises each process's
slice on its own (as it does each micro-batch in a pipeline), so models with BatchNorm differ slightly.

DDP waits for every parameter's gradient before it averages a bucket, so a model with a parameter its
forward never uses (a pooler, an aux head) failed at the second step ("Expected to have finished
reduction in the prior iteration"). `find_unused_parameters=True` makes DDP find them by walking the
autograd graph from the outputs every step; it is asked for only where the model has such parameters
(`unused_parameters`, a forward on the meta device once: no compute, no memory), not paid by every model.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from pipebench.bench.strategies.checkpointing import checkpoint_layers
from pipebench.bench.strategies.micro_batches import as_args, to_device
from pipebench.bench.strategies.trainers import ReplicaTrainer, own_copy

__all__ = ["DDPTrainer", "unused_parameters"]


class DDPTrainer(ReplicaTrainer):
    def __init__(self, model, devices, **kw):
        """devices: this process's device; the process group must already be initialised."""
        super().__init__(own_copy(model), devices[:1], **kw)
        # Before checkpointing and compiling, which hide the graph: a reentrant checkpoint's parameters
        # look unused, and DDP refuses those marked ready twice.
        unused = unused_parameters(self.model.module, self.model.make_batch(2, seed=0)[0])
        if self.training.checkpoint == "always":
            checkpoint_layers(self.model)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.compile(self.model.module.to(self.devices[0]))  # the module inside DDP, as torch's docs compile it
        ids = [self.devices[0].index] if self.devices[0].type == "cuda" else None
        self.replica = DistributedDataParallel(self.model.module, device_ids=ids,
                                               find_unused_parameters=unused is None or bool(unused))

    @property
    def runner(self):
        return self.replica


def unused_parameters(module: nn.Module, inputs) -> list[str] | None:
    """The names of `module`'s trained parameters that its forward of `inputs` does not reach (no gradient
    flows to them), found by one forward on the meta device with the module's own code (functional_call:
    meta copies of its parameters and buffers, the module itself untouched, no random number drawn), and
    a walk of the outputs' autograd graph, as DDP's own search does. None where the forward cannot run
    on meta (it reads values: .item(), a data-dependent shape): unknown."""
    from torch.func import functional_call
    from torch.utils._pytree import tree_leaves

    params = {n: torch.empty_like(p, device="meta").requires_grad_(p.requires_grad)
              for n, p in module.named_parameters()}
    buffers = {n: torch.empty_like(b, device="meta") for n, b in module.named_buffers()}
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            outputs = functional_call(module, {**params, **buffers}, as_args(to_device(inputs, "meta")))
    except Exception:  # noqa: BLE001 - the forward reads values that meta tensors lack
        return None
    reached: set[int] = set()
    seen: set = set()
    stack = [t.grad_fn for t in tree_leaves(outputs) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):  # AccumulateGrad: a leaf, one of the parameters
            reached.add(id(node.variable))
        stack.extend(next_node for next_node, _ in node.next_functions)
    return [n for n, p in params.items() if p.requires_grad and id(p) not in reached]
