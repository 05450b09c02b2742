"""Where `pipebench plan` and `pipebench advise` get their profiles: the options that name a model or saved
profiles (`add_source_options`), the outputs checked before any work (`check_plan_outputs`), and
`load_or_profile`, which reads the saved profiles or profiles the model, with the Request both commands
plan from."""
from __future__ import annotations

from typing import Callable, NamedTuple

from pipebench.bench.cli.common import (add_model_options, add_server_options, add_training_options, data_folder,
                                        model_overrides, model_settings, training_given, training_of)
from pipebench.bench.cli.machine_choice import chosen_gpus, speeds
from pipebench.bench.cli.output import note
from pipebench.bench.train.outputs import model_file
from pipebench.base.errors import UserError
from pipebench.model_spec import ModelSpec
from pipebench.request import DEFAULT_BATCH, DEFAULT_REPEATS, Request, check_device_beside_gpus
from pipebench.base.time_limit import LIMIT_SECONDS, time_limit


def add_source_options(parser, command: str, *, where: str, stages: str) -> None:
    """What plan and advise share: the model, the devices, the server's limits, and where the profile
    comes from (measured now, or a saved file)."""
    parser.add_argument("--model", help="a zoo model (see `pipebench models`), or your own: path/to/file.py:NAME or "
                        "package.module:NAME (NAME: an nn.Module class or a function returning one); taken from "
                        "--profile if omitted")
    parser.add_argument("--flavour", default=None, help="size flavour, e.g. tiny (default: the model's full size)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a model setting, e.g. --set depth=8 (repeatable)")
    parser.add_argument("--batch", help=f"global batch size (default: {DEFAULT_BATCH['cpu']} on the CPU, "
                        f"{DEFAULT_BATCH['cuda']} on GPUs)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--gpus", help=where)
    group.add_argument("--stages", help=stages)
    parser.add_argument("--device", help="device for --stages (default: cpu); not with --gpus")
    add_server_options(parser)
    add_training_options(parser)
    parser.add_argument("--link-gbps", default=None,
                        help="GB/s between devices to price transfers (default: what the profile measured, "
                        "between the first two GPUs; gloo's between CPU processes)")
    parser.add_argument("--repeats", default=None,
                        help=f"timed repeats per layer (default: {DEFAULT_REPEATS['cuda']} on GPUs, "
                        f"{DEFAULT_REPEATS['cpu']} on the CPU)")
    parser.add_argument("--profile", metavar="FILE", help=f"{command} from a saved profile, touching no GPU")
    parser.add_argument("--fresh", action="store_true",
                        help="measure again instead of reusing the profile cache (~/.cache/pipebench)")
    parser.add_argument("--save-profile", metavar="FILE", help="save the measured profile as JSON")
    parser.add_argument("--json", metavar="FILE", help=f"write the {command} as JSON" if command != "advise"
                        else "write the ranking as JSON")
    parser.add_argument("--data-dir", help="folder holding MNIST for the convnet (never downloaded)")
    parser.add_argument("--timeout", default=LIMIT_SECONDS,
                        help=f"seconds the profiling may take before it is stopped (default: {LIMIT_SECONDS:g})")
    add_model_options(parser)


class Source(NamedTuple):
    """What plan and advise work from: the profiles and the Request (devices, caps, speeds, links, the
    Training) that the options say."""

    profiles: list
    request: Request


def check_plan_outputs(args, json_format: str, json_what: str) -> None:
    """--json, --save-profile and --export's file, checked together before any model file is imported and
    anything profiled (files.writable_file), and made absolute: a model file that changes the working
    folder when imported moves none of them. Two that name one file (or the --profile read, or --model's
    file) are refused: the second write would replace the first. A file that holds something other than
    what is written there (--json: `json_format`, plan's or advise's) is refused: files.not_another_file."""
    from pipebench.base.fileio.files import json_of_format, not_another_file, same_outputs, writable_file
    from pipebench.partition.profiling.profile_record import FORMAT as PROFILE

    if args.profile and args.save_profile:  # nothing is measured: no profile to save, and nothing would say so
        raise UserError("--save-profile saves a profile measured here; with --profile nothing is measured: give one "
                        "of them")
    export = getattr(args, "export", None)
    outputs = {"--json": args.json, "--save-profile": args.save_profile, "--export": export[1] if export else None}
    for option, path in outputs.items():
        if path == "-":  # no stdout convention: stdout carries the answer, and a file named "-" would be written
            raise UserError(f"{option} -: {option} writes a file, and stdout carries the answer; name a file "
                            "(/dev/stdout, if the answer may mix in)")
        if path is not None:
            outputs[option] = str(writable_file(path, option))
    same_outputs({"--model": model_file(args.model), "--profile": args.profile}, outputs)
    not_another_file(outputs["--json"], "--json", json_of_format(json_format), f"{json_what} ({json_format} JSON)")
    not_another_file(outputs["--save-profile"], "--save-profile", json_of_format(PROFILE),
                     "profiles (pipebench-profile JSON)")
    not_another_file(outputs["--export"], "--export", json_of_format(None, key="engine"),
                     "an engine export (JSON starting with its \"engine\")")
    args.json, args.save_profile = outputs["--json"], outputs["--save-profile"]
    if export:
        args.export = [export[0], outputs["--export"]]


def load_or_profile(args, profiled: Callable[..., list], **asked) -> Source:
    """The saved profile (--profile: no GPU touched), or a new one measured on the devices asked for by
    `profiled` (pipebench.api.plan_profiles or advice_profiles: which counts the command's answer needs,
    and what ranks them, are the API's), under a progress bar and --timeout, and saved when --save-profile
    says so; with the Request the options say (`asked`: the command's own fields of it, e.g. plan's
    schedule), checked against the profiles by `Request.check_profiles`."""
    if args.profile is not None:
        return _saved_source(args, asked)
    if not args.model:
        raise UserError("--model NAME is required (or --profile FILE); see `pipebench models`")
    from pipebench.partition.profiling.profile_record import save_profiles
    from pipebench.base.text.progress import ProgressBar

    devices, infos = _devices(args, check=True)
    overrides = _settings(args, args.model)
    request = _request(args, devices, batch=args.batch, **asked).measured_here(infos)
    with ProgressBar() as progress, time_limit(args.timeout, lambda: _late(args, progress)):
        profiles = profiled(args.model, None, request, flavour=args.flavour, settings=overrides,
                            data_dir=args.data_dir, note=note, progress=progress)
    if args.save_profile:
        save_profiles(profiles, args.save_profile)
        note(f"profile written to {args.save_profile}")
    return Source(profiles, request)


def _late(args, progress) -> str:
    """The line of a profile that ran past --timeout: what it was doing then."""
    return (f"profiling {args.model} did not finish within --timeout {args.timeout:g} s (at: "
            f"{progress.doing or 'the capture, before the first segment'}); a forward or backward that never returns, or give a longer --timeout")


def _saved_source(args, asked: dict) -> Source:
    """--profile FILE: the profiles read back, and the Request of the options, checked against them before
    any work (the model, --flavour and --set named: ModelSpec.check_profiled; the batch, the stages against
    the layers, the split, --precision and --compile where given). The batch defaults to theirs."""
    from pipebench.partition.profiling.profile_record import load_profiles

    profiles = load_profiles(args.profile)
    model = args.model or profiles[0].model
    of_file = model_settings(args, [model])  # --input-shape and friends: a model file's; --set gives the others

    def said(key, value) -> str:
        return f"--{key.replace('_', '-')} {value}" if key in of_file else f"--set {key}={value}"

    spec = ModelSpec(args.model, flavour=args.flavour, settings=_settings(args, model))
    spec.check_profiled(profiles[0], ("--model", "--flavour"), said)
    devices, _ = _devices(args, check=False)
    request = _request(args, devices, batch=profiles[0].batch if args.batch is None else args.batch,
                       measuring=False, **asked)
    return Source(request.check_profiles(profiles, training_given=training_given(args)), request)


def _request(args, devices: list[str], *, batch, measuring: bool = True, **asked) -> Request:
    """The Request the options say, on `devices`: the batch (None: Request.measured_here's default), the
    caps (--max-memory; None: Request.measured_here's, what NVML says is free), the speeds (--speeds auto
    probes them now, only when `measuring`), the link, the Training and the profiling settings."""
    from pipebench.base.text.parse import parse_link_gbps
    from pipebench.base.text.units import parse_size

    caps = parse_size(args.max_memory, "--max-memory") if args.max_memory else None
    return Request.from_keywords(None, {
        "devices": devices, "batch": batch, "max_memory": caps, "speeds": speeds(args.speeds, devices, probe=measuring),
        "link_gbps": parse_link_gbps(args.link_gbps), "training": training_of(args), "repeats": args.repeats,
        "fresh": args.fresh, **asked})


def _devices(args, check: bool) -> tuple[list[str], list | None]:
    """(the device of each stage, what NVML says of the GPUs taken, for the default memory caps): --gpus,
    else --stages on --device, as Request.from_keywords reads them (--device beside --gpus refused there),
    each checked to exist when `check`."""
    from pipebench.hardware.devices import check_gpus, resolve_device

    check_device_beside_gpus(args.gpus, args.device)  # asked before auto:N says which GPUs it took: one line
    ids, infos = chosen_gpus(args.gpus, now=check)
    devices = list(Request.from_keywords(None, {"gpus": ids, "stages": args.stages, "device": args.device}).devices)
    if check:
        devices = check_gpus(ids) if ids is not None else [resolve_device(devices[0], check=True)] * len(devices)
    return devices, infos


def _settings(args, model: str) -> dict:
    """The settings of `model`: --set, and --input-shape and friends for a model of your own, read (nothing
    is built: a cached answer needs no model); --data-dir checked with them, a profile read or made."""
    overrides = model_overrides(args, [model])
    data_folder(args.data_dir)
    return overrides
