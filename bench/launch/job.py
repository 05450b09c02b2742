"""What one benchmark case runs: a plain, JSON-ready description that crosses process boundaries.

The parent writes a `Job` to a file; every worker process reads it, builds the same model from the same
seed, and runs the named strategy on the Job's Plan (see `bench/launch/worker.py` and `bench/launch/sessions.py`). The
Plan travels whole, in its own versioned format: the worker reads cuts, placement and micro-batch count
from it and decides none of them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pipebench.bench.strategies import get_strategy
from pipebench.base.errors import UserError
from pipebench.base.fileio.files import read_json, record, write_json
from pipebench.partition.planning.plan import Plan
from pipebench.bench.strategies.hybrid.copies import copies_error
from pipebench.request import check_recompute, split_error
from pipebench.base.training import Training, nest_training

__all__ = ["Job"]


@dataclass
class Job:
    model: str
    strategy: str
    """A name in the strategy registry (bench/strategies)."""
    batch: int
    devices: int
    """Devices the strategy uses: GPUs cuda:0..devices-1 (after CUDA_VISIBLE_DEVICES), or CPU stand-ins."""
    device_type: str = "cuda"
    """"cuda" or "cpu" (CPU processes talk through gloo)."""
    flavour: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    plan: dict[str, Any] | None = None
    """The Plan the strategy runs (`Plan.to_dict()`); None for strategies that need none (replicas)."""
    steps: int = 5
    """Timed training steps, after `warmup` untimed ones."""
    warmup: int = 2
    seed: int = 0
    """Weights; the batch uses seed + 1."""
    training: Training = field(default_factory=Training)
    """How the case trains (pipebench/base/training.py): precision, optimizer, checkpoint mode. Which stages
    recompute comes from the Plan (StagePlan.recompute); replica strategies recompute every layer with
    checkpoint always."""
    gpu_memory: int | None = None
    """Bytes each worker may allocate on each of its GPUs (`--gpu-memory`), enforced with
    torch.cuda.set_per_process_memory_fraction: a smaller card reproduced on a bigger one. None: no cap."""
    save_params: bool = False
    """Write each process's updated parameters (after the first step) to params-rank<r>.pt, for tests."""
    fail_on_rank: int | None = None
    """Fault injection for the launcher's tests: this rank raises during its first step."""
    cpu_threads: int = 1
    """Threads of each CPU worker process: one device's share of the cores (hardware/cpu.py), as the profile
    that predicts it was timed with."""
    control_port: int | None = None
    """Set by `bench.launch.sessions.Session`: after warm-up, rank 0 takes each step's go-ahead from the parent's
    TCPStore on this port, so that the parent (and pytest-benchmark in it) times every step itself."""

    def __post_init__(self):
        strategy = get_strategy(self.strategy)
        # A Job read from its file (a worker's, torchrun's) or made by hand has no Request to have checked it
        self.training.check_device(self.device_type)  # cudagraphs on the CPU: refused
        check_recompute(None, self.training.checkpoint, [strategy])  # auto: it runs without
        if self.gpu_memory is not None and self.gpu_memory <= 0:
            raise UserError(f"gpu_memory must be a positive byte count (got {self.gpu_memory})")
        if self.device_type not in ("cuda", "cpu"):
            raise UserError(f"device_type is 'cuda' or 'cpu' (got {self.device_type!r})")
        if self.devices < 1:
            raise UserError(f"need at least one device (got {self.devices})")
        if strategy.needs_plan and self.plan is None:
            raise UserError(f"{self.strategy} runs a Plan; the job has none")
        plan = self.the_plan
        if plan is not None and strategy.replicated:  # copies of one replica's pipeline
            if (why := copies_error(self.devices, plan.device_count)) is not None:
                raise UserError(f"{self.strategy}: {why}")
            if plan.batch * self.replicas != self.batch:
                raise UserError(f"the plan is for batch {plan.batch} per replica; {self.replicas} replicas of it "
                                f"train {plan.batch * self.replicas}, the job {self.batch}")
        elif plan is not None:
            if plan.batch != self.batch:
                raise UserError(f"the plan is for batch {plan.batch}, the job for {self.batch}")
            if plan.device_count != strategy.devices_used(self.devices):
                raise UserError(f"the plan is for {plan.device_count} device(s); {self.strategy} runs on "
                                f"{self.devices}")
        if strategy.splits_batch and (why := split_error(self.batch, self.replicas, self.strategy)) is not None:
            raise UserError(why)

    @cached_property
    def the_plan(self) -> Plan | None:
        """The Plan, read from its dict once (the dict is what the Job's file holds)."""
        return None if self.plan is None else Plan.from_dict(self.plan, "job.plan")

    @property
    def micro_batches(self) -> int:
        return self.plan["micro_batches"] if self.plan is not None and get_strategy(self.strategy).micro_batched else 1

    @property
    def replicas(self) -> int:
        """Copies of the model that each train on their share of the batch: one per process (DDP), one per
        copy of the Plan's devices (a replicated strategy), else 1."""
        strategy = get_strategy(self.strategy)
        if strategy.replicated and self.plan is None:
            return 1
        return strategy.replicas(self.devices, self.the_plan.device_count if strategy.replicated else None)

    @property
    def processes(self) -> int:
        """Worker processes: one per device for multi-process strategies, else one."""
        return get_strategy(self.strategy).processes(self.devices)

    @classmethod
    def from_plan(cls, plan: Plan, strategy: str, *, device_type: str = "cuda", replicas: int = 1,
                  **settings: Any) -> "Job":
        """The Job that runs `strategy` on `plan` (its model, batch and devices), e.g. to start on several
        machines with torchrun; `settings`: steps, warmup, seed and the other fields. replicas: copies of
        the plan that a replicated strategy (hybrid) runs, each on its own devices and share of the batch."""
        return cls(model=plan.model, flavour=plan.flavour or None, overrides=dict(plan.config), strategy=strategy,
                   batch=plan.batch * replicas, devices=plan.device_count * replicas, device_type=device_type,
                   plan=plan.to_dict(), **settings)

    @classmethod
    def by_hand(cls, model: str, strategy: str, *, batch: int, devices: int, flavour: str | None = None,
                overrides: dict[str, Any] | None = None, micro_batches: int = 1, stages_per_device: int | None = None,
                bounds: list[int] | None = None, device_type: str = "cuda", stages_per_replica: int | None = None,
                **settings: Any) -> "Job":
        """A Job whose Plan is cut by hand (`bounds`, default equal layer counts) without profiling: to try
        a split of your own, and how the tests run many splits. `stages_per_device` defaults to the
        strategy's; so does `stages_per_replica` (a replicated strategy's Plan covers that many of the
        `devices`, for batch / replicas)."""
        from pipebench.partition.planning.plan import hand_plan

        kind = get_strategy(strategy)
        overrides = dict(overrides or {})
        plan = None
        if kind.needs_plan:
            p = kind.devices_used(devices)
            replica_batch = batch
            if kind.replicated:
                p = stages_per_replica or kind.stages_per_replica
                if (why := copies_error(devices, p)) is not None:
                    raise UserError(f"{strategy}: {why}")
                replicas = kind.replicas(devices, p)
                if (why := split_error(batch, replicas, strategy)) is not None:
                    raise UserError(why)
                replica_batch = batch // replicas
            plan = hand_plan(model, cut_candidates(model, flavour, overrides), batch=replica_batch,
                             devices=[f"{device_type}:{i}" for i in range(p)],
                             flavour=flavour or "", schedule=kind.schedule.name,
                             micro_batches=micro_batches if kind.micro_batched else 1,
                             virtual_stages=stages_per_device or kind.stages_per_device, bounds=bounds,
                             recompute=settings.get("training", Training()).checkpoint == "always").to_dict()
        return cls(model=model, flavour=flavour, overrides=overrides, strategy=strategy, batch=batch, devices=devices,
                   device_type=device_type, plan=plan, **settings)

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> "Job":
        return record(cls, nest_training(read_json(path, kind="job")), str(path))


def cut_candidates(model: str, flavour: str | None, settings: dict[str, Any]) -> list[str]:
    """Where a model may be cut: the zoo's layers (read on the meta device, no memory), or for a model
    of your own the candidates its captured graph offers (partition/capture/graph.py)."""
    from pipebench import models

    if not models.is_user_model(model):
        return models.get_model(model, flavour, device="meta", **settings).layer_names
    from pipebench.bench.strategies.micro_batches import as_args
    from pipebench.partition.capture.graph import capture

    built = models.get_model(model, flavour, **settings)
    inputs, _ = built.make_batch(2, seed=0)
    return capture(built.module, as_args(inputs), granularity=built.granularity).candidates
