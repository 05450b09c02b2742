"""The library entry points: profile a model, plan it, hand the Plan to the libraries people use.

    >>> import pipebench
    >>> plan = pipebench.plan("resnet18", batch=32, stages=2, device="cpu", flavour="tiny")
    >>> plan.balance                  # layers per stage: torchgpipe's GPipe(module, balance, chunks=m)
    >>> plan.split_spec()             # torch.distributed.pipelining.pipeline(module, (x,), split_spec=...)

The command line builds the same values (`Request`, `RunOptions`) from its options: `pipebench plan` and
`advise` call these functions, `pipebench run` reads its options into `run`'s keywords and calls it (its caps
and speeds too: max_memory, gpu_memory, speeds; bench/cases/run_options.py RunOptions.from_keywords).
"""
from __future__ import annotations

import functools
import sys
from dataclasses import replace
from typing import Any, Callable, Sequence

from pipebench.base.errors import UserError
from pipebench.partition.planning.plan import Plan, shared_cores
from pipebench.partition.planning.plan_choice import make_plan, plan_ranking
from pipebench.partition.profiling.micro_batch_sizes import Ranking
from pipebench.partition.profiling.profile_record import Profile, check_profile_list
from pipebench.partition.profile_session import ProfilingSession, counts_and_devices
from pipebench.model_spec import ModelSpec, is_module
from pipebench.request import Request, check_stage_count, plan_devices

__all__ = ["profile", "plan", "advise", "run", "train", "plan_devices", "Request"]


def _named_gpus(asked: dict[str, Any]) -> list | None:
    """What NVML says now of the GPUs `gpus` names by id (None where not given): Request.measured_here's
    memory caps, as --gpus gives `pipebench plan` its caps."""
    from pipebench.hardware.gpus import gpus_by_id

    return None if asked.get("gpus") is None else gpus_by_id(asked["gpus"])


def _leaves_as_given(function):
    """`function(model, ...)` leaving the caller's nn.Module object and torch's global state as they were
    (pipebench/base/snapshot.py: restored on return, however it returns), and run under pipebench's own torch
    settings (own_state): a caller inside torch.no_grad() or torch.autocast still gets a profile of
    training in the precision asked."""

    @functools.wraps(function)
    def call(model: Any, *args: Any, **kwargs: Any):
        from pipebench.base.snapshot import as_given, own_state

        _check_default_device()
        with as_given(model if is_module(model) else None), own_state():
            return function(model, *args, **kwargs)

    return call


@_leaves_as_given
def profile(model: Any, example_inputs: Any = None, request: Request | None = None, *, flavour: str | None = None,
            settings: dict[str, Any] | None = None, data_dir: str | None = None,
            loss_fn: Callable[[Any, Any], Any] | None = None, note: Callable[[str], None] | None = None,
            progress: Callable[[int, int, str], None] | None = None,
            on_layers: Callable[[int], None] | None = None, rank: Ranking | None = None,
            **asked: Any) -> list[Profile]:
    """Profile every layer of `model` on the request's first device at the micro-batch sizes a plan for its
    batch considers, in its Training's precision (fp32, tf32 or bf16: pipebench/base/training.py), the whole
    step including its optimizer's update; compiled in the Training's compile mode (default, max-autotune,
    cudagraphs; None: eager) as the strategies compile their stages, the compile time kept apart
    (Profile.compile_s).

    request: what is asked (pipebench/request.py), or its fields as keywords: batch (default: 256 on a GPU, 8 on the CPU), device
        (default cpu) or devices, micro_batches, repeats, granularity, link_gbps, precision, optimizer and
        compile (or training), cache, fresh. One clear UserError for a value of the wrong type or out of range.

    model: a registry name ("resnet101", see `pipebench models`), `path/to/file.py:NAME` or
        `package.module:NAME` (settings: input_shape, input_dtype, num_classes, token_range, loss, output;
        see models/source.py), or an nn.Module object with `example_inputs`, a batch of any size: a tensor
        such as torch.randn(2, 3, 224, 224), a tuple of them, or a dict such as {"input_ids": ids,
        "attention_mask": mask} (batches like it are made up, token ids below the model's vocabulary;
        settings may give loss="mse", num_classes or token_range). A Hugging Face model object trains as
        on the command line: token ids in, logits out, no KV cache, the loss against the next tokens.
        An output that is a tuple, dict or ModelOutput trains its logits, else its first tensor; the
        profiles' config records which ("output").
    loss_fn: loss_fn(outputs, targets) for an nn.Module object, given the trained tensor; None: the
        settings' loss (cross_entropy unless they say otherwise).
    granularity: module depth of the cut candidates (1 = top-level submodules); None: the zoo's layers,
        or the finest depth with at most 64 candidates (partition/capture/graph.py).
    micro_batches: "auto" (every power of two up to 64 that splits the batch; sizes that fail are
        skipped with a note), one count, or a list of counts (each measured). Under "auto" a few sizes
        are measured (the whole batch, the smallest micro-batch, the device count's and one between) and
        the others interpolated between them (partition/profiling/micro_batch_sizes.py: `interpolated_from` marks them); then
        `rank(profiles)` ranks the choices they serve, and the interpolated counts predicted within
        micro_batch_sizes.TIE of the best are measured, until the close ones all are. rank None: on two or more
        devices, the default schedule's plan over `devices` ranks its micro-batch counts; on one, nothing
        is measured beyond those sizes.
    devices: the devices the plan will use; with two distinct GPUs among them the link between the first
        two is timed (unless `link_gbps` is given) and recorded in each Profile.
    note(line) hears what happens (sizes skipped, the link); progress(done, total, what) hears each
    segment as it starts (pipebench.base.text.progress.ProgressBar draws it).
    cache: reuse sizes measured before in the profile cache (partition/profiling/cache.py) and keep new ones;
        fresh: measure every size again (and replace the cached ones). The cache is looked up before the
        model is built: when it holds every size, no model is built and no model file imported.
    on_layers(count): called with the model's layer count as soon as it is known, before anything is timed:
        a zoo model's counted on the meta device before it is built; any other's once it is captured and
        its first sizes measured, before the link figures are timed. Not called when the cache answers.
        A plan checks its stage count there.
    An nn.Module object comes back as it was given (each submodule's mode, parameters, buffers,
    requires_grad, device, forward methods), and torch's global state too (RNG, threads, default dtype,
    grad mode, autocast, anomaly detection, matmul precision): pipebench/base/snapshot.py. Profiling runs under
    pipebench's own settings whatever the caller's or a model file's (grad on, autocast and anomaly
    detection off, float32 by default: snapshot.own_state).
    Returns one Profile per micro-batch size that ran or was interpolated, fewest micro-batches first.
    """
    request = Request.from_keywords(request, asked, stages=1).measured_here()
    counts, devices = counts_and_devices(request)
    spec = ModelSpec(model, flavour=flavour, settings=settings, data_dir=data_dir, example_inputs=example_inputs,
                     loss_fn=loss_fn)
    _check_functions(note=note, progress=progress, on_layers=on_layers, rank=rank)
    session = ProfilingSession(spec, request, counts, devices, note=note, progress=progress,
                               on_layers=on_layers)
    return session.profiles(rank)


def _check_functions(**functions: Any) -> None:
    """Refuse a keyword that takes a function (a callback such as note) given something else, in one line:
    uncalled until deep in the work, it would fail there as a TypeError."""
    for name, function in functions.items():
        if function is not None and not callable(function):
            raise UserError(f"{name} takes a function, got a {type(function).__name__}")


def _check_default_device() -> None:
    """A default device of meta (torch.set_default_device) is refused: every batch made there would hold no
    values."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_default_device().type == "meta":
        raise UserError("torch's default device is meta (torch.set_default_device): the batches profiled would "
                        "hold no values; call torch.set_default_device(None) before profiling")


def plan(model: Any = None, example_inputs: Any = None, request: Request | None = None, *,
         profiles: Sequence[Profile] | None = None, flavour: str | None = None, settings: dict[str, Any] | None = None,
         data_dir: str | None = None, loss_fn: Callable[[Any, Any], Any] | None = None,
         note: Callable[[str], None] | None = None, progress: Callable[[int, int, str], None] | None = None,
         **asked: Any) -> Plan:
    """Profile `model` (unless `profiles` are given) and return the Plan with the fastest predicted step.

    request: what is asked (pipebench/request.py), or its fields as keywords: the stages as one per GPU in
    `gpus` (e.g. [0, 1]), or `stages` on `device` (e.g. stages=4, device="cpu"); batch (default: the profiles', else 256 on a GPU and 8
    on the CPU, as `pipebench plan`: Request.measured_here); schedule (gpipe, 1f1b,
    interleaved, zb-interleaved or zbv; the last three put `virtual_stages`, default 2, stages on each
    device; None: the default, 1f1b); micro_batches ("auto" picks the count with the highest predicted throughput among those
    profiled); max_memory (bytes per device the plan must stay within; default, for a model profiled on
    `gpus`: what NVML says is free on them now, as `pipebench plan --gpus`); speeds (per-device speed factors:
    a busy GPU is slower); link_gbps (GB/s that prices a cut; default: what the profile measured, 0 when
    nothing was); training, or its parts: precision (that of the profile made here), optimizer (whose
    states the memory counts) and checkpoint (never, auto or always: which stages recompute their
    activations); repeats and granularity as for profile(). Each is checked once, one clear UserError.
    model, example_inputs, flavour, settings, data_dir, loss_fn, note, progress: as for profile(). With
    `profiles`, a model, flavour or settings given must be what they record (ModelSpec.check_profiled).
    """
    request = Request.from_keywords(request, asked)
    if profiles is None:
        if model is None:
            raise UserError("plan needs a model (or profiles)")
        request = request.measured_here(_named_gpus(asked))
        profiles = plan_profiles(model, example_inputs, request, flavour=flavour, settings=settings,
                                 data_dir=data_dir, loss_fn=loss_fn, note=note, progress=progress)
    else:
        profiles = _given_profiles(profiles, request, ModelSpec(model, flavour=flavour, settings=settings),
                                   training_given=[name for name in ("precision", "compile")
                                                   if asked.get(name) is not None or "training" in asked])
    return make_plan(profiles, request, shared_cores=shared_cores(profiles[0], request.devices))


def advise(model: Any = None, example_inputs: Any = None, request: Request | None = None, *,
           profiles: Sequence[Profile] | None = None, strategies: Sequence[str] | None = None,
           flavour: str | None = None, settings: dict[str, Any] | None = None, data_dir: str | None = None,
           loss_fn: Callable[[Any, Any], Any] | None = None, note: Callable[[str], None] | None = None,
           progress: Callable[[int, int, str], None] | None = None, **asked: Any):
    """Predict every strategy for `model` on the request's devices from one profile, rank them by predicted
    samples/s and recommend the fastest that fits: nothing runs but the profile (`pipebench advise`).

    request, or its fields as keywords: as for plan(); devices (or gpus, or stages on device) are the
    devices every strategy is priced on, max_memory the cap each must fit, micro_batches the pipelines'
    counts (None: every count they might choose). strategies: the names to rank (default: every one that
    uses all the devices, and single). profiles: rank from these instead of profiling (a model, flavour or
    settings given beside them must be what they record, as for plan()).
    Returns an Advice (bench/predict/ranking.py): `predictions` fastest first, `recommended`, `tied`.
    """
    from pipebench.bench.predict.ranking import rank_strategies
    from pipebench.bench.strategies import strategy_list

    request = Request.from_keywords(request, asked)
    if strategies is not None:
        strategies = strategy_list(strategies)
    if profiles is None:
        if model is None:
            raise UserError("advise needs a model (or profiles)")
        request = request.measured_here(_named_gpus(asked))
        profiles = advice_profiles(model, example_inputs, request, strategies=strategies, flavour=flavour,
                                   settings=settings, data_dir=data_dir, loss_fn=loss_fn, note=note, progress=progress)
    else:
        profiles = _given_profiles(profiles, request, ModelSpec(model, flavour=flavour, settings=settings))
    first = profiles[0].training  # the profile's precision and compile mode are what was priced
    return rank_strategies(profiles, request.with_(training=replace(request.training, precision=first.precision,
                                                                     compile=first.compile)), strategies)


def _given_profiles(profiles: Profile | Sequence[Profile], request: Request, named: ModelSpec, *,
                    training_given: Sequence[str] = ()) -> Sequence[Profile]:
    """The profiles a caller gave plan or advise, checked alike: one Profile or a list of them, every
    field checked as a file's is (they are the caller's objects), the model, flavour and settings named
    beside them the ones they record (`named`: ModelSpec.check_profiled), then what the request needs of
    them (Request.check_profiles, with the parts of the Training the caller gave)."""
    if isinstance(profiles, Profile):
        profiles = [profiles]
    check_profile_list(profiles, values=True)
    named.check_profiled(profiles[0])
    return request.check_profiles(profiles, training_given=training_given)


def plan_profiles(model: Any, example_inputs: Any, request: Request, **how: Any) -> list[Profile]:
    """The profiles `plan` makes a Plan from, for a Request settled on the devices it profiles on
    (Request.measured_here): one micro-batch count or auto (a list is refused before anything is
    measured), the counts the plan's ranking asks for measured (plan_ranking), its stages checked against
    the model's layers as soon as they are known and again against a cached answer (check_profiles).
    how: profile()'s keywords (flavour, settings, data_dir, loss_fn, note, progress). `pipebench plan`
    profiles through it, under its progress bar and --timeout."""
    request.chosen  # noqa: B018 (a plan takes one count: refused before profiling)
    profiles = profile(model, example_inputs, request, rank=plan_ranking(request),
                       on_layers=lambda layers: check_stage_count(request.stages, layers), **how)
    return request.check_profiles(profiles)


def advice_profiles(model: Any, example_inputs: Any, request: Request, *, strategies: Sequence[str] | None = None,
                    **how: Any) -> list[Profile]:
    """The profiles `advise` ranks from, for a Request settled on the devices it profiles on: the whole
    batch, the replicas' share and the pipelines' counts asked for (advise_counts), the close ones
    measured as the ranking of `strategies` asks (advice_ranking); more devices than the model has layers
    refused as soon as they are counted and again against a cached answer (check_profiles), as from given
    profiles. how: as for plan_profiles. `pipebench advise` profiles through it."""
    from pipebench.bench.predict.ranking import advice_ranking, advise_counts

    measured = request.with_(micro_batches=advise_counts(request.devices, request.micro_batches))
    profiles = profile(model, example_inputs, measured, rank=advice_ranking(request, strategies),
                       on_layers=lambda layers: check_stage_count(request.stages, layers), **how)
    return request.check_profiles(profiles)


def run(models: Any, *, strategies: Sequence[str] | None = None, machine: Any = None, quick: bool = False,
        max_memory: int | None = None, gpu_memory: int | None = None, speeds: Any = None,
        note: Callable[[str], None] | None = print, on_start: Callable[[Any, Any], None] | None = None,
        **options: Any):
    """Run the benchmark suite, as `pipebench run`: every model with every strategy on this machine, side
    by side, one results row per case appended to <out>/<date>-<host>-<hardware>.csv and .json as it
    ends. Returns (rows, csv path, json path).

    models: {name: global batch}, or names (each at its default batch); a name is the zoo's, FILE.py:NAME
        or package.module:NAME. strategies: names (default: every one). machine: a Machine
        (bench/cases/machine.py detect_machine: GPUs by id, or CPU processes; default: every visible GPU,
        else 2 CPU processes). options: the fields of RunOptions (bench/cases/run_options.py), e.g. flavour,
        out, steps, warmup, rounds, training, compiles, micro_batches (or its alias chunks), resume; each
        field's default where not given.
    max_memory: bytes every case may use per device, which plans are cut under and predictions judged by
        (`--max-memory`; default: the machine's caps, on GPUs what was free when it was detected).
    gpu_memory: bytes every worker may allocate per GPU, enforced in the workers (`--gpu-memory`: a smaller
        card on a bigger one), and the memory cap at most that less a margin; refused without GPUs.
    speeds: one speed factor per device that plans are cut for (`--speeds`), or "auto": each GPU's speed
        probed now, in a child process, and said through `note` (GPUs only); default: the machine's.
        max_memory, gpu_memory and speeds are applied to the machine (run_options.cap_machine) before the
        options are checked against it.
    quick (and the CPU, always): tiny flavours, batch 8 and short rounds for what is not given, as
    `pipebench run --quick` (RunOptions.from_keywords: the one path both take). quick, resume, again: True
    or False; resume and again together are refused (one skips the cases done, the other runs them anew).
    on_start(options, machine): called once everything is checked, before any speed probe or profile, with
    the RunOptions that run and the Machine they run on (`pipebench run` says its line then).
    Everything is checked, one UserError, before anything is profiled or written: each option's type and
    the command line's bound (RunOptions), then what check_run checks for `pipebench run`."""
    from pipebench.bench.cases import run_suite
    from pipebench.bench.cases.machine import check_speed_probe, probe_speeds, speed_probe_line
    from pipebench.base.text.parse import count_of
    from pipebench.bench.cases.run_options import RunOptions, cap_machine
    from pipebench.request import plain

    note = note or (lambda line: None)
    _check_functions(note=note, on_start=on_start)
    for name, size in (("max_memory", max_memory), ("gpu_memory", gpu_memory)):
        if size is not None:
            count_of(size, name)  # bytes: a positive integer
    probe = isinstance(speeds, str) and speeds == "auto"
    if speeds is not None and not probe and not isinstance(plain(speeds), (list, tuple)):
        raise UserError(f"speeds takes 'auto' or one speed factor per device, e.g. [1, 0.5] (got {speeds!r:.40})")
    machine = cap_machine(_machine_of(machine), max_memory, gpu_memory)
    if probe:
        check_speed_probe(machine.gpus is not None)
    if speeds is not None and not probe:
        machine = machine.with_(speeds=plain(speeds))  # one factor per device, each within --speeds' range (Machine)
    settled = RunOptions.from_keywords(models, machine, strategies=strategies, quick=quick, **options)
    if on_start is not None:
        on_start(settled, machine)
    if probe:
        machine = machine.with_(speeds=probe_speeds(machine))
        note(speed_probe_line((f"GPU {g}" for g in machine.gpus), machine.speeds))
    return run_suite.run_suite(settled, machine, note=note)


def train(model: str, data: str, *, batch: int, strategy: str = "auto", machine: Any = None,
          note: Callable[[str], None] | None = print, **options: Any) -> dict:
    """Train a model on a data set, as `pipebench train`: with `strategy` (or "auto": advise's
    recommendation from the profile), through the same workers and Plan as `pipebench run`, to one
    state_dict with the model's own names at `save` (torch.save; the model's own class loads it).
    Returns what the training did: steps, total, seconds, and stopped or diverged where so ({"written":
    ...} for write_job), and save: the checkpoint's absolute path (None without).

    model: a zoo name, FILE.py:NAME or package.module:NAME. data: as --data: "mnist:DIR", "tokens:FILE"
        (nanoGPT's uint16 train.bin) or "FILE.py:NAME" (a function returning a Dataset of (input, target)).
    machine: a Machine (bench/cases/machine.py detect_machine; default: every visible GPU, else 2 CPU
        processes). options: the other fields of TrainOptions (bench/train/options.py): training (a
        Training: precision, optimizer, checkpoint, compile; default tf32 sgd), save, flavour, overrides,
        epochs, steps, lr, save_every, resume, log_every, csv, loader_workers (the DataLoader's worker
        processes; default 0 on the CPU, 4 on GPUs), seed, timeout, write_job, nodes (machines a job spans,
        with write_job only: docs/several-machines.md).
    Everything is checked before any model file is imported or any worker starts, one UserError: the
    keywords, the outputs, the options' bounds (TrainOptions.from_keywords), then the data, the model and
    the strategy (run_training)."""
    from pipebench.bench.train.options import TrainOptions
    from pipebench.bench.train.parent import over_nodes, run_training

    _check_functions(note=note)
    machine = _machine_of(machine)
    asked = TrainOptions.from_keywords(model, data, machine, batch=batch, strategy=strategy, **options)
    result = run_training(asked, over_nodes(machine, asked.nodes), note=note or (lambda line: None))
    return {**result, "save": asked.save}


def _machine_of(machine: Any):
    """The Machine `run` and `train` work on: the one given, or every visible GPU (else 2 CPU processes)."""
    from pipebench.bench.cases.machine import Machine, detect_machine

    if machine is None:
        return detect_machine(None)
    if not isinstance(machine, Machine):
        raise UserError(f"machine takes a Machine (pipebench.bench.cases.machine.detect_machine), not {type(machine).__name__}")
    return machine
