"""One profiling session: what `pipebench.profile` does once its arguments are checked.

A `ProfilingSession` holds one request's micro-batch counts, the profile cache's keys for them (made from
what was asked alone, before anything is built), the model once it must be built, and the profiles
measured or found so far. `measure(counts)` measures what the cache does not hold, `links()` times (or
finds) the link figures a plan prices its cuts with, and `profiles(rank)` runs the whole session: the
first sizes, the links, then the sizes a close choice depends on (partition/profiling/micro_batch_sizes.py).
"""
from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from pipebench.base.errors import UserError
from pipebench.partition.profiling import micro_batch_sizes
from pipebench.partition.planning.plan_choice import plan_ranking
from pipebench.partition.profiling.profile_record import Profile
from pipebench.base.schedules import DEFAULT_SCHEDULE
from pipebench.partition.profiling.micro_batch_sizes import Ranking
from pipebench.model_spec import ModelSpec
from pipebench.request import DEFAULT_REPEATS, Request
from pipebench.base.training import Training

__all__ = ["ProfilingSession", "counts_and_devices"]


def counts_and_devices(request: Request) -> tuple[list[int], list[str]]:
    """The micro-batch counts `request` measures (partition/profiling/micro_batch_sizes.py counts_to_profile) and the
    devices it names, each checked (one UserError); a Training the first device cannot run the Request
    refused when it was built."""
    from pipebench.hardware.devices import resolve_device

    counts = micro_batch_sizes.counts_to_profile(request.micro_batches, request.batch, len(request.devices))
    devices = [resolve_device(d) for d in request.devices]
    return counts, devices


class ProfilingSession:
    """One `pipebench.profile` call's state: the request, the cache keys of its sizes, the model once
    built, and the profiles measured or cached so far (`measured`). The model is built the first time a
    size must be measured, so a cache that holds every size builds none and imports no torch."""

    def __init__(self, spec: ModelSpec, request: Request, counts: list[int], devices: list[str], *,
                 note: Callable[[str], None] | None = None, progress: Callable[[int, int, str], None] | None = None,
                 on_layers: Callable[[int], None] | None = None):
        """`counts` and `devices` as `counts_and_devices(request)` checked them; the rest as for
        pipebench.profile()."""
        from pipebench.hardware.cpu import threads_per_device

        self.spec, self.model, self.request = spec, spec.model, request  # self.model: the model once built
        self.counts, self.devices, self.device = counts, devices, devices[0]
        self.note, self.progress, self.on_layers = note, progress, on_layers
        self.on_gpu = self.device.startswith("cuda")
        self.repeats = request.repeats if request.repeats is not None else DEFAULT_REPEATS["cuda" if self.on_gpu else "cpu"]
        # On the CPU, time with one device's share of the cores, holding the memory freed between runs: what
        # each worker standing in for a device gets (hardware/cpu.py).
        self.threads = None if self.on_gpu else threads_per_device(len(devices))
        self.warmup = 2 if self.on_gpu else 1
        self.asked = _Measurement(cache=request.cache, flavour=spec.flavour, settings=spec.settings, data_dir=spec.data_dir,
                                  batch=request.batch, device=self.device, devices=devices, threads=self.threads,
                                  training=request.training, repeats=self.repeats, warmup=self.warmup,
                                  granularity=request.granularity)
        self.store, self.keys, self.link_key = _cache_keys(spec.model, counts, self.asked)
        self.cached: dict[int, Profile] = self._found(counts)
        self.measured: list[Profile] = list(self.cached.values())
        self.built: dict[str, Any] = {}  # the model's device, its one capture, the threads that time it, its dtype

    def profiles(self, rank: Ranking | None = None) -> list[Profile]:
        """The session's answer: the first sizes (every count asked, or auto's anchors), the link figures on
        each profile, and under auto the sizes a close choice depends on, measured until they all are
        (micro_batch_sizes.refine; rank None: the default ranking, `default_ranking`). Fewest micro-batches first."""
        auto = self.request.micro_batches is None
        first = micro_batch_sizes.anchors(self.counts, len(self.devices)) if auto else self.counts
        if missing := [m for m in first if m not in self.cached]:
            self.measure(missing)
        if self.cached and self.note:
            self.note(f"{self._name()}: micro-batch size(s) "
                      f"{', '.join(str(self.request.batch // m) for m in sorted(self.cached, reverse=True))} from "
                      f"the profile cache ({self.store.folder}; --fresh measures again)")
        links = self.links()  # before the ranking: a plan prices its cuts with them

        def with_links(profiles: list[Profile]) -> list[Profile]:
            for p in profiles:
                for name, value in links.items():
                    setattr(p, name, value)
            return profiles

        if not auto:
            return with_links(sorted(self.measured, key=lambda p: p.micro_batches))
        rank = rank if rank is not None else default_ranking(self.devices)
        profiles = micro_batch_sizes.refine(with_links(list(self.measured)), self.counts, rank,
                                            lambda wanted: with_links(self.measure(wanted)))
        guessed = [p.micro_batch for p in profiles if p.interpolated_from]
        if guessed and self.note:
            self.note(f"{self._name()}: micro-batch size(s) {', '.join(map(str, guessed))} interpolated between "
                      f"the measured ones, not measured (partition/profiling/micro_batch_sizes.py; --micro-batches M,M,... measures them)")
        return profiles

    def measure(self, wanted: list[int]) -> list[Profile]:
        """The counts `wanted`, measured on the model's one capture unless cached; each measured one is kept
        in the cache."""
        from pipebench.hardware.cpu import held_memory, thread_budget
        from pipebench.partition.profiling.measure import profile_sizes
        from pipebench.base.snapshot import own_state

        if not self.built:
            self._build()
        new = [m for m in wanted if m not in self.cached]
        got = []
        if new:
            request = self.request
            # pipebench's torch settings again: a model file's import may have turned gradients or autocast
            # off or anomaly detection on; its default dtype is its model's (own_state)
            with own_state(self.built["dtype"]), thread_budget(self.built["threads"]), \
                    held_memory() if not self.on_gpu else contextlib.nullcontext():
                got = profile_sizes(self.model, self.built["target"], request.batch, new, repeats=self.repeats,
                                    warmup=self.warmup, note=self.note, progress=self.progress,
                                    granularity=request.granularity, training=request.training,
                                    already=len(self.measured), captures=self.built["captures"])
            if self.on_layers is not None:  # a model of your own's, captured: before the links are timed
                self.on_layers(len(got[0].layers))
                self.on_layers = None
            for p in got:
                if self.store is not None:
                    self.store.put(self.keys[p.micro_batches], p)
            self.measured.extend(got)
        return [self.cached[m] for m in wanted if m in self.cached] + got

    def links(self) -> dict[str, float | None]:
        """The link figures the profiles carry (`_links`): from the cache when every size came from it too,
        or from the link cache where the profile cache is off (partition/profiling/cache.py link_cache); what is
        timed is kept there."""
        from pipebench.partition.profiling.cache import link_cache

        request, store = self.request, self.store
        kept = store if store is not None else (link_cache() if request.cache else None)
        reuse = kept if not request.fresh and (store is None or len(self.measured) == len(self.cached)) else None
        return _links(self.devices, self.on_gpu, request.link_gbps, self.note, store=reuse, keep=kept,
                      key=self.link_key)

    def _found(self, counts: Sequence[int]) -> dict[int, Profile]:
        """The counts among `counts` the profile cache holds, under the current keys (none when fresh)."""
        if self.request.fresh or self.store is None:
            return {}
        return {m: p for m in counts if (p := self.store.get(self.keys[m])) is not None}

    def _name(self) -> str:
        return getattr(self.model, "name", self.model)

    def _build(self) -> None:
        """Build the model, the first time a size must be measured: a cached answer never waits for it. A
        zoo name given without a flavour learns the zoo's default here, and the cache is asked again under it."""
        import torch

        from pipebench.model_spec import is_user_model
        from pipebench.models import LayeredModel, UserModel, get_model
        from pipebench.partition.profiling.measure import Captures
        from pipebench.base.training import set_precision

        target = torch.device(self.device)
        if self.on_gpu:
            set_precision(self.request.training)
            torch.cuda.set_device(target)
        model = self.model
        if isinstance(model, str):
            if self.on_layers is not None and not is_user_model(model):  # the zoo's layers, on the meta device
                self.on_layers(len(get_model(model, self.spec.flavour, device="meta", **(self.spec.settings or {}))))
                self.on_layers = None
            self.model = get_model(model, self.spec.flavour, device=target, data_dir=self.spec.data_dir,
                                   **(self.spec.settings or {}))
            if self.store is not None and self.spec.flavour is None and isinstance(self.model, LayeredModel):
                self.store.learn_flavour(model, self.model.flavour)  # the zoo's default
                self.keys = _cache_keys(model, self.counts, replace(self.asked, flavour=self.model.flavour))[1]
                found = self._found([m for m in self.counts if m not in self.cached])
                self.cached.update(found)
                self.measured.extend(found.values())
        elif isinstance(model, torch.nn.Module):
            from pipebench.models.source import object_model

            self.model = object_model(model, self.spec.example_inputs, self.spec.settings, self.spec.loss_fn)
        elif not isinstance(model, (LayeredModel, UserModel)):
            raise UserError(f"model must be a registry name, FILE.py:NAME, an nn.Module or a LayeredModel, "
                            f"not {type(model).__name__}")
        self.built.update(target=target, captures=Captures(self.note), threads=self.threads or torch.get_num_threads(),
                          dtype=torch.get_default_dtype())  # a model file's, set at its import


def default_ranking(devices: Sequence[str] | None) -> Ranking | None:
    """What ranks the micro-batch counts when the caller gives nothing: on two or more devices, the
    default schedule's plan over them; on one, nothing (no pipeline to choose for)."""
    if not devices or len(devices) < 2:
        return None
    return plan_ranking(Request(devices=tuple(devices), schedule=DEFAULT_SCHEDULE))


@dataclass(frozen=True)
class _Measurement:
    """What a session is asked to measure, as its cache keys name it (partition/profiling/cache.py)."""

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
    or the model is an object (partition/profiling/cache.py)."""
    from pipebench.partition.profiling.cache import (ProfileCache, cache_enabled, check_cache_folders, device_label, link_cache,
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
    from pipebench.hardware.drift import drift_seconds, measure_machine_drift
    from pipebench.hardware.gpu_probes import measure_allreduce_gbps, measure_stage_link
    from pipebench.partition.profiling.cache import LINK_FIELDS

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
            links.update(_cpu_processes(len(devices)))
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


def _cpu_processes(devices: int) -> dict[str, float]:
    """What CPU stand-ins for `devices` devices cost each other (hardware/cpu_processes.py), in the profile's
    terms: the pipeline runtime's step as the hop and the cost per operation that make the simulator price
    it (pipeline_costs)."""
    from pipebench.hardware.cpu_processes import PIPELINE_MICRO_BATCHES, measure_cpu_processes
    from pipebench.partition.planning.simulator import pipeline_costs

    figures = measure_cpu_processes(devices)
    hop, action = pipeline_costs(figures.pop("pipeline_step_ms"), devices, PIPELINE_MICRO_BATCHES,
                                 figures["link_latency_ms"])
    return {**figures, "link_latency_ms": hop, "action_ms": action}
