"""`pipebench.run`: the benchmark suite from Python, as `pipebench run` runs it.

Apart from pipebench/api.py because the suite's cases profile through the API (bench/cases/prepare.py):
here above both, the import graph stays without cycles (tests/test_layers.py).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from pipebench.errors import UserError
from pipebench.request import count_of
from pipebench.time_limit import LIMIT_SECONDS

__all__ = ["run"]


def run(models: Any, *, strategies: Sequence[str] | None = None, machine: Any = None,
        note: Callable[[str], None] | None = print, **options: Any):
    """Run the benchmark suite, as `pipebench run`: every model with every strategy on this machine, side
    by side, one results row per case appended to <out>/<date>-<host>-<hardware>.csv and .json as it
    ends. Returns (rows, csv path, json path).

    models: {name: global batch}, or names (each at its default batch); a name is the zoo's, FILE.py:NAME
        or package.module:NAME. strategies: names (default: every one). machine: a Machine
        (bench/cases/machine.py detect_machine: GPUs by id, or CPU processes; default: every visible GPU,
        else 2 CPU processes). options: the fields of RunOptions (bench/cases/suite_run.py), e.g. flavour,
        out, steps, warmup, rounds, training, chunks, resume; the command line's defaults where not given.
    Everything is checked, one UserError, before anything is profiled or written: each option's type and
    the command line's bound (RunOptions, parse.LIMITS), then what check_run checks for `pipebench run`."""
    from dataclasses import fields as fields_of

    from pipebench.bench.cases import suite_run
    from pipebench.bench.cases.machine import Machine, detect_machine
    from pipebench.bench.store.results import DEFAULT_OUT
    from pipebench.bench.strategies import strategy_list, strategy_names

    if isinstance(models, str) or not isinstance(models, (dict, list, tuple)) or not models:
        raise UserError(f"models takes names or {{name: batch}}, e.g. ['mlp'] or {{'mlp': 8}}, not {models!r:.60}")
    if not isinstance(models, dict):
        models = suite_run.model_batches([str(name) for name in models], None)
    else:
        suite_run.model_batches([str(name) for name in models], None)  # an unknown name: one line
        models = {str(name): count_of(batch, "batch") for name, batch in models.items()}
    names = strategy_names() if strategies is None else strategy_list(strategies)
    known = {f.name for f in fields_of(suite_run.RunOptions)} - {"models", "strategies"}
    if unknown := sorted(set(options) - known):
        raise UserError(f"run takes no option {', '.join(unknown)}; it takes: {', '.join(sorted(known))}")
    options = {"chunks": [None], "flavour": None, "overrides": {}, "out": DEFAULT_OUT, "resume": False,
               "timeout": LIMIT_SECONDS, **suite_run.FULL, **options}
    run_options = suite_run.RunOptions(models=models, strategies=list(dict.fromkeys(names)), **options)
    if machine is None:
        machine = detect_machine(None)
    elif not isinstance(machine, Machine):
        raise UserError(f"machine takes a Machine (bench/cases/machine.py detect_machine), not {type(machine).__name__}")
    run_options = suite_run.check_run(run_options, machine)
    return suite_run.run_suite(run_options, machine, note=note or (lambda line: None))
