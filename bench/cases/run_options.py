"""What `pipebench run` and `pipebench.run` are asked, checked once: `RunOptions` (each default spelled
on its field), the quick values for the CPU and --quick (`settle`, the one place either entry point turns
what was given into what runs), and the checks against the machine before anything is profiled.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from pipebench.bench.cases.case import DEFAULT_MODELS, QUICK_BATCH
from pipebench.bench.cases.machine import Machine
from pipebench.bench.store.results import DEFAULT_OUT
from pipebench.bench.strategies import STRATEGIES, get_strategy
from pipebench.base.errors import UserError
from pipebench.model_spec import ModelSpec
from pipebench.request import check_recompute, check_training, split_error
from pipebench.base.time_limit import LIMIT_SECONDS
from pipebench.base.training import Training

QUICK = {"batch": QUICK_BATCH, "flavour": "tiny", "steps": 2, "warmup": 1, "rounds": 3}
"""What --quick, and every run on the CPU, uses for each of these options the user did not give."""
FULL = {"steps": 5, "warmup": 2, "rounds": 2}
"""The defaults otherwise (batch: each model's own, DEFAULT_MODELS; flavour: its full size)."""


@dataclass(frozen=True)
class RunOptions:
    """What `pipebench run` (and `pipebench.run`) is asked, checked once when made; a change is a new
    value (dataclasses.replace), checked again."""

    models: dict[str, int]
    """{model name: global batch}: the zoo's names, FILE.py:NAME or package.module:NAME."""
    strategies: list[str]
    """The strategies' names, in the order they run (bench/strategies/)."""
    micro_batches: list[int | None] = (None,)
    """--micro-batches: the micro-batch counts of the pipelines (None: auto, the count predicted fastest)."""
    flavour: str | None = None
    """The zoo's size (tiny, small, ...; None: each model's full size)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """--set KEY=VALUE and the model options (input shape, classes, loss ...)."""
    out: Path = DEFAULT_OUT
    """The results folder."""
    resume: bool = False
    """--resume: skip the cases the results file already holds."""
    steps: int = FULL["steps"]
    """Timed steps per case (per round)."""
    warmup: int = FULL["warmup"]
    """Untimed steps before them."""
    timeout: float = LIMIT_SECONDS
    """Seconds one case (or one profile) may take."""
    min_seconds: float = 0.0
    """--min-seconds: steps are timed until this many seconds have passed (`steps` of them at the least)."""
    repeats: int | None = None
    fresh: bool = False
    """--fresh: profile again, reusing neither the profile cache nor the profiles folder."""
    profiles: Path | None = None
    """Folder of saved profiles to reuse (default: next to the results file)."""
    auto: int | None = None
    """--strategies auto:K: run single and the K strategies predicted fastest (strategies is then ignored)."""
    training: Training = Training()
    """--precision, --optimizer and --checkpoint, for every case."""
    data_dir: str | None = None
    """--data-dir: a local MNIST folder the convnet trains on (None: synthetic batches)."""
    compiles: tuple[str | None, ...] = (None,)
    """--compile's modes (None: eager): every case runs in each, one case per mode, side by side. A
    `training` that names a compile mode stands for that one mode (the Training itself then says eager)."""
    again: bool = False
    """--again: run every case again into results files that hold earlier rows of them (the report keeps
    the later row of a case); the check command `pipebench advise` prints runs so, into a folder of its own."""
    rounds: int = FULL["rounds"]
    """--rounds: each model's cases are measured in this many interleaved rounds (A B C, C B A, ...), each
    `steps` timed steps after `warmup` (bench/cases/rounds.py run_rounds)."""
    try_anyway: bool = False
    """--try-anyway: run the cases predicted not to fit in the memory cap too (and those an earlier run
    recorded as predicted-oom), to test the prediction."""

    def __post_init__(self):
        """Each option of its type and within the command line's bound (pipebench/base/text/parse.py LIMITS,
        the one rule of a micro-batch count, the count of strategies for auto:K), refused in one line when the
        options are made: the command line's parsers make these types already, and `pipebench.run` passes
        what the caller gave. Each number is kept as the Python int or float its check makes, and the models'
        batches and the settings as Python's values (request.plain): a numpy number would pass the checks and
        then fail the results file's JSON, the run half written."""
        import os

        from pipebench.base.fileio.files import not_empty
        from pipebench.base.text.parse import MAX_MICRO_BATCHES, count_of, micro_batches_error, option_of
        from pipebench.request import plain

        def set_(name: str, value: Any) -> None:  # frozen: each field normalised once, here
            object.__setattr__(self, name, value)

        for name in ("steps", "warmup", "rounds", "repeats", "timeout", "min_seconds"):
            if getattr(self, name) is not None or name != "repeats":  # repeats None: the profiler's own count
                set_(name, option_of(getattr(self, name), name))
        set_("micro_batches", plain(self.micro_batches))
        if isinstance(self.models, dict):
            set_("models", {name: plain(batch) for name, batch in self.models.items()})
        if isinstance(self.overrides, dict):
            set_("overrides", {key: plain(value) for key, value in self.overrides.items()})
        if not isinstance(self.micro_batches, (list, tuple)) or not self.micro_batches or not all(
                c is None or micro_batches_error(c) is None for c in self.micro_batches):
            raise UserError(f"micro_batches takes a list of micro-batch counts (integers from 1 to "
                            f"{MAX_MICRO_BATCHES:,}, or None: auto), e.g. [2, 4, None] "
                            f"(got {self.micro_batches!r:.40})")
        for name in ("out", "profiles", "data_dir"):
            value = getattr(self, name)
            if not (isinstance(value, (str, os.PathLike)) or (value is None and name != "out")):
                raise UserError(f"{name} takes a folder's path (got {type(value).__name__} {value!r:.40})")
            if value is not None:
                not_empty(value, name)
        ModelSpec(None, data_dir=self.data_dir)  # the model side's rule: a folder, said as given
        _make_paths_absolute(self)
        check_training(self.training)
        for name in ("resume", "again", "fresh", "try_anyway"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name} takes True or False (got {getattr(self, name)!r:.40})")
        if self.resume and self.again:
            raise UserError("--resume skips the cases the results file holds and --again runs them anew: give one, "
                            "not both")
        if self.auto is not None:
            set_("auto", count_of(self.auto, "auto", 1, len(STRATEGIES)))
        if not isinstance(self.compiles, (list, tuple)) or not self.compiles:
            raise UserError(f"compiles takes a list of compile modes (None: eager), got {self.compiles!r:.40}")
        if self.training.compile is not None:  # one meaning: the modes are the compiles
            if tuple(self.compiles) != (None,):
                raise UserError("give the compile mode in training or in compiles, not both")
            object.__setattr__(self, "compiles", (self.training.compile,))
            object.__setattr__(self, "training", replace(self.training, compile=None))
        for mode in self.compiles:
            replace(self.training, compile=mode)  # an unknown mode: one line (Training checks it)
        set_("compiles", tuple(self.compiles))
        set_("micro_batches", [None if count is None else int(count) for count in self.micro_batches])
        set_("out", Path(self.out))
        set_("profiles", None if self.profiles is None else Path(self.profiles))

    @classmethod
    def from_keywords(cls, models: Any, machine: Machine, *, strategies: Sequence[str] | None = None,
                      quick: bool = False, **options: Any) -> "RunOptions":
        """What runs on `machine` for what `pipebench.run` and `pipebench run` are asked, each rule of theirs
        here once: models as {name: batch} (the batch then counts as given) or names (each at its default
        batch), strategies (default: every one; none besides single under auto:K), the other fields of
        RunOptions by name (chunks: micro_batches' other name), then `settle`d: quick values for what was not
        given, everything checked against the machine, one UserError before anything is profiled."""
        from dataclasses import fields

        from pipebench.base.text.parse import count_of
        from pipebench.bench.strategies import strategy_list, strategy_names

        if "chunks" in options:
            if "micro_batches" in options:
                raise TypeError("run takes micro_batches or its alias chunks, not both")
            options["micro_batches"] = options.pop("chunks")
        if not isinstance(quick, bool):
            raise UserError(f"quick takes True or False (got {quick!r:.40})")
        if isinstance(models, str) or not isinstance(models, (dict, list, tuple)) or not models:
            raise UserError(f"models takes names or {{name: batch}}, e.g. ['mlp'] or {{'mlp': 8}}, not {models!r:.60}")
        batch_given = isinstance(models, dict)
        batches = model_batches([str(name) for name in models], None)  # an unknown name: one line
        if batch_given:
            batches = {str(name): count_of(batch, "batch") for name, batch in models.items()}
        if strategies is not None:
            names = strategy_list(strategies)
        else:
            names = [] if options.get("auto") is not None else strategy_names()
        known = {f.name for f in fields(cls)} - {"models", "strategies"}
        if unknown := sorted(set(options) - known):
            raise UserError(f"run takes no option {', '.join(unknown)}; it takes: {', '.join(sorted(known))}")
        asked = cls(models=batches, strategies=list(dict.fromkeys(names)), **options)  # single,single: one case
        given = [name for name in QUICK_GIVEN if name in options] + ["batch"] * batch_given
        return settle(asked, machine, given=given, quick=quick)


def quick_options(options: RunOptions, given: Sequence[str] = ()) -> RunOptions:
    """--quick: tiny flavours, batch 8, 3 interleaved rounds of 2 timed steps after 1 warm-up (QUICK), except for the options
    named in `given` ("batch", "flavour", "steps", "warmup", "rounds"), which keep what the user asked for: a run
    on the CPU must not silently run batch 8 when --batch 1000000000 was asked."""
    changes: dict[str, Any] = {}
    if "batch" not in given:
        changes["models"] = {name: QUICK["batch"] for name in options.models}
    if "flavour" not in given:
        changes["flavour"] = QUICK["flavour"]
    if "steps" not in given:
        changes["steps"] = min(options.steps, QUICK["steps"])
    if "warmup" not in given:
        changes["warmup"] = min(options.warmup, QUICK["warmup"])
    if "rounds" not in given:
        changes["rounds"] = QUICK["rounds"]
    return replace(options, **changes)


QUICK_GIVEN = ("batch", "flavour", "steps", "warmup", "rounds")
"""The options whose quick value gives way to one the user gave (quick_options)."""


def settle(options: RunOptions, machine: Machine, *, given: Sequence[str], quick: bool = False) -> RunOptions:
    """What runs, from what was asked: under --quick, and on the CPU always, the quick values for the
    options not `given` (QUICK_GIVEN: "batch" when the caller chose the batch), then everything checked
    against the machine before anything is profiled (check_run). `pipebench run` and `pipebench.run` both
    come through here."""
    for mode in options.compiles:  # each case's Request checked now (cudagraphs on the CPU): one line
        machine.request(replace(options.training, compile=mode))
    if quick or machine.gpus is None:
        options = quick_options(options, given)
    return check_run(options, machine, batch_given="batch" in given)


def describe_options(options: RunOptions) -> str:
    """One line on what every case runs with: flavour, batch, steps, and the training where it is not the
    default TF32 SGD."""
    from pipebench import models as zoo

    batches = sorted(set(options.models.values()))
    training = "" if options.training == Training() else f", {options.training.label()}"
    if any(options.compiles):
        training += ", " + " and ".join("eager" if mode is None else f"compiled {mode}" for mode in options.compiles)
    # A flavour is the zoo's: a model of the user's own runs as written.
    flavour = "" if all(zoo.is_user_model(m) for m in options.models) else f"flavour {options.flavour or 'full'}, "
    return (f"{flavour}batch {', '.join(map(str, batches))}{training}, "
            f"{options.steps} timed step(s){f' or more, for {options.min_seconds:g} s' if options.min_seconds else ''}"
            f" after {options.warmup} warm-up"
            + (f", in {options.rounds} interleaved rounds" if options.rounds > 1 else ""))


def cap_machine(machine: Machine, max_memory: int | None, gpu_memory: int | None) -> Machine:
    """The machine with the memory cap of every case: --max-memory (else what was free at the start, on GPUs), at most
    --gpu-memory less CAPPED_MARGIN (the workers enforce --gpu-memory itself: Job.gpu_memory). --gpu-memory
    without GPUs is refused: nothing could enforce it on the CPU."""
    from pipebench.hardware.gpus import plannable

    if gpu_memory is not None and machine.gpus is None:
        raise UserError("--gpu-memory caps GPU memory, and no CUDA GPU is visible here; leave it out on the CPU "
                        "(--max-memory caps the plans)")
    if max_memory is not None:
        machine = machine.with_(caps=[max_memory] * machine.devices)
    if gpu_memory is not None:
        machine = machine.with_(gpu_memory=gpu_memory, caps=[
            min(cap, plannable(gpu_memory)) for cap in machine.caps or [gpu_memory] * machine.devices])
    return machine


def check_run(options: RunOptions, machine: Machine, *, batch_given: bool = True) -> RunOptions:
    """Everything a run is asked against the machine, refused in one line before anything is profiled
    (check_options), and the results and profiles folders writable: returns the options with those
    folders made and absolute (none left made when refused)."""
    from pipebench.base.fileio.files import writable_folder

    check_options(options, machine.devices, batch_given=batch_given, on_cpu=machine.gpus is None)
    made = _absent_folders(Path(options.out))
    out = writable_folder(options.out, "--out")
    try:
        profiles = None if options.profiles is None else writable_folder(options.profiles, "--profiles")
        if profiles is not None and profiles.resolve() == out.resolve():  # its .json files would spoil `report OUT`
            raise UserError(f"--profiles and --out name one folder {out}; report reads every .json there as "
                            "results: give --profiles a folder of its own (by default they go beside the results)")
    except UserError:  # a refused run leaves nothing: the folders made for --out go again
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: kept
                folder.rmdir()
        raise
    return replace(options, out=out, profiles=profiles)


def _absent_folders(path: Path) -> list[Path]:
    """`path` and those of its parents that do not exist yet, deepest first: what making it creates."""
    absent = []
    try:
        while not (path.exists() or path.is_symlink()) and path != path.parent:
            absent.append(path)
            path = path.parent
    except OSError:  # a name the file system refuses: nothing can be made there (writable_folder says so)
        return []
    return absent


def check_options(options: RunOptions, devices: int = 1, *, batch_given: bool = True, on_cpu: bool = False) -> None:
    """What can be refused before anything is profiled, refused now in one line: every model is built
    once on the meta device (no memory; a model of your own also puts a batch through it), which checks
    its flavour and every --set setting (unknown, or a count that is not a positive integer), each
    --micro-batches count must split each model's batch into equal micro-batches, a strategy that splits the
    batch over one replica per device (DDP, FSDP) must find a --batch the user gave divisible by the
    `devices`, and --checkpoint needs strategies that can recompute (always; auto runs the others without).
    On the CPU (`on_cpu`) a model larger than the memory free now is refused (models/imports.py
    check_module_fits): every process of the run would build it there.
    A default batch that does not split over the devices (8 on 3) is no mistake of the user's: those
    strategies become `unavailable` rows that say so, and the others run (`batch_given` False)."""
    from pipebench import models as zoo
    from pipebench.models.imports import check_module_fits

    if any(options.compiles) and options.warmup < 1:
        raise UserError("--compile needs a warm-up step (--warmup 1 or more): torch.compile compiles in the first "
                        "step, which is kept out of the timed ones")
    check_recompute(None, options.training.checkpoint, [get_strategy(name) for name in options.strategies])
    for name, batch in options.models.items():
        own = zoo.is_user_model(name)
        model = zoo.get_model(name, None if own else options.flavour, device="meta", data_dir=options.data_dir,
                              **options.overrides)
        if on_cpu:
            check_module_fits(model.module if own else model.layers, name)
        for micro_batches in options.micro_batches:
            if (why := split_error(batch, micro_batches)) is not None:
                raise UserError(f"--micro-batches {micro_batches}: {name}: {why}")
        splitting = [s for s in options.strategies if get_strategy(s).splits_batch and not get_strategy(s).replicated]
        if batch_given and splitting and (why := split_error(batch, get_strategy(splitting[0]).replicas(devices), splitting[0])) is not None:
            raise UserError(f"--batch {batch}: {name}: {why}; use a multiple of {devices}")


def _make_paths_absolute(options: RunOptions) -> None:
    """The model files (FILE.py:NAME), the results and profiles folders and --data-dir as absolute paths,
    made so when the options are made, before any model file is imported: a file that calls os.chdir("/")
    would have the results land in /out and the profiling child look for /m/net.py."""
    from pipebench.models.source import absolute_target

    if isinstance(options.models, dict):
        object.__setattr__(options, "models", {absolute_target(str(name)): batch for name, batch in options.models.items()})
    object.__setattr__(options, "out", Path(os.path.abspath(options.out)))
    if options.profiles is not None:
        object.__setattr__(options, "profiles", Path(os.path.abspath(options.profiles)))
    if options.data_dir is not None:
        object.__setattr__(options, "data_dir", os.path.abspath(options.data_dir))


def parse_models(text: str | None, batch: int | None) -> dict[str, int]:
    """'gpt,resnet101' -> {name: batch}; the default batch per model unless --batch is given."""
    names = list(DEFAULT_MODELS) if text is None else [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("--models names no model")
    return model_batches(names, batch)


def model_batches(names: Sequence[str], batch: int | None) -> dict[str, int]:
    """{name: batch} for models named by the zoo or as FILE.py:NAME / package.module:NAME (an unknown one:
    one line), each at `batch`, else at its default batch."""
    from pipebench import models as zoo

    for name in names:
        if name not in zoo.model_names() and not zoo.is_user_model(name):
            raise zoo.UnknownModelError(f"unknown model {name!r}; choose one of: {', '.join(zoo.model_names())}")
    return {name: batch or DEFAULT_MODELS.get(name, 64) for name in names}
