"""`pipebench plan`: profile a model (or load a saved profile) and print a balanced pipeline plan."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

from pipebench.bench.cli.common import add_model_options, add_server_options, add_training_options, training_of, model_settings, auto_gpus, note, speeds
from pipebench.errors import UserError
from pipebench.specs import is_user_model
from pipebench.partition.schedule import DEFAULT_SCHEDULE, SCHEDULES as SIMULATED_SCHEDULES
from pipebench.training import DEFAULT_PRECISION


def add_parser(subparsers) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="profile a model and print a balanced pipeline plan",
        description="Profile each layer at the micro-batch sizes considered, cut the model into balanced "
        "contiguous stages with the exact solver, simulate the schedule and print the plan beside the "
        "parameter-balanced baseline.",
    )
    add_source_options(plan, "plan", where="GPU ids, one stage each, e.g. 0,1, or auto:N for the N freest GPUs now",
                       stages="number of stages, all on --device")
    plan.add_argument("--chunks", default="auto",
                      help="micro-batch count, or auto to pick the fastest predicted (default: auto; a few sizes "
                      "are measured, the others interpolated, and those predicted within 5%% of the best measured)")
    plan.add_argument("--schedule", default=DEFAULT_SCHEDULE, choices=list(SIMULATED_SCHEDULES),
                      help=f"pipeline schedule to plan for (default: {DEFAULT_SCHEDULE})")
    plan.add_argument("--virtual-stages", default=None, metavar="V",
                      help="stages per device for interleaved, zb-interleaved and zbv (default: 2; 1 otherwise)")
    plan.add_argument("--balance", default="time", choices=["time", "params", "uniform"],
                      help="what to balance: profiled time (default), parameter counts or layer counts")
    plan.add_argument("--export", nargs=2, metavar=("ENGINE", "FILE"),
                      help="also write the plan in an engine's own terms as JSON: torchtitan, deepspeed, megatron "
                      "or device-map (see docs/engines.md)")
    plan.set_defaults(handler=cmd_plan)


def add_source_options(parser, command: str, *, where: str, stages: str) -> None:
    """What plan and advise share: the model, the devices, the server's limits, and where the profile
    comes from (measured now, or a saved file)."""
    parser.add_argument("--model", help="a zoo model (see `pipebench models`), or your own: path/to/file.py:NAME or "
                        "package.module:NAME (NAME: an nn.Module class or a function returning one); taken from "
                        "--profile if omitted")
    parser.add_argument("--flavour", default=None, help="size flavour, e.g. tiny (default: the model's full size)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a model setting, e.g. --set depth=8 (repeatable)")
    parser.add_argument("--batch", help="global batch size (default: 8 on the CPU, 256 on GPUs)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--gpus", help=where)
    group.add_argument("--stages", help=stages)
    parser.add_argument("--device", default="cpu", help="device for --stages (default: cpu)")
    add_server_options(parser)
    add_training_options(parser)
    parser.add_argument("--link-gbps", default=None,
                        help="GB/s between devices to price transfers (default: what the profile measured, "
                        "between the first two GPUs; gloo's between CPU processes)")
    parser.add_argument("--repeats", default=None,
                        help="timed repeats per layer (default: 5 on GPUs, 3 on the CPU)")
    parser.add_argument("--profile", metavar="FILE", help=f"{command} from a saved profile, touching no GPU")
    parser.add_argument("--fresh", action="store_true",
                        help="measure again instead of reusing the profile cache (~/.cache/pipebench)")
    parser.add_argument("--save-profile", metavar="FILE", help="save the measured profile as JSON")
    parser.add_argument("--json", metavar="FILE", help=f"write the {command} as JSON" if command != "advise"
                        else "write the ranking as JSON")
    parser.add_argument("--data-dir", help="folder holding MNIST for the convnet (never downloaded)")
    add_model_options(parser)


class Source(NamedTuple):
    """What plan and advise work from: the profiles, the devices, their speed factors and memory caps."""

    profiles: list
    devices: list[str]
    speeds: list[float] | None
    caps: float | list[float] | None


def check_outputs(args) -> None:
    """--json and --save-profile, checked before anything is profiled (files.writable_file)."""
    from pipebench.files import writable_file

    for option, path in (("--json", args.json), ("--save-profile", args.save_profile)):
        if path is not None:
            writable_file(path, option)


def load_or_profile(args, stages_per_device: int = 1, counts=None, ranking=None) -> Source:
    """The saved profile (--profile, checked against --model and --batch; no GPU touched), or a new one
    measured on the devices asked for, at the micro-batch counts `counts(device count)` gives (None:
    --chunks), and saved when --save-profile says so. Sets args.link_gbps to the parsed --link-gbps.
    ranking(devices, speeds, caps): what ranks the counts under --chunks auto (pipebench.profile's rank)."""
    from pipebench.partition.profile import load_profiles, save_profiles
    from pipebench.specs import parse_link_gbps
    from pipebench.units import parse_size

    caps = parse_size(args.max_memory) if args.max_memory else None
    args.link_gbps = parse_link_gbps(args.link_gbps)
    if args.profile:
        profiles = load_profiles(args.profile)
        first = profiles[0]
        if args.model and args.model != first.model:
            raise UserError(f"--model {args.model} does not match the profile's model {first.model}")
        if args.batch is not None and args.batch != first.batch:
            raise UserError(f"--batch {args.batch} does not match the profile's batch {first.batch}")
        if args.precision != DEFAULT_PRECISION and args.precision != first.precision:
            raise UserError(f"--precision {args.precision} does not match the profile's {first.precision}; "
                            "profile again in that precision")
        if args.speeds == "auto":
            raise UserError("--speeds auto probes the GPUs; with --profile give the factors, e.g. --speeds 1,0.5")
        devices = _devices(args, check=False)
        return Source(profiles, devices, speeds(args.speeds, devices), caps)
    if not args.model:
        raise UserError("--model NAME is required (or --profile FILE); see `pipebench models`")
    devices = _devices(args, check=True)
    overrides = _settings(args)
    if caps is None and getattr(args, "gpu_infos", None):
        from pipebench.hardware.gpus import free_memory_caps

        caps = free_memory_caps(args.gpu_infos)
    factors = speeds(args.speeds, devices)
    stages = len(devices) * stages_per_device
    profiles, _ = _profile(args, devices, overrides, counts(len(devices)) if counts else None,
                           check=lambda: _check_stages(args, overrides, stages),
                           rank=ranking(devices, factors, caps) if ranking else None)
    if not is_user_model(args.model) and stages > len(profiles[0].layers):  # as _check_stages, for a cached one
        raise UserError(f"more stages than layers ({stages} > {len(profiles[0].layers)})")
    if args.save_profile:
        save_profiles(profiles, args.save_profile)
        note(f"profile written to {args.save_profile}")
    return Source(profiles, devices, factors, caps)


def cmd_plan(args) -> int:
    from pipebench.files import write_json
    from pipebench.partition.engines import check_engine, summary
    from pipebench.partition.plan import check_recompute, make_plan, shared_cores
    from pipebench.partition.plan_text import format_plan
    from pipebench.specs import micro_batch_counts, parse_chunks, virtual_stages

    chunks = parse_chunks(args.chunks, single=True)[0]
    check_outputs(args)
    training_of(args)  # an unknown precision, optimizer or checkpoint mode: one line now
    if args.export:
        check_engine(args.export[0])
    virtual = virtual_stages(args.schedule, args.virtual_stages)
    check_recompute(args.schedule, args.checkpoint)  # refused before profiling, not after
    def ranking(devices, speeds, caps):
        from pipebench.partition.plan import plan_ranking

        return plan_ranking(devices, schedule=args.schedule, balance=args.balance, max_memory=caps, speeds=speeds,
                            optimizer=args.optimizer, virtual_stages=virtual, checkpoint=args.checkpoint,
                            **({"link_gbps": args.link_gbps} if args.link_gbps is not None else {}))

    source = load_or_profile(args, virtual, ranking=ranking)
    profiles, devices, max_memory = source.profiles, source.devices, source.caps
    micro_batch_counts(chunks, profiles[0].batch)
    if len(devices) * virtual > len(profiles[0].layers):
        raise UserError(f"more stages than layers ({len(devices) * virtual} > {len(profiles[0].layers)})")
    # The link the profile measured prices the cuts, unless --link-gbps says otherwise.
    first = profiles[0]
    link_gbps = args.link_gbps if args.link_gbps is not None else (first.link_gbps or 0.0)
    latency = (first.link_latency_ms or 0.0) if args.link_gbps is None else 0.0
    common = dict(schedule=args.schedule, link_gbps=link_gbps, link_latency_ms=latency, optimizer=args.optimizer,
                  virtual_stages=virtual, checkpoint=args.checkpoint, shared_cores=shared_cores(first, devices))
    plan = make_plan(profiles, devices, balance=args.balance, micro_batches=chunks,
                     max_memory=max_memory, speeds=source.speeds, **common)
    baseline = make_plan(profiles, devices, balance="params", micro_batches=plan.micro_batches, **common)
    print(format_plan(plan, baseline, max_memory))
    if args.json:
        plan.save(args.json)
        print(f"plan written to {args.json}")
    if args.export:
        (engine, path), exported = args.export, plan.export(args.export[0], profiles)
        write_json(path, exported)
        print(f"{summary(exported)}; {engine} export written to {path}")
    return 0


def _devices(args, check: bool) -> list[str]:
    """The device of each stage: --gpus (checked to exist when `check`), else --stages on --device.
    Sets args.gpu_infos to what NVML says of the GPUs taken, for the default memory caps."""
    from pipebench.hardware.probes import check_gpus, resolve_device
    from pipebench.specs import parse_gpus

    if args.gpus is not None:
        if args.gpus.startswith("auto"):
            if not check:
                raise UserError("--gpus auto:N looks at the GPUs now; with --profile name them, e.g. --gpus 0,1")
            ids, args.gpu_infos = auto_gpus(args.gpus)
            return check_gpus(ids)
        ids = parse_gpus(args.gpus)
        if not check:
            return [f"cuda:{i}" for i in ids]
        devices = check_gpus(ids)
        from pipebench.hardware.gpus import parse_gpu_choice

        args.gpu_infos = parse_gpu_choice(args.gpus)[1] or None
        return devices
    stages = 2 if args.stages is None else args.stages
    return [resolve_device(args.device, check=check)] * stages


def _settings(args) -> dict:
    """The model's settings: --set, and --input-shape and friends for a model of your own, read (nothing
    is built: a cached answer needs no model)."""
    from pipebench.specs import parse_override

    overrides = {**dict(parse_override(o) for o in args.overrides), **model_settings(args, [args.model])}
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise UserError(f"--data-dir {args.data_dir}: {'not a folder' if Path(args.data_dir).exists() else 'no such folder'}")
    return overrides


def _check_stages(args, overrides: dict, stages: int) -> None:
    """Before anything is measured: a zoo model is built on the meta device (no memory, no time), which
    checks its settings and counts its layers, so --stages 11 for a 10-layer model is refused at once. A
    model of your own is counted once torch.export has captured it, as profiling starts."""
    from pipebench.models import get_model

    if not is_user_model(args.model):
        layers = len(get_model(args.model, args.flavour, device="meta", **overrides))
        if stages > layers:
            raise UserError(f"more stages than layers ({stages} > {layers})")


def _profile(args, devices: list[str], overrides: dict, counts: list[int] | None = None, check=None,
             rank=None):
    """Profile through the library (pipebench.profile) at every micro-batch size considered (`counts`,
    else --chunks), calling `check()` before anything is measured; (profiles, link GB/s between the first
    two GPUs, measured unless --link-gbps gives it)."""
    import pipebench
    from pipebench.progress import ProgressBar
    from pipebench.specs import micro_batch_counts, parse_chunks

    on_gpu = devices[0].startswith("cuda")
    batch = args.batch if args.batch is not None else (256 if on_gpu else 8)
    for count in counts or parse_chunks(args.chunks, single=True):
        micro_batch_counts(count, batch)
    with ProgressBar() as progress:
        profiles = pipebench.profile(args.model, batch=batch, device=devices[0], devices=devices,
                                     micro_batches=counts or args.chunks, repeats=args.repeats, flavour=args.flavour,
                                     settings=overrides, data_dir=args.data_dir, link_gbps=args.link_gbps, note=note,
                                     precision=args.precision, optimizer=args.optimizer, fresh=args.fresh,
                                     progress=progress, before_measuring=check, rank=rank)
    return profiles, profiles[0].link_gbps or 0.0
