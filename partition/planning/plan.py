"""The Plan: where to cut, on which devices, with how many micro-batches, and what that should give.

A Plan is the contract between the partitioner and the executors: strategies never re-decide where to
cut, and reports compare its predictions with what a run measured. `plan_for` builds the plan of one
profiled micro-batch count with the exact solver and the schedule simulator (partition/planning/plan_choice.py's
`make_plan` chooses among the counts), in four steps: the problem (`problem_of`), the cut (`solved`) and the
step (`simulated`), which partition/planning/plan_search.py holds, and the record (`_record`) here; it imports no
torch, so a saved profile plans anywhere. What a cut costs and the walk among cuts on the simulated step
are partition/planning/cuts.py; what a stage holds, partition/planning/memory.py.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from pipebench.base.fileio.files import read_json, record, writable_file, write_json
from pipebench.partition.planning import schedule_order as sched
from pipebench.partition.planning import simulator as sim
from pipebench.partition.planning.cuts import transfer_ms
from pipebench.partition.planning.plan_search import Problem, Simulated, problem_of, simulated, solved, uniform_bounds
from pipebench.partition.profiling.profile_record import Profile, step_spread
from pipebench.base.errors import UserError
from pipebench.request import BALANCES, Request, split_error
from pipebench.base.schedules import IN_TURN, get_schedule
from pipebench.base.step_stats import samples_per_s
from pipebench.base.training import OPTIMIZER_STATES, Training, flat_training, nest_training

__all__ = ["BALANCES", "StagePlan", "Plan", "PlanError", "hand_plan", "uniform_bounds", "OPTIMIZER_STATES",
           "plan_for", "plan_with_bounds", "shared_cores"]

FORMAT = "pipebench-plan"
VERSION = 1

class PlanError(UserError):
    """A plan file that is missing, unreadable or malformed; the message names the field."""


MAX_PLAN_MS = 1e12
"""The longest time a plan may hold (30 years): the results row its run writes refuses more (bench/store/
row.py MAX_FIGURE), and a sum of such times overflows. An edited plan's 1e300 is no prediction."""


def _figures(where: str, record: Any, names: Sequence[str], *, positive: Sequence[str] = (), at_most: float = MAX_PLAN_MS) -> None:
    """Each of `names` (None skipped) a number from 0 to `at_most`, and those of `positive` above 0, else
    PlanError naming the field: what a profile file refuses (a negative time, 1e300 ms), a plan file
    refuses too, rather than pricing or exporting it (a step of -5 ms, a calibration of 0)."""
    for name in names:
        value = getattr(record, name)
        if value is None:
            continue
        if not 0 <= value <= at_most:  # NaN fails too
            bound = "must be >= 0" if at_most == float("inf") else f"must be from 0 to {at_most:g}"
            raise PlanError(f"{where}: {name} {bound}, got {value!r}")
        if name in positive and value == 0:
            raise PlanError(f"{where}: {name} must be above 0, got {value!r}")


@dataclass
class StagePlan:
    index: int
    device: str
    first_layer: int
    end_layer: int
    """Layers [first_layer, end_layer) of the model."""
    layers: list[str]
    params: int
    forward_ms: float
    """One micro-batch, at the stage's speed."""
    backward_ms: float
    activation_out_bytes: int
    """Bytes sent to the next stage per micro-batch (0 for the last stage)."""
    peak_in_flight: int
    """Micro-batches whose activations the stage holds at once under the schedule."""
    predicted_memory_bytes: int
    """Parameters, gradients and optimizer state, plus saved activations x peak_in_flight."""
    input_shape: list[int] = field(default_factory=list)
    """One micro-batch's input to the stage, as profiled (torch.distributed.pipelining needs it)."""
    input_dtype: str = ""
    backward_input_ms: float | None = None
    """Zero-bubble schedules' I and W of one micro-batch at the stage's speed; None when not profiled."""
    backward_weight_ms: float | None = None
    launch_ms: dict[str, float] | None = None
    """On GPUs, the CPU's time to launch one micro-batch's "F", "B", "I" and "W" on this stage (the
    `*_ms` above are the device's run times); None where not profiled apart (the CPU)."""
    recompute: bool = False
    """Activation checkpointing: the stage keeps only what it receives per micro-batch and runs its
    forward again in the backward (whose time above includes it). A one-stage plan (the single baseline)
    recomputes layer by layer instead, keeping each layer's input."""

    def __post_init__(self):
        """Counts and times no profile could give are refused (`_figures`), and a stage holds its layers:
        one of no layers (an edited file) split and exported as a stage that computes nothing."""
        where = f"plan: stages[{self.index}]"
        _figures(where, self, ("index", "first_layer", "params", "activation_out_bytes", "peak_in_flight",
                               "predicted_memory_bytes"), at_most=float("inf"))
        _figures(where, self, ("forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms"))
        if not self.layers or len(self.layers) != self.end_layer - self.first_layer:
            raise PlanError(f"{where}: layers [{self.first_layer}, {self.end_layer}) but {len(self.layers)} layer "
                            "names; a stage holds one name per layer, at least one")
        if any(not 0 <= ms <= MAX_PLAN_MS for ms in (self.launch_ms or {}).values()):
            raise PlanError(f"{where}: launch_ms must be from 0 to {MAX_PLAN_MS:g} each, got {self.launch_ms}")


@dataclass
class Plan:
    model: str
    flavour: str
    batch: int
    micro_batches: int
    micro_batch_size: int
    schedule: str
    balanced_by: str
    """What the cuts balance: "time" (profiled forward + backward), "params" or "uniform" (layer counts)."""
    device_name: str
    bounds: list[int]
    stages: list[StagePlan]
    predicted_step_ms: float
    predicted_samples_per_s: float
    """The batch over the predicted step (pipebench/base/step_stats.py); 0 where the plan predicts nothing
    (a hand plan, whose step is 0 too; a profile whose layers take no time is refused before planning)."""
    bubble_fraction: float
    balance_ratio: float
    """Slowest stage over mean stage (forward + backward): 1.0 is perfect balance."""
    training: Training = field(default_factory=Training)
    """How the plan trains (pipebench/base/training.py): the precision its profile was measured in and the
    workers train in, the optimizer whose states the memory counts, and the checkpoint mode (never, auto:
    stages recompute only where the memory caps require it, or always); which stages recompute is each
    StagePlan's `recompute`."""
    link_gbps: float = 0.0
    """The bandwidth that activation transfers are priced at (0: transfers free)."""
    link_latency_ms: float = 0.0
    """The fixed cost of one transfer (gloo between CPU processes: a fraction of a ms; 0 where not measured)."""
    virtual_stages: int = 1
    """Stages per device: 2 or more for the interleaved and zero-bubble schedules."""
    calibration: float = 1.0
    """The factor on every profiled device time: a whole step timed on one device over the segments'
    prediction of it (profile.calibration; it prices the loss, the update and a long step's clocks)."""
    step_spread: float = 0.0
    """The predicted step is an interval, predicted_step_ms x (1 ± this): the profile's noise
    (profile.step_spread at this plan's micro-batch size); 0 where the profile kept none."""
    config: dict[str, Any] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    """Each micro-batch count considered: micro_batches, predicted_step_ms, samples_per_s, or why not."""
    profile_id: str | None = None
    """The profile (partition/profiling/cache.py's name for it) the plan was made from; None: not cached."""
    interpolated_from: list[int] | None = None
    """The plan's profile was not measured but interpolated between the profiles measured at these
    micro-batch sizes (partition/profiling/micro_batch_sizes.py); None: measured."""
    cut_note: str = ""
    """Why the cuts are not the solver's, when they are not: a baseline's cut (parameter-balanced, or
    equal layer counts) that the simulated step prices faster than the solver's is taken instead."""
    placement: list[int] = field(default_factory=list)
    """The device index (0 .. device_count - 1) of each stage, as the schedule places it: the one place
    every executor reads it from (partition.planning.schedule_order.placement computes it when the plan is made)."""
    cores_shared: bool = False
    """The devices are CPU processes sharing one machine's cores: the step is simulated with
    simulator.SharedCores(contention, action_ms)."""
    contention: float = 1.0
    """With cores_shared: how much slower each device computes while all of them do (measured per machine)."""
    action_ms: float = 0.0
    """With cores_shared: the pipeline runtime's own cost of each operation (measured per machine)."""
    step_end_ms: float = 0.0
    """With cores_shared: the collective that ends every step (the loss's broadcast; measured per machine)."""

    def __post_init__(self):
        _figures("plan", self, ("predicted_step_ms", "predicted_samples_per_s", "balance_ratio", "link_gbps",
                                "link_latency_ms", "step_spread", "action_ms", "step_end_ms", "calibration",
                                "contention"), positive=("calibration", "contention"))
        _figures("plan", self, ("bubble_fraction",), at_most=1.0)  # a fraction of the step
        for name in ("micro_batches", "micro_batch_size", "virtual_stages"):  # an edited file's 0: a
            if getattr(self, name) < 1:                                      # ZeroDivisionError later
                raise PlanError(f"plan: {name} must be at least 1, got {getattr(self, name)}")
        if self.batch != self.micro_batches * self.micro_batch_size:  # an edited file: the stages would run
            raise PlanError(f"plan: batch {self.batch} is not {self.micro_batches} micro-batches of "  # other shapes
                            f"{self.micro_batch_size} samples")
        get_schedule(self.schedule)  # an unknown one: one line now, not when it is simulated
        if not self.placement:  # plans written before placement was stored
            self.placement = sched.placement(self.schedule, len(self.stages), len(self.stages) // self.virtual_stages)
        if len(self.placement) != len(self.stages) or len(self.bounds) != len(self.stages) + 1:
            raise PlanError(f"plan: {len(self.stages)} stages, {len(self.bounds)} bounds and "
                            f"{len(self.placement)} placements do not agree")
        if self.bounds[0] != 0 or any(a >= b for a, b in zip(self.bounds, self.bounds[1:])) or any(
                (st.first_layer, st.end_layer) != (a, b) for st, a, b in zip(self.stages, self.bounds, self.bounds[1:])):
            raise PlanError(f"plan: bounds {self.bounds[:20]} and the stages' layers are not contiguous stages from "
                            "layer 0")
        if len(self.stages) % self.virtual_stages or not all(
                0 <= d < len(self.stages) // self.virtual_stages for d in self.placement):
            raise PlanError(f"plan: placement {self.placement[:20]} names devices beyond the "
                            f"{len(self.stages) // self.virtual_stages} of {len(self.stages)} stages")

    # ------------------------------------------------------------------------------------- the file

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **asdict(self)}

    def save(self, path: str | Path) -> None:
        """Write the plan's JSON to `path`, checked first as the command line checks an output (a name the file
        system cannot take, a path ending in / that names a folder: one line)."""
        write_json(writable_file(path, "Plan.save"), self.to_dict())

    @property
    def plan_id(self) -> str:
        """A short hash of the plan's content: results rows name the plan they ran by it. The Training is
        hashed as its three fields, so a plan keeps the name it had when they were the plan's own."""
        text = json.dumps(flat_training(asdict(self)), sort_keys=True, allow_nan=False)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Any, where: str = "plan") -> "Plan":
        """A Plan from its JSON object (format and version checked when present: plans saved before the
        plan had a format load too), every field checked."""
        if not isinstance(data, dict):
            raise PlanError(f"{where}: expected an object")
        values = dict(data)
        if "format" in values or "version" in values:
            if values.pop("format", None) != FORMAT or values.pop("version", None) != VERSION:
                raise PlanError(f"{where}: not a pipebench plan version {VERSION} "
                                f"(format {data.get('format')!r}, version {data.get('version')!r})")
        if isinstance(values.get("balance"), str):  # before balanced_by had its name
            values["balanced_by"] = values.pop("balance")
        return record(cls, nest_training(values), where, error=PlanError)

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        return cls.from_dict(read_json(path, kind="plan", error=PlanError), str(path))

    # ------------------------------------------------------------------- handing the plan to others

    @property
    def balance(self) -> list[int]:
        """Layers per stage, in stage order: torchgpipe's `balance` (GPipe(module, balance, chunks=m))."""
        return [b - a for a, b in zip(self.bounds, self.bounds[1:])]

    def split_spec(self) -> dict[str, Any]:
        """{layer name: SplitPoint.BEGINNING} at every cut, for torch.distributed.pipelining:

            pipe = pipeline(module, mb_args=(x,), split_spec=plan.split_spec())

        builds exactly this plan's stages (stage k begins at the first layer of StagePlan k)."""
        from torch.distributed.pipelining import SplitPoint

        return {stage.layers[0]: SplitPoint.BEGINNING for stage in self.stages[1:]}

    def export(self, engine: str, profiles: Sequence[Profile] | None = None) -> dict[str, Any]:
        """This plan in an engine's own terms (partition/planning/engines.py): "torchtitan", "deepspeed", "megatron"
        or "device-map". A cut the engine cannot make moves to the nearest it can, priced with `profiles`
        (the plan's own) when given."""
        from pipebench.partition.planning.engines import export
        from pipebench.partition.profiling.profile_record import check_profile_list

        if profiles is not None:  # export("megatron", "x"): refused, not taken with the "x" unused
            check_profile_list(profiles)
        return export(self, engine, profiles, price_bounds=plan_with_bounds)

    def stages_on(self, device: int) -> list[int]:
        """The stage indices that device `device` runs, in increasing order."""
        return [s for s, d in enumerate(self.placement) if d == device]

    @property
    def devices(self) -> list[str]:
        """The device of each stage (a device appears v times with v virtual stages)."""
        return [s.device for s in self.stages]

    @property
    def device_count(self) -> int:
        return len(self.stages) // self.virtual_stages

    @property
    def shared_cores(self) -> sim.SharedCores | None:
        return sim.SharedCores(self.contention, self.action_ms, self.step_end_ms) if self.cores_shared else None

    def simulate(self) -> sim.Timeline:
        """The step this Plan predicts, as the simulator's timeline (what the report draws)."""
        transfer = [transfer_ms(s.activation_out_bytes, self.link_gbps, self.link_latency_ms) for s in self.stages[:-1]]
        split = all(s.backward_input_ms is not None and s.backward_weight_ms is not None for s in self.stages)
        launch = ({kind: [s.launch_ms[kind] for s in self.stages] for kind in self.stages[0].launch_ms}
                  if all(s.launch_ms for s in self.stages) else None)
        return sim.simulate([s.forward_ms for s in self.stages], [s.backward_ms for s in self.stages],
                              self.micro_batches, self.schedule, transfer, devices=self.device_count,
                              backward_input=[s.backward_input_ms for s in self.stages] if split else None,
                              backward_weight=[s.backward_weight_ms for s in self.stages] if split else None,
                              launch=launch, shared_cores=self.shared_cores)

    def memory_per_device(self) -> list[int]:
        """Predicted peak bytes per device: the sum over the stages it runs."""
        totals = [0] * self.device_count
        for stage, device in zip(self.stages, self.placement):
            totals[device] += stage.predicted_memory_bytes
        return totals


def shared_cores(profile: Profile, devices: Sequence[str]) -> sim.SharedCores | None:
    """What a pipeline of a process per device pays on CPU stand-ins sharing one machine's cores, from
    the figures the profile timed (contention, the runtime's cost per operation, the collective that ends
    a step); None on GPUs and on one device. `pipebench plan`, pipebench.plan() and advise's pipelines
    all price it so."""
    if len(devices) < 2 or not str(devices[0]).startswith("cpu"):
        return None
    return sim.SharedCores(max(1.0, profile.core_contention or 1.0), profile.action_ms or 0.0,
                             profile.collective_ms or 0.0)


def hand_plan(model: str, layers: Sequence[str], *, batch: int, devices: Sequence[str], flavour: str = "",
              config: dict[str, Any] | None = None, schedule: str = IN_TURN, micro_batches: int = 1,
              virtual_stages: int = 1, bounds: Sequence[int] | None = None, recompute: bool = False) -> Plan:
    """A Plan with cuts given by hand (default: equal layer counts), for a model not profiled: it runs
    like any Plan but predicts nothing (its predicted figures are 0). The way to try a split of your own,
    and what the tests use to run many splits without profiling."""
    get_schedule(schedule)
    if (why := split_error(batch, micro_batches)) is not None:
        raise UserError(why)
    p = len(devices) * virtual_stages
    by_hand = bounds is not None
    bounds = list(bounds) if by_hand else uniform_bounds(len(layers), p)
    if len(bounds) != p + 1 or bounds[0] != 0 or bounds[-1] != len(layers) or any(
            a >= b for a, b in zip(bounds, bounds[1:])):
        raise UserError(f"bounds {bounds} are not {p} non-empty stages of {len(layers)} layers")
    where = sched.placement(schedule, p, len(devices))
    stages = [StagePlan(index=s, device=str(devices[where[s]]), first_layer=a, end_layer=b, layers=list(layers[a:b]),
                        params=0, forward_ms=0.0, backward_ms=0.0, activation_out_bytes=0, peak_in_flight=0,
                        predicted_memory_bytes=0, recompute=recompute)
              for s, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    return Plan(model=model, flavour=flavour, batch=batch, micro_batches=micro_batches,
                micro_batch_size=batch // micro_batches, schedule=schedule,
                balanced_by="hand" if by_hand else "uniform", device_name="", bounds=bounds,
                stages=stages, predicted_step_ms=0.0, predicted_samples_per_s=0.0, bubble_fraction=0.0,
                balance_ratio=1.0, virtual_stages=virtual_stages, config=dict(config or {}), placement=list(where),
                training=Training(checkpoint="always" if recompute else "never"))



def plan_with_bounds(profiles: Sequence[Profile], request: Request, bounds: Sequence[int], *,
                     balanced_by: str = "hand", shared_cores: sim.SharedCores | None = None) -> Plan:
    """The Plan of cuts decided elsewhere, one stage per device in order (stage s on the request's
    devices[s]; fewer stages than devices leave the last ones idle), priced as plan_for prices its own:
    stage times, the simulated step, memory. For a strategy that cuts by its own rule (accelerate's
    device_map="auto", by parameter bytes), the exporters moving a cut, and brute force in the tests;
    `balanced_by` names the rule in the Plan. The request gives the schedule, the micro-batch count
    (auto: 1), the speeds, the link and the Training; its caps do not apply (the cuts are given: the
    caller judges the memory)."""
    micro_batches = request.chosen or 1
    devices, speeds = request.devices, request.speeds
    by_count = {p.micro_batches: p for p in profiles}
    if micro_batches not in by_count:
        raise UserError(f"no profile at {micro_batches} micro-batch(es); profiled counts: "
                        f"{', '.join(str(m) for m in sorted(by_count))}")
    n, stages = len(by_count[micro_batches].layers), len(bounds) - 1
    if not 1 <= stages <= len(devices) or bounds[0] != 0 or bounds[-1] != n or any(
            a >= b for a, b in zip(bounds, bounds[1:])):
        raise UserError(f"bounds {list(bounds)} are not 1 to {len(devices)} non-empty stages of {n} layers")
    request = request.with_(devices=devices[:stages], speeds=speeds[:stages] if speeds else None, max_memory=None,
                            micro_batches=micro_batches)
    return plan_for(by_count[micro_batches], request, links=request.links(by_count[micro_batches]), others=profiles,
                     given_bounds=bounds, balanced_by=balanced_by, shared=shared_cores)


def _stage_plans(problem: Problem, bounds: list[int], recompute: list[bool], run: Simulated) -> list[StagePlan]:
    """Each stage's record: its device, layers and parameters, its simulated times, what it sends, the
    micro-batches it holds at its peak and the memory that predicts (partition/planning/memory.py), and the shape
    and dtype its input arrives in."""
    profile, layers, times, launches = problem.profile, problem.layers, run.times, run.launches
    stages = []
    for s, (a, b) in enumerate(zip(bounds, bounds[1:])):
        held = run.timeline.peak_in_flight[s]
        stages.append(StagePlan(
            index=s,
            device=str(problem.request.devices[problem.where[s]]),
            first_layer=a,
            end_layer=b,
            layers=[l.name for l in layers[a:b]],
            params=sum(l.params for l in layers[a:b]),
            forward_ms=times["forward"][s],
            backward_ms=times["backward"][s],
            activation_out_bytes=layers[b - 1].output_bytes if b < len(layers) else 0,
            peak_in_flight=held,
            predicted_memory_bytes=problem.memory.stage(a, b, held, recompute[s]),
            input_shape=list(profile.input_shape if a == 0 else layers[a - 1].output_shape),
            input_dtype=profile.input_dtype if a == 0 else layers[a - 1].output_dtype,
            backward_input_ms=times["input"][s] if "input" in times else None,
            backward_weight_ms=times["weight"][s] if "weight" in times else None,
            launch_ms={kind: values[s] for kind, values in launches.items()} if launches else None,
            recompute=recompute[s],
        ))
    return stages


def _record(problem: Problem, bounds: list[int], recompute: list[bool], run: Simulated,
            balanced_by: str | None, notes: list[str]) -> Plan:
    """The Plan: the profile's model and batch, the cut and its stages, the predicted step, bubble and
    balance (the slowest stage's compute over the mean), the Training as it will run, the link and the
    shared cores it was priced with, and which profile it came from."""
    profile, request, shared, p = problem.profile, problem.request, problem.shared, problem.stages
    stage_compute = [(problem.recompute if again else problem.keep).stage(s, a, b)
                     for s, (again, a, b) in enumerate(zip(recompute, bounds, bounds[1:]))]
    step_ms = run.timeline.step_time
    return Plan(
        model=profile.model,
        flavour=profile.flavour,
        config=dict(profile.config),
        batch=profile.batch,
        micro_batches=profile.micro_batches,
        micro_batch_size=profile.micro_batch,
        schedule=request.schedule,
        balanced_by=balanced_by or request.balance,
        device_name=profile.device_name,
        bounds=list(bounds),
        stages=_stage_plans(problem, bounds, recompute, run),
        predicted_step_ms=step_ms,
        predicted_samples_per_s=samples_per_s(profile.batch, step_ms) or 0.0,  # 0: no figure, as a hand plan's
        bubble_fraction=run.timeline.bubble_fraction,
        balance_ratio=max(stage_compute) / (sum(stage_compute) / p) if sum(stage_compute) > 0 else 1.0,
        training=replace(request.training, precision=profile.training.precision, checkpoint=problem.checkpoint,
                         compile=profile.training.compile),
        link_gbps=problem.link_gbps,
        link_latency_ms=problem.latency_ms if problem.link_gbps > 0 else 0.0,
        calibration=problem.scale,
        step_spread=step_spread([profile, *problem.others], profile.micro_batch, between_runs=True),
        virtual_stages=request.virtual_stages,
        placement=list(problem.where),
        cores_shared=shared is not None,
        contention=shared.contention if shared else 1.0,
        action_ms=shared.action_ms if shared else 0.0,
        step_end_ms=shared.step_end_ms if shared else 0.0,
        profile_id=profile.profile_id,
        interpolated_from=profile.interpolated_from,
        cut_note=" ".join(notes),
    )


def plan_for(profile: Profile, request: Request, *, links: tuple[float, float], others: Sequence[Profile] = (),
             polish: bool = False, given_bounds: Sequence[int] | None = None, balanced_by: str | None = None,
             shared: sim.SharedCores | None = None) -> Plan:
    """One micro-batch count's plan (make_plan tries each count); `links`: (GB/s, latency ms) of a cut; `others`: the profiles of the
    other counts (one of them may hold the whole step that calibrates this one); `given_bounds`: cuts
    decided elsewhere (plan_with_bounds), named `balanced_by`; `polish`: walk the solver's cut on the
    simulated step. The steps: the problem, the cut solved, the step simulated, the record."""
    problem = problem_of(profile, request, links, others, shared)
    notes: list[str] = []
    bounds, recompute = solved(problem, given=given_bounds, polish=polish, notes=notes)
    return _record(problem, bounds, recompute, simulated(problem, bounds, recompute), balanced_by, notes)
