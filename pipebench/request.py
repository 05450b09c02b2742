"""What a plan, or one case of a run, is asked to do: one typed value, checked once.

The command line (bench/cli) and the Python API (pipebench/api.py) both build a `Request`; `make_plan`,
the rankings, advise and the Job take it whole, so no layer re-validates an option or re-spells a
default. Building one checks every field's type and value (a float batch, a micro-batch count given as
text, a NaN link speed: one clear line, UserError, exit status 2 on the command line), and the rules
that need something only a profile knows have their one home here too:

- `check_stage_count`: more stages than layers;
- `split_error`: a batch that must split into equal shares (micro-batches, or replicas);
- `check_recompute`: a schedule or strategy that cannot recompute activations;
- `check_training`: a training that is not a Training (the Request's, RunOptions' and train's);
- `Training.check_device`, asked when a Request is built: a compile mode the first device cannot run;
- `Request.links`: the link that prices a cut, by default what the profile measured.

A field's type and bounds are pipebench/base/text/parse.py's (`count_of`, `number_of`,
`micro_batches_error`), the rules the command line's options follow; what fits a memory cap is the
memory model's (partition/planning/memory.py `within_caps`).

Nothing here imports torch: a saved profile plans anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from numbers import Integral
from typing import Any, Sequence

from pipebench.base.errors import UserError
from pipebench.base.text.parse import LIMITS, count_of, micro_batches_error, number_of, parse_device, speeds_error
from pipebench.base.schedules import DEFAULT_SCHEDULE, get_schedule
from pipebench.base.training import Training

__all__ = ["Request", "plan_devices", "plain", "CheckedProfiles", "BALANCES", "DEFAULT_BATCH", "DEFAULT_REPEATS",
           "check_stage_count", "check_training", "split_error", "check_recompute", "virtual_stages"]

BALANCES = ("time", "params", "uniform")
"""What the cuts balance: profiled time, parameter counts, or layer counts."""

DEFAULT_BATCH = {"cuda": 256, "cpu": 8}
"""The global batch of a model profiled here where none is given, by the first device's kind."""
DEFAULT_REPEATS = {"cuda": 5, "cpu": 3}
"""Timed repeats per layer when profiling where none are given, by the first device's kind."""


@dataclass(frozen=True)
class Request:
    """A plan's (or a run's case's) devices, schedule, micro-batches, caps, speeds, links and Training."""

    devices: tuple[str, ...] = ("cpu", "cpu")
    """The device of each pipeline position ("cuda:0", "cpu", ...); the profile is measured on the first."""
    batch: int | None = None
    """The global batch; None: the profile's (a plan from saved profiles)."""
    schedule: str | None = DEFAULT_SCHEDULE
    """The pipeline schedule (pipebench/base/schedules.py SCHEDULES) the plan is made for; None: the
    default (DEFAULT_SCHEDULE), as None is every other keyword's default."""
    virtual_stages: int | None = None
    """Stages per device; None: the schedule's own (2 for interleaved, zb-interleaved and zbv, else 1)."""
    micro_batches: int | tuple[int, ...] | None = None
    """The micro-batch count; None ("auto"): the count predicted fastest among those profiled. A profile
    may be asked for several counts at once (a run's cases)."""
    min_micro_batches: int = 1
    """The fewest micro-batches the executor accepts (torch's Schedule1F1B wants one per stage)."""
    balance: str = "time"
    """What the cuts balance (BALANCES)."""
    max_memory: float | tuple[float, ...] | None = None
    """Bytes per device the plan must stay within (one figure for all, or one per device); None: no cap."""
    speeds: tuple[float, ...] | None = None
    """Speed factor of each device relative to the profiled one (2.0: twice as fast); None: all equal."""
    link_gbps: float | None = None
    """GB/s that price a cut's transfer; None: what the profile measured between the first two devices
    (its latency too), 0 (transfers free) where it measured nothing."""
    link_latency_ms: float | None = None
    """The fixed cost of one transfer; None: the profile's where the link is the profile's, else 0."""
    training: Training = field(default_factory=Training)
    """How the model trains (pipebench/base/training.py): precision, optimizer, checkpoint mode."""
    repeats: int | None = None
    """Timed repeats per layer when profiling; None: DEFAULT_REPEATS (5 on GPUs, 3 on the CPU)."""
    granularity: int | None = None
    """Module depth of the cut candidates (1: top-level submodules); None: the zoo's layers, or the finest
    depth with at most 64 candidates."""
    cache: bool = True
    """Reuse the sizes measured before (partition/profiling/cache.py) and keep new ones."""
    fresh: bool = False
    """Measure every size again (and replace the cached ones)."""

    def __post_init__(self):
        def set_(name: str, value: Any) -> None:  # frozen: each field normalised once, here
            object.__setattr__(self, name, value)

        devices = self.devices
        if isinstance(devices, str) or not isinstance(devices, Sequence) or not devices:
            raise UserError(f"devices takes a non-empty list of device names (got {devices!r:.60})")
        if len(devices) > LIMITS["stages"][1]:
            raise UserError(f"devices takes up to {int(LIMITS['stages'][1]):,} devices (got {len(devices):,})")
        for device in devices:  # the rule of the devices= keyword and --device: 'tpu:0', 'cuda:-1' are refused
            parse_device(device, "devices")
        set_("devices", tuple(devices))
        if self.batch is not None:
            set_("batch", count_of(self.batch, "batch"))
        if self.schedule is None:
            set_("schedule", DEFAULT_SCHEDULE)
        set_("virtual_stages", virtual_stages(self.schedule, self.virtual_stages))
        set_("micro_batches", _micro_batches(plain(self.micro_batches)))
        set_("min_micro_batches", count_of(self.min_micro_batches, "min_micro_batches"))
        if self.batch is not None:
            self.check_split(self.batch)
        if self.balance not in BALANCES:
            raise UserError(f"unknown balance {self.balance!r}; choose one of: {', '.join(BALANCES)}")
        set_("max_memory", self._per_device("max_memory", plain(self.max_memory), one_figure=True))
        set_("speeds", self._per_device("speeds", plain(self.speeds), one_figure=False))
        if self.speeds is not None:
            check_speeds(self.speeds)
        if self.link_gbps is not None:
            gbps = number_of(self.link_gbps, "link_gbps", low=0.0)
            if 0 < gbps < 1e-3:
                raise UserError(f"link_gbps takes 0 (transfers not priced) or GB/s from 0.001 up (got {gbps!r})")
            set_("link_gbps", gbps)
        if self.link_latency_ms is not None:
            set_("link_latency_ms", number_of(self.link_latency_ms, "link_latency_ms", low=0.0))
        check_training(self.training)
        self.training.check_device(self.devices[0].partition(":")[0])  # cudagraphs on the CPU
        check_recompute(self.schedule, self.training.checkpoint)
        for name in ("repeats", "granularity"):
            if getattr(self, name) is not None:
                set_(name, count_of(getattr(self, name), name))
        for name in ("cache", "fresh"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name} takes True or False (got {getattr(self, name)!r:.40})")

    def _per_device(self, name: str, value: Any, *, one_figure: bool) -> Any:
        """`value` as positive finite numbers, one per device (or one figure for all where `one_figure`)."""
        if value is None:
            return None
        if one_figure and not _is_list(value):
            return number_of(value, name, low=0.0, above=True)
        if not _is_list(value):
            raise UserError(f"{name} takes {'a number or ' if one_figure else ''}one number per device "
                            f"(got {value!r:.40})")
        figures = tuple(number_of(v, name, low=0.0, above=True) for v in value)
        if len(figures) != len(self.devices):
            raise UserError(f"need one {'memory cap' if name == 'max_memory' else 'speed'} per device "
                            f"({len(figures)} != {len(self.devices)})")
        return figures

    # --------------------------------------------------------------------------------------- derived

    @property
    def stages(self) -> int:
        """Pipeline stages: the devices times the stages each holds."""
        return len(self.devices) * self.virtual_stages

    @property
    def on_gpu(self) -> bool:
        return self.devices[0].startswith("cuda")

    @property
    def chosen(self) -> int | None:
        """The one micro-batch count a plan must use (None: its choice); a list of counts is for profiling."""
        if isinstance(self.micro_batches, tuple):
            raise UserError(f"a plan takes one micro-batch count or auto (got {list(self.micro_batches)})")
        return self.micro_batches

    @classmethod
    def from_keywords(cls, request: "Request | None", asked: dict[str, Any], *, stages: int | None = None) -> "Request":
        """`request`, or the Request that the keywords `asked` say: the devices as `devices`, `gpus` (one stage
        per GPU id; `device` beside them refused) or `stages` (default: the one given here, else 2) on `device`
        (default cpu); the Training whole or as its parts (precision, optimizer, checkpoint: its defaults for
        those not given); every other keyword a field of Request (TypeError for any other name). Both a request
        and keywords: refused."""
        from pipebench.hardware.devices import resolve_device

        if request is not None:
            if asked:
                raise UserError(f"give request or {', '.join(sorted(asked))}, not both")
            if not isinstance(request, cls):
                raise UserError(f"request takes a pipebench Request (got {type(request).__name__})")
            return request
        asked = dict(asked)
        where = {name: asked.pop(name, None) for name in ("devices", "gpus", "stages", "device")}
        parts = {name: asked.pop(name, None) for name in ("precision", "optimizer", "checkpoint", "compile")}
        training = asked.pop("training", None)
        unknown = sorted(set(asked) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"unknown argument {unknown[0]!r}; a request takes devices, gpus, stages, device, precision, "
                            f"optimizer, checkpoint, compile and {', '.join(f.name for f in fields(cls) if f.name != 'devices')}")
        check_device_beside_gpus(where["gpus"], where["device"])
        devices, device = where["devices"], where["device"] if where["device"] is not None else "cpu"
        if devices is not None:
            if where["gpus"] is not None or where["stages"] is not None:
                raise UserError("give devices, gpus or stages, not more than one")
            if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence) or not devices:
                raise UserError(f"devices takes a non-empty list of device names (got {devices!r:.40})")
            devices = [resolve_device(d, check=False) for d in devices]
            if where["device"] is not None and resolve_device(device, check=False) != devices[0]:
                raise UserError(f"device {device!r} is not the first of devices {devices!r}")
        else:
            count = where["stages"] if where["stages"] is not None or where["gpus"] is not None else stages
            devices = plan_devices(stages=count, device=device, gpus=where["gpus"])
        given = {name: value for name, value in parts.items() if value is not None}
        if training is not None and given:
            raise UserError(f"give training or {', '.join(given)}, not both")
        return cls(devices=tuple(devices), training=Training(**given) if training is None else training, **asked)

    def measured_here(self, gpu_infos: Sequence[Any] | None = None) -> "Request":
        """This request for a model profiled now, its defaults filled as `pipebench plan` and
        `pipebench.plan` both fill them: the batch, else DEFAULT_BATCH for the first device (256 on a GPU, 8
        on the CPU); the memory caps, else what NVML says is free on the GPUs named by id (`gpu_infos`,
        hardware/gpus.py GpuInfo: free_memory_caps, less its safety margin; None: no cap). A plan from
        saved profiles takes their batch and no cap of what is free now."""
        batch = DEFAULT_BATCH["cuda" if self.on_gpu else "cpu"] if self.batch is None else self.batch
        caps = self.max_memory
        if caps is None and gpu_infos:
            from pipebench.hardware.gpus import free_memory_caps

            caps = free_memory_caps(gpu_infos)
        return self.with_(batch=batch, max_memory=caps)

    def with_(self, **changes: Any) -> "Request":
        """A copy with some fields changed (checked again)."""
        return replace(self, **changes)

    def links(self, profile: Any) -> tuple[float, float]:
        """(GB/s, latency ms) of the link that prices a cut: `link_gbps` where given (its latency
        `link_latency_ms`, else 0), else what `profile` measured between the first two devices (0 where it
        measured nothing), its latency the profile's unless `link_latency_ms` says otherwise. The one home
        of the link default."""
        if self.link_gbps is not None:
            return self.link_gbps, self.link_latency_ms or 0.0
        latency = self.link_latency_ms if self.link_latency_ms is not None else profile.link_latency_ms
        return profile.link_gbps or 0.0, latency or 0.0

    def check_profiles(self, profiles: Sequence[Any], *, training_given: Sequence[str] = ()) -> "CheckedProfiles":
        """What the profiles must agree with before a plan is made from them: there is one, the batch is
        theirs, the stages do not outnumber their layers, the micro-batch count splits their batch, and
        each part of the Training the caller gave (`training_given`: "precision", "compile") is the one
        they were measured in (a part not given is the profiles' own: a saved profile keeps its precision).
        Returns them as CheckedProfiles, which this request takes again without checking them again (the
        plan the API checks, make_plan then makes)."""
        from pipebench.partition.profiling.profile_record import check_profile_list

        if (isinstance(profiles, CheckedProfiles) and profiles.request == self
                and set(training_given) <= profiles.training_given):
            return profiles
        check_profile_list(profiles)
        first = profiles[0]
        if self.batch is not None and self.batch != first.batch:
            raise UserError(f"batch {self.batch} does not match the profile's batch {first.batch}")
        check_stage_count(self.stages, len(first.layers))
        self.check_split(first.batch)
        for name in training_given:
            given, measured = getattr(self.training, name), getattr(first.training, name)
            if given != measured:
                said = {None: "eager"}
                raise UserError(f"{name} {said.get(given, given)} does not match the profiles' "
                                f"{said.get(measured, measured)}; profile again with it")
        return CheckedProfiles(profiles, self, frozenset(training_given))

    def check_split(self, batch: int) -> None:
        """Refuse a micro-batch count that does not split `batch` into equal micro-batches."""
        counts = self.micro_batches if isinstance(self.micro_batches, tuple) else (self.micro_batches,)
        for count in counts:
            if (why := split_error(batch, count)) is not None:
                raise UserError(why)


class CheckedProfiles(tuple):
    """Profiles that Request.check_profiles passed, with the request they were checked for and the parts
    of its Training checked against them: a tuple of the profiles, so that a plan reads them as any."""

    request: Request
    training_given: frozenset

    def __new__(cls, profiles: Sequence[Any], request: Request, training_given: frozenset = frozenset()):
        checked = super().__new__(cls, profiles)
        checked.request, checked.training_given = request, training_given
        return checked

    def __reduce__(self):  # a tuple's own pickling would call __new__ with the profiles alone
        return CheckedProfiles, (tuple(self), self.request, self.training_given)


# ----------------------------------------------------------------------------------------------- rules

def split_error(batch: int, parts: int | None, replicas: str | None = None) -> str | None:
    """Why `batch` does not split into `parts` equal shares (None where it does, or parts is None):
    micro-batches, or with `replicas` (the strategy's name) one share per replica."""
    if parts is None or (parts >= 1 and batch % parts == 0):
        return None
    if replicas is not None:
        return f"batch {batch} does not split evenly over {parts} {replicas} replicas"
    return f"batch {batch} does not split into {parts} equal micro-batches"


def check_speeds(speeds: Sequence[Any]) -> None:
    """Refuse speed factors that are not positive finite numbers within `--speeds`' range (speeds_error):
    the one rule of speeds, for a Request and a run's Machine alike."""
    figures = [number_of(v, "speeds", low=0.0, above=True) for v in speeds]
    if (why := speeds_error(figures)) is not None:
        raise UserError(f"speeds {why} (got {figures})")


def check_device_beside_gpus(gpus: Any, device: str | None) -> None:
    """Refuse a device named beside GPU ids (`--device` with `--gpus`, `device=` with `gpus=`): the GPUs
    named are the devices. The one home of this rule: from_keywords asks it, and plan and advise ask it
    before `--gpus auto:N` says which GPUs it took."""
    if gpus is not None and device is not None:
        raise UserError(f"--device {device} with --gpus: the GPUs named are the devices; leave out --device")


def check_training(training: Any) -> None:
    """Refuse a `training` that is not a Training (UserError): the one home of that rule, which the Request
    (and so pipebench.train, through its machine's Request) and RunOptions ask."""
    if not isinstance(training, Training):
        raise UserError(f"training takes a Training (pipebench.base.training), not {type(training).__name__} "
                        f"{training!r:.40}")


def check_stage_count(stages: int, layers: int) -> None:
    """Refuse more pipeline stages than layers to cut (UserError): the one home of that rule."""
    if stages < 1:
        raise UserError(f"need at least one stage (got {stages})")
    if stages > layers:
        raise UserError(f"more stages than layers ({stages} > {layers})")


def check_recompute(schedule: str | None, checkpoint: str, strategies: Sequence[Any] = ()) -> None:
    """Refuse checkpoint always where nothing can recompute (UserError): a zero-bubble `schedule` splits the
    backward in two, and recomputing needs it whole; `strategies` (bench/strategies' entries) that cannot
    (their can_checkpoint). auto recomputes where it can and runs the others without."""
    if checkpoint != "always":
        return
    if cannot := [s.name for s in strategies if not s.can_checkpoint]:
        raise UserError(f"--checkpoint always: {', '.join(cannot)} cannot recompute activations; leave "
                        f"{'it' if len(cannot) == 1 else 'them'} out or use --checkpoint never")
    if schedule is not None and get_schedule(schedule).split_backward:
        raise UserError(f"activation checkpointing needs a backward in one piece; {schedule} splits it "
                        "(choose another schedule or --checkpoint never)")


# ------------------------------------------------------------------------------- a field's value

def plain(value: Any) -> Any:
    """`value` in Python's own types where it has tolist() (a numpy array or scalar, a tensor), and each item
    of a list or tuple so: an array is then taken wherever a list of numbers is, and what is kept (and later
    written as JSON) holds no numpy numbers. A 2-D array becomes a list of lists, which the checks refuse as
    any other."""
    if type(value) in (list, tuple):
        return type(value)(plain(item) for item in value)
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) and not isinstance(value, (str, bytes)) else value


def _is_list(value: Any) -> bool:
    """Whether `value` is taken as a list: a sequence (a list, a tuple, a range) but text."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _micro_batches(value: Any) -> int | tuple[int, ...] | None:
    """`micro_batches` as None (auto), one count, or the counts of a list, sorted, each once."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return None
    if _is_list(value):
        if not value:
            raise UserError("micro_batches names no count")
        return tuple(sorted({_micro_batch_count(v) for v in value}))
    if isinstance(value, Integral) and not isinstance(value, bool):
        return _micro_batch_count(value)
    raise UserError(f"micro_batches takes a positive integer, a list of them or 'auto' (got {value!r:.40})")


def _micro_batch_count(value: Any) -> int:
    """One micro-batch count, by the one rule (micro_batches_error)."""
    if (why := micro_batches_error(value)) is not None:
        raise UserError(why)
    return int(value)


def virtual_stages(schedule: str, asked: Any) -> int:
    """Stages per device for `schedule`: 1 for gpipe and 1f1b, 2 by default for the multi-stage schedules
    (exactly 2 for zbv); `asked` a count, or None for the schedule's own."""
    kind = get_schedule(schedule)
    if asked is not None:
        asked = count_of(asked, "virtual_stages")
    if kind.stages_per_device == 1:
        if asked not in (None, 1):
            raise UserError(f"{asked} virtual stages: {schedule} runs one stage per device")
        return 1
    if asked is None:
        return kind.stages_per_device
    if kind.fixed_stages_per_device and asked != kind.stages_per_device:
        raise UserError(f"{asked} virtual stages: {schedule} runs exactly {kind.stages_per_device} stages per device")
    return asked


def plan_devices(*, stages: int | None = None, device: str = "cpu", gpus: Sequence[int] | None = None) -> list[str]:
    """The device of each pipeline position: one per GPU in `gpus`, else `stages` (default 2) on `device`
    (cpu, cuda for the current GPU, or cuda:N)."""
    from pipebench.hardware.devices import resolve_device

    if gpus is not None and stages is not None:
        raise UserError("give gpus or stages, not both")
    if gpus is not None:
        gpus = plain(gpus)
        if not _is_list(gpus):
            raise UserError(f"gpus takes a list of GPU ids such as [0, 1] (got {gpus!r:.40})")
        if not gpus:
            raise UserError("gpus names no GPU")
        return [f"cuda:{count_of(i, 'a GPU id', low=0)}" for i in gpus]
    stages = 2 if stages is None else count_of(stages, "stages")
    return [resolve_device(device, check=False)] * stages
