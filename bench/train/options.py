"""What `pipebench train` is asked, as one frozen value checked when it is made.

`pipebench.train` makes it from its keywords (`TrainOptions.from_keywords`), and the command line
(bench/cli/train.py) through `pipebench.train`, reading its defaults for --help; the parent (parent.py)
trains by it. What the values alone tell is checked here, once: the keywords, their types and bounds, the
options that need another, the outputs and the paths made absolute, the data read as its DataSpec. What
needs the model's build, the data's contents or the machine's devices is the parent's to check, before
any worker starts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipebench.base.errors import UserError
from pipebench.base.time_limit import WEEK_SECONDS
from pipebench.base.training import Training

__all__ = ["TrainOptions"]

MAX_SEED = 2**32 - 1
"""The largest seed train takes: the loader's generator is seeded with seed + epoch and each process with
seed + 2 + rank, which stay far within torch's 64 bits."""


@dataclass(frozen=True)
class TrainOptions:
    """What `pipebench train` is asked, checked once when made (the types, the bounds, the options that
    need another); what needs the model's build, the data's contents or the machine's devices is checked
    by run_training before any worker starts."""

    model: str
    strategy: str
    """A registry name, or "auto" (advise's recommendation)."""
    data: Any
    """A bench.train.data.DataSpec."""
    batch: int
    flavour: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    epochs: int | None = None
    steps: int | None = None
    training: Training = field(default_factory=Training)
    """How each step trains (precision, optimizer, checkpointing, compile), as run's cases take it."""
    lr: float | None = None
    save: str | None = None
    save_every: int | None = None
    resume: bool = False
    log_every: int = 10
    csv: str | None = None
    loader_workers: int = 0
    """The DataLoader's worker processes in each process that reads the data (--loader-workers)."""
    seed: int = 0
    """Seeds the model's weights, the data's order and each process's random stream: an integer from 0 to
    MAX_SEED."""
    timeout: float = WEEK_SECONDS
    """Seconds the training may take: no limit but a week's, while this process lives."""
    write_job: str | None = None
    """A folder: write the checked, planned job there (job.json, train.json) for torchrun to start on
    each node, instead of starting the workers here (docs/several-machines.md)."""
    nodes: int = 1
    """Machines the job spans, each with this one's devices (with write_job)."""

    def __post_init__(self):
        _check_types(self)
        _check_bounds(self)
        _check_needed_options(self)
        _make_paths_absolute(self)

    @classmethod
    def from_keywords(cls, model: str, data: str, machine, *, batch: int, strategy: str = "auto",
                      **options: Any) -> TrainOptions:
        """What `pipebench.train` (and so `pipebench train`) is asked, each rule of its keywords here once:
        model, data and strategy as text, no keyword TrainOptions lacks, the outputs checked together
        (bench/train/outputs.py check_train_outputs), `training` a Training (default Training(): tf32,
        sgd) that `machine` can run (its Request's checks: cudagraphs on the CPU), loader_workers by the
        machine where not given (0 on the CPU, 4 on GPUs), the data read as its DataSpec, then the fields
        checked when made. One UserError, before any model file is imported or any worker starts."""
        from dataclasses import fields

        from pipebench.bench.train.data import parse_data, token_length
        from pipebench.bench.train.outputs import check_train_outputs
        from pipebench.model_spec import check_settings_dict

        for name, value in (("model", model), ("data", data), ("strategy", strategy)):
            if not isinstance(value, str):
                raise UserError(f"{name} takes a name (text), not {type(value).__name__}")
        known = {f.name for f in fields(cls)} - {"model", "strategy", "data", "batch"}
        if unknown := sorted(set(options) - known):
            raise UserError(f"train takes no option {', '.join(unknown)}; it takes: {', '.join(sorted(known))}")
        checked = check_train_outputs(options.pop("save", None), options.pop("csv", None),
                                      options.pop("write_job", None), data=data, model=model)
        if options.get("training") is None:
            options["training"] = Training()
        if options.get("loader_workers") is None:
            options["loader_workers"] = 0 if machine.gpus is None else 4
        overrides = options.pop("overrides", None)
        overrides = {} if overrides is None else overrides
        check_settings_dict(overrides, "overrides")  # before token_length reads them
        spec = parse_data(data, token_length(model, options.get("flavour"), overrides))
        asked = cls(model=model, strategy=strategy, data=spec, batch=batch, overrides=overrides, save=checked.save,
                    csv=checked.csv, write_job=checked.write_job, **options)
        machine.request(asked.training)  # the Request's checks (cudagraphs on the CPU), before the model is built
        return asked


def _check_types(options: TrainOptions) -> None:
    """The values no bound reads, of their types: a caller of TrainOptions passes what it has, and a
    resume="no" is true (the checkpoint continued), a training of "fp32" or a data of text an
    AttributeError in the parent, overrides of pairs a TypeError of get_model's **, a seed of "1" a
    TypeError of the workers' manual_seed."""
    from pipebench.bench.train.data import DataSpec
    from pipebench.base.text.parse import count_of
    from pipebench.model_spec import check_settings_dict
    from pipebench.request import check_training

    check_training(options.training)
    check_settings_dict(options.overrides, "overrides")
    count_of(options.seed, "seed", low=0, high=MAX_SEED)
    if not isinstance(options.resume, bool):
        raise UserError(f"resume takes True or False (got {options.resume!r:.40})")
    if not isinstance(options.data, DataSpec):
        raise UserError(f"data takes a DataSpec (bench/train/data.py parse_data), not {type(options.data).__name__}")


def _check_bounds(options: TrainOptions) -> None:
    """The counts, the learning rate, the loader's workers and the timeout within the table of limits
    (pipebench/base/text/parse.py LIMITS), by the rule of the API's options (`option_of`): the command line reads
    every count and number from that table before any command runs, but a caller of run_training passes what
    it has, a rate beyond float32's range overflows in the workers, and a timeout of -1 s ends the training
    only once the model is built and the workers started."""
    from pipebench.base.text.parse import option_of

    for name, value in (("batch", options.batch), ("epochs", options.epochs), ("steps", options.steps),
                        ("save_every", options.save_every), ("log_every", options.log_every), ("nodes", options.nodes),
                        ("lr", options.lr), ("loader_workers", options.loader_workers), ("timeout", options.timeout)):
        if value is not None:
            object.__setattr__(options, name, option_of(value, name))


def _make_paths_absolute(options: TrainOptions) -> None:
    """The model file, the checkpoint, the CSV and the job folder as absolute paths, made so before any of
    the user's code runs: the workers start elsewhere, and a --data function that calls os.chdir("/") would
    have them look for /m/good.py ("rank 0: UserError: ... no such file")."""
    from pipebench.models.source import absolute_target

    object.__setattr__(options, "model", absolute_target(options.model))
    for name in ("save", "csv"):
        if getattr(options, name):
            object.__setattr__(options, name, str(Path(getattr(options, name)).resolve()))
    if options.write_job is not None:
        object.__setattr__(options, "write_job", str(Path(options.write_job).expanduser().resolve()))


def _check_needed_options(options: TrainOptions) -> None:
    """An option that needs another, given without it, is refused (not dropped without a word): a job over
    several machines only as files for torchrun (--write-job), and only of a strategy of one process per
    device; checkpoints every STEPS steps, and a resumed training, only with a --save. And one that excludes
    another, given with it: the training's length in steps or in epochs (the command line's --steps and
    --epochs are exclusive), not both, where steps would win and epochs be dropped."""
    from pipebench.bench.strategies import get_strategy

    if options.steps is not None and options.epochs is not None:
        raise UserError(f"--steps {options.steps} and --epochs {options.epochs}: give one, not both (the steps in "
                        "all, or the passes over the data)")

    if options.save_every is not None and not options.save:
        raise UserError(f"--save-every {options.save_every}: checkpoints are written to --save; give --save PATH")
    if options.resume and not options.save:
        raise UserError("--resume continues the checkpoint that --save names; give --save PATH")

    if options.nodes > 1 and options.write_job is None:
        raise UserError(f"--nodes {options.nodes}: a job over several machines is started by torchrun on each; "
                        "give --write-job DIR to write it (docs/several-machines.md)")
    if options.strategy != "auto":
        named = get_strategy(options.strategy)
        if options.nodes > 1 and not named.process_per_device:
            raise UserError(f"--nodes {options.nodes}: {named.name} runs in one process, on one machine; choose a "
                            "strategy of one process per device (ddp, fsdp, zero1, pp-*, hybrid)")
