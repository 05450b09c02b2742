"""The library entry points: profile a model, plan it, hand the Plan to the libraries people use.

    >>> import pipebench
    >>> plan = pipebench.plan("resnet18", batch=32, stages=2, device="cpu", flavour="tiny")
    >>> plan.balance                  # layers per stage: torchgpipe's GPipe(module, balance, chunks=m)
    >>> plan.split_spec()             # torch.distributed.pipelining.pipeline(module, (x,), split_spec=...)

The command line (`pipebench plan`, `pipebench run`) is a thin layer over these functions.
"""
from __future__ import annotations

import contextlib
import functools
import socket
import sys
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Sequence

from pipebench.errors import UserError
from pipebench.partition import sizes
from pipebench.partition.plan import Plan, shared_cores
from pipebench.partition.plan_choice import make_plan, plan_ranking
from pipebench.partition.sizes import Ranking
from pipebench.partition.profile import Profile
from pipebench.partition.schedule import DEFAULT_SCHEDULE
from pipebench.request import Request, count_of
from pipebench.training import Training

__all__ = ["profile", "plan", "advise", "plan_devices", "Request"]


def plan_devices(*, stages: int | None = None, device: str = "cpu", gpus: Sequence[int] | None = None) -> list[str]:
    """The device of each pipeline position: one per GPU in `gpus`, else `stages` (default 2) on `device`
    (cpu, cuda for the current GPU, or cuda:N)."""
    from pipebench.hardware.probes import resolve_device

    if gpus is not None and stages is not None:
        raise UserError("give gpus or stages, not both")
    if gpus is not None:
        if isinstance(gpus, (str, bytes)) or not isinstance(gpus, Sequence):
            raise UserError(f"gpus takes a list of GPU ids such as [0, 1] (got {gpus!r:.40})")
        if not gpus:
            raise UserError("gpus names no GPU")
        return [f"cuda:{count_of(i, 'a GPU id', low=0)}" for i in gpus]
    stages = 2 if stages is None else count_of(stages, "stages")
    return [resolve_device(device, check=False)] * stages


def _request(request: Request | None, asked: dict[str, Any], *, stages: int | None = None) -> Request:
    """`request`, or the Request that the keywords `asked` say: the devices as `devices`, `gpus` (one stage
    per GPU id) or `stages` (default: the one given here, else 2) on `device` (default cpu); the Training
    whole or as its parts (precision, optimizer, checkpoint: its defaults for those not given); every other
    keyword a field of Request (TypeError for any other name). Both a request and keywords: refused."""
    from pipebench.hardware.probes import resolve_device

    if request is not None:
        if asked:
            raise UserError(f"give request or {', '.join(sorted(asked))}, not both")
        if not isinstance(request, Request):
            raise UserError(f"request takes a pipebench Request (got {type(request).__name__})")
        return request
    asked = dict(asked)
    where = {name: asked.pop(name, None) for name in ("devices", "gpus", "stages", "device")}
    parts = {name: asked.pop(name, None) for name in ("precision", "optimizer", "checkpoint", "compile")}
    training = asked.pop("training", None)
    unknown = sorted(set(asked) - {f.name for f in fields(Request)})
    if unknown:
        raise TypeError(f"unknown argument {unknown[0]!r}; a request takes devices, gpus, stages, device, precision, "
                        f"optimizer, checkpoint, compile and {', '.join(f.name for f in fields(Request) if f.name != 'devices')}")
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
    return Request(devices=tuple(devices), training=Training(**given) if training is None else training, **asked)


def _leaves_as_given(function):
    """`function(model, ...)` leaving the caller's nn.Module object and torch's global state as they were
    (pipebench/snapshot.py: restored on return, however it returns), and run in torch's default state
    (_working_state): a caller inside torch.no_grad() still gets a profile of training."""

    @functools.wraps(function)
    def call(model: Any, *args: Any, **kwargs: Any):
        from pipebench.snapshot import as_given

        with as_given(model if _is_module(model) else None), _working_state():
            return function(model, *args, **kwargs)

    return call


@_leaves_as_given
def profile(model: Any, example_inputs: Any = None, request: Request | None = None, *, flavour: str | None = None,
            settings: dict[str, Any] | None = None, data_dir: str | None = None,
            loss_fn: Callable[[Any, Any], Any] | None = None, note: Callable[[str], None] | None = None,
            progress: Callable[[int, int, str], None] | None = None,
            before_measuring: Callable[[], None] | None = None, rank: Ranking | None = None,
            **asked: Any) -> list[Profile]:
    """Profile every layer of `model` on the request's first device at the micro-batch sizes a plan for its
    batch considers, in its Training's precision (fp32, tf32 or bf16: pipebench/training.py), the whole
    step including its optimizer's update; compiled in the Training's compile mode (default, max-autotune,
    cudagraphs; None: eager) as the strategies compile their stages, the compile time kept apart
    (Profile.compile_s).

    request: what is asked (pipebench/request.py), or its fields as keywords: batch (required), device
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
        or the finest depth with at most 64 candidates (partition/graph.py).
    micro_batches: "auto" (every power of two up to 64 that splits the batch; sizes that fail are
        skipped with a note), one count, or a list of counts (each measured). Under "auto" a few sizes
        are measured (the whole batch, the smallest micro-batch, the device count's and one between) and
        the others interpolated between them (partition/sizes.py: `interpolated_from` marks them); then
        `rank(profiles)` ranks the choices they serve, and the interpolated counts predicted within
        sizes.MARGIN of the best are measured, until the close ones all are. rank None: on two or more
        devices, the default schedule's plan over `devices` ranks its micro-batch counts; on one, nothing
        is measured beyond those sizes.
    devices: the devices the plan will use; with two distinct GPUs among them the link between the first
        two is timed (unless `link_gbps` is given) and recorded in each Profile.
    note(line) hears what happens (sizes skipped, the link); progress(done, total, what) hears each
    segment as it starts (pipebench.progress.ProgressBar draws it).
    cache: reuse sizes measured before in the profile cache (partition/cache.py) and keep new ones;
        fresh: measure every size again (and replace the cached ones). The cache is looked up before the
        model is built: when it holds every size, no model is built and no model file imported.
    before_measuring(): called before the model is built to be measured, not when the cache answers (the
        command line checks the stage count against the model's layers there).
    An nn.Module object comes back as it was given (each submodule's mode, parameters, buffers,
    requires_grad, device, forward methods), and torch's global state too (RNG, threads, default dtype,
    grad mode, matmul precision): pipebench/snapshot.py.
    Returns one Profile per micro-batch size that ran or was interpolated, fewest micro-batches first.
    """
    from pipebench.hardware.cpu import held_memory, thread_budget, threads_per_device
    from pipebench.hardware.probes import resolve_device
    from pipebench.parse import micro_batch_counts

    request = _request(request, asked, stages=1)
    if request.batch is None:
        raise UserError("profile needs the global batch size, e.g. batch=64")
    batch, training, micro_batches = request.batch, request.training, request.micro_batches
    if isinstance(micro_batches, tuple):  # several counts, e.g. what a run's cases need
        counts = sorted({m for c in micro_batches for m in micro_batch_counts(c, batch)})
    else:
        counts = micro_batch_counts(micro_batches, batch)
    devices = [resolve_device(d) for d in request.devices]
    training.check_device(devices[0].partition(":")[0])  # cudagraphs on the CPU: one line now
    device = devices[0]
    auto = micro_batches is None
    if auto and len(devices) > 1 and batch % len(devices) == 0:
        counts = sorted({*counts, len(devices)})  # the replicas' share (DDP, DataParallel), 3 devices too
    on_gpu = device.startswith("cuda")
    if loss_fn is not None and not _is_module(model):
        raise UserError("loss_fn is for an nn.Module object; a model named by FILE.py:NAME defines loss_fn in its "
                        "file")
    repeats = request.repeats if request.repeats is not None else (5 if on_gpu else 3)
    granularity, cache, fresh, link_gbps = request.granularity, request.cache, request.fresh, request.link_gbps
    # On the CPU, time with one device's share of the cores, holding the memory freed between runs: what each
    # worker standing in for a device gets (hardware/cpu.py).
    threads = None if on_gpu else threads_per_device(len(devices))
    warmup = 2 if on_gpu else 1
    asked = _Measurement(cache=cache, flavour=flavour, settings=settings, data_dir=data_dir, batch=batch,
                         device=device, devices=devices, threads=threads, training=training, repeats=repeats,
                         warmup=warmup, granularity=granularity)
    store, keys, link_key = _cache_keys(model, counts, asked)
    cached = {} if fresh or store is None else {m: p for m in counts if (p := store.get(keys[m])) is not None}
    measured: list[Profile] = list(cached.values())
    built: dict[str, Any] = {}  # the model's device, its one capture and the threads that time it, once built

    def build() -> None:
        """Build the model, the first time a size must be measured: a cached answer never waits for it."""
        nonlocal model, keys
        if before_measuring is not None:
            before_measuring()
        import torch

        from pipebench.models import LayeredModel, UserModel, get_model
        from pipebench.partition.measure import Captures
        from pipebench.training import set_precision

        target = torch.device(device)
        if on_gpu:
            set_precision(training)
            torch.cuda.set_device(target)
        if isinstance(model, str):
            named, model = model, get_model(model, flavour, device=target, data_dir=data_dir, **(settings or {}))
            if store is not None and flavour is None and isinstance(model, LayeredModel):  # the zoo's default
                store.learn_flavour(named, model.flavour)
                keys = _cache_keys(named, counts, replace(asked, flavour=model.flavour))[1]
                found = {} if fresh else {m: p for m in counts if m not in cached and (p := store.get(keys[m]))}
                cached.update(found)
                measured.extend(found.values())
        elif isinstance(model, torch.nn.Module):
            from pipebench.models.source import object_model

            model = object_model(model, example_inputs, settings, loss_fn)
        elif not isinstance(model, (LayeredModel, UserModel)):
            raise UserError(f"model must be a registry name, FILE.py:NAME, an nn.Module or a LayeredModel, "
                            f"not {type(model).__name__}")
        built.update(target=target, captures=Captures(note), threads=threads or torch.get_num_threads())

    def measure(wanted: list[int]) -> list[Profile]:
        """The counts `wanted`, measured on the model's one capture unless cached; each measured one is kept
        in the cache."""
        from pipebench.partition.measure import profile_sizes

        if not built:
            build()
        new = [m for m in wanted if m not in cached]
        got = []
        if new:
            with thread_budget(built["threads"]), held_memory() if not on_gpu else contextlib.nullcontext():
                got = profile_sizes(model, built["target"], batch, new, repeats=repeats, warmup=warmup, note=note,
                                    progress=progress, granularity=granularity, training=training,
                                    already=len(measured), captures=built["captures"])
            for p in got:
                if store is not None:
                    store.put(keys[p.micro_batches], p)
            measured.extend(got)
        return [cached[m] for m in wanted if m in cached] + got

    first = sizes.anchors(counts, required=[len(devices)] if len(devices) > 1 else []) if auto else counts
    if missing := [m for m in first if m not in cached]:
        measure(missing)
    if cached and note:
        note(f"{getattr(model, 'name', model)}: micro-batch size(s) "
             f"{', '.join(str(batch // m) for m in sorted(cached, reverse=True))} from the profile cache "
             f"({store.folder}; --fresh measures again)")
    # The links before the ranking: a plan prices its cuts with them. From the cache with a cached profile,
    # or from the link cache where the profile cache is off (partition/cache.py link_cache).
    from pipebench.partition.cache import link_cache

    links_kept = store if store is not None else (link_cache() if cache else None)
    reuse = links_kept if not fresh and (store is None or len(measured) == len(cached)) else None
    links = _links(devices, on_gpu, link_gbps, note, store=reuse, keep=links_kept, key=link_key)

    def with_links(profiles: list[Profile]) -> list[Profile]:
        for p in profiles:
            for name, value in links.items():
                setattr(p, name, value)
        return profiles

    if not auto:
        return with_links(sorted(measured, key=lambda p: p.micro_batches))
    rank = rank if rank is not None else _default_ranking(devices)
    profiles = sizes.refine(with_links(list(measured)), counts, rank, lambda wanted: with_links(measure(wanted)))
    guessed = [p.micro_batch for p in profiles if p.interpolated_from]
    if guessed and note:
        note(f"{getattr(model, 'name', model)}: micro-batch size(s) {', '.join(map(str, guessed))} interpolated "
             f"between the measured ones, not measured (partition/sizes.py; --chunks M,M,... measures them)")
    return profiles


def _default_ranking(devices: Sequence[str] | None) -> Ranking | None:
    """What ranks the micro-batch counts when the caller gives nothing: on two or more devices, the
    default schedule's plan over them; on one, nothing (no pipeline to choose for)."""
    if not devices or len(devices) < 2:
        return None
    return plan_ranking(Request(devices=tuple(devices), schedule=DEFAULT_SCHEDULE))


@contextlib.contextmanager
def _working_state():
    """Inside the block, where torch is imported: gradients on, inference mode off and float32 the default
    dtype, as profiling and the CPU probes' peers (fresh processes) assume; as_given restores the caller's."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    with torch.inference_mode(False), torch.enable_grad():
        torch.set_default_dtype(torch.float32)
        yield


def _is_module(model: Any) -> bool:
    """Whether `model` is an nn.Module object; one exists only once torch is imported, so asking imports none."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


@dataclass(frozen=True)
class _Measurement:
    """What `profile` is asked to measure, as its cache keys name it (partition/cache.py)."""

    cache: bool
    flavour: str | None
    settings: dict | None
    data_dir: str | None
    batch: int
    device: str
    devices: list[str]
    threads: int | None
    """The CPU threads of one device's share (None on GPUs)."""
    training: Training
    repeats: int
    warmup: int
    granularity: Any


def _cache_keys(model: Any, counts: list[int], asked: _Measurement) -> tuple[Any, dict[int, dict], dict | None]:
    """(the profile cache, the key of each micro-batch count's size, the key of the link figures), from
    what was `asked` alone: nothing is built, torch is not imported. (None, {}, the links' key) when no profile
    is cached but the link cache keeps the links; (None, {}, None) when nothing is kept: the cache is off,
    or the model is an object (partition/cache.py)."""
    from pipebench.partition.cache import (ProfileCache, cache_enabled, check_cache_folders, device_label, link_cache,
                                           request_identity, torch_version)

    a, training = asked, asked.training
    if a.cache:
        check_cache_folders()  # a cache folder that is a file would be silently unused
    identity = request_identity(model, flavour=a.flavour, settings=a.settings, data_dir=a.data_dir) \
        if a.cache and cache_enabled() else None
    if identity is None and not (a.cache and link_cache()):
        return None, {}, None
    common = dict(device_name=device_label(a.device), threads=a.threads, torch=torch_version(),
                  **({"memory": "held"} if a.threads is not None else {}))  # on the CPU: hardware/cpu.py
    link_key = ProfileCache.key({"links": a.devices, "host": socket.gethostname(), **common}, micro_batch=0)
    if identity is None:
        return None, {}, link_key
    keys = {m: ProfileCache.key(identity, micro_batch=a.batch // m, batch=a.batch, device=a.device.partition(":")[0],
                                precision=training.precision, optimizer=training.optimizer, repeats=a.repeats,
                                **({"compile": training.compile} if training.compile is not None else {}),
                                warmup=a.warmup, granularity=a.granularity, **common) for m in counts}
    return ProfileCache(), keys, link_key


def _links(devices: list[str], on_gpu: bool, link_gbps: float | None, note, *, store, keep, key) -> dict:
    """The link figures a profile carries: GB/s between the first two devices, an all-reduce's bus
    bandwidth, and on CPU stand-ins the machine's drift (one device too), gloo's latency, the slowdown of
    processes computing at once on the shared cores and the pipeline runtime's, FSDP2's and DDP's own
    costs. Timed, or from the cache (`store`) when every size was too; `keep` keeps what was timed.
    `link_gbps` given: taken as is."""
    from pipebench.hardware.cpu import threads_per_device
    from pipebench.hardware.probes import (drift_seconds, measure_allreduce_gbps, measure_cpu_processes,
                                           measure_machine_drift, measure_stage_link)
    from pipebench.partition.cache import LINK_FIELDS

    if link_gbps is None and store is not None and (links := store.get_links(key)) is not None:
        if note:
            note("link figures from the profile cache")
        return links
    links = {name: None for name in LINK_FIELDS}
    links["link_gbps"] = link_gbps
    if link_gbps is None and on_gpu:
        link = measure_stage_link(devices)
        links["link_gbps"] = link[2] if link else None
        if link and note:
            note(f"link {link[0]} -> {link[1]}: {links['link_gbps']:.0f} GB/s (timed copy)")
    if on_gpu:
        links["allreduce_gbps"] = measure_allreduce_gbps(devices)
        if links["allreduce_gbps"] and note:
            note(f"all-reduce over {len(set(devices))} GPUs: {links['allreduce_gbps']:.0f} GB/s bus bandwidth (timed)")
    if not on_gpu and link_gbps is None:  # CPU stand-ins share a machine whose speed moves
        links["machine_drift"] = measure_machine_drift(threads_per_device(len(devices)))
        if note:
            note(f"this machine's speed moved ±{100 * links['machine_drift']:.0f}% over {drift_seconds():g} s "
                 "(the least interval of a CPU prediction)")
        if len(devices) > 1:  # standing in for devices, they talk through gloo
            links.update(measure_cpu_processes(len(devices)))
            if note:
                note(f"gloo between CPU processes: {links['link_gbps']:.2f} GB/s copies, "
                     f"{links['allreduce_gbps']:.2f} GB/s all-reduce, {links['link_latency_ms']:.2f} ms a message, "
                     f"{links['collective_ms']:.2f} ms a collective; {len(devices)} processes computing at once: "
                     f"each step {links['core_contention']:.2f}x slower; the pipeline runtime: "
                     f"{links['action_ms']:.2f} ms an operation, FSDP2 {links['fsdp_layer_ms']:.2f} ms a layer "
                     f"and {links['gather_gbps']:.2f} GB/s its gathers and reduce-scatters, "
                     f"DDP {links['ddp_ms']:.2f} ms a step and "
                     f"{links['ddp_layer_ms']:.2f} ms a layer (timed)")
    if keep is not None and link_gbps is None:
        keep.put_links(key, links)
    return links


def plan(model: Any = None, example_inputs: Any = None, request: Request | None = None, *,
         profiles: Sequence[Profile] | None = None, flavour: str | None = None, settings: dict[str, Any] | None = None,
         data_dir: str | None = None, loss_fn: Callable[[Any, Any], Any] | None = None,
         note: Callable[[str], None] | None = None, progress: Callable[[int, int, str], None] | None = None,
         **asked: Any) -> Plan:
    """Profile `model` (unless `profiles` are given) and return the Plan with the fastest predicted step.

    request: what is asked (pipebench/request.py), or its fields as keywords: the stages as one per GPU in
    `gpus` (e.g. [0, 1]), or `stages` on `device` (e.g. stages=4, device="cpu"); schedule (gpipe, 1f1b,
    interleaved, zb-interleaved or zbv; the last three put `virtual_stages`, default 2, stages on each
    device); micro_batches ("auto" picks the count with the highest predicted throughput among those
    profiled); max_memory (bytes per device the plan must stay within); speeds (per-device speed factors:
    a busy GPU is slower); link_gbps (GB/s that prices a cut; default: what the profile measured, 0 when
    nothing was); training, or its parts: precision (that of the profile made here), optimizer (whose
    states the memory counts) and checkpoint (never, auto or always: which stages recompute their
    activations); repeats and granularity as for profile(). Each is checked once, one clear UserError.
    model, example_inputs, flavour, settings, data_dir, loss_fn, note, progress: as for profile().
    """
    request = _request(request, asked)
    if profiles is None:
        if model is None:
            raise UserError("plan needs a model (or profiles)")
        if request.batch is None:
            raise UserError("plan needs the global batch size, e.g. batch=256")
        request.chosen  # noqa: B018 (a plan takes one count: refused before profiling)
        profiles = profile(model, example_inputs, request, flavour=flavour, settings=settings, data_dir=data_dir,
                           loss_fn=loss_fn, note=note, progress=progress, rank=plan_ranking(request))
    elif isinstance(profiles, Profile):
        profiles = [profiles]
    request.check_profiles(profiles)
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
    uses all the devices, and single). profiles: rank from these instead of profiling.
    Returns an Advice (bench/predict/ranking.py): `predictions` fastest first, `recommended`, `tied`.
    """
    from pipebench.bench.predict.ranking import advice_ranking, advise_counts
    from pipebench.bench.predict.ranking import advise as rank_strategies
    from pipebench.bench.strategies import get_strategy

    request = _request(request, asked)
    if isinstance(strategies, str) or not isinstance(strategies, (list, tuple, type(None))):
        raise UserError(f"strategies takes a list of names such as ['ddp', 'pp-1f1b'], not {strategies!r:.60}")
    for name in strategies or ():
        get_strategy(name)  # an unknown name: one UserError now
    if profiles is None:
        if model is None:
            raise UserError("advise needs a model (or profiles)")
        if request.batch is None:
            raise UserError("advise needs the global batch size, e.g. batch=256")
        measured = request.with_(micro_batches=advise_counts(len(request.devices), request.micro_batches))
        profiles = profile(model, example_inputs, measured, flavour=flavour, settings=settings, data_dir=data_dir,
                           loss_fn=loss_fn, note=note, progress=progress, rank=advice_ranking(request, strategies))
    elif isinstance(profiles, Profile):
        profiles = [profiles]
    if not profiles or not all(isinstance(p, Profile) for p in profiles):
        raise UserError("advise needs profiles (pipebench.profile's), or a model to profile")
    if request.batch is not None and request.batch != profiles[0].batch:
        raise UserError(f"batch {request.batch} does not match the profile's batch {profiles[0].batch}")
    # Not check_profiles: more devices than layers leaves the pipelines without a figure, not advise refused.
    first = profiles[0].training  # the profile's precision and compile mode are what was priced
    return rank_strategies(profiles, request.with_(training=replace(request.training, precision=first.precision,
                                                                     compile=first.compile)), strategies)
