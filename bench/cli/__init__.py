"""`pipebench`: list models, plan a pipeline, run the suite, look at the GPUs, report on results.

A thin layer: one module per command (models, plan, advise, run, devices, report), each with `add_parser`
and the command, and bench/cli/common.py for the options and helpers they share; reading options is
pipebench.specs and pipebench.units, the work is the library's.

Bad input (unknown model, impossible split, malformed file, missing GPU) ends with one line on stderr
and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import signal
import sys

from pipebench.bench.cli.common import EXIT_INTERRUPTED, EXIT_USAGE
from pipebench.errors import UserError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # timeout, Slurm, systemd, docker stop: as Ctrl-C
    try:
        _read_counts(args)
        from pipebench.hardware.probes import drift_seconds

        drift_seconds()  # a bad $PIPEBENCH_DRIFT_SECONDS is refused before any work
        return args.handler(args)
    except UserError as exc:  # bad input; anything else is a bug and keeps its traceback
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("pipebench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _version() -> str:
    """pipebench's version and torch's, which every figure depends on (torch read from its metadata: no
    import for --version)."""
    from importlib.metadata import PackageNotFoundError, version

    from pipebench.version import __version__

    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "not installed"
    return f"pipebench {__version__} (torch {torch})"


def _read_counts(args) -> None:
    """Every count and number option of every command (--batch, --stages, --steps, --timeout...: the keys
    of specs.LIMITS), read from its text by the one strict parser, before the command starts."""
    from pipebench.specs import LIMITS, parse_option

    for name in LIMITS:
        text = getattr(args, name, None)
        if isinstance(text, str):
            setattr(args, name, parse_option(name, text))


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def build_parser() -> argparse.ArgumentParser:
    from pipebench.bench.cli import advise, devices, models, plan, report, run, train

    parser = argparse.ArgumentParser(
        prog="pipebench",
        description="Plan, run and measure pipeline-parallel training across the GPUs of one server.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (models, plan, advise, run, train, devices, report):
        command.add_parser(sub)
    return parser


def _fail(message: str) -> int:
    print(f"pipebench: error: {message}", file=sys.stderr)
    return EXIT_USAGE
