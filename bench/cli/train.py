"""`pipebench train`: train the model on your data with a strategy (or advise's pick), to a checkpoint that
your model's own class loads (bench/train)."""
from __future__ import annotations

import argparse
import os
import sys

from pipebench.bench.cli.common import add_model_options, add_training_options, model_overrides, training_of
from pipebench.bench.cli.machine_choice import chosen_gpus
from pipebench.bench.cli.output import EXIT_INTERRUPTED, DeferredNote, answer, note
from pipebench.bench.train.outputs import model_file
from pipebench.bench.launch.spawn import WorkerError
from pipebench.bench.cli.strategy_option import help_text
from pipebench.base.errors import UserError, printable

EXIT_DIVERGED = 1
"""`pipebench train` whose loss became NaN or infinite: it stopped there, and its last finite checkpoint
stays (not 0: a script that trains and then uses the checkpoint must notice)."""


def add_parser(subparsers) -> None:
    from pipebench.bench.cases.machine import CPU_PROCESSES
    from pipebench.bench.train.options import TrainOptions

    train = subparsers.add_parser(
        "train", help="train a model on your data with the planned split, and save it",
        description="Train the model on a data set with one strategy (or auto: advise's recommendation), "
        "through the same workers and Plan as `pipebench run`; save one state_dict with the model's own names.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("--model", required=True, help="a zoo name or your own, path/to/file.py:NAME")
    train.add_argument("--strategy", default="auto",
                       help="a strategy (see below), or auto: advise's recommendation from the profile (default)")
    train.add_argument("--data", required=True, metavar="mnist:DIR|tokens:FILE|FILE.py:NAME",
                       help="torchvision's MNIST folder, a flat uint16 token file (nanoGPT's train.bin), or a "
                       "function returning a torch Dataset of (input, target)")
    train.add_argument("--batch", required=True, help="global batch (split over replicas, micro-batched in pipelines)")
    length = train.add_mutually_exclusive_group()
    length.add_argument("--epochs", default=None, help="passes over the data (default: 1)")
    length.add_argument("--steps", default=None, help="optimizer steps in all (instead of --epochs)")
    train.add_argument("--lr", default=None, help="learning rate (default: the optimizer's, sgd 0.1)")
    train.add_argument("--save", metavar="PATH", help="the checkpoint: the model's state_dict (torch.save)")
    train.add_argument("--save-every", default=None, metavar="STEPS", help="also checkpoint every STEPS steps")
    train.add_argument("--resume", action="store_true", help="continue the run whose checkpoint --save names")
    train.add_argument("--log-every", default=None, metavar="STEPS", help="a log line every STEPS steps "
                       f"(default {TrainOptions.log_every})")
    train.add_argument("--csv", metavar="FILE", help="one row per step: step, epoch, loss, samples/s, time")
    train.add_argument("--loader-workers", default=None, help="DataLoader worker processes (default: 0 on the CPU, 4 on GPUs)")
    train.add_argument("--write-job", metavar="DIR", help="check and plan, then write DIR/job.json and "
                       "DIR/train.json for torchrun to start on each machine, instead of training here "
                       "(docs/several-machines.md)")
    train.add_argument("--nodes", default=None, help="with --write-job: machines the job spans, each with the "
                       "devices named here (--gpus, or --cpu-processes on the CPU; default 1)")
    train.add_argument("--flavour", help="size flavour of a zoo model (default: full size)")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a model setting (repeatable)")
    train.add_argument("--gpus", help="GPU ids, e.g. 0,1, or auto:N for the N freest GPUs now (default: every visible GPU; "
                       "the CPU when there is none)")
    train.add_argument("--device", help="cpu: CPU processes stand in for the devices (gloo)")
    train.add_argument("--cpu-processes", "--stages", dest="cpu_processes", metavar="N",
                       help=f"on the CPU, how many processes stand in for devices, one each (default: {CPU_PROCESSES})")
    add_training_options(train)
    add_model_options(train)
    train.epilog = help_text()
    train.set_defaults(handler=cmd_train)


def cmd_train(args) -> int:
    from pipebench.api import train
    from pipebench.bench.cli.machine_choice import asks_cpu, cpu_notice
    from pipebench.bench.cases.machine import detect_machine

    training = training_of(args)  # an unknown value: one line now
    overrides = model_overrides(args, [args.model])
    on_cpu = asks_cpu(args)
    machine = detect_machine(chosen_gpus(args.gpus or None)[0], args.cpu_processes, cpu=on_cpu)
    nodes = args.nodes or 1
    where = cpu_notice(machine, on_cpu, "training", nodes)
    asked = {name: getattr(args, name) for name in ("epochs", "steps", "lr", "save_every", "log_every", "csv",
                                                    "write_job") if getattr(args, name) is not None}
    say = DeferredNote(where)
    try:
        result = train(args.model, args.data, batch=args.batch, strategy=args.strategy, machine=machine,
                       note=say, save=args.save, nodes=nodes, loader_workers=args.loader_workers,
                       resume=args.resume, flavour=args.flavour, training=training, overrides=overrides, **asked)
        say.flush()
    except KeyboardInterrupt:
        note("pipebench: interrupted")
        return EXIT_INTERRUPTED
    except WorkerError as exc:  # a worker's own failure: its rank and reason in one line, not the parent's stack
        print(f"pipebench train: failed: {printable(str(exc))}", file=sys.stderr)
        return 1
    return _answer(result, result.get("save"))


def _answer(result: dict, save: str | None) -> int:
    """The training's end in one line, and its exit status: done (0), stopped by Ctrl-C (EXIT_INTERRUPTED,
    its checkpoint said) or diverged (EXIT_DIVERGED, the NaN weights not saved); nothing for a job
    written (--write-job), which said where."""
    if "written" in result:
        return 0
    if result.get("diverged"):  # a result, not a crash: said in one line, the NaN weights not saved
        kept = ("" if not save else f"; checkpoint {printable(save)} of step {result['saved_at']}" if result.get("saved_at")
                else f"; {printable(save)} not written")
        answer(f"diverged: {result['diverged']}; stopped after {result['steps']}/{result['total']} steps{kept}")
        return EXIT_DIVERGED
    ended = "stopped" if result.get("stopped") else "done"
    answer(f"{ended}: {result['steps']}/{result['total']} steps in {result['seconds']:.1f} s"
          + (f"; checkpoint {printable(save)}" + (" (--resume continues)" if result.get("stopped") else "") if save else ""))
    return EXIT_INTERRUPTED if result.get("stopped") else 0


