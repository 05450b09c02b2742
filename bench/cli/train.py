"""`pipebench train`: train the model on your data with a strategy (or advise's pick), to a checkpoint that
your model's own class loads (bench/train)."""
from __future__ import annotations

import argparse
import os
import sys

from pipebench.bench.cli.common import (EXIT_INTERRUPTED, answer, add_model_options, add_training_options, chosen_gpus,
                                        model_file, model_settings, note, DeferredNote, training_of)
from pipebench.bench.launch.spawn import WorkerError
from pipebench.bench.strategies import help_text
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


def check_outputs(args) -> None:
    """--save (and its training state folder PATH.train), --csv and --write-job's job.json and train.json,
    checked together before any model file is imported and any work (files.writable_file), and made
    absolute. Regular files only: the workers append to --csv row by row and --resume reads --save back,
    which a FIFO would hang. PATH.train is a folder of train's own or nothing: a link there would have the
    state written into whatever it leads to (a user's folder), or fail at the first checkpoint if it leads nowhere. None may be another output, the --data file or the model file (files.same_outputs):
    the write would replace it; --data and --model may name one file, both read."""
    from pathlib import Path

    from pipebench.base.fileio.files import creatable_folder, same_outputs, writable_file

    outputs = {}
    if args.save is not None:  # not truthiness: --save '' taken as no --save would train and save nothing
        args.save = outputs["--save"] = str(writable_file(args.save, "--save", regular=True))
        state = Path(args.save + ".train")
        if state.is_symlink() or state.exists() and not state.is_dir():  # a link's target is no folder of train's
            what = "a link" if state.is_symlink() else "a file"
            raise UserError(f"--save {args.save}: {state} is in the way ({what}, where the training state's folder "
                            "goes); move it or name another --save")
    if args.csv is not None:
        args.csv = outputs["--csv"] = str(writable_file(args.csv, "--csv", regular=True))
    if args.write_job:
        folder = creatable_folder(Path(args.write_job).expanduser(), "--write-job")  # made when the job is written
        args.write_job = str(folder)
        for name in ("job.json", "train.json"):
            outputs[f"--write-job's {name}"] = str(writable_file(folder / name, f"--write-job {folder}:")
                                                   if folder.is_dir() else folder / name)
    inputs = {"--data": _data_file(args.data), "--model": model_file(args.model)}
    same_outputs(inputs, outputs)
    _not_another_file(args)


def _data_file(text: str) -> str | None:
    """The file --data reads (tokens:FILE, FILE.py:NAME), as parse_data takes it; None for a folder."""
    kind, sep, rest = text.partition(":")
    if sep and kind == "tokens" and rest:
        return os.path.expanduser(rest)
    return model_file(text)


def cmd_train(args) -> int:
    from pipebench.bench.cli.common import asks_cpu
    from pipebench.bench.cases.machine import detect_machine
    from pipebench.bench.train.parent import run_training
    from pipebench.bench.train.data import parse_data
    from pipebench.base.text.parse import parse_override

    check_outputs(args)
    training = training_of(args)
    overrides = {**dict(parse_override(o) for o in args.overrides), **model_settings(args, [args.model])}
    data = parse_data(args.data, _seq_len(args, overrides))
    on_cpu = asks_cpu(args)
    machine = detect_machine(chosen_gpus(args.gpus or None)[0], args.cpu_processes, cpu=on_cpu)
    machine.request(training)  # the Request's checks (cudagraphs on the CPU): one line, before the model is built
    workers = args.loader_workers
    nodes = args.nodes or 1
    machine = _over_nodes(machine, nodes)
    options = _train_options(args, data, overrides, training,
                             workers=workers if workers is not None else (0 if machine.gpus is None else 4), nodes=nodes)
    where = None if machine.gpus is not None else (
        f"{'--device cpu' if on_cpu else 'no CUDA GPU visible'}: training on the CPU, {machine.devices} "
        "processes standing in for devices (gloo)" + (f" over {nodes} nodes" if nodes > 1 else ""))
    try:
        say = DeferredNote(where)
        result = run_training(options, machine, note=say)
        say.flush()
    except KeyboardInterrupt:
        note("pipebench: interrupted")
        return EXIT_INTERRUPTED
    except WorkerError as exc:  # a worker's own failure: its rank and reason in one line, not the parent's stack
        print(f"pipebench train: failed: {printable(str(exc))}", file=sys.stderr)
        return 1
    return _answer(result, options.save)


def _seq_len(args, overrides: dict) -> int | None:
    """The tokens a sample of a token file takes: --input-shape's one dimension, else gpt's own (its
    flavour's, or --set's); None for another model."""
    if "input_shape" in overrides and len(overrides["input_shape"]) == 1:
        return overrides["input_shape"][0]
    if args.model == "gpt":
        from pipebench import models

        return models.get_model("gpt", args.flavour, device="meta", **overrides).config["seq_len"]
    return None


def _over_nodes(machine, nodes: int):
    """The machine a job over `nodes` machines is planned for: every node's devices (and their caps),
    each node like this one."""
    if nodes <= 1:
        return machine
    from dataclasses import replace

    return replace(machine, devices=machine.devices * nodes, caps=machine.caps * nodes if machine.caps else None)


def _train_options(args, data, overrides: dict, training, *, workers: int, nodes: int):
    """The TrainOptions the command line gives (bench/train/options.py), their defaults filled: its counts and
    --lr are read already, by the table of limits (pipebench/base/text/parse.py LIMITS) before any command runs."""
    from pipebench.bench.train.options import TrainOptions

    return TrainOptions(
        model=args.model, strategy=args.strategy, data=data, batch=args.batch, flavour=args.flavour,
        overrides=overrides, training=training, epochs=args.epochs, steps=args.steps, lr=args.lr, save=args.save,
        save_every=args.save_every, resume=args.resume,
        log_every=args.log_every if args.log_every is not None else TrainOptions.log_every, csv=args.csv,
        workers=workers, write_job=args.write_job, nodes=nodes)


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


def _torch_saved(path: str) -> bool:
    """Whether `path` is a zip in torch.save's layout (its pickle at `<name>/data.pkl`): any other zip, an
    archive of someone's, is not train's to replace with a checkpoint."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return any(name.endswith("/data.pkl") and name.count("/") == 1 for name in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _not_another_file(args) -> None:
    """Refuse a --csv or --save that already holds something other than what train writes there: a train
    log (--csv) and a checkpoint, a zip as torch.save writes it (--save), are train's own to write again."""
    from pipebench.base.fileio.files import not_another_file
    from pipebench.bench.train.curves import COLUMNS, has_train_header

    not_another_file(args.csv, "--csv", has_train_header, f"a train log (header {','.join(COLUMNS)})")
    not_another_file(args.save, "--save", _torch_saved, "a checkpoint of torch.save's")
