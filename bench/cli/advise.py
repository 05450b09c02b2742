"""`pipebench advise`: predict every strategy for a model on these devices, ranked, and recommend one."""
from __future__ import annotations

from pipebench.bench.cli import note


def add_parser(subparsers) -> None:
    from pipebench.bench.cli.plan import add_source_options

    advise = subparsers.add_parser(
        "advise",
        help="predict every strategy (step, samples/s, memory) and recommend the fastest that fits",
        description="Profile the model once (or load a saved profile), price every strategy from it without "
        "running any (the pipelines with the planner and its simulator, DDP's bucketed all-reduce and "
        "DataParallel's copies with the measured link), rank them by predicted samples/s and recommend the "
        "fastest that fits in memory.",
    )
    add_source_options(advise, "advise", where="GPU ids, e.g. 0,1, or auto:N for the N freest GPUs now",
                       stages="number of devices, all --device (e.g. --stages 2 --device cpu)")
    advise.add_argument("--chunks", default="auto", metavar="auto|M,M,...",
                        help="micro-batch counts the pipelines may choose from: auto (every power of two up to 64 "
                        "that splits the batch; default) or a list such as 1,2,4,8 (profiling is faster); the "
                        "device count is always profiled, for DDP and DataParallel")
    advise.set_defaults(handler=cmd_advise)


def cmd_advise(args) -> int:
    from dataclasses import replace

    from pipebench.bench.advise import advise
    from pipebench.bench.cli import training_of
    from pipebench.bench.cli.plan import load_or_profile
    from pipebench.files import write_json
    from pipebench.specs import parse_chunks

    training = training_of(args)  # an unknown value: one line now
    chunks = parse_chunks(args.chunks)
    # The whole batch (single, the calibrating whole step) and the replicas' share are always profiled.
    counts = None if None in chunks else (lambda devices: sorted({1, devices, *chunks}))
    source = load_or_profile(args, 1, counts)
    profiles, devices = source.profiles, source.devices
    caps = source.caps
    per_device = None if caps is None else ([float(caps)] * len(devices) if isinstance(caps, (int, float))
                                            else list(caps))
    advice = advise(profiles, devices, caps=per_device, speeds=source.speeds, link_gbps=args.link_gbps,
                    training=replace(training, precision=profiles[0].precision))  # the profile's own
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
