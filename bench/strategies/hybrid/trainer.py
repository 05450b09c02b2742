"""Pipeline stages replicated with data parallelism: a 2-D device mesh of replicas x stages.

    init_device_mesh(device, (dp, pp), mesh_dim_names=("dp", "pp"))

    rank = replica * pp + stage          pp = 2, dp = 2:      stage 0   stage 1
    "pp" group: one replica's pipeline                  replica 0   rank 0 -> rank 1
    "dp" group: one stage's copies                      replica 1   rank 2 -> rank 3

Each replica runs the Plan (made for one replica: its devices are one replica's stages, its batch one
replica's share) with torch's Schedule1F1B over its "pp" group, on its slice of the global batch, exactly
as pp-1f1b would (bench/strategies/planned/pp.py). After the schedule, each stage's copies average their
gradients over the "dp" group, as DistributedDataParallel does, so that every replica takes the step
of the whole batch's mean loss, as one device does.

The all-reduce is by hand, in buckets, after the schedule: torch's schedules run one backward per
micro-batch, so a DDP-wrapped stage would need no_sync on all but the last, and DDP refuses a stage
whose tied original sits unused beside its trained copy (bench/strategies/planned/stages.py: shared_parameters)
unless it searches the graph for unused parameters on every step.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from pipebench.bench.strategies.ddp.cost import DDP_BUCKET_BYTES
from pipebench.bench.strategies.micro_batches import split
from pipebench.bench.strategies.planned.pp import PipelineParallelTrainer
from pipebench.base.errors import UserError
from pipebench.bench.strategies.hybrid.copies import copies_error


class HybridTrainer(PipelineParallelTrainer):
    """This process's stage of its replica's pipeline; the replicas of a stage average their gradients."""

    local_batch = False
    """True: `step` is given this replica's own share of the batch (`pipebench train`), not the global one."""

    def __init__(self, model, devices, *, strategy, plan, **kw):
        from torch.distributed.device_mesh import init_device_mesh

        world, stages = dist.get_world_size(), plan.device_count
        if (why := copies_error(world, stages)) is not None:
            raise UserError(f"{strategy.name}: {why}")
        self.replicas = strategy.replicas(world, stages)
        mesh = init_device_mesh(torch.device(devices[0]).type, (self.replicas, stages), mesh_dim_names=("dp", "pp"))
        self.dp_group = mesh.get_group("dp")
        self.replica = mesh.get_local_rank("dp")
        super().__init__(model, devices, strategy=strategy, plan=plan, group=mesh.get_group("pp"), **kw)

    def forward_backward(self, inputs, targets):
        # The replica's slice of the global batch (or, local_batch, its own share already: `pipebench
        # train`'s sampler); the schedule cuts it into the Plan's micro-batches.
        if not self.local_batch:
            mine = lambda batch: split(batch, self.replicas)[self.replica] if batch is not None else None  # noqa: E731
            inputs, targets = mine(inputs), mine(targets)
        loss = super().forward_backward(inputs, targets)
        self.average_gradients()
        dist.all_reduce(loss, group=self.dp_group)  # each replica's loss is the mean over its equal share
        return loss / self.replicas

    def average_gradients(self) -> None:
        """Each gradient becomes the mean of its copies over the replicas (tied weights' copies already hold
        their sum over the stages: pp.py), in buckets of one dtype, in the same order on every replica."""
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        for bucket in _buckets(grads, DDP_BUCKET_BYTES):  # gradients all-reduced together, as DDP's
            flat = _flatten_dense_tensors(bucket)
            dist.all_reduce(flat, group=self.dp_group)
            flat /= self.replicas
            for grad, mean in zip(bucket, _unflatten_dense_tensors(flat, bucket)):
                grad.copy_(mean)


def _buckets(tensors: list[torch.Tensor], limit: int) -> list[list[torch.Tensor]]:
    """Consecutive tensors of one dtype, each list up to `limit` bytes (or one larger tensor alone)."""
    buckets: list[list[torch.Tensor]] = []
    size = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        if not buckets or buckets[-1][0].dtype != t.dtype or size + nbytes > limit:
            buckets.append([])
            size = 0
        buckets[-1].append(t)
        size += nbytes
    return buckets
