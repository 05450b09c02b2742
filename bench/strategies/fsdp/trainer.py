"""FSDP2 (`torch.distributed.fsdp.fully_shard`): one process per device, each holding 1/p of every
parameter, gradient and optimizer state; a block's parameters are gathered whole just before its forward
(and again before its backward) and freed after, its gradients reduce-scattered back into shards.

The model that does not fit on one device, without a pipeline: every process runs the whole model on its
equal slice of the global batch, as DDP does, so one step computes the whole batch's mean-loss gradient
(FSDP averages the gradients over the processes). Memory per device is the shards plus the blocks
gathered at the moment plus the activations of the slice.

Blocks are what `fully_shard` is applied to, one all-gather each (`blocks`); the root is sharded last
and gathers whatever no block holds. With bf16, the gathered copies are bf16 and gradients are reduced
in fp32 (MixedPrecisionPolicy), the sharded master weights and the optimizer stay fp32. A model with
BatchNorm is gathered in fp32 and computes in bf16 under autocast, as the other strategies do: its running
statistics are fp32 buffers, which CUDA's batch norm refuses beside bf16 weights. Sharding each BatchNorm
on its own in fp32 instead would make a group, with its own hooks and collectives, of every BatchNorm.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from pipebench.bench.strategies.trainers import ReplicaTrainer, own_copy


def blocks(model) -> list[nn.Module]:
    """The submodules to shard one by one, in order. A zoo model's layers (`model.layer_names`, children
    of its nn.Sequential); a user model's repeated blocks: the children of its outermost nn.ModuleLists
    and nn.Sequentials (a transformer's layers, a ResNet stage's blocks), as torchtitan and Hugging Face
    shard them; else its top-level children. A block holding a parameter that is also used outside it
    (tied embeddings) is left to the root, since FSDP shards each parameter in one group only."""
    module = model.module
    found = _named_layers(module, getattr(model, "layer_names", None) or [])
    if found is None:
        found = _outer_containers(module) or list(module.children())
    uses: dict[int, int] = {}
    for _, p in module.named_parameters(remove_duplicate=False):
        uses[id(p)] = uses.get(id(p), 0) + 1

    def own(block):
        inside: dict[int, int] = {}
        for _, p in block.named_parameters(remove_duplicate=False):
            inside[id(p)] = inside.get(id(p), 0) + 1
        return all(count == uses[key] for key, count in inside.items())

    return [b for b in found if any(True for _ in b.parameters()) and own(b)]


def batch_norms(module: nn.Module) -> list[nn.Module]:
    """The BatchNorm layers with parameters (affine), whose weights must stay fp32 beside their fp32 statistics."""
    return [m for m in module.modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and any(True for _ in m.parameters(recurse=False))]


def _named_layers(module: nn.Module, names: list[str]) -> list[nn.Module] | None:
    try:
        return [module.get_submodule(name) for name in names] if names else None
    except AttributeError:
        return None


def _outer_containers(module: nn.Module) -> list[nn.Module]:
    if isinstance(module, (nn.ModuleList, nn.Sequential)):
        return list(module.children())
    return [b for child in module.children() for b in _outer_containers(child)]


class FSDPTrainer(ReplicaTrainer):
    def __init__(self, model, devices, **kw):
        """devices: this process's device; the process group must already be initialised."""
        from torch.distributed._composable import checkpoint
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        super().__init__(own_copy(model), devices[:1], **kw)
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        device = self.devices[0]
        self.model.module.to(device)
        mesh = init_device_mesh(device.type, (self.world,))
        gather_bf16 = self.training.bf16 and not batch_norms(self.model.module)
        policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
                  if gather_bf16 else MixedPrecisionPolicy())  # fp32 gathers; autocast computes in bf16
        # "auto" comes here as always or never: the suite chose by the predicted memory (bench/predict/ranking.py).
        for block in blocks(self.model):
            if self.training.checkpoint == "always":
                checkpoint(block)  # non-reentrant: recomputes the block's forward in its backward
            fully_shard(block, mesh=mesh, mp_policy=policy)
            self.compile(block)  # each shard unit, as torchtitan compiles each block
        fully_shard(self.model.module, mesh=mesh, mp_policy=policy)

    def parameters(self):
        """The shards (DTensors): the optimizer steps on this process's 1/p of each parameter."""
        return list(self.model.module.parameters())

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Whole parameters by their original names, on the CPU, on every process (a collective: every
        process must call it)."""
        from torch.distributed.tensor import DTensor

        with torch.no_grad():
            return {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
                    for name, p in self.model.module.named_parameters()}
