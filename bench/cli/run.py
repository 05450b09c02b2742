"""`pipebench run`: the benchmark suite, one results row per case, on the chosen GPUs (or CPU processes)."""
from __future__ import annotations

import argparse
from pathlib import Path

from pipebench.bench.store.results import DEFAULT_OUT
from pipebench.bench.cli.common import as_option, add_model_options, add_server_options, add_training_options, training_of, model_overrides
from pipebench.bench.cli.machine_choice import asks_cpu, chosen_gpus, cpu_notice
from pipebench.bench.cli.output import EXIT_INTERRUPTED, DeferredNote, answer
from pipebench.bench.cli.strategy_option import help_text, parse_auto, parse_strategies
from pipebench.base.errors import UserError, printable
from pipebench.base.time_limit import LIMIT_SECONDS


def add_parser(subparsers) -> None:
    """The options, each default named from the constant that sets it."""
    from pipebench.bench.cases.case import DEFAULT_MODELS
    from pipebench.bench.cases.machine import CPU_PROCESSES
    from pipebench.bench.cases.run_options import FULL, QUICK, RunOptions
    from pipebench.bench.cli.strategy_option import AUTO_COUNT

    def steps(name: str) -> str:  # "(default: 5; 2 with --quick)"
        return f"(default: {FULL[name]}; {QUICK[name]} with --quick)"

    run = subparsers.add_parser(
        "run", help="run the benchmark suite and write one results row per case",
        description="Train every model with every strategy on the chosen GPUs, side by side in one run; "
        "append one row per case to <out>/<date>-<host>-<hardware>.csv and .json as each case ends.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--models", help="comma-separated models: zoo names or your own, path/to/file.py:NAME "
                     f"(default: {','.join(DEFAULT_MODELS)})")
    run.add_argument("--strategies", help="comma-separated strategies (default: all; see below), or auto[:K]: "
                     f"single and the K strategies predicted fastest (pipebench advise; K defaults to {AUTO_COUNT})")
    run.add_argument("--gpus", help="GPU ids, e.g. 0,1, or auto:N for the N freest GPUs now (default: every "
                     "visible GPU; the CPU when there is none)")
    run.add_argument("--device", help="cpu: CPU processes stand in for the devices (gloo), even where GPUs are "
                     "visible (default: the GPUs, --gpus; the CPU when none is visible)")
    run.add_argument("--cpu-processes", "--stages", dest="cpu_processes", metavar="N",
                     help=f"on the CPU, how many processes stand in for devices, one each (default: {CPU_PROCESSES})")
    run.add_argument("--batch", help="global batch for every model (default: "
                     f"{', '.join(f'{model} {batch}' for model, batch in DEFAULT_MODELS.items())})")
    run.add_argument("--micro-batches", "--chunks", dest="micro_batches", default="auto", metavar="auto|M,M,...",
                     help="micro-batch counts for pipelines, e.g. 2,4,8 or auto (the planner's; default)")
    run.add_argument("--flavour", help="size flavour for every model (default: full size)")
    run.add_argument("--data-dir", help="folder holding MNIST for the convnet (never downloaded; default: "
                     "synthetic batches)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a model setting for every model (repeatable)")
    run.add_argument("--quick", action="store_true",
                     help=f"{QUICK['flavour']} flavours of every strategy, batch {QUICK['batch']}, {QUICK['rounds']} "
                     f"rounds of {QUICK['steps']} steps after {QUICK['warmup']} warm-up, for whichever of --flavour, "
                     "--batch, --steps, --warmup and --rounds you do not give (always so on the CPU)")
    run.add_argument("--resume", action="store_true", help="skip cases already in today's results file")
    run.add_argument("--again", action="store_true",
                     help="run every case again, even into a results file that holds them (the report keeps the "
                     "later row of each case; not with --resume); advise's check command runs so, into a folder of its own")
    run.add_argument("--out", default=DEFAULT_OUT,
                     help=f"folder for the results files, created if missing (default: ./{DEFAULT_OUT})")
    run.add_argument("--steps", default=None, help=f"timed steps per case {steps('steps')}")
    run.add_argument("--rounds", default=None,
                     help="interleaved rounds per case: each model's cases are measured A B C, then C B A, ... "
                     "(--steps timed steps each), so that drift falls on all alike and the spread of the rounds "
                     f"is the noise a speed-up must exceed {steps('rounds')}")
    run.add_argument("--warmup", default=None, help=f"untimed steps first {steps('warmup')}")
    run.add_argument("--min-seconds", default=None,
                     help="keep timing steps until this many seconds have passed, --steps at the least "
                     f"(default: {RunOptions.min_seconds:g}); on a CPU stand-in a few seconds see past the bursts of "
                     "other load")
    run.add_argument("--timeout", default=LIMIT_SECONDS,
                     help=f"seconds before a case is stopped (default: {LIMIT_SECONDS:g})")
    run.add_argument("--repeats", default=None, help="timed repeats per layer when profiling")
    run.add_argument("--fresh", action="store_true",
                     help="profile again instead of reusing the profile cache (~/.cache/pipebench) and --profiles")
    add_training_options(run, several_compiles=True)
    run.add_argument("--gpu-memory", metavar="SIZE",
                     help="cap every worker's GPU memory for real, e.g. 10GiB (a smaller card on a bigger one); "
                     "plans and predictions use it as the memory cap too")
    run.add_argument("--try-anyway", action="store_true",
                     help="run the cases predicted not to fit in the memory cap too, to test the prediction "
                     "(default: they become predicted-oom rows without running)")
    add_server_options(run)
    run.add_argument("--profiles", help="folder of saved profiles to reuse (default: beside the results file)")
    add_model_options(run)
    run.epilog = help_text()  # from the strategy registry
    run.set_defaults(handler=cmd_run)


def cmd_run(args) -> int:
    """The options read into pipebench.run's keywords, then pipebench.run itself (the machine capped, the
    speeds probed, RunOptions.from_keywords and run_suite are its), with the CPU's line and a summary table."""
    import pipebench.api
    from pipebench.base.text.parse import parse_speeds
    from pipebench.base.text.units import parse_size
    from pipebench.bench.report.tables import summary_table

    keywords = _run_keywords(args)
    on_cpu = asks_cpu(args)
    gpu_memory = parse_gpu_memory(args.gpu_memory)
    max_memory = parse_size(args.max_memory, "--max-memory") if args.max_memory else None
    machine = _run_machine(args, on_cpu)
    say = DeferredNote(None)
    started = {}

    def on_start(options, machine) -> None:  # checked: the line on the CPU or under --quick, said before the first
        started["options"] = options
        say.pending = _where(args, options, machine, on_cpu)

    try:
        rows, csv_path, json_path = pipebench.api.run(
            machine=machine, quick=args.quick, max_memory=max_memory, gpu_memory=gpu_memory, note=say,
            on_start=on_start, speeds=parse_speeds(args.speeds, machine.devices), **keywords)
        say.flush()
    except UserError as exc:  # pipebench.run's refusal, in the option's name where it names a keyword
        raise as_option(exc) from None
    except KeyboardInterrupt:
        if "options" not in started:  # while the options were read: nothing ran
            raise
        say(f"pipebench: interrupted; finished rows are kept in {started['options'].out}; --resume continues")
        return EXIT_INTERRUPTED
    answer(summary_table(rows))
    answer(f"\nresults: {printable(str(csv_path))}\n         {printable(str(json_path))}")
    answer(f"report:  pipebench report {printable(str(json_path))}")
    return 0


def _run_keywords(args) -> dict:
    """pipebench.run's keywords from the command line, each option's text read by its parser: the models
    (with their batch where --batch is given), the strategies or auto:K, and the RunOptions fields given."""
    from pipebench.bench.cases import run_options
    from pipebench.bench.cli.common import compile_modes
    from pipebench.base.fileio.files import not_empty
    from pipebench.base.text.parse import parse_micro_batches

    compiles = tuple(compile_modes(args.compile))  # an unknown mode: one line now
    args.compile = None
    training = training_of(args)  # an unknown value: one line now
    for option, text in (("--out", args.out), ("--profiles", args.profiles)):
        if text is not None:
            not_empty(text, option)
    names = list(run_options.parse_models(args.models, None))
    overrides = model_overrides(args, names)
    auto = parse_auto(args.strategies)
    return dict(
        models=names if args.batch is None else {name: args.batch for name in names},
        strategies=None if auto is not None else parse_strategies(args.strategies), auto=auto,
        micro_batches=parse_micro_batches(args.micro_batches),
        overrides=overrides, out=Path(args.out),
        resume=args.resume, again=args.again, timeout=args.timeout, repeats=args.repeats, fresh=args.fresh,
        **{name: getattr(args, name) for name in ("steps", "warmup", "rounds", "flavour") if getattr(args, name) is not None},
        min_seconds=args.min_seconds or 0.0,
        profiles=None if args.profiles is None else Path(args.profiles), training=training, try_anyway=args.try_anyway,
        data_dir=args.data_dir, compiles=compiles,
    )


def _run_machine(args, on_cpu: bool):
    """The machine the cases run on: the GPUs --gpus names (auto:N: the freest now), else every visible
    one, or CPU processes (pipebench.run caps it: --max-memory, --gpu-memory)."""
    from pipebench.bench.cases.machine import detect_machine

    ids, _ = chosen_gpus(args.gpus or None)
    return detect_machine(ids, args.cpu_processes, cpu=on_cpu)


def _where(args, options, machine, on_cpu: bool) -> str | None:
    """The line on the CPU (why there, how many processes) or under --quick: what every case runs with;
    None on GPUs without --quick."""
    from pipebench.bench.cases.run_options import describe_options

    uses = describe_options(options)
    if (line := cpu_notice(machine, on_cpu, "running")) is not None:
        return f"{line}: {uses}"
    return f"--quick: {uses}" if args.quick else None


def parse_gpu_memory(text: str | None) -> int | None:
    """--gpu-memory SIZE -> bytes (None when not given); anything but a positive size is one line."""
    from pipebench.base.text.units import parse_size

    if text is None:
        return None
    try:
        size = parse_size(text)
    except UserError as exc:
        raise UserError(f"--gpu-memory: {exc}") from None
    if size < 1:
        raise UserError(f"--gpu-memory must be a positive size such as 10GiB (got {text!r})")
    return size
