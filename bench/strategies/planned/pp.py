"""Pipeline parallelism through torch.distributed.pipelining: one process per device.

Each process owns one or more of the Plan's stages and runs torch's schedule for them; activations and
their gradients cross between processes with point-to-point sends (NCCL on GPUs, gloo on the CPU).

    strategy        torch schedule                   stages per process   stage s lives on (Plan.placement)
    pp-gpipe        ScheduleGPipe                    1                    process s
    pp-1f1b         Schedule1F1B                     1                    process s
    pp-interleaved  ScheduleInterleaved1F1B          v (>= 2)             process s % p   (loop)
    pp-zb           ScheduleInterleavedZeroBubble    v (>= 2)             process s % p   (loop)
    pp-zbv          ScheduleZBVZeroBubble            2                    s < p: s, else 2p - 1 - s  (V)

The torch class comes from the strategy registry (bench/strategies/__init__.py); which stages this
process runs comes from the Plan (`Plan.placement`, made once by partition.planning.schedule_order.placement).

A schedule the installed torch lacks raises `UnavailableStrategy`, never a stand-in.

Each micro-batch's loss is its own mean; torch scales the summed gradients by 1/m (`scale_grads`), so
the update is that of the whole batch's mean loss, as on one device. BatchNorm normalises each
micro-batch on its own, as in every pipeline.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from pipebench.bench.strategies.micro_batches import as_args, to_device
from pipebench.bench.strategies.planned.stages import chain_stages, place, shared_parameters, stage_split, sum_shared_grads
from pipebench.bench.strategies.trainers import Trainer, UnavailableStrategy, own_copy
from pipebench.base.errors import UserError


def schedule_class(strategy):
    """torch's schedule class for a strategy that runs one (its registry entry); UnavailableStrategy if
    this torch has none."""
    name = strategy.torch_schedule
    if name is None:
        raise UserError(f"{strategy.name} is not a torch.distributed.pipelining strategy")
    import torch.distributed.pipelining as pipelining

    cls = getattr(pipelining, name, None)
    if cls is None:
        raise UnavailableStrategy(f"{strategy.name}: torch {torch.__version__} has no {name}")
    return cls


class PipelineParallelTrainer(Trainer):
    """This process's share of a torch.distributed.pipelining pipeline: the Plan's stages that the Plan
    places on this process's device: pipebench's split of the model at the Plan's cuts, as a chain of plain
    PipelineStages (bench/strategies/planned/stages.py: chain_stages), run by torch's schedule for the strategy."""

    def __init__(self, model, devices, *, strategy, plan, group=None, **kw):
        """group: the process group that runs the pipeline (None: every process; the hybrid strategy
        passes one replica's group, and ranks below are ranks within it)."""
        cls = schedule_class(strategy)
        super().__init__(own_copy(model), devices[:1], strategy=strategy, plan=plan, **kw)
        from torch.distributed.pipelining.schedules import PipelineScheduleSingle

        self.group = group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        if plan.device_count != self.world:
            raise UserError(f"{strategy.name}: the plan is for {plan.device_count} devices, {self.world} processes "
                            "run it")
        self.num_stages = len(plan.stages)
        self.micro_batches = plan.micro_batches
        self.stage_ids = plan.stages_on(self.rank)
        device = self.devices[0]
        split = stage_split(self.model, plan, training=self.training)  # every process splits the same model the same way
        from torch.distributed.pipelining import PipelineStage

        chain = chain_stages(split)  # plain stages, each taking what the one before returns
        self.shared = shared_parameters(split, chain, self.model.module)  # tied weights: a copy per stage, gradients summed
        for stage, planned in zip(chain, plan.stages):
            stage.copy_outputs = strategy.schedule.split_backward
            stage.recompute = planned.recompute
        if strategy.schedule.split_backward and self.training.compile is not None:
            import torch._functorch.config as functorch_config

            # A split backward runs the compiled backward graph twice (I, then W), retaining it: AOTAutograd's
            # donated buffers forbid that.
            functorch_config.donated_buffer = False
        for s in self.stage_ids:
            self.compile(place(chain[s], device).submod)  # the stage's own graph; the chain's plumbing stays eager
        stages = [PipelineStage(chain[s], s, self.num_stages, device, group=group) for s in self.stage_ids]
        for stage in stages:
            _zeros_for_metadata_inference(stage)
        if dist.get_backend(group) == "gloo":
            for stage in stages:
                _no_sends_to_itself(stage)
        self.modules = [stage.submod for stage in stages]
        self.first_rank = plan.placement[0]
        self.last_rank = plan.placement[-1]
        self.pipeline_stages = stages
        single = issubclass(cls, PipelineScheduleSingle)
        if single and len(stages) != 1:
            raise UserError(f"{strategy.name} runs one stage per process; the plan puts {len(stages)} on process {self.rank}")
        self.schedule = cls(stages[0] if single else stages, plan.micro_batches, loss_fn=self.model.loss_fn)

    def parameters(self):
        return [p for module in self.modules for p in module.parameters()]

    def forward_backward(self, inputs, targets):
        device = self.devices[0]
        args = as_args(to_device(inputs, device)) if self.rank == self.first_rank else ()
        kwargs = {}
        losses: list[torch.Tensor] = []
        if self.rank == self.last_rank:
            kwargs = {"target": targets.to(device), "losses": losses}
        self.schedule.step(*args, **kwargs)
        if self.shared:
            sum_shared_grads(self.shared, set(self.stage_ids),
                             all_reduce=lambda t: dist.all_reduce(t, group=self.group))
        # Each micro-batch loss is a mean over its samples; their mean is the batch-mean loss.
        loss = torch.stack([l.detach() for l in losses]).mean() if losses else torch.zeros((), device=device)
        dist.broadcast(loss, group=self.group, group_src=self.last_rank)
        return loss


def _no_sends_to_itself(stage) -> None:
    """Drop the warm-up sends between a stage and a neighbour on its own process. torch 2.11's schedules
    open every stage's links with a dummy send to each neighbour's process, its own included when both
    stages live there (pp-zbv's V turns on the last process), and gloo has no link from a process to
    itself ("Pair is not connected"). The schedule passes such tensors locally anyway; newer torch warms
    up the links another way and never calls this."""
    ops = stage._get_init_p2p_neighbors_ops
    own = stage.group_rank
    stage._get_init_p2p_neighbors_ops = lambda: [op for op in ops() if op.group_peer != own]


def _zeros_for_metadata_inference(stage) -> None:
    """Run torch's metadata inference on zeros, not on uninitialised memory. Before the first step, torch
    2.14's schedules run each stage once on tensors made from the received shapes alone (`_to_tensor`:
    torch.empty). An integer tensor that crosses a cut (position ids made by the first stage, as floats:
    float_coding.py) then holds whatever the memory held, and the next stage's embedding indexes out of
    range. Zeros index every embedding; torch 2.11's shape inference runs the stages on zeros as well (and
    has no `_to_tensor`: nothing changes there)."""
    to_tensor = getattr(stage, "_to_tensor", None)
    if to_tensor is None:
        return

    def zeros(arg):
        made = to_tensor(arg)
        if not isinstance(arg, torch.Tensor):  # made from metadata: torch.empty's contents
            with torch.no_grad():
                made.zero_()
        return made

    stage._to_tensor = zeros
