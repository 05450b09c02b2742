"""`pipebench`: list models, plan a pipeline, run the suite, look at the GPUs, report on results.

One module per command (models, plan, advise, run, train, devices, report), each with `add_parser` and
the command, bench/cli/plan_inputs.py for where plan and advise get their profiles, bench/cli/common.py
for the options they share, bench/cli/machine_choice.py for where they work (--gpus, --device cpu) and
bench/cli/output.py for what they say (stdout, stderr, exit statuses); reading options is
pipebench.base.text.parse and pipebench.base.text.units, the work is the library's.

Bad input (unknown model, impossible split, malformed file, missing GPU) ends with one line on stderr
and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import sys

from pipebench.base import interrupts
from pipebench.bench.cli.output import EXIT_INTERRUPTED, EXIT_USAGE
from pipebench.base.errors import UserError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The command line; run as the program (`argv` None) it also leaves past threads that a model file
    started and never ends (processes.leave), and writes what its streams cannot encode as escapes (_escaping)."""
    if argv is None:
        _quiet_lost_stderr()
        _escaping()
    code = _main(argv)
    if argv is None:
        from pipebench.base.processes import leave

        leave(code)
    return code


def _writable(stream) -> bool:
    """Whether `stream` takes what is written: not None (Python's stream of a descriptor closed at the start),
    and its descriptor open for writing. A closed descriptor that a wrapper's own open took (`flock LOCK
    pipebench ... >&-`: the lock file) is open for reading only: the first write would raise EBADF.
    A stream of no descriptor (a test's capture) takes it."""
    import fcntl
    import os

    if stream is None:
        return False
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return True
    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        return False


def _quiet_lost_stderr() -> None:
    """A stderr that takes nothing (`2>&-`) is pointed at /dev/null: otherwise the first progress line raises
    EBADF, and a refused input's line, which cannot be said, turns exit status 2 into 1. So the command runs,
    and its exit status (2 for a refusal) says what its lines would have."""
    import os

    if _writable(sys.stderr):
        return
    null = os.open(os.devnull, os.O_WRONLY)
    if null != 2:
        os.dup2(null, 2)
        os.close(null)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def _escaping() -> None:
    """stdout and stderr write a character their encoding lacks as an escape: under PYTHONIOENCODING=ascii
    the plan's own "±" would otherwise raise UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _main(argv: list[str] | None) -> int:
    from pipebench.base.errors import UserError
    from pipebench.base.snapshot import working_folder

    try:
        working_folder()  # before torch's import, which a removed folder may break
    except UserError as exc:
        return _fail(str(exc))
    try:
        parser = build_parser()  # imports every command's module: seconds, before signals are caught
    except KeyboardInterrupt:  # Ctrl-C during the imports: "interrupted", not a traceback through them
        return _stopped()
    try:
        args = _parse(parser, sys.argv[1:] if argv is None else argv)
    except _UsageError as exc:
        from pipebench.base.errors import printable

        print(printable(str(exc)), file=sys.stderr)
        return EXIT_USAGE
    from pipebench.base.processes import run_folder

    previous = interrupts.catch()
    interrupted = False
    try:
        with run_folder():  # every process and temporary folder of the command ends with it
            code = _command(args)
        interrupted = code == EXIT_INTERRUPTED
        return code
    except KeyboardInterrupt:  # while the command's processes were being ended
        interrupted = True
        print("pipebench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        interrupts.forget()
        if not interrupted:  # after an interrupt a second signal stays ignored until we have left: still 130
            interrupts.restore(previous)


def _command(args) -> int:
    try:
        if not _writable(sys.stdout):  # `>&-`: every answer would vanish, and the flush below raise
            raise UserError("stdout is closed (>&-); send it somewhere, e.g. > /dev/null")
        _read_counts(args)
        from pipebench.base.time_limit import import_seconds
        from pipebench.hardware.drift import drift_seconds

        drift_seconds()  # a bad $PIPEBENCH_DRIFT_SECONDS or $PIPEBENCH_IMPORT_SECONDS is refused before any work,
        import_seconds()  # whether or not this command reads it (a cached answer imports no model file)
        from pipebench.partition.profiling.cache import check_cache_folders

        check_cache_folders()  # and a cache folder that is a file
        code = args.handler(args)
        sys.stdout.flush()  # the answer is written now, where a full disk or a closed pipe can be said
        return _stopped() if interrupts.signalled() else code
    except UserError as exc:  # bad input; anything else is a bug and keeps its traceback
        return _stopped() if interrupts.signalled() else _fail(str(exc))
    except OSError as exc:
        if not _output_lost(exc):
            raise
        return _fail(f"cannot write the output ({exc.strerror or exc})")
    except KeyboardInterrupt:
        return _stopped()
    except Exception:
        if interrupts.signalled():  # what followed an interrupt that the user's code or a library swallowed
            return _stopped()
        raise


def _stopped() -> int:
    """A command asked to stop (SIGINT, SIGTERM) says so and exits 130, whatever followed the signal: a
    library's bare `except:` around an import can swallow the KeyboardInterrupt and fail later (a
    torchvision import cut short can end as "cannot import torchvision.models: RecursionError")."""
    print("pipebench: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


class _UsageError(Exception):
    """What argparse refuses (an unknown option or command, a missing value, a value not among the choices),
    as the one line `_Parser.error` makes of it."""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line and exit status 2 instead of its usage block and
    message: `pipebench plan: error: argument --model: expected one argument; pipebench plan --help lists
    the options`. Subcommands' parsers are of this class too (add_subparsers makes its parser's class);
    --help and --version still print in full."""

    def error(self, message: str):
        raise _UsageError(f"{self.prog}: error: {message}; `{self.prog} --help` lists the options")

    def add_argument(self, *names, **kwargs):
        """An option of two long spellings (--cpu-processes and --stages, --micro-batches and --chunks) is a
        _OneValue: given under both, the values must agree."""
        if sum(name.startswith("--") for name in names) > 1 and kwargs.get("action", "store") == "store":
            kwargs["action"] = _OneValue
        return super().add_argument(*names, **kwargs)


class _OneValue(argparse._StoreAction):
    """An option stored as argparse does, that refuses a value under one spelling that disagrees with the
    value under another (`--cpu-processes 2 --stages 3`): argparse's last-wins would take 3 without a word.
    One spelling given twice is argparse's own, the last kept."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = self.__dict__.setdefault("_given", {})  # a parser is built for each command line
        for spelling, value in given.items():
            if spelling != option_string and _meaning(value) != _meaning(values):
                parser.error(f"argument {option_string}: {values} disagrees with {spelling} {value}, another "
                             "spelling of it; give one")
        given[option_string] = values
        super().__call__(parser, namespace, values, option_string)


def _meaning(text) -> frozenset:
    """What a value of an aliased option says, whatever its form: its comma-separated items, each a number
    where it is ASCII digits (02 is 2), as a set (both options are counts, or lists of counts that count
    each value once), so `--micro-batches 1,2 --chunks 2,1` agree."""
    items = (item.strip() for item in str(text).split(","))
    return frozenset(int(item) if item.isascii() and item.isdigit() else item for item in items)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`argv` parsed; an option no command knows is refused by that command's parser, which names it (the
    top one only knows that some of its words were left over) and the closest option it does know."""
    import difflib

    argv = _values_joined(parser, argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        before = argv.index(extra[0]) < argv.index(args.command) if extra[0] in argv else False
        command = parser if before else _subparsers(parser)[args.command]
        known = {o.lstrip("-"): o for action in command._actions for o in action.option_strings}
        close = difflib.get_close_matches(extra[0].split("=")[0].lstrip("-"), known, n=1)
        hint = f" (did you mean {known[close[0]]}?)" if close and extra[0].startswith("-") else ""
        command.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    return args


def _values_joined(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`argv` with each option that takes one value joined to a value that starts with '-' (`--max-memory
    -1GB` -> `--max-memory=-1GB`, also as an abbreviation that argparse would take: `--max-mem -1GB`):
    argparse takes such a value for an option, and answers "expected one argument"; joined, the option's
    own check refuses it in one line. Only the options of the command given count (`--mod` is --model for
    plan, though run has --models). A next word that is an option itself (`--out --fresh`) is left for
    argparse to refuse."""
    command = next((word for word in argv if not word.startswith("-")), None)
    taking, options = set(), set()
    for each in (parser, _subparsers(parser).get(command)):
        for action in each._actions if each is not None else ():
            options.update(action.option_strings)
            if action.option_strings and action.nargs is None:
                taking.update(action.option_strings)
    joined: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--":
            joined += [word, *words]
            break
        if word.startswith("--") and word not in options:  # an abbreviation of exactly one option is that option
            meant = [option for option in options if option.startswith(word)]
            word = meant[0] if len(meant) == 1 else word
        if word in taking:
            value = next(words, None)
            if value is not None and value.startswith("-") and value.split("=")[0] not in options:
                word = f"{word}={value}"
            elif value is not None:
                joined.append(word)
                word = value
        joined.append(word)
    return joined


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each command's name and parser."""
    return {name: command for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, command in action.choices.items()}


def _version() -> str:
    """pipebench's version and torch's, which every figure depends on (torch read from its metadata: no
    import for --version)."""
    from importlib.metadata import PackageNotFoundError, version

    from pipebench.base.version import __version__

    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "not installed"
    return f"pipebench {__version__} (torch {torch})"


def _read_counts(args) -> None:
    """Every count and number option of every command (--batch, --stages, --cpu-processes, --steps, --timeout...: the keys
    of parse.LIMITS), read from its text by the one strict parser, before the command starts."""
    from pipebench.base.text.parse import LIMITS, parse_option

    for name in LIMITS:
        text = getattr(args, name, None)
        if isinstance(text, str):
            setattr(args, name, parse_option(name, text))


def _output_lost(exc: OSError) -> bool:
    """Whether `exc` is stdout or a file refusing what is written: a closed pipe (`| head`), a full disk
    (`> /dev/full`), a quota, a descriptor closed or open for reading only (EBADF). Then stdout is pointed at
    /dev/null, so that Python's own flush at exit does not fail again with a traceback."""
    import errno
    import os

    if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG,
                                                                  errno.EBADF):
        return False
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no stdout of a file descriptor (a test's capture)
        pass
    return True


def build_parser() -> argparse.ArgumentParser:
    from pipebench.bench.cli import advise, devices, models, plan, report, run, train

    parser = _Parser(
        prog="pipebench",
        description="Plan, run and measure pipeline-parallel training across the GPUs of one server.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (models, plan, advise, run, train, devices, report):
        command.add_parser(sub)
    return parser


def _fail(message: str) -> int:
    """Say `message` on stderr; exit status 2 even where stderr takes nothing (a reader gone: its EPIPE)."""
    from pipebench.base.errors import printable

    try:
        print(f"pipebench: error: {printable(message)}", file=sys.stderr)
    except (OSError, ValueError):
        pass
    return EXIT_USAGE
