"""The options the commands share (the server's limits, the Training, a model of your own, --data-dir)
and reading them; what is said is output.py's, where the work runs machine_choice.py's."""
from __future__ import annotations

import argparse

from pipebench.base.errors import UserError


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """--max-memory and --speeds, which plan and run share (run applies them to each plan it makes)."""
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="memory cap per GPU, e.g. 20GiB or 512MB (default on GPUs: what is free at the "
                        "start, less 5%% of the total or 1 GiB)")
    parser.add_argument("--speeds", metavar="auto|F,F,...",
                        help="speed factor per GPU for the solver: auto runs a short matrix-product probe on each "
                        "(a busy GPU gets fewer layers); default: all equal")


def add_training_options(parser: argparse.ArgumentParser, *, several_compiles: bool = False) -> None:
    """--precision, --optimizer, --checkpoint and --compile (pipebench/base/training.py), which run, plan and
    advise share; `training_of(args)` reads them, an unknown value in one line. several_compiles: --compile
    takes a list, each mode a case of its own, eager among them (run: compiled beside eager)."""
    from pipebench.base.training import CHECKPOINT_MODES, COMPILE_MODES, OPTIMIZERS, PRECISIONS, Training

    parser.add_argument("--precision", metavar="|".join(PRECISIONS),
                        help="fp32, tf32 (default; TF32 matmuls) or bf16 (autocast, fp32 master weights): what "
                        "runs and what profiles are measured in (a saved profile keeps its own)")
    parser.add_argument("--optimizer", default=Training.optimizer, metavar="|".join(OPTIMIZERS),
                        help="sgd (default) or adamw; the memory predictions count its state")
    parser.add_argument("--checkpoint", default=Training.checkpoint, metavar="|".join(CHECKPOINT_MODES),
                        help="activation recomputation: never (default), auto (stages recompute only where the "
                        "memory cap requires it) or always")
    modes = "|".join(COMPILE_MODES)
    if several_compiles:
        parser.add_argument("--compile", metavar="MODE[,MODE...]",
                            help=f"torch.compile what each strategy runs, in each mode given ({modes}, or eager), "
                            "each a case of its own: --compile eager,default measures both in one run (default: "
                            "eager); compile seconds are kept apart from the step")
    else:
        parser.add_argument("--compile", metavar=modes,
                            help="torch.compile what each strategy runs in this mode (cudagraphs: GPUs only); the "
                            "profile is measured compiled (default: eager)")


def compile_modes(text: str | None) -> list[str | None]:
    """--compile's modes in the order given, None for eager (the default); an unknown one in one line."""
    from pipebench.base.training import COMPILE_MODES

    if text is None:
        return [None]
    modes = [part.strip() for part in text.split(",")]
    for mode in modes:
        if mode != "eager" and mode not in COMPILE_MODES:
            raise UserError(f"--compile {mode!r}: choose one of: {', '.join(COMPILE_MODES)} (or eager)")
    return list(dict.fromkeys(None if mode == "eager" else mode for mode in modes))


def training_of(args):
    """The Training the options of add_training_options say (UserError for an unknown value); --compile
    with one mode (run reads its list with compile_modes)."""
    from pipebench.base.training import Training

    modes = compile_modes(getattr(args, "compile", None))
    if len(modes) > 1:
        raise UserError(f"--compile takes one mode here (got {args.compile!r}); run measures several side by side")
    given = {"precision": args.precision, "optimizer": args.optimizer, "checkpoint": args.checkpoint}
    return Training(**{name: value for name, value in given.items() if value is not None}, compile=modes[0])


def training_given(args) -> list[str]:
    """The parts of the Training that a saved profile must have been measured in: those given on the
    command line (--precision, --compile); the others are the profile's own."""
    return [name for name in ("precision", "compile") if getattr(args, name, None) is not None]


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """How a model of your own (--model FILE.py:NAME or package.module:NAME) is fed and cut; plan and run
    share them (models/source.py says what each does)."""
    group = parser.add_argument_group("a model of your own (FILE.py:NAME or package.module:NAME)")
    group.add_argument("--input-shape", metavar="C,H,W", help="one sample's input shape, without the batch "
                       "dimension (not needed when the file defines make_batch(batch_size))")
    group.add_argument("--input-dtype", default=None, help="float32, bfloat16, int64 (token ids)... (default: "
                       "int64 for a Hugging Face model that takes input_ids, else float32)")
    group.add_argument("--num-classes", default=None,
                       help="classes of the synthetic targets (default: the output's last dimension)")
    group.add_argument("--token-range", default=None, help="token ids are drawn below this (default: the model's vocabulary, the rows "
                       "of its input embedding; 1000 where it has none)")
    group.add_argument("--loss", default=None, help="cross_entropy (default), nll, mse or bce (a Hugging Face "
                       "classifier's default follows its problem_type); a loss_fn in the file wins")
    group.add_argument("--granularity", default=None, metavar="DEPTH",
                       help="module depth of the cut candidates, 1 = top-level submodules (default: the finest "
                       "depth with at most 64 candidates)")


def model_settings(args, names: list[str]) -> dict:
    """The settings --input-shape and friends give, for get_model; refused for the zoo's models."""
    from pipebench.model_spec import is_user_model

    given = {"input_shape": args.input_shape, "input_dtype": args.input_dtype, "num_classes": args.num_classes,
             "token_range": args.token_range, "loss": args.loss, "granularity": args.granularity}
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return {}
    zoo = [n for n in names if not is_user_model(n)]
    if zoo:
        option = "--" + next(iter(given)).replace("_", "-")
        raise UserError(f"{option} is for a model of your own (FILE.py:NAME); {zoo[0]} is the zoo's")
    if "input_shape" in given:
        from pipebench.base.text.parse import parse_int

        try:
            given["input_shape"] = [parse_int(d, "--input-shape", 1, 2**31) for d in given["input_shape"].split(",")]
        except UserError:
            raise UserError(f"--input-shape takes positive integers such as 3,224,224 "
                            f"(got {args.input_shape[:40]!r})") from None
    return given


def model_overrides(args, names: list[str]) -> dict:
    """The settings of the models `names`: --set KEY=VALUE, and --input-shape and friends (model_settings),
    merged the one way run, train, plan and advise all take them."""
    from pipebench.base.text.parse import parse_override

    return {**dict(parse_override(o) for o in args.overrides), **model_settings(args, names)}


OPTION_OF = {"data_dir": "--data-dir"}
"""The API's keywords whose refusals the command line says in its options' names (as_option)."""


def as_option(error: UserError) -> UserError:
    """A refusal the API makes, naming its keyword first (`data_dir X: no such folder`: ModelSpec's rule), as
    the command line says it, naming its option (`--data-dir X: no such folder`); any other as it is."""
    text = str(error)
    for keyword, option in OPTION_OF.items():
        if text.startswith((f"{keyword} ", f"{keyword}:")):
            return UserError(option + text[len(keyword):])
    return error


def data_folder(text: str | None) -> str | None:
    """--data-dir (plan and advise): the folder as given, refused in one line by ModelSpec's rule (empty, not
    a folder) in the option's name."""
    from pipebench.model_spec import ModelSpec

    try:
        ModelSpec(None, data_dir=text)
    except UserError as exc:
        raise as_option(exc) from None
    return text
