"""The strategy registry: every way pipebench trains a model, each declared once.

The CLI's help, the suite's cases, the worker and the report all read `STRATEGIES`; adding a strategy is
one entry here plus its Trainer (a module of this package) and its tests. Nothing here imports torch:
the trainer class is named as "module:Class" and imported only in the worker that runs it.

Every Trainer starts from the same weights (the model is built once on the CPU from its seed and
copied), uses the same loss and the same SGD step, and records the loss of its first step, so that a
reader sees that every strategy computes the same thing.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from pipebench.errors import UserError

__all__ = ["Strategy", "STRATEGIES", "get_strategy", "strategy_names", "parse_strategies", "parse_auto"]


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    """One line for the help and the report."""
    trainer: str
    """"module:Class" under pipebench.bench.strategies; imported by the worker only."""
    process_per_device: bool
    """True: one process per device through torchrun (NCCL or gloo); False: one process drives them all."""
    schedule: str | None = None
    """The schedule the Plan is made for (partition.schedule.SCHEDULES); None: runs without a Plan."""
    stages_per_device: int = 1
    """Stages of the Plan on each device (2 for the interleaved and zero-bubble schedules)."""
    devices: str = "all"
    """"all" the chosen devices, or "one" (the baseline)."""
    micro_batched: bool = False
    """True: the batch is cut into the Plan's micro-batches (the planner's count, or --chunks)."""
    one_micro_batch_per_stage: bool = False
    """torch's Schedule1F1B needs at least as many micro-batches as stages."""
    torch_schedule: str | None = None
    """The torch.distributed.pipelining schedule class it runs, if any."""
    splits_batch: bool = False
    """The batch is split evenly over the replicas (DDP: one per process): it must divide by their count."""
    stages_per_replica: int | None = None
    """Replicated pipelines (hybrid): the Plan is one replica's pipeline, by default over this many
    devices, copied over all of them (devices / its device count replicas), its batch one replica's
    share. None: the Plan, if any, spans every device."""
    can_checkpoint: bool = True
    """It can recompute activations (Training.checkpoint auto or always); False: always is refused, and
    auto runs it without recomputing (device-map: accelerate's hooks; dataparallel: its replicas' threads;
    the zero-bubble schedules: a backward split in two)."""

    @property
    def needs_plan(self) -> bool:
        return self.schedule is not None

    @property
    def replicated(self) -> bool:
        return self.stages_per_replica is not None

    def processes(self, devices: int) -> int:
        return devices if self.process_per_device else 1

    def min_micro_batches(self, devices: int) -> int:
        return devices * self.stages_per_device if self.one_micro_batch_per_stage else 1

    def trainer_class(self):
        module, _, cls = self.trainer.partition(":")
        return getattr(importlib.import_module(f"pipebench.bench.strategies.{module}"), cls)


STRATEGIES: dict[str, Strategy] = {s.name: s for s in [
    Strategy("single", "the whole model on one device: the baseline", "single:SingleTrainer", False,
             schedule="gpipe", devices="one"),
    Strategy("dataparallel", "nn.DataParallel: one process replicates the model on every GPU each step",
             "dataparallel:DataParallelTrainer", False, can_checkpoint=False),
    Strategy("ddp", "DistributedDataParallel: a replica per process, gradients all-reduced",
             "ddp:DDPTrainer", True, splits_batch=True),
    Strategy("fsdp", "FSDP2: fully_shard per block, parameters gathered as needed", "fsdp:FSDPTrainer", True,
             splits_batch=True),
    Strategy("device-map",
             "Hugging Face accelerate's device_map=\"auto\": layers spread over the GPUs, one working at a time",
             "devicemap:DeviceMapTrainer", False, can_checkpoint=False),
    Strategy("modelparallel", "the seed's hand split at the plan's cuts, no micro-batches",
             "modelparallel:ModelParallelTrainer", False, schedule="gpipe"),
    Strategy("pipeline", "GPipe in one process over CUDA streams", "pipeline:PipelineTrainer", False,
             schedule="gpipe", micro_batched=True),
    Strategy("pp-gpipe", "torch.distributed.pipelining ScheduleGPipe, one process per GPU",
             "pp:PipelineParallelTrainer", True, schedule="gpipe", micro_batched=True, torch_schedule="ScheduleGPipe"),
    Strategy("pp-1f1b", "torch.distributed.pipelining Schedule1F1B", "pp:PipelineParallelTrainer", True,
             schedule="1f1b", micro_batched=True, one_micro_batch_per_stage=True, torch_schedule="Schedule1F1B"),
    Strategy("pp-interleaved", "ScheduleInterleaved1F1B, 2 stages per GPU in loops", "pp:PipelineParallelTrainer",
             True, schedule="interleaved", stages_per_device=2, micro_batched=True,
             torch_schedule="ScheduleInterleaved1F1B"),
    Strategy("pp-zb", "ScheduleInterleavedZeroBubble, 2 stages per GPU in loops", "pp:PipelineParallelTrainer",
             True, schedule="zb-interleaved", stages_per_device=2, micro_batched=True,
             torch_schedule="ScheduleInterleavedZeroBubble",
             can_checkpoint=False),
    Strategy("pp-zbv", "ScheduleZBVZeroBubble, 2 stages per GPU in a V", "pp:PipelineParallelTrainer", True,
             schedule="zbv", stages_per_device=2, micro_batched=True, torch_schedule="ScheduleZBVZeroBubble",
             can_checkpoint=False),
    Strategy("hybrid", "pipeline stages (1F1B) replicated with DDP over a 2-D device mesh: 4 or more GPUs",
             "hybrid:HybridTrainer", True, schedule="1f1b", micro_batched=True, one_micro_batch_per_stage=True,
             torch_schedule="Schedule1F1B", splits_batch=True, stages_per_replica=2),
]}


def strategy_names() -> list[str]:
    return list(STRATEGIES)


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UserError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None


def parse_strategies(text: str | None) -> list[str]:
    """'single,ddp' -> ["single", "ddp"]; None -> every strategy."""
    if text is None:
        return strategy_names()
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError(f"--strategies names no strategy (got {text!r}); choose from: {', '.join(STRATEGIES)}")
    for name in names:
        get_strategy(name)
    return names


def parse_auto(text: str | None) -> int | None:
    """'auto' -> 3, 'auto:K' -> K (run single and the K strategies predicted fastest); None otherwise."""
    if text is None or not text.strip().startswith("auto"):
        return None
    from pipebench.specs import parse_int

    head, _, count = text.strip().partition(":")
    if head == "auto":
        try:
            return parse_int(count, "--strategies auto:K", 1, len(STRATEGIES)) if count else 3
        except UserError:
            pass
    raise UserError(f"--strategies auto takes a count of strategies to run besides single, e.g. auto:3 "
                    f"(got {text[:40]!r})")


def help_text() -> str:
    """The strategies, one line each, for `pipebench run --help`."""
    width = max(map(len, STRATEGIES))
    return "strategies:\n" + "\n".join(f"  {s.name:<{width}}  {s.summary}" for s in STRATEGIES.values())
