"""The strategy suite as pytest-benchmark cases: one case per model x strategy x micro-batch count.

    pytest bench/benchmarks/bench_suite.py --benchmark-json=out.json                    # every visible GPU
    pytest bench/benchmarks/bench_suite.py --suite-quick --suite-strategies single,ddp,pp-1f1b

Each case starts its workers (bench.launch.sessions.Session; multi-process strategies through torchrun), lets
them warm up, then `benchmark.pedantic` times one synchronised training step per round in this process.
extra_info holds the results row (samples/s, peak memory per device, first loss, the Plan's cuts and
predicted step time, memory and bubble). Cases that cannot run here are skipped with the reason; a case
that fails or runs out of memory fails with the worker's error.
"""
from __future__ import annotations

import dataclasses
import socket
import time
from datetime import date
from pathlib import Path

import pytest

from pipebench.base.errors import UserError

from pipebench.bench.store import results as res
from pipebench.bench.cases.run_options import RunOptions, parse_models, quick_options
from pipebench.bench.cli.strategy_option import parse_strategies
from pipebench.bench.strategies import get_strategy
from pipebench.base.text.parse import parse_micro_batches
from pipebench.base.training import Training
from pipebench.bench.cases.case import CaseUnavailable, make_cases, now
from pipebench.bench.cases.case_rows import make_row
from pipebench.bench.cases.prepare import prepare, profile_case_model
from pipebench.bench.cases.machine import detect_machine
from pipebench.base.time_limit import LIMIT_SECONDS


def suite_options(config) -> tuple[RunOptions, object]:
    """The suite's options and machine, parsed once (bench/benchmarks/conftest.py checks them at start-up, so that a
    bad option is one line and pytest's usage-error status, 4)."""
    if not hasattr(config, "_pipebench_suite"):
        try:
            config._pipebench_suite = _parse_options(config)
        except UserError as exc:  # DeviceError and the parse_* errors
            raise pytest.UsageError(str(exc)) from None
    return config._pipebench_suite


def _parse_options(config) -> tuple[RunOptions, object]:
    from pipebench.base.text.parse import AutoGpus, parse_gpus

    gpus = parse_gpus(config.getoption("--suite-gpus")) if config.getoption("--suite-gpus") else None
    if isinstance(gpus, AutoGpus):
        from pipebench.hardware.gpus import choose_gpus, query_gpus

        gpus = [g.index for g in choose_gpus(query_gpus(), gpus.count)]
    machine = detect_machine(gpus)
    options = RunOptions(
        models=parse_models(config.getoption("--suite-models"), config.getoption("--suite-batch")),
        strategies=parse_strategies(config.getoption("--suite-strategies")),
        micro_batches=parse_micro_batches(config.getoption("--suite-micro-batches")), flavour=None, overrides={},
        out=Path(config.getoption("--suite-out") or "."), resume=False,
        steps=config.getoption("--suite-steps"), warmup=config.getoption("--suite-warmup"), timeout=LIMIT_SECONDS,
        training=Training(config.getoption("--suite-precision"), config.getoption("--suite-optimizer")),
    )
    if config.getoption("--suite-quick") or machine.gpus is None:
        options = quick_options(options)
    return options, machine


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        options, _ = suite_options(metafunc.config)
        cases = make_cases(options.models, options.strategies, options.micro_batches, flavour=options.flavour,
                           training=options.training)
        metafunc.parametrize("case", cases, ids=[c.label().replace(" ", "-") for c in cases])


@pytest.fixture(scope="session")
def suite(request, tmp_path_factory):
    options, machine = suite_options(request.config)
    return {"options": options, "machine": machine, "profiles": {}, "folder": tmp_path_factory.mktemp("profiles")}


def test_case(benchmark, case, suite):
    from pipebench.bench.launch.sessions import Session

    options, machine = suite["options"], suite["machine"]
    benchmark.group = f"{case.model} {case.flavour or 'full'} batch {case.batch} on {machine.hardware}"
    key = (case.model, case.flavour, case.batch, case.overrides, case.training.precision, case.training.optimizer)
    try:
        profiled = None
        if get_strategy(case.strategy).needs_plan:
            if key not in suite["profiles"]:
                suite["profiles"][key] = profile_case_model(case, machine, suite["folder"], note=lambda _: None)
            profiled = suite["profiles"][key]
        prepared = prepare(case, machine, profiled, steps=options.steps, warmup=options.warmup)
    except CaseUnavailable as exc:
        pytest.skip(str(exc))
    if prepared.job is None:  # predicted not to fit in the memory cap: not launched
        pytest.skip(f"predicted out of memory: {prepared.over_cap}")
    started, start = now(), time.monotonic()
    with Session(prepared.job, gpus=prepared.gpus, timeout=options.timeout) as workers:
        times: list[float] = []
        benchmark.pedantic(lambda: times.append(workers.step()), rounds=options.steps, iterations=1)
        workers.step(trace=True)
        result = workers.finish()
    row = make_row(prepared, machine, status="ok", result=result, step_ms=times, started_at=started,
                   duration_s=time.monotonic() - start)
    benchmark.extra_info.update({k: v for k, v in dataclasses.asdict(row).items()
                                 if k not in ("timeline", "predicted_timeline")})
    if options.out != Path("."):
        csv_path, json_path = res.results_paths(options.out, date.today(), socket.gethostname(), machine.hardware)
        res.append(row, csv_path, json_path)
    assert row.first_loss is not None and row.first_loss == row.first_loss  # a finite loss was computed
