"""Pipeline parallelism through torch.distributed.pipelining: one process per device.

Each process owns one or more of the Plan's stages and runs torch's schedule for them; activations and
their gradients cross between processes with point-to-point sends (NCCL on GPUs, gloo on the CPU).

    strategy        torch schedule                   stages per process   stage s lives on
    pp-gpipe        ScheduleGPipe                    1                    process s
    pp-1f1b         Schedule1F1B                     1                    process s
    pp-interleaved  ScheduleInterleaved1F1B          v (>= 2)             process s % p   (loop)
    pp-zb           ScheduleInterleavedZeroBubble    v (>= 2)             process s % p   (loop)
    pp-zbv          ScheduleZBVZeroBubble            2                    s < p: s, else 2p - 1 - s  (V)

A schedule the installed torch lacks raises `UnavailableStrategy`, never a stand-in.

Each micro-batch's loss is its own mean; torch scales the summed gradients by 1/m (`scale_grads`), so
the update is that of the whole batch's mean loss, as on one device. BatchNorm normalises each
micro-batch on its own, as in every pipeline.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.distributed as dist

from bench.strategies.common import Trainer, UnavailableStrategy, own_copy

SCHEDULES = {
    # strategy: (torch class name, placement, stages per process or None for "v from the plan")
    "pp-gpipe": ("ScheduleGPipe", "loop", 1),
    "pp-1f1b": ("Schedule1F1B", "loop", 1),
    "pp-interleaved": ("ScheduleInterleaved1F1B", "loop", None),
    "pp-zb": ("ScheduleInterleavedZeroBubble", "loop", None),
    "pp-zbv": ("ScheduleZBVZeroBubble", "v", 2),
}


def schedule_class(strategy: str):
    """torch's schedule class for a pp-* strategy; UnavailableStrategy if this torch has none."""
    if strategy not in SCHEDULES:
        raise ValueError(f"unknown pipeline strategy {strategy!r}; choose one of: {', '.join(SCHEDULES)}")
    import torch.distributed.pipelining as pipelining

    name = SCHEDULES[strategy][0]
    cls = getattr(pipelining, name, None)
    if cls is None:
        raise UnavailableStrategy(f"{strategy}: torch {torch.__version__} has no {name}")
    return cls


def stages_per_process(strategy: str, num_stages: int, processes: int) -> int:
    """How many of the Plan's stages each process runs; ValueError when the counts do not fit."""
    fixed = SCHEDULES[strategy][2]
    if num_stages % processes:
        raise ValueError(f"{strategy}: {num_stages} stages do not spread evenly over {processes} processes")
    v = num_stages // processes
    if fixed is not None and v != fixed:
        raise ValueError(f"{strategy} runs {fixed} stage(s) per process; the plan has {num_stages} stages "
                         f"for {processes} processes")
    if fixed is None and v < 2:
        raise ValueError(f"{strategy} needs at least 2 stages per process (plan {2 * processes} stages for "
                         f"{processes} processes, e.g. --virtual-stages 2)")
    return v


def local_stages(strategy: str, rank: int, processes: int, num_stages: int) -> list[int]:
    """The global indices of the stages that process `rank` owns, in increasing order."""
    v = stages_per_process(strategy, num_stages, processes)
    if SCHEDULES[strategy][1] == "v":
        return [rank, 2 * processes - 1 - rank]
    return [rank + k * processes for k in range(v)]


def owner(strategy: str, stage: int, processes: int) -> int:
    """The process that runs global stage `stage`."""
    if SCHEDULES[strategy][1] == "v" and stage >= processes:
        return 2 * processes - 1 - stage
    return stage % processes


class PipelineParallelTrainer(Trainer):
    """This process's share of a torch.distributed.pipelining pipeline."""

    def __init__(self, model, device, *, strategy: str, bounds: Sequence[int], micro_batches: int,
                 stage_inputs: Sequence[tuple[Sequence[int], str]] | None = None, **kw):
        """bounds: the Plan's stage boundaries (p x v stages); stage_inputs: per stage, the shape and dtype
        of one micro-batch's input (from the profile); None lets torch infer shapes on the first step."""
        cls = schedule_class(strategy)
        super().__init__(own_copy(model), [device], **kw)
        from torch.distributed.pipelining import PipelineStage

        self.name = strategy
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.num_stages = len(bounds) - 1
        self.micro_batches = micro_batches
        self.stage_ids = local_stages(strategy, self.rank, self.world, self.num_stages)
        device = self.devices[0]
        self.modules = []
        stages = []
        for s in self.stage_ids:
            module = self.model.stage(bounds[s], bounds[s + 1]).to(device)
            example = None
            if stage_inputs is not None:
                shape, dtype = stage_inputs[s]
                example = torch.zeros(list(shape), dtype=getattr(torch, dtype), device=device)
            self.modules.append(module)
            stages.append(PipelineStage(module, s, self.num_stages, device, input_args=example))
        self.first_rank = owner(strategy, 0, self.world)
        self.last_rank = owner(strategy, self.num_stages - 1, self.world)
        self.pipeline_stages = stages
        stage_arg = stages[0] if len(stages) == 1 and SCHEDULES[strategy][2] == 1 else stages
        self.schedule = cls(stage_arg, micro_batches, loss_fn=self.model.loss_fn)

    def parameters(self):
        return [p for module in self.modules for p in module.parameters()]

    def forward_backward(self, inputs, targets):
        device = self.devices[0]
        args = (inputs.to(device),) if self.rank == self.first_rank else ()
        kwargs = {}
        losses: list[torch.Tensor] = []
        if self.rank == self.last_rank:
            kwargs = {"target": targets.to(device), "losses": losses}
        self.schedule.step(*args, **kwargs)
        # Each micro-batch loss is a mean over its samples; their mean is the batch-mean loss.
        loss = torch.stack([l.detach() for l in losses]).mean() if losses else torch.zeros((), device=device)
        dist.broadcast(loss, src=self.last_rank)
        return loss
