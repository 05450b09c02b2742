"""`pipebench`: list models, and plan a pipeline before anything runs.

Bad input (unknown model, impossible split, malformed file, missing GPU) ends with one line on stderr
and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from partition.schedule import SCHEDULES as SIMULATED_SCHEDULES
from partition.solver import format_bytes

__all__ = ["main"]

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input the user can fix; printed as one line, exit status 2."""


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("pipebench: interrupted", file=sys.stderr)
        return 130
    except ValueError as exc:
        # Our modules raise ValueError subclasses for bad input (unknown model, malformed profile,
        # memory caps nothing fits, missing GPU); anything else is a bug and keeps its traceback.
        if type(exc).__module__.split(".")[0] in ("models", "partition", "bench") or type(exc) is ValueError:
            return _fail(str(exc))
        raise


def _fail(message: str) -> int:
    print(f"pipebench: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pipebench",
        description="Plan, run and measure pipeline-parallel training across the GPUs of one server.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    models = sub.add_parser("models", help="list the model zoo with sizes")
    models.set_defaults(handler=cmd_models)

    plan = sub.add_parser(
        "plan",
        help="profile a model and print a balanced pipeline plan",
        description="Profile each layer at the micro-batch sizes considered, cut the model into balanced "
        "contiguous stages with the exact solver, simulate the schedule and print the plan beside the "
        "parameter-balanced baseline.",
    )
    plan.add_argument("--model", help="model name (see `pipebench models`); taken from --profile if omitted")
    plan.add_argument("--flavour", default=None, help="size flavour, e.g. tiny (default: the model's full size)")
    plan.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a model setting, e.g. --set depth=8 (repeatable)")
    plan.add_argument("--batch", type=int, help="global batch size (default: 8 on the CPU, 256 on GPUs)")
    where = plan.add_mutually_exclusive_group()
    where.add_argument("--gpus", help="GPU ids, one stage each, e.g. 0,1, or auto:N for the N freest GPUs now")
    where.add_argument("--stages", type=int, help="number of stages, all on --device")
    plan.add_argument("--device", default="cpu", help="device for --stages (default: cpu)")
    plan.add_argument("--chunks", default="auto",
                      help="micro-batch count, or auto to pick the fastest predicted (default: auto)")
    plan.add_argument("--schedule", default="1f1b", choices=list(SIMULATED_SCHEDULES),
                      help="pipeline schedule to plan for (default: 1f1b)")
    plan.add_argument("--virtual-stages", type=int, default=None, metavar="V",
                      help="stages per device for interleaved, zb-interleaved and zbv (default: 2; 1 otherwise)")
    plan.add_argument("--balance", default="time", choices=["time", "params", "uniform"],
                      help="what to balance: profiled time (default), parameter counts or layer counts")
    _add_shared_server_options(plan)
    plan.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"],
                      help="optimizer whose state the memory prediction counts (default: sgd)")
    plan.add_argument("--link-gbps", type=float, default=None,
                      help="GB/s between stages to price activation transfers (default: measured between "
                      "the first two GPUs; 0 on the CPU)")
    plan.add_argument("--repeats", type=int, default=None, help="timed repeats per layer (default: 5 on GPUs, 3 on the CPU)")
    plan.add_argument("--profile", metavar="FILE", help="plan from a saved profile, touching no GPU")
    plan.add_argument("--save-profile", metavar="FILE", help="save the measured profile as JSON")
    plan.add_argument("--json", metavar="FILE", help="write the plan as JSON")
    plan.add_argument("--data-dir", help="folder holding MNIST for the convnet (never downloaded)")
    plan.set_defaults(handler=cmd_plan)

    run = sub.add_parser(
        "run", help="run the benchmark suite and write one results row per case",
        description="Train every model with every strategy on the chosen GPUs, side by side in one run; "
        "append one row per case to <out>/<date>-<host>-<hardware>.csv and .json as each case ends.",
    )
    run.add_argument("--models", help="comma-separated models (default: gpt,resnet101)")
    run.add_argument("--strategies", help="comma-separated strategies (default: all; see below)")
    run.add_argument("--gpus", help="GPU ids, e.g. 0,1, or auto:N for the N freest GPUs now (default: every "
                     "visible GPU; the CPU when there is none)")
    run.add_argument("--batch", type=int, help="global batch for every model (default: gpt 64, resnet101 256)")
    run.add_argument("--chunks", default="auto",
                     help="micro-batch counts for pipelines, e.g. 2,4,8 or auto (the planner's; default)")
    run.add_argument("--flavour", help="size flavour for every model (default: full size)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a model setting for every model (repeatable)")
    run.add_argument("--quick", action="store_true",
                     help="tiny flavours of every strategy, batch 8: a couple of minutes on a 2-core CPU")
    run.add_argument("--resume", action="store_true", help="skip cases already in today's results file")
    run.add_argument("--out", default="results", help="folder for the results files (default: results)")
    run.add_argument("--steps", type=int, default=5, help="timed steps per case (default: 5)")
    run.add_argument("--warmup", type=int, default=2, help="untimed steps first (default: 2)")
    run.add_argument("--timeout", type=float, default=1800, help="seconds before a case is stopped (default: 1800)")
    run.add_argument("--repeats", type=int, default=None, help="timed repeats per layer when profiling")
    _add_shared_server_options(run)
    run.add_argument("--profiles", help="folder of saved profiles to reuse (default: beside the results file)")
    run.epilog = "strategies: single, dataparallel, ddp, modelparallel, pipeline, pp-gpipe, pp-1f1b, " \
                 "pp-interleaved, pp-zb, pp-zbv"
    run.set_defaults(handler=cmd_run)

    devices = sub.add_parser("devices", help="the GPUs, what is free on them, and the links between them",
                             description="List every visible GPU through NVML (memory, utilisation, other "
                             "processes) and time a copy between each pair of the chosen GPUs.")
    devices.add_argument("--gpus", help="GPUs whose links to time, e.g. 0,1 or auto:2 (default: all visible)")
    devices.add_argument("--no-links", action="store_true", help="skip the link bandwidth probe")
    devices.set_defaults(handler=cmd_devices)

    report = sub.add_parser("report", help="tables and plots from results files",
                            description="Summarise results files (speed-ups, efficiency, predicted against "
                            "measured) into report.md, summary.csv and PNG plots.")
    report.add_argument("files", nargs="*", help="results .json/.csv files or folders (default: results)")
    report.add_argument("--out", help="folder for the report (default: <first file>-report)")
    report.set_defaults(handler=cmd_report)
    return parser


# ------------------------------------------------------------------------------------------------- run

def _add_shared_server_options(parser: argparse.ArgumentParser) -> None:
    """--max-memory and --speeds, which plan and run share (run applies them to each plan it makes)."""
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="memory cap per GPU, e.g. 20GiB or 512MB (default on GPUs: what is free at the "
                        "start, less 5%% of the total or 1 GiB)")
    parser.add_argument("--speeds", metavar="auto|F,F,...",
                        help="speed factor per GPU for the solver: auto runs a short matrix-product probe on each "
                        "(a busy GPU gets fewer layers); default: all equal")


def cmd_run(args) -> int:
    from bench import run as suite_run
    from bench.suite import detect_machine
    from partition.devices import parse_gpu_ids

    for name in ("steps", "warmup"):
        if getattr(args, name) < (1 if name == "steps" else 0):
            raise UsageError(f"--{name} must be at least {1 if name == 'steps' else 0} (got {getattr(args, name)})")
    if args.batch is not None and args.batch < 1:
        raise UsageError(f"--batch must be at least 1 (got {args.batch})")
    options = suite_run.RunOptions(
        models=suite_run.parse_models(args.models, args.batch),
        strategies=suite_run.parse_strategies(args.strategies),
        chunks=suite_run.parse_chunks(args.chunks),
        flavour=args.flavour, overrides=dict(_parse_override(o) for o in args.overrides), out=Path(args.out), resume=args.resume,
        steps=args.steps, warmup=args.warmup, timeout=args.timeout, repeats=args.repeats,
        profiles=Path(args.profiles) if args.profiles else None,
    )
    ids = None
    if args.gpus and args.gpus.startswith("auto"):
        from partition.gpus import parse_gpu_choice

        ids, infos = parse_gpu_choice(args.gpus)
        _announce_choice(infos)
    elif args.gpus:
        ids = parse_gpu_ids(args.gpus)
    cap = parse_size(args.max_memory) if args.max_memory else None
    machine = detect_machine(ids)
    if cap is not None:
        machine.caps = [cap] * machine.devices
    if machine.gpus is None:
        _note(f"no CUDA GPU visible: running on the CPU, {machine.devices} processes standing in for GPUs "
              "(gloo), tiny flavours")
        args.quick = True
    if args.quick:
        options = suite_run.quick_options(options)
    if args.speeds == "auto" and machine.gpus is not None:
        from bench.suite import probe_speeds

        machine.speeds = probe_speeds(machine)
        _note("speed probe: " + ", ".join(f"GPU {g} {s:.2f}" for g, s in zip(machine.gpus, machine.speeds)))
    elif args.speeds is not None:
        machine.speeds = _speeds(args.speeds, [f"{machine.device_type}:{i}" for i in range(machine.devices)])
    try:
        rows, csv_path, json_path = suite_run.run_suite(options, machine, note=_note)
    except KeyboardInterrupt:
        _note(f"pipebench: interrupted; finished rows are kept in {options.out}; --resume continues")
        return 130
    print(suite_run.summary_table(rows))
    print(f"\nresults: {csv_path}\n         {json_path}")
    print(f"report:  pipebench report {json_path}")
    return 0


# --------------------------------------------------------------------------------------------- devices

def cmd_devices(args) -> int:
    from partition.gpus import parse_gpu_choice, query_gpus

    infos = query_gpus()
    if not infos:
        print("no NVIDIA GPU visible here (NVML found none); pipebench runs on the CPU with gloo processes")
        return 0
    print(format_gpus(infos))
    chosen = parse_gpu_choice(args.gpus)[0] if args.gpus else [g.index for g in infos]
    missing = [i for i in chosen if i >= len(infos)]
    if missing:
        raise UsageError(f"GPU {missing[0]} does not exist: {len(infos)} visible")
    if args.no_links or len(chosen) < 2:
        return 0
    from partition.devices import measure_link_gbps

    print("\nlink bandwidth (GB/s, timed device-to-device copy of 256 MB; row sends to column):")
    table = {f"GPU {a}": {f"GPU {b}": ("-" if a == b else f"{measure_link_gbps(f'cuda:{a}', f'cuda:{b}'):.0f}")
                          for b in chosen} for a in chosen}
    import pandas as pd

    print(pd.DataFrame(table).T.to_string())
    return 0


def format_gpus(infos) -> str:
    import pandas as pd

    rows = [{"gpu": g.index, "nvidia-smi id": g.physical, "name": g.name,
             "used GiB": f"{g.memory_used / 2**30:.1f}", "free GiB": f"{g.memory_free / 2**30:.1f}",
             "total GiB": f"{g.memory_total / 2**30:.1f}", "busy %": g.utilisation, "processes": g.processes}
            for g in infos]
    return pd.DataFrame(rows).to_string(index=False)


# ---------------------------------------------------------------------------------------------- report

def cmd_report(args) -> int:
    from bench.report import frame, markdown_table, recommend, summarise, write_report
    from bench.results import load

    files = args.files or ["results"]
    rows = load(files)
    if not rows:
        raise UsageError(f"no results rows in {', '.join(files)}")
    out = Path(args.out) if args.out else _default_report_dir(Path(files[0]))
    summary = summarise(frame(rows))
    print(markdown_table(summary))
    print()
    print("\n".join(recommend(summary)))
    written = write_report(rows, out, command=" ".join(["pipebench", "report", *args.files]))
    for note in written.notes:
        _note(note)
    print("\nwrote " + ", ".join(str(p) for p in written.paths))
    return 0


def _default_report_dir(first: Path) -> Path:
    if first.is_dir():
        return first / "report"
    return first.with_name(first.stem + "-report")


# ---------------------------------------------------------------------------------------------- models

def cmd_models(args) -> int:
    import pandas as pd

    import models

    rows = []
    for info in models.list_models():
        sizes = {f: models.get_model(info.name, f, device="meta") for f in info.flavours}  # no memory used
        default = sizes[info.default_flavour]
        rows.append({
            "model": info.name,
            "layers": len(default),
            "parameters": _count(default.num_parameters()),
            "flavours": ", ".join(
                f"{f}{'*' if f == info.default_flavour else ''} ({_count(m.num_parameters())})" for f, m in sizes.items()
            ),
            "description": info.description,
        })
    table = pd.DataFrame(rows)
    left = {c: (lambda w: lambda v: f"{v:<{w}}")(table[c].str.len().max()) for c in ("model", "flavours", "description")}
    print(table.to_string(index=False, formatters=left, justify="left"))
    print("* default flavour; layers and parameters are the default's")
    return 0


# ------------------------------------------------------------------------------------------------ plan

def cmd_plan(args) -> int:
    from partition.plan import make_plan
    from partition.profile import load_profiles, save_profiles

    max_memory = parse_size(args.max_memory) if args.max_memory else None
    virtual = _virtual_stages(args.schedule, args.virtual_stages)
    speeds = None
    if args.profile:
        profiles = load_profiles(args.profile)
        first = profiles[0]
        if args.model and args.model != first.model:
            raise UsageError(f"--model {args.model} does not match the profile's model {first.model}")
        if args.batch is not None and args.batch != first.batch:
            raise UsageError(f"--batch {args.batch} does not match the profile's batch {first.batch}")
        devices, link_gbps = _devices(args, check=False), args.link_gbps or 0.0
        if args.speeds == "auto":
            raise UsageError("--speeds auto probes the GPUs; with --profile give the factors, e.g. --speeds 1,0.5")
        speeds = _speeds(args.speeds, devices)
        _check_chunks(args.chunks, first.batch)
    else:
        if not args.model:
            raise UsageError("--model NAME is required (or --profile FILE); see `pipebench models`")
        devices = _devices(args, check=True)
        if max_memory is None and getattr(args, "gpu_infos", None):
            from partition.gpus import free_memory_caps

            max_memory = free_memory_caps(args.gpu_infos)
        speeds = _speeds(args.speeds, devices)
        profiles, link_gbps = _profile(args, devices)
        if args.save_profile:
            save_profiles(profiles, args.save_profile)
    if len(devices) * virtual > len(profiles[0].layers):
        raise UsageError(f"more stages than layers ({len(devices) * virtual} > {len(profiles[0].layers)})")

    chunks = None if args.chunks == "auto" else int(args.chunks)
    common = dict(schedule=args.schedule, link_gbps=link_gbps, optimizer=args.optimizer, virtual_stages=virtual)
    plan = make_plan(profiles, devices, balance=args.balance, micro_batches=chunks, max_memory=max_memory,
                     speeds=speeds, **common)
    baseline = make_plan(profiles, devices, balance="params", micro_batches=plan.micro_batches, **common)
    print(format_plan(plan, baseline, max_memory))
    if args.save_profile and not args.profile:
        print(f"profile written to {args.save_profile}")
    if args.json:
        plan.save(args.json)
        print(f"plan written to {args.json}")
    return 0


def _virtual_stages(schedule: str, asked: int | None) -> int:
    """Stages per device: 1 for gpipe and 1f1b, 2 by default for the multi-stage schedules."""
    if schedule in ("gpipe", "1f1b"):
        if asked not in (None, 1):
            raise UsageError(f"--virtual-stages {asked}: {schedule} runs one stage per device")
        return 1
    if asked is None:
        return 2
    if schedule == "zbv" and asked != 2:
        raise UsageError(f"--virtual-stages {asked}: zbv runs exactly 2 stages per device")
    if asked < 1:
        raise UsageError(f"--virtual-stages takes a positive integer (got {asked})")
    return asked


def _announce_choice(infos) -> None:
    """--gpus auto:N says which GPUs it took, and why, before anything runs."""
    _note("chose GPUs " + ", ".join(
        f"{g.index} ({g.name}, {g.memory_free / 2**30:.1f} GiB free, {g.utilisation}% busy, "
        f"{g.processes} process(es))" for g in infos))


def _speeds(spec: str | None, devices: list[str]) -> list[float] | None:
    """--speeds: None (equal), 'auto' (probe each GPU), or one factor per device."""
    if spec is None:
        return None
    if spec == "auto":
        if not devices[0].startswith("cuda"):
            raise UsageError("--speeds auto probes GPUs; on the CPU give the factors, e.g. --speeds 1,0.5")
        from partition.devices import measure_speeds

        speeds = measure_speeds(sorted(set(devices), key=devices.index))
        _note("speed probe: " + ", ".join(f"{d} {s:.2f}" for d, s in zip(sorted(set(devices), key=devices.index), speeds)))
        return speeds
    try:
        speeds = [float(part) for part in spec.split(",")]
    except ValueError:
        raise UsageError(f"--speeds takes auto or comma-separated positive numbers (got {spec!r})") from None
    if len(speeds) != len(devices) or any(s <= 0 for s in speeds):
        raise UsageError(f"--speeds needs one positive factor per device ({len(devices)}), got {spec!r}")
    return speeds


def _devices(args, check: bool) -> list[str]:
    from partition.devices import check_gpus

    if args.gpus is not None:
        if args.gpus.startswith("auto"):
            if not check:
                raise UsageError("--gpus auto:N looks at the GPUs now; with --profile name them, e.g. --gpus 0,1")
            from partition.gpus import parse_gpu_choice

            ids, infos = parse_gpu_choice(args.gpus)
            _announce_choice(infos)
            args.gpu_infos = infos
            return check_gpus(ids)
        from partition.devices import parse_gpu_ids

        ids = parse_gpu_ids(args.gpus)
        if not check:
            return [f"cuda:{i}" for i in ids]
        devices = check_gpus(ids)
        from partition.gpus import parse_gpu_choice

        args.gpu_infos = parse_gpu_choice(args.gpus)[1] or None
        return devices
    stages = 2 if args.stages is None else args.stages
    if stages < 1:
        raise UsageError(f"--stages must be at least 1 (got {stages})")
    if check and args.device.startswith("cuda"):
        from partition.devices import check_gpus

        index = int(args.device.partition(":")[2] or 0)
        check_gpus([index])
    return [args.device] * stages


def _check_chunks(chunks: str, batch: int) -> list[int]:
    """Micro-batch counts to profile: the one asked for, or the powers of two that split the batch."""
    if chunks == "auto":
        counts = [m for m in (1, 2, 4, 8, 16, 32, 64) if m <= batch and batch % m == 0]
        return counts
    if not re.fullmatch(r"[1-9][0-9]*", chunks):
        raise UsageError(f"--chunks takes a positive integer or auto (got {chunks!r})")
    m = int(chunks)
    if batch % m:
        raise UsageError(f"batch {batch} does not split into {m} equal micro-batches")
    return [m]


def _profile(args, devices):
    import torch

    import models
    from partition.devices import measure_link_gbps
    from partition.profiler import profile_model, set_fast_math

    on_gpu = devices[0].startswith("cuda")
    batch = args.batch if args.batch is not None else (256 if on_gpu else 8)
    if batch < 1:
        raise UsageError(f"--batch must be at least 1 (got {batch})")
    counts = _check_chunks(args.chunks, batch)
    overrides = dict(_parse_override(o) for o in args.overrides)
    device = torch.device(devices[0])
    if on_gpu:
        set_fast_math()
        torch.cuda.set_device(device)
    model = models.get_model(args.model, args.flavour, device=device, data_dir=args.data_dir, **overrides)
    link_gbps = args.link_gbps
    if link_gbps is None:
        distinct = list(dict.fromkeys(devices))
        link_gbps = measure_link_gbps(distinct[0], distinct[1]) if on_gpu and len(distinct) > 1 else 0.0
        if link_gbps:
            _note(f"link {distinct[0]} -> {distinct[1]}: {link_gbps:.0f} GB/s (timed copy)")
    repeats = args.repeats if args.repeats is not None else (5 if on_gpu else 3)
    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1 (got {repeats})")
    warmup = 2 if on_gpu else 1
    profiles = []
    started = time.perf_counter()
    _note(f"profiling {model.name} ({model.flavour}, {len(model)} layers) on {device} at "
          f"{len(counts)} micro-batch size(s) for batch {batch}")
    for k, m in enumerate(counts, 1):
        size = batch // m
        t0 = time.perf_counter()

        def progress(i, n, name, size=size, k=k):
            _note(f"  [{k}/{len(counts)}] micro-batch {size}: layer {i + 1}/{n} {name}", end="\r")

        try:
            profiles.append(profile_model(model, device, size, batch=batch, repeats=repeats, warmup=warmup,
                                          progress=progress if sys.stderr.isatty() else None))
        except (RuntimeError, ValueError) as exc:  # out of memory, BatchNorm over one value, ...
            last_error = f"micro-batch {size}: {_first_line(exc)}"
            if len(counts) == 1:
                raise UsageError(f"cannot run {model.name} with micro-batches of {size}: {_first_line(exc)}") from None
            _note(f"  [{k}/{len(counts)}] micro-batch {size}: skipped, {_first_line(exc)}" + " " * 30)
            if on_gpu:
                torch.cuda.empty_cache()
            continue
        _note(f"  [{k}/{len(counts)}] micro-batch {size}: {time.perf_counter() - t0:.1f} s" + " " * 30)
    if not profiles:
        raise UsageError(f"{model.name} runs at none of the micro-batch sizes tried; the last: {last_error}")
    _note(f"profiled in {time.perf_counter() - started:.1f} s")
    return profiles, link_gbps


def _first_line(exc: BaseException) -> str:
    """The error's first line, and its cause's (torch wraps some errors in a bare RuntimeError)."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if exc.__cause__ is not None:
        line += f" ({_first_line(exc.__cause__)})"
    return line


def _parse_override(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--set takes KEY=VALUE (got {text!r})")
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """'20GiB' -> 21474836480; '512MB' -> 512000000; a bare number is bytes."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise UsageError(f"cannot read memory size {text!r}; write it like 20GiB, 512MB or 1e9")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


# -------------------------------------------------------------------------------------------- printing

def format_plan(plan, baseline, max_memory=None) -> str:
    """The stages as a table, then the predicted figures beside the parameter-balanced baseline."""
    import pandas as pd

    where = f" ({plan.virtual_stages} per device on {plan.device_count} devices)" if plan.virtual_stages > 1 else ""

    # Zero-bubble schedules split each backward into I and W; show them where they were profiled.
    split = plan.schedule in ("zb-interleaved", "zbv") and all(s.backward_input_ms is not None for s in plan.stages)
    rows = []
    for s in plan.stages:
        names = s.layers[0] if len(s.layers) == 1 else f"{s.layers[0]} .. {s.layers[-1]}"
        backward = ({"I ms": f"{s.backward_input_ms:.3f}", "W ms": f"{s.backward_weight_ms:.3f}"} if split
                    else {"bwd ms": f"{s.backward_ms:.3f}"})
        rows.append({
            "stage": s.index,
            "device": s.device,
            "layers": f"{s.first_layer}-{s.end_layer - 1} ({s.end_layer - s.first_layer})",
            "names": names,
            "params": _count(s.params),
            "fwd ms": f"{s.forward_ms:.3f}",
            **backward,
            "sends": format_bytes(s.activation_out_bytes) if s.activation_out_bytes else "-",
            "in flight": s.peak_in_flight,
            "memory": format_bytes(s.predicted_memory_bytes),
        })
    lines = [
        f"{plan.model} ({plan.flavour}) on {len(plan.stages)} stages{where} [{plan.device_name}], batch {plan.batch} = "
        f"{plan.micro_batches} micro-batch(es) of {plan.micro_batch_size}, {plan.schedule}, balanced by {plan.balance}",
        "",
        pd.DataFrame(rows).to_string(index=False),
        "",
    ]
    summary = pd.DataFrame(
        {
            f"this plan ({plan.balance})": _summary(plan),
            "by parameters": _summary(baseline),
        }
    )
    lines.append(summary.to_string())
    ratio = plan.predicted_samples_per_s / baseline.predicted_samples_per_s
    lines.append(f"\npredicted speed-up over the parameter-balanced split: {ratio:.2f}x "
                 f"(cuts {plan.bounds[1:-1]} vs {baseline.bounds[1:-1]})")
    if max_memory:
        caps = [max_memory] if isinstance(max_memory, (int, float)) else list(max_memory)
        lines.append("memory cap per GPU: " + " / ".join(format_bytes(c) for c in caps))
    if len(plan.candidates) > 1:
        tried = ", ".join(
            f"{c['micro_batches']}: {c['samples_per_s']:.1f}/s" if "samples_per_s" in c else f"{c['micro_batches']}: no fit"
            for c in plan.candidates
        )
        lines.append(f"micro-batch counts tried (predicted samples/s): {tried}")
    return "\n".join(lines)


def _summary(plan) -> dict[str, str]:
    slowest = max(s.forward_ms + s.backward_ms for s in plan.stages)
    return {
        "step time (ms)": f"{plan.predicted_step_ms:.2f}",
        "throughput (samples/s)": f"{plan.predicted_samples_per_s:.1f}",
        "bubble": f"{plan.bubble_fraction:.1%}",
        "balance (slowest/mean)": f"{plan.balance_ratio:.3f}",
        "slowest stage (ms/micro-batch)": f"{slowest:.3f}",
        "largest stage memory": format_bytes(max(s.predicted_memory_bytes for s in plan.stages)),
    }


def _count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def _note(message: str, end: str = "\n") -> None:
    print(message, file=sys.stderr, end=end, flush=True)


if __name__ == "__main__":
    sys.exit(main())
