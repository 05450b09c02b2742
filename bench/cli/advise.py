"""`pipebench advise`: predict every strategy for a model on these devices, ranked, and recommend one."""
from __future__ import annotations

import re
from pathlib import Path

from pipebench.bench.cli.output import answer, note
from pipebench.bench.report.advice_text import format_advice
from pipebench.bench.report.labels import is_pipeline
from pipebench.base.errors import printable


def add_parser(subparsers) -> None:
    from pipebench.bench.cli.plan_inputs import add_source_options

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
    advise.add_argument("--micro-batches", "--chunks", dest="micro_batches", default="auto", metavar="auto|M,M,...",
                        help="micro-batch counts the pipelines may choose from: auto (every power of two up to 64 "
                        "that splits the batch; a few sizes measured, the others interpolated and the close ones "
                        "measured; default) or a list such as 1,2,4,8 (each measured); the device count is always "
                        "profiled, for DDP and DataParallel")
    advise.set_defaults(handler=cmd_advise)


ADVICE = "pipebench-advice"  # the format --json writes: {"format", "version", "model", "batch", "devices", ...}


def cmd_advise(args) -> int:
    import pipebench
    from pipebench.api import advice_profiles
    from pipebench.bench.cli.plan_inputs import check_plan_outputs, load_or_profile
    from pipebench.base.fileio.files import write_json
    from pipebench.base.text.parse import parse_micro_batches

    micro_batches = parse_micro_batches(args.micro_batches)
    check_plan_outputs(args, ADVICE, "a ranking of advise's")
    source = load_or_profile(args, advice_profiles, micro_batches=None if None in micro_batches else micro_batches)
    profiles, request = source
    devices = list(request.devices)
    advice = pipebench.advise(profiles=profiles, request=request)
    answer(format_advice(advice, profiles[0], request,
                         check=lambda compared: check_command(args, profiles[0], compared, len(devices))))
    if args.json:
        write_json(args.json, {"format": ADVICE, "version": 1, "model": profiles[0].model, "batch": profiles[0].batch, "devices": devices,
                               **advice.to_dict()})
        note(f"ranking written to {args.json}")
    return 0


def model_slug(name: str) -> str:
    """A model's name as a folder's: 'convnet.py:ConvNet' -> 'convnet.py-ConvNet'."""
    from pipebench.base.fileio.file_names import slug

    return slug(Path(name.split(":")[0]).name + ("-" + name.rsplit(":", 1)[1] if ":" in name else ""))


def check_command(args, profile, compared, devices: int) -> str:
    """The `pipebench run` that measures the recommendation beside single: the same model, inputs, batch,
    devices (`devices` of them) and training, the pipelines at the predicted micro-batch count. Copied as
    printed, it runs."""
    import shlex

    from pipebench.bench.strategies import BASELINE
    from pipebench.base.training import Training

    words = ["pipebench", "run", "--models", args.model or profile.model]
    options = {"--flavour": args.flavour, "--batch": profile.batch, "--gpus": args.gpus,
               "--input-shape": args.input_shape, "--input-dtype": args.input_dtype,
               "--num-classes": args.num_classes, "--token-range": args.token_range, "--loss": args.loss,
               "--granularity": args.granularity, "--data-dir": args.data_dir, "--max-memory": args.max_memory,
               "--speeds": args.speeds}
    for option, value in options.items():
        if value is not None:
            words += [option, str(value)]
    for setting in args.overrides or []:
        words += ["--set", setting]
    if not args.gpus and args.stages and str(args.device).startswith("cuda"):
        words += ["--gpus", ",".join(str(i) for i in range(int(args.stages)))]
    if str(profile.device).startswith("cpu"):  # CPU processes, as many as advised for, GPUs visible or not
        words += ["--device", "cpu", "--cpu-processes", str(devices)]
    if profile.training.precision != Training().precision:
        words += ["--precision", profile.training.precision]
    if profile.training.optimizer != Training().optimizer:
        words += ["--optimizer", profile.training.optimizer]
    if args.checkpoint and args.checkpoint != "never":
        words += ["--checkpoint", args.checkpoint]
    if profile.training.compile is not None:
        words += ["--compile", profile.training.compile]
    words += ["--strategies", ",".join([BASELINE, *(p.strategy for p in compared)])]
    counts = sorted({p.micro_batches for p in compared if p.micro_batches and is_pipeline(p.strategy)})
    if counts:
        words += ["--micro-batches", ",".join(map(str, counts))]
    if str(profile.device).startswith("cpu"):
        # CPU stand-ins: a few seconds of steps per case, past the bursts of the host's other load; the
        # quick suite's 2 steps judge the machine's moment as much as the strategy
        words += ["--steps", str(CPU_CHECK["steps"]), "--min-seconds", str(CPU_CHECK["min_seconds"])]
    # A folder of its own, named for what it measures, so that no other model's rows mix in; --again
    # measures anew when it is run again (the report keeps each case's later row).
    where = "-".join([model_slug(args.model or profile.model), args.flavour or "", f"b{profile.batch}",
                      "cpu" if str(profile.device).startswith("cpu") else "gpu", f"{devices}dev"])
    words += ["--out", f"pipebench-checks/{re.sub(r'-+', '-', where)}", "--again"]
    return " ".join(shlex.quote(printable(w)) for w in words)  # a line feed in a name cannot end the line


CPU_CHECK = {"steps": 6, "min_seconds": 3}
"""How `check it with` times each case on CPU stand-ins; scripts/cpu_fidelity.sh reads it from here."""

