"""The strategy registry: every way pipebench trains a model, each declared once, in one `Strategy`.

An entry says everything the rest of pipebench asks about a strategy: the devices and processes it
uses, the pipeline Schedule its Plan is made for, what it can do (micro-batches, recompute), its
Trainer and its price (the function bench/predict/ranking.py calls to predict it). A strategy that follows a Plan
is priced by the planner (planned/price.py price_plan); any other is a package of its own here, its price in
the package's price.py (no torch; its own cost model, where it has one, in cost.py) and its Trainer in
its trainer.py, which the package's `trainer_class` returns (ddp/, zero1/, dataparallel/, fsdp/, devicemap/,
hybrid/). Adding a strategy is one entry here plus its package (or, for one more schedule, its Trainer's
module and its function in planned/__init__.py) and its tests, one of them showing that it trains as one
device does (tests/test_strategies.py fails for an entry that no such test names).

The price is held as the function itself; the Trainer as its package's function that returns the
class (`ddp.trainer_class`, `planned.pp_trainer_class`), importing its module only when called: every
Trainer's module imports torch, and this registry is imported where torch must not load (the report, the
results store, a cached `pipebench advise`: tests/test_strategies.py, test_report.py,
test_results_file.py and test_cache.py check it). The worker, the one place that builds a Trainer,
pays for torch there.

Every Trainer starts from the same weights (the model is built once on the CPU from its seed and
copied), uses the same loss and the same optimizer step (pipebench/base/training.py), and records the loss
of its first step, so that a reader sees that every strategy computes the same thing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from pipebench.bench.strategies import dataparallel, ddp, devicemap, fsdp, hybrid, planned, zero1
from pipebench.bench.strategies.dataparallel.price import price_dataparallel
from pipebench.bench.strategies.ddp.price import price_ddp
from pipebench.bench.strategies.devicemap.price import price_device_map
from pipebench.bench.strategies.fsdp.price import price_fsdp
from pipebench.bench.strategies.hybrid.copies import copies_error
from pipebench.bench.strategies.hybrid.price import price_hybrid
from pipebench.bench.strategies.prediction import Prediction
from pipebench.bench.strategies.planned.price import price_plan
from pipebench.bench.strategies.pricing import Pricing
from pipebench.bench.strategies.zero1.price import price_zero1
from pipebench.base.errors import UserError
from pipebench.partition.profiling import micro_batch_sizes
from pipebench.base.schedules import SCHEDULES, Schedule

__all__ = ["Strategy", "STRATEGIES", "BASELINE", "LEVELS", "get_strategy", "registry_rank", "strategy_names", "strategy_list", "profile_counts"]


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    """One line for the help and the report."""
    import_trainer: Callable[[], type]
    """Imports its Trainer's module (with torch) and returns the class: a function of the strategy's package
    (see the module's docstring), called through `trainer_class` by the worker only. Every Trainer is built as
    Trainer(model, devices, plan=, strategy=, training=)."""
    process_per_device: bool = field(kw_only=True)
    """True: one process per device through torchrun (NCCL or gloo); False: one process drives them all.
    Keyword-only: a bare True or False in an entry does not say which question it answers."""
    price: Callable[[Pricing], Prediction] = price_plan
    """The function that predicts it (pricing.py, or the strategy's package): price(Pricing) -> Prediction, the
    Pricing (pricing.py) saying what it is asked: this entry, the profiles, the devices, their caps and speeds,
    the links, the Training and the micro-batch count."""
    schedule: Schedule | None = None
    """The schedule the Plan is made for (pipebench.base.schedules.SCHEDULES); None: runs without a Plan."""
    one_device: bool = False
    """It runs on the first chosen device only (the baseline); else on all of them."""
    micro_batched: bool = False
    """True: the batch is cut into the Plan's micro-batches (the planner's count, or --micro-batches)."""
    runs_torch_schedule: bool = False
    """It runs its schedule's torch.distributed.pipelining class (Schedule.torch_class)."""
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
    named_after_schedule: bool = False
    """Its name says its schedule (pp-1f1b): a label need not repeat it."""

    @property
    def needs_plan(self) -> bool:
        return self.schedule is not None

    @property
    def is_pipeline(self) -> bool:
        """A pipeline, as the report and advise group strategies: its batch is cut into micro-batches."""
        return self.micro_batched

    @property
    def replicated(self) -> bool:
        return self.stages_per_replica is not None

    @property
    def stages_per_device(self) -> int:
        return self.schedule.stages_per_device if self.schedule is not None else 1

    @property
    def torch_schedule(self) -> str | None:
        """The torch.distributed.pipelining schedule class it runs, if any."""
        return self.schedule.torch_class if self.runs_torch_schedule else None

    def devices_used(self, devices: int) -> int:
        """Of `devices` chosen, how many it runs on."""
        return 1 if self.one_device else devices

    def compute_devices(self, devices: int, device_type: str) -> int:
        """The devices it computes on for real, of `devices` chosen: on the CPU every stand-in device of
        one process is the same cores, so a one-process strategy (dataparallel, device-map, the hand
        split, pipeline) computes on one, as single does; on GPUs, the devices it uses."""
        return self.processes(devices) if device_type == "cpu" else self.devices_used(devices)

    def processes(self, devices: int) -> int:
        """Worker processes on `devices` chosen: one per device used, or one."""
        return self.devices_used(devices) if self.process_per_device else 1

    def replicas(self, devices: int, stages: int | None = None) -> int:
        """Copies of the model that each train their own share of the batch on `devices`: one per copy of
        a `stages`-device pipeline where pipelines are replicated (the hybrid; `stages` default
        stages_per_replica; 1 where the devices make no two copies, hybrid/copies.py copies_error), one per
        device where the batch is split (DDP, ZeRO-1, FSDP), else 1. The one home of the replica count: the
        Job, the prices, the Trainers and the training loop's sampler ask here."""
        if self.replicated:
            k = self.stages_per_replica if stages is None else stages
            return 1 if copies_error(devices, k) is not None else devices // k
        return self.devices_used(devices) if self.splits_batch else 1

    def min_micro_batches(self, devices: int) -> int:
        """torch's Schedule1F1B needs at least as many micro-batches as stages."""
        needs = self.schedule is not None and self.schedule.micro_batch_per_stage
        return devices * self.stages_per_device if needs else 1

    def trainer_class(self):
        """Its Trainer class, imported now (with torch): see the module's docstring for why only here."""
        return self.import_trainer()


STRATEGIES: dict[str, Strategy] = {s.name: s for s in [
    Strategy("single", "the whole model on one device: the baseline", planned.single_trainer_class,
             process_per_device=False, schedule=SCHEDULES["gpipe"], one_device=True),
    Strategy("dataparallel", "nn.DataParallel: one process replicates the model on every GPU each step",
             dataparallel.trainer_class, process_per_device=False, price=price_dataparallel, can_checkpoint=False),
    Strategy("ddp", "DistributedDataParallel: a replica per process, gradients all-reduced",
             ddp.trainer_class, process_per_device=True, price=price_ddp, splits_batch=True),
    Strategy("zero1", "DDP with ZeroRedundancyOptimizer (ZeRO-1): optimizer states sharded over the replicas",
             zero1.trainer_class, process_per_device=True, price=price_zero1, splits_batch=True),
    Strategy("fsdp", "FSDP2: fully_shard per block, parameters gathered as needed", fsdp.trainer_class,
             process_per_device=True, price=price_fsdp, splits_batch=True),
    Strategy("device-map",
             "Hugging Face accelerate's device_map=\"auto\": layers spread over the GPUs, one working at a time",
             devicemap.trainer_class, process_per_device=False, price=price_device_map, can_checkpoint=False),
    Strategy("modelparallel", "the hand split: each stage on its device at the plan's cuts, one process, no micro-batches",
             planned.modelparallel_trainer_class, process_per_device=False, schedule=SCHEDULES["gpipe"]),
    Strategy("pipeline", "GPipe in one process over CUDA streams", planned.pipeline_trainer_class,
             process_per_device=False, schedule=SCHEDULES["gpipe"], micro_batched=True),
    Strategy("pp-gpipe", "torch.distributed.pipelining ScheduleGPipe, one process per GPU",
             planned.pp_trainer_class, process_per_device=True, schedule=SCHEDULES["gpipe"], micro_batched=True,
             runs_torch_schedule=True, named_after_schedule=True),
    Strategy("pp-1f1b", "torch.distributed.pipelining Schedule1F1B", planned.pp_trainer_class, process_per_device=True,
             schedule=SCHEDULES["1f1b"], micro_batched=True, runs_torch_schedule=True, named_after_schedule=True),
    Strategy("pp-interleaved", "ScheduleInterleaved1F1B, 2 stages per GPU in loops", planned.pp_trainer_class,
             process_per_device=True, schedule=SCHEDULES["interleaved"], micro_batched=True, runs_torch_schedule=True,
             named_after_schedule=True),
    Strategy("pp-zb", "ScheduleInterleavedZeroBubble, 2 stages per GPU in loops", planned.pp_trainer_class,
             process_per_device=True, schedule=SCHEDULES["zb-interleaved"], micro_batched=True,
             runs_torch_schedule=True, can_checkpoint=False, named_after_schedule=True),
    Strategy("pp-zbv", "ScheduleZBVZeroBubble, 2 stages per GPU in a V", planned.pp_trainer_class,
             process_per_device=True, schedule=SCHEDULES["zbv"], micro_batched=True, runs_torch_schedule=True,
             can_checkpoint=False, named_after_schedule=True),
    Strategy("hybrid", "pipeline stages (1F1B) replicated with DDP over a 2-D device mesh: 4 or more GPUs",
             hybrid.trainer_class, process_per_device=True, price=price_hybrid, schedule=SCHEDULES["1f1b"],
             micro_batched=True, runs_torch_schedule=True, splits_batch=True, stages_per_replica=2),
]}

BASELINE = "single"
"""The strategy every other is measured against (x_single, the auto selection, the plots' speed-up)."""
LEVELS = (BASELINE, "dataparallel", "ddp")
"""Strategies without micro-batches drawn as levels beside the pipelines' curves (bench/report/plots.py); the
report's x_dataparallel compares with the second."""


def strategy_names() -> list[str]:
    return list(STRATEGIES)


def registry_rank(name: str) -> int:
    """A strategy's place in the registry (baselines first, then the data-parallel ones, then the
    pipelines): the order tables list them in, and the simpler-first order a tie goes by. Unknown: last."""
    order = list(STRATEGIES)
    return order.index(name) if name in order else len(order)


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UserError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None


def profile_counts(micro_batches: Sequence[int | None], devices: int, *, strategies: Sequence[str],
                   batch: int | None = None) -> list[int] | None:
    """The micro-batch counts a profile must hold for `strategies` to be priced on `devices` devices, from
    what each entry says: whether it micro-batches (then the counts of `micro_batches`; a None in them: the
    planner chooses, None), the devices it spreads the batch over, and its copies of a pipeline
    (partition/profiling/micro_batch_sizes.py counts_to_ask). Only counts that split `batch` (None: any). The one rule
    of what `pipebench run` and `advise` profile."""
    chosen = [get_strategy(name) for name in strategies]
    return micro_batch_sizes.counts_to_ask(micro_batches, spread={s.devices_used(devices) for s in chosen if not s.micro_batched},
                                           replicas={s.replicas(devices) for s in chosen if s.replicated},
                                           micro_batched=any(s.micro_batched for s in chosen), batch=batch)


def strategy_list(names: Any) -> list[str]:
    """The Python API's strategies (pipebench.advise, pipebench.run): a list of known names, else one
    UserError. A string is refused, not read letter by letter."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names:
        raise UserError(f"strategies takes a non-empty list of names such as ['single', 'ddp'], not {names!r:.60}")
    return [get_strategy(name).name for name in names]

