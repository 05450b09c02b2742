"""What one benchmark case runs: a plain, JSON-ready description that crosses process boundaries.

The parent writes a `Job` to a file, every worker process reads it, builds the same model from the same
seed, and runs the named strategy; see `bench/worker.py` and `bench/launch.py`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from partition.profile import write_json

__all__ = ["Job", "job_from_plan", "SINGLE_PROCESS_STRATEGIES", "MULTI_PROCESS_STRATEGIES", "STRATEGIES", "PIPELINES"]

SINGLE_PROCESS_STRATEGIES = ("single", "dataparallel", "modelparallel", "pipeline")
MULTI_PROCESS_STRATEGIES = ("ddp", "pp-gpipe", "pp-1f1b", "pp-interleaved", "pp-zb", "pp-zbv")
STRATEGIES = SINGLE_PROCESS_STRATEGIES + MULTI_PROCESS_STRATEGIES
PIPELINES = ("pipeline", "pp-gpipe", "pp-1f1b", "pp-interleaved", "pp-zb", "pp-zbv")
"""Strategies that cut the batch into micro-batches."""


@dataclass
class Job:
    model: str
    strategy: str
    batch: int
    devices: int
    """Devices the strategy uses: GPUs cuda:0..devices-1 (after CUDA_VISIBLE_DEVICES), or CPU stand-ins."""
    device_type: str = "cuda"
    """"cuda" or "cpu" (CPU processes talk through gloo)."""
    flavour: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    data_dir: str | None = None
    micro_batches: int = 1
    bounds: list[int] | None = None
    """The Plan's stage boundaries [0, ..., n] (p x v of them for interleaved schedules)."""
    stage_inputs: list[list[Any]] | None = None
    """Per stage, [shape, dtype] of one micro-batch's input, from the profile (dimension 0 is rescaled)."""
    steps: int = 5
    """Timed training steps, after `warmup` untimed ones."""
    warmup: int = 2
    seed: int = 0
    """Weights; the batch uses seed + 1."""
    fast_math: bool = True
    """TF32 and cuDNN autotuning, as DESIGN.md's figures were measured."""
    save_params: bool = False
    """Write each process's updated parameters (after the first step) to params-rank<r>.pt, for tests."""
    fail_on_rank: int | None = None
    """Fault injection for the launcher's tests: this rank raises during its first step."""
    control_port: int | None = None
    """Set by `bench.launch.Session`: after warm-up, rank 0 takes each step's go-ahead from the parent's
    TCPStore on this port, so that the parent (and pytest-benchmark in it) times every step itself."""

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of: {', '.join(STRATEGIES)}")
        if self.device_type not in ("cuda", "cpu"):
            raise ValueError(f"device_type is 'cuda' or 'cpu' (got {self.device_type!r})")
        if self.devices < 1:
            raise ValueError(f"need at least one device (got {self.devices})")
        if self.micro_batches < 1 or self.batch % self.micro_batches:
            raise ValueError(f"batch {self.batch} does not split into {self.micro_batches} equal micro-batches")
        if self.strategy == "ddp" and self.batch % self.devices:
            raise ValueError(f"batch {self.batch} does not split evenly over {self.devices} DDP processes")

    @property
    def processes(self) -> int:
        """Worker processes: one per device for multi-process strategies, else one."""
        return self.devices if self.strategy in MULTI_PROCESS_STRATEGIES else 1

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> "Job":
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def job_from_plan(plan, strategy: str, *, device_type: str = "cuda", **settings: Any) -> Job:
    """The Job that runs `strategy` on a Plan's cuts, micro-batches and profiled stage input shapes.

    Non-pipeline strategies keep the Plan's devices and batch but run the whole batch at once."""
    virtual = getattr(plan, "virtual_stages", 1)
    shapes = [[s.input_shape, s.input_dtype] for s in plan.stages]
    return Job(
        model=plan.model, flavour=plan.flavour, overrides=dict(plan.config), strategy=strategy,
        batch=plan.batch, devices=len(plan.stages) // virtual, device_type=device_type,
        micro_batches=plan.micro_batches if strategy in PIPELINES else 1, bounds=list(plan.bounds),
        stage_inputs=shapes if all(shape for shape, _ in shapes) else None, **settings,
    )
