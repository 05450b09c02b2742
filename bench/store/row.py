"""The Row: one benchmark case as `pipebench run` records it (what ran, how it went, what the Plan
predicted, where it ran), checked when it is made, whether by the suite or read from a file; the
fields that name a case (`case_key`); its timelines. bench/store/results.py stores rows."""
from __future__ import annotations

import math
import numbers
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Iterable

from pipebench.base.errors import UserError
from pipebench.base.fileio.files import check
from pipebench.base.training import CHECKPOINT_MODES, COMPILE_MODES, DEFAULT_PRECISION, OPTIMIZERS, PRECISIONS, Training

__all__ = ["STATUSES", "DONE_STATUSES", "FIELDS", "CSV_COLUMNS", "LATER_FIELDS", "CASE_FIELDS", "ResultsError", "Row", "case_key",
           "settings_text", "timeline_from_ops"]

STATUSES = ("ok", "oom", "failed", "timeout", "unavailable", "predicted-oom", "diverged")
"""ok; oom: ran out of memory; failed: any other error; timeout: stopped at `run --timeout`; unavailable:
cannot run here; diverged: ran to the end and was timed, but its loss became NaN or infinite (the reason
says at which step; first_loss is empty where the first was not a number); predicted-oom: not run,
because its plan or cost model predicts it will not fit in the memory cap (the row carries that prediction
in predicted_memory_bytes and max_memory; `run --try-anyway` runs such cases to test the prediction)."""
DONE_STATUSES = ("ok", "oom", "unavailable", "predicted-oom", "diverged")
"""Statuses `--resume` does not run again: an out-of-memory, unavailable, diverged or predicted
out-of-memory case would end the same way (`--try-anyway` runs the predicted ones again)."""
MAX_FIGURE = 1e12
"""The largest samples/s, milliseconds or seconds a row may hold: a step of 30 years, a trillion samples
a second. Beyond it a figure is a corrupt file, and sums and axis limits overflow to infinity."""
TIMELINE_KEYS = {"stage": int, "device": int | str, "kind": str, "micro": int, "start_ms": float, "end_ms": float}
"""One operation of a timeline: kind is "F" (forward), "B" (backward), or "I" / "W" (a zero-bubble
schedule's input-gradient and weight-gradient halves of a backward); times from the step's start."""


class ResultsError(UserError):
    """A results file that is unreadable or malformed; the one-line message names the file and the field."""


@dataclass(kw_only=True)
class Row:
    """One benchmark case: what ran, how it went, what the Plan predicted, and where it ran."""

    model: str
    """Registry name, e.g. "gpt"."""
    flavour: str
    """Size flavour, e.g. "800m" or "tiny"."""
    strategy: str
    """A name in the strategy registry (bench/strategies), e.g. "pp-1f1b"."""
    gpus: str
    """The GPU ids used, e.g. "0,1", or "cpu"."""
    world_size: int
    """Processes the strategy ran in (1 for single-process strategies)."""
    batch: int
    """Global batch: samples per optimizer step."""
    micro_batches: int
    """Micro-batches the batch is cut into (1 when not a pipeline)."""
    schedule: str = ""
    """Pipeline schedule, e.g. "gpipe" or "1f1b"; "" when not a pipeline."""
    virtual_stages: int = 1
    """Stages per device (more than 1 for interleaved schedules)."""
    status: str
    """"ok", "oom" (out of memory), "failed" (any other error), "timeout" (stopped at its time limit),
    "unavailable" (cannot run here), "diverged" (timed, but the loss became NaN or infinite) or
    "predicted-oom" (predicted not to fit in the memory cap, so not run); see STATUSES."""
    reason: str = ""
    """Why the case is not ok, one line; "" when ok."""
    samples_per_s: float | None = None
    """Measured throughput: batch / mean step time; None unless ok."""
    step_ms: float | None = None
    """Mean of the timed steps, every device synchronised."""
    step_ms_std: float | None = None
    """Standard deviation of the timed steps (None with a single timed step)."""
    step_ms_best: float | None = None
    """The fastest timed step: the step without the machine's other load, which is what a prediction is
    judged against (bench/predict/fidelity.py). On a CPU stand-in the host's load slows every process at once, in
    bursts (up to 1.9x on a shared 2-vCPU VM), and `run --min-seconds` times steps long enough to see past them; on a
    GPU it is within a few percent of the mean. None in files written before the field."""
    round_ms: list[float] = field(default_factory=list)
    """The mean step of each round the case was measured in, in the order they ran (bench/cases/rounds.py
    run_rounds: cases interleaved A B C, C B A, ...): their spread is the case's noise, which the report
    judges "faster" by; empty for a case measured in one round, or in files written before the field."""
    same_work_as: str = ""
    """The strategy this case does the same computation as on its machine ("single" for a one-process
    strategy on one device: every one on the CPU), so that it can only measure a tie with it, or slower;
    "" otherwise (bench/cases/case_rows.py same_work_as)."""
    peak_memory_bytes: list[int] = field(default_factory=list)
    """Peak bytes allocated per device during the timed steps (0 for a CPU)."""
    first_loss: float | None = None
    """Loss of the first step: equal across strategies when they compute the same thing."""
    predicted_step_ms: float | None = None
    """The Plan's predicted step time; None for strategies without a Plan."""
    predicted_step_spread: float | None = None
    """The prediction's interval, predicted_step_ms x (1 ± this), from its profile's noise (bench/predict/ranking.py
    Prediction.step_spread); None where no prediction was made or the file predates the field."""
    predicted_own_spread: float | None = None
    """The part of the interval that is the prediction's own, without the machine's drift (bench/predict/ranking.py
    Prediction.own_spread): what advise judges ties by; None where not made or the file predates it."""
    predicted_memory_bytes: list[int] = field(default_factory=list)
    """The Plan's predicted bytes per device (stages of one device summed)."""
    bubble_fraction: float | None = None
    """The Plan's predicted idle share of device time."""
    bounds: list[int] = field(default_factory=list)
    """Stage cuts [0, ..., layers] from the Plan; empty when the model is not split."""
    plan_id: str = ""
    """`Plan.plan_id` of the Plan the case ran (saved as <results stem>-plans/<plan_id>.plan.json); "" without one."""
    speeds: str = ""
    """Speed factor per GPU the Plan was cut for (`--speeds`), e.g. "1;0.45"; "" when all equal."""
    max_memory: str = ""
    """Memory cap per device in GiB the Plan was cut under (`--max-memory`, or on GPUs what was free at the
    start less a margin), 3 significant figures, e.g. "20;20"; "" without a cap or a Plan."""
    settings: str = ""
    """The other settings that change what runs, as `settings_text` writes them: the model's `--set`
    overrides, e.g. "depth=4;width=64"; "" for none."""
    precision: str = DEFAULT_PRECISION
    """How the case trained (pipebench/base/training.py): "fp32", "tf32" or "bf16". Files written before the
    field load as "tf32", as every earlier run was."""
    optimizer: str = Training.optimizer
    """"sgd" or "adamw"; earlier files load as "sgd"."""
    checkpoint: str = Training.checkpoint
    """Activation recomputation: "never", "auto" or "always"; earlier files load as "never"."""
    compile: str | None = None
    """The torch.compile mode the case ran in ("default", "max-autotune", "cudagraphs"); None: eager (and
    every earlier file)."""
    compile_s: float | None = None
    """Seconds the warm-up steps took beyond as many timed steps: compiling (and cudagraphs' recording),
    kept out of step_ms; None when eager or not run."""
    graph_breaks: int | None = None
    """Graph breaks torch.compile took in the process that took the most (torch._dynamo's counters): a
    break is no failure, the code between runs eagerly; None when eager or not run."""
    device_name: str = ""
    """E.g. "NVIDIA H200", or "cpu"."""
    torch_version: str = ""
    host: str = ""
    started_at: str = ""
    """ISO 8601 time the case started; the later of two rows for one case is the one reported."""
    duration_s: float = 0.0
    """Wall time of the whole case: building, warm-up and timed steps."""
    timeline: list[dict] = field(default_factory=list)
    """One measured step: dicts with the keys of TIMELINE_KEYS; may be empty."""
    predicted_timeline: list[dict] = field(default_factory=list)
    """The Plan's simulated step, same shape; may be empty."""

    def __post_init__(self):
        # Normalise numpy and other numeric types to plain Python ones, so the row is JSON-ready; NaN
        # ("not measured", as pandas and statistics write it) becomes None.
        hints = typing.get_type_hints(Row)
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, numbers.Real) and math.isnan(value) and f.type.endswith("| None"):
                value = None
            value = check(hints[f.name], value, f"Row.{f.name}", error=ResultsError)
            if f.name in ("timeline", "predicted_timeline"):
                value = [_timeline_entry(f"Row.{f.name}[{i}]", op) for i, op in enumerate(value)]
            setattr(self, f.name, value)
        if self.status not in STATUSES:
            raise ValueError(f"Row.status: {self.status!r} is not one of: {', '.join(STATUSES)}")
        for name, allowed in (("precision", PRECISIONS), ("optimizer", OPTIMIZERS), ("checkpoint", CHECKPOINT_MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"Row.{name}: {getattr(self, name)!r} is not one of: {', '.join(allowed)}")
        if self.compile is not None and self.compile not in COMPILE_MODES:
            raise ValueError(f"Row.compile: {self.compile!r} is not one of: {', '.join(COMPILE_MODES)}")
        if self.graph_breaks is not None and self.graph_breaks < 0:
            raise ResultsError(f"Row.graph_breaks: must not be negative (got {self.graph_breaks})")
        for name in ("world_size", "batch", "micro_batches", "virtual_stages"):
            if getattr(self, name) < 1:
                raise ValueError(f"Row.{name}: must be at least 1 (got {getattr(self, name)})")
        for name in ("samples_per_s", "step_ms", "step_ms_std", "step_ms_best", "predicted_step_ms",
                     "predicted_step_spread", "predicted_own_spread", "duration_s", "bubble_fraction", "compile_s"):
            value = getattr(self, name)
            if value is not None and value < 0:  # measurements: a negative one is a corrupt file
                raise ResultsError(f"Row.{name}: must not be negative (got {value})")
            if value is not None and value > MAX_FIGURE:  # so is 1e308, which no plot can scale to
                raise ResultsError(f"Row.{name}: {value:g} is not a measurement (at most {MAX_FIGURE:g})")
        if any(b < 0 for b in [*self.peak_memory_bytes, *self.predicted_memory_bytes]):
            raise ResultsError("Row: memory figures must not be negative")
        if any(not 0 <= ms <= MAX_FIGURE for ms in self.round_ms):
            raise ResultsError(f"Row.round_ms: every round's mean step must be a measurement (got {self.round_ms})")
        if self.status == "ok" and (self.samples_per_s is None or self.step_ms is None):
            raise ValueError(f"Row: status 'ok' needs samples_per_s and step_ms "
                             f"(got {self.samples_per_s!r}, {self.step_ms!r})")
        for name in ("samples_per_s", "step_ms"):  # a step that took no time: every ratio of it is inf
            if self.status == "ok" and getattr(self, name) == 0:
                raise ResultsError(f"Row.{name}: an ok row measures more than 0 (got {getattr(self, name)!r})")
        if self.status != "ok" and not self.reason.strip():
            raise ValueError(f"Row.reason: say why the case is {self.status!r}")


FIELDS = tuple(f.name for f in fields(Row))
CSV_COLUMNS = tuple(name for name in FIELDS if name not in ("timeline", "predicted_timeline"))
"""The CSV header, in this order."""
LATER_FIELDS = ("speeds", "plan_id", "max_memory", "settings", "precision", "optimizer", "checkpoint",
                "predicted_step_spread", "step_ms_best", "predicted_own_spread", "compile", "compile_s", "graph_breaks",
                "round_ms", "same_work_as")
"""Fields added after the first files were written: a file without them still loads, with the default."""
CASE_FIELDS = ("model", "flavour", "strategy", "gpus", "batch", "micro_batches", "schedule", "virtual_stages",
               "speeds", "max_memory", "settings", "precision", "optimizer", "checkpoint", "compile")
"""Every field that changes what runs. A new setting goes into `settings` (one entry where the suite
makes the row), or into a field of its own listed here."""


def case_key(row: Row) -> tuple:
    """What identifies a benchmark case, for `--resume` and the report: the CASE_FIELDS values. The same
    case with other `--set` values, another memory cap, other speeds, precision, optimizer, checkpoint
    or compile mode is another case."""
    return tuple(getattr(row, name) for name in CASE_FIELDS)


def settings_text(settings: dict[str, Any]) -> str:
    """{"width": 64, "depth": 4} -> "depth=4;width=64": sorted, so the same settings always key alike;
    list values joined with ","."""
    def text(value):
        return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return ";".join(f"{key}={text(settings[key])}" for key in sorted(settings))


def timeline_from_ops(ops: Iterable[Any]) -> list[dict]:
    """Timeline dicts from `partition.planning.simulator.Op`s (times in ms); an Op without a device (None, or an
    older Op without the field) runs on the device numbered like its stage."""
    return [{"stage": op.stage, "device": op.stage if getattr(op, "device", None) is None else op.device,
             "kind": op.kind, "micro": op.micro, "start_ms": float(op.start), "end_ms": float(op.end)} for op in ops]


def _timeline_entry(where: str, op: Any) -> dict:
    if not isinstance(op, dict):
        raise ResultsError(f"{where}: expected an object, got {op!r}")
    entry = dict(op)
    for key, kind in TIMELINE_KEYS.items():
        if key not in op:
            raise ResultsError(f"{where}: missing key {key!r}")
        entry[key] = check(kind, op[key], f"{where}.{key}", error=ResultsError)
    for key in ("start_ms", "end_ms"):
        if abs(entry[key]) > MAX_FIGURE:
            raise ResultsError(f"{where}.{key}: {entry[key]:g} ms is not a time in a step (at most {MAX_FIGURE:g})")
    return entry
