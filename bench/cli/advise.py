"""`pipebench advise`: predict every strategy for a model on these devices, ranked, and recommend one."""
from __future__ import annotations

from pipebench.bench.cli import add_model_options, add_server_options, note, speeds
from pipebench.errors import UserError


def add_parser(subparsers) -> None:
    advise = subparsers.add_parser(
        "advise",
        help="predict every strategy (step, samples/s, memory) and recommend the fastest that fits",
        description="Profile the model once (or load a saved profile), price every strategy from it without "
        "running any (the pipelines with the planner and its simulator, DDP's bucketed all-reduce and "
        "DataParallel's copies with the measured link), rank them by predicted samples/s and recommend the "
        "fastest that fits in memory.",
    )
    advise.add_argument("--model", help="a zoo model or your own (FILE.py:NAME); taken from --profile if omitted")
    advise.add_argument("--flavour", default=None, help="size flavour, e.g. tiny (default: the model's full size)")
    advise.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a model setting, e.g. --set depth=8 (repeatable)")
    advise.add_argument("--batch", type=int, help="global batch size (default: 8 on the CPU, 256 on GPUs)")
    where = advise.add_mutually_exclusive_group()
    where.add_argument("--gpus", help="GPU ids, e.g. 0,1, or auto:N for the N freest GPUs now")
    where.add_argument("--stages", type=int, help="number of devices, all --device (e.g. --stages 2 --device cpu)")
    advise.add_argument("--device", default="cpu", help="device for --stages (default: cpu)")
    add_server_options(advise)
    advise.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"],
                        help="optimizer whose state the memory prediction counts (default: sgd)")
    advise.add_argument("--link-gbps", type=float, default=None,
                        help="GB/s between devices (default: measured when profiled; 0 on the CPU)")
    advise.add_argument("--chunks", default="auto", metavar="auto|M,M,...",
                        help="micro-batch counts the pipelines may choose from: auto (every power of two up to 64 "
                        "that splits the batch; default) or a list such as 1,2,4,8 (profiling is faster); the "
                        "device count is always profiled, for DDP and DataParallel")
    advise.add_argument("--repeats", type=int, default=None, help="timed repeats per layer (default: 5 on GPUs, 3 on the CPU)")
    advise.add_argument("--profile", metavar="FILE", help="advise from a saved profile, touching no GPU")
    advise.add_argument("--save-profile", metavar="FILE", help="save the measured profile as JSON")
    advise.add_argument("--json", metavar="FILE", help="write the ranking as JSON")
    advise.add_argument("--data-dir", help="folder holding MNIST for the convnet (never downloaded)")
    add_model_options(advise)
    advise.set_defaults(handler=cmd_advise)


def cmd_advise(args) -> int:
    from pipebench.bench.advise import advise
    from pipebench.bench.cli.plan import _devices, _profile, _settings
    from pipebench.files import write_json
    from pipebench.partition.profile import load_profiles, save_profiles
    from pipebench.specs import parse_chunks, parse_link_gbps
    from pipebench.units import parse_size

    caps = parse_size(args.max_memory) if args.max_memory else None
    args.link_gbps = parse_link_gbps(args.link_gbps)
    chunks = parse_chunks(args.chunks)
    if args.profile:
        profiles = load_profiles(args.profile)
        first = profiles[0]
        if args.model and args.model != first.model:
            raise UserError(f"--model {args.model} does not match the profile's model {first.model}")
        if args.batch is not None and args.batch != first.batch:
            raise UserError(f"--batch {args.batch} does not match the profile's batch {first.batch}")
        if args.speeds == "auto":
            raise UserError("--speeds auto probes the GPUs; with --profile give the factors, e.g. --speeds 1,0.5")
        devices = _devices(args, check=False)
        factors = speeds(args.speeds, devices)
    else:
        if not args.model:
            raise UserError("--model NAME is required (or --profile FILE); see `pipebench models`")
        devices = _devices(args, check=True)
        if caps is None and getattr(args, "gpu_infos", None):
            from pipebench.hardware.gpus import free_memory_caps

            caps = free_memory_caps(args.gpu_infos)
        overrides = _settings(args, len(devices))
        factors = speeds(args.speeds, devices)
        counts = None if None in chunks else sorted({1, len(devices), *chunks})
        profiles, _ = _profile(args, devices, overrides, counts)
        if args.save_profile:
            save_profiles(profiles, args.save_profile)
            note(f"profile written to {args.save_profile}")
    per_device = None if caps is None else ([float(caps)] * len(devices) if isinstance(caps, (int, float))
                                            else list(caps))
    advice = advise(profiles, devices, caps=per_device, speeds=factors, link_gbps=args.link_gbps,
                    optimizer=args.optimizer)
    print(format_advice(advice, profiles[0], devices))
    if args.json:
        write_json(args.json, {"model": profiles[0].model, "batch": profiles[0].batch, "devices": devices,
                               **advice.to_dict()})
        note(f"ranking written to {args.json}")
    return 0


def format_advice(advice, profile, devices) -> str:
    """The ranking as a table, then one line: the recommendation."""
    import pandas as pd

    from pipebench.units import format_bytes

    single = next((p for p in advice.predictions if p.strategy == "single" and p.predicted_samples_per_s), None)
    rows = []
    for rank, p in enumerate(advice.predictions, 1):
        known = p.predicted_samples_per_s is not None
        rows.append({
            "rank": rank if known else "-",
            "strategy": p.strategy,
            "schedule": p.schedule or "-",
            "micro-batches": p.micro_batches,
            "step ms": f"{p.predicted_step_ms:.2f}" if known else "-",
            "samples/s": f"{p.predicted_samples_per_s:.1f}" if known else "-",
            "x single": f"{p.predicted_samples_per_s / single.predicted_samples_per_s:.2f}" if known and single else "-",
            "peak memory per device": " / ".join(format_bytes(b) for b in p.peak_memory_bytes) or "-",
            "fits": "yes" if p.fits else "no",
            "note": p.reason,
        })
    table = pd.DataFrame(rows).to_string(index=False)
    head = (f"{profile.model} ({profile.flavour}), batch {profile.batch}, on {len(devices)} x "
            f"{profile.device_name or devices[0]} ({', '.join(dict.fromkeys(devices)) if len(set(devices)) > 1 else devices[0]}); "
            f"predicted from the profile, nothing run")
    if advice.recommended is None:
        tail = "recommended: none fits; lower --batch, raise --max-memory, or use more devices"
    else:
        best = next(p for p in advice.predictions if p.strategy == advice.recommended)
        gain = (f", {best.predicted_samples_per_s / single.predicted_samples_per_s:.2f}x single"
                if single and best.strategy != "single" else "")
        tail = (f"recommended: {best.strategy} ({best.predicted_samples_per_s:.1f} samples/s predicted{gain}); "
                f"check it with: pipebench run --strategies single,{best.strategy}"
                if best.strategy != "single" else f"recommended: single ({best.predicted_samples_per_s:.1f} samples/s)")
    return "\n".join([head, "", table, "", tail])
