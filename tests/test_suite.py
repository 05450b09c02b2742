"""The suite end to end on the CPU: Session-timed steps, `pipebench run` rows, --resume, the report."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pipebench.bench.cli import main
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.sessions import Session
from pipebench.bench.launch.spawn import WorkerError
from pipebench.bench.store.results import load


def hide_gpus(monkeypatch):
    import torch

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    """These tests are about the CPU path: hide any GPU from this process and from the workers."""
    hide_gpus(monkeypatch)


def test_session_times_each_step_in_the_parent(groups):
    """In the session's warm worker group (tests/conftest.py), as `run` times its cases; a Session with
    workers of its own is test_timeout_ends_the_case_whatever_its_steps_do's."""
    job = Job.by_hand("gpt", "pp-1f1b", flavour="tiny", batch=8, devices=2, device_type="cpu",
              micro_batches=2, warmup=1)
    with Session(job, timeout=120, groups=groups) as workers:
        times = [workers.step() for _ in range(3)]
        workers.step(trace=True)
        result = workers.finish()
    assert len(times) == 3 and all(t > 0 for t in times)
    assert len(result.step_ms) == 4  # the workers' own clocks, the traced step included
    kinds = {(op["kind"], op["stage"], op["micro"]) for op in result.timeline}
    assert kinds == {(k, s, m) for k in "FB" for s in (0, 1) for m in (0, 1)}


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_session_reports_a_failing_worker():
    """One process, as the claim needs (torchrun's ranks failing: tests/test_distributed.py, and in a worker
    group: test_run_runs_the_cases_of_one_process_count_in_one_group)."""
    job = Job.by_hand("gpt", "single", flavour="tiny", batch=8, devices=1, device_type="cpu", fail_on_rank=0)
    with pytest.raises(WorkerError, match="rank 0: RuntimeError: injected failure on rank 0"):
        with Session(job, timeout=120):
            pass


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """One folder of saved profiles for this module's runs (`--profiles`): each model and set of sizes is
    profiled by the first run that needs it and reused by the others, which test what comes after it."""
    return tmp_path_factory.mktemp("profiles")


DEEP_MLP = ["--models", "mlp", "--set", "depth=8", "--quick"]
"""The model of this module's runs; their pipelines plan from its profile (every micro-batch count)."""


@pytest.fixture(scope="module")
def resumed(tmp_path_factory, profiles):
    """`run` three times into one results folder, as a user resumes it: single, ddp and pp-1f1b on the MLP;
    the same again with --resume; then with the second device at a quarter of the speed, pp-zb (made to
    fail on rank 1) and pp-1f1b added; then `report` of the folder. Each step's (exit status, stdout,
    stderr) and the process counts of the worker groups it started, by name, and the folder. Shared by the
    tests below: each run starts processes (every case, worker groups), seconds each."""
    import contextlib
    import io

    from pipebench.bench.cases import run_suite

    from pipebench.bench.launch import sessions

    folder = tmp_path_factory.mktemp("resumed")

    def argv(strategies, *more):
        return ["run", *DEEP_MLP, "--strategies", strategies, "--steps", "1", "--warmup", "0", "--rounds", "1", "--profiles",
                str(profiles), "--out", str(folder / "results"), *more]

    steps, started = {}, {}

    class Counted(sessions.WorkerGroup):
        def __init__(self, job, *args, **kwargs):
            started[name].append(job.processes)
            super().__init__(job, *args, **kwargs)

    def failing(case, *args, **kwargs):
        prepared = prepare(case, *args, **kwargs)
        if case.strategy == "pp-zb":
            prepared.job = replace(prepared.job, fail_on_rank=1)
        return prepared

    prepare = run_suite.prepare
    with pytest.MonkeyPatch.context() as monkeypatch:
        hide_gpus(monkeypatch)
        monkeypatch.setattr(sessions, "WorkerGroup", Counted)
        monkeypatch.setattr(run_suite, "prepare", failing)
        for name, args in [("first", argv("single,ddp,pp-1f1b", "--speeds", "1,1")),
                           ("again", argv("single,ddp,pp-1f1b", "--speeds", "1,1", "--resume")),
                           ("slower", argv("single,ddp,pp-zb,pp-1f1b", "--speeds", "1,0.25", "--resume",
                                           "--warmup", "1", "--min-seconds", "0.3")),
                           ("report", ["report", str(folder / "results"), "--out", str(folder / "report")])]:
            out, err = io.StringIO(), io.StringIO()
            started[name] = []
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(args)
            steps[name] = (code, out.getvalue(), err.getvalue())
    return steps, started, folder


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_run_writes_rows_resumes_and_reports(resumed):
    steps, started, folder = resumed
    code, out, err = steps["first"]
    assert code == 0, err
    assert "no CUDA GPU visible: running on the CPU" in err and "[3/3]" in err and "so far" in err
    files = sorted((folder / "results").glob("*.json"))
    assert len(files) == 1 and files[0].with_suffix(".csv").exists()
    rows = load(files)[:3]
    assert [r.strategy for r in rows] == ["single", "ddp", "pp-1f1b"]
    assert all(r.status == "ok" and r.samples_per_s > 0 for r in rows)
    assert len({round(r.first_loss, 5) for r in rows}) == 1  # the same computation everywhere
    pp = rows[2]
    assert pp.predicted_step_ms > 0 and pp.timeline and pp.predicted_timeline and pp.bounds[0] == 0
    assert "| single |" in out and str(files[0]) in out

    code, _, err = steps["again"]
    assert code == 0 and err.count("done already (--resume)") == 3 and started["again"] == []

    code, out, err = steps["report"]
    assert code == 0, err
    assert "mlp tiny (depth=8):" in out and (folder / "report" / "report.md").exists()
    assert (folder / "report" / "throughput.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.ci  # reads the module's three runs (the `resumed` fixture, 30-50 s): CI runs it after the default set
def test_run_runs_the_cases_of_one_process_count_in_one_group(resumed):
    """One worker group per process count, not one launch per case: the first run starts one for single
    and one for ddp and pp-1f1b. A case that fails in its group (pp-zb in the slower run) ends it and
    becomes its own row, and the case after it (pp-1f1b) runs in a new group."""
    steps, started, folder = resumed
    assert started["first"] == [1, 2]
    assert started["slower"] == [2, 2]
    assert steps["slower"][0] == 0, steps["slower"][2]
    rows = {(r.strategy, r.speeds): r for r in load(sorted((folder / "results").glob("*.json")))}
    assert rows["pp-zb", "1;0.25"].status == "failed"
    assert rows["pp-zb", "1;0.25"].reason == "rank 1: RuntimeError: injected failure on rank 1"
    assert rows["pp-1f1b", "1;0.25"].status == "ok"


@pytest.mark.ci  # reads the module's three runs (the `resumed` fixture, 30-50 s): CI runs it after the default set
def test_min_seconds_times_steps_until_it_has_passed(resumed):
    """The slower run asked for 1 step and at least 0.3 s after a warm-up (a new group's first step can take
    longer than that): its pp-1f1b (ms a step) timed several,
    and its row keeps their fastest beside their mean; a row of one step has the one as both."""
    steps, _, folder = resumed
    assert "1 timed step(s) or more, for 0.3 s" in steps["slower"][2]
    rows = {(r.strategy, r.speeds): r for r in load(sorted((folder / "results").glob("*.json")))}
    timed = rows["pp-1f1b", "1;0.25"]
    assert timed.step_ms_std is not None and timed.step_ms_best < timed.step_ms
    once = rows["single", ""]
    assert once.step_ms_std is None and once.step_ms_best == once.step_ms


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_unavailable_cases_become_rows(capsys, tmp_path, profiles):
    # The hybrid copies a pipeline of 2 stages onto 4 devices or more; the CPU stands in for 2.
    code, _, err = run(capsys, "run", *DEEP_MLP, "--strategies", "hybrid", "--profiles", str(profiles),
                       "--out", str(tmp_path))
    assert code == 0, err
    (row,) = load(sorted(tmp_path.glob("*.json")))
    assert row.status == "unavailable" and "needs 4 or more devices" in row.reason


@pytest.mark.parametrize("argv, message", [
    (["run", "--models", "nosuch"], "unknown model 'nosuch'"),
    (["run", "--strategies", "single,warp"], "unknown strategy 'warp'"),
    (["run", "--gpus", "0"], "no CUDA GPU is visible here"),
    (["run", "--micro-batches", "two"], "--micro-batches takes positive integers and/or auto"),
    (["run", "--steps", "0"], "--steps takes a positive integer up to 1,000,000 (got '0')"),
    (["run", "--min-seconds", "-1"], "--min-seconds takes a number from 0 to 86400 (got '-1')"),
    (["run", "--min-seconds", "nan"], "--min-seconds takes a number from 0 to 86400 (got 'nan')"),
    (["run", "--max-memory", "lots"], "cannot read memory size 'lots'"),
    (["run", "--speeds", "auto"], "--speeds auto probes GPUs; on the CPU give the factors"),
    (["run", "--speeds", "1,0.5,2"], "--speeds needs one positive factor per device (2)"),
])
def test_run_bad_input_exits_2(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.strip().splitlines()[-1].startswith("pipebench: error: ") and message in err
    assert "Traceback" not in err


@pytest.mark.ci  # reads the module's three runs (the `resumed` fixture, 30-50 s): CI runs it after the default set
def test_run_cuts_plans_for_the_given_speeds(resumed):
    """A device at a quarter of the speed is planned for, and the row says which speeds the plan assumed.
    Both runs go into one results file: --resume reruns only the cases planned for other speeds, and the
    report shows the two side by side."""
    steps, _, folder = resumed
    code, _, err = steps["slower"]
    assert code == 0 and err.count("done already (--resume)") == 2, err
    rows = load(sorted((folder / "results").glob("*.json")))
    assert sorted((r.strategy, r.speeds) for r in rows) == [  # replicas do not depend on speeds
        ("ddp", ""), ("pp-1f1b", "1;0.25"), ("pp-1f1b", "1;1"), ("pp-zb", "1;0.25"), ("single", "")]
    code, _, err = steps["report"]
    assert code == 0, err
    table = (folder / "report" / "report.md").read_text()
    assert "planned for speeds 1/0.25" in table and "planned for speeds 1/1" in table
    equal = next(r for r in rows if r.strategy == "pp-1f1b" and r.speeds == "1;1")
    aware = next(r for r in rows if r.strategy == "pp-1f1b" and r.speeds == "1;0.25")
    assert aware.status == "ok"
    # One profile, the slow device's stage priced 4 times over: a slower predicted step, and never more
    # layers on the slow device (the last stage starts no earlier). Fewer, unless a busy CPU's spike in
    # one layer's profiled time already holds the cut where it is (tests/test_cli.py plans a steadier model).
    assert aware.predicted_step_ms > equal.predicted_step_ms
    assert aware.bounds[1] >= equal.bounds[1]


def test_run_honours_a_memory_cap(capsys, tmp_path, profiles):
    """--max-memory caps every plan; a case that fits nowhere becomes a predicted-oom row naming the stage."""
    code, _, err = run(capsys, "run", *DEEP_MLP, "--strategies", "pp-1f1b", "--max-memory", "1KB", "--steps", "1",
                       "--warmup", "0", "--profiles", str(profiles), "--out", str(tmp_path))
    assert code == 0, err
    (row,) = load(sorted(tmp_path.glob("*.json")))
    assert row.status == "predicted-oom" and "fits the memory cap (1000 B per stage)" in row.reason
    assert re.search(r"\(stage \d: layers \d+-\d+, cap 1000 B\)", row.reason), row.reason


def test_report_of_a_bad_file_exits_2_and_leaves_it(capsys, tmp_path):
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"format": "pipebench-results", "version": 0, "rows": []}))
    code, _, err = run(capsys, "report", str(bad))
    assert code == 2 and "version" in err and "Traceback" not in err
    assert json.loads(bad.read_text())["version"] == 0


def test_out_of_memory_is_told_apart():
    import torch

    from pipebench.bench.launch.worker_report import error_record

    oom = error_record(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore"), 1)
    assert oom["oom"] and oom["rank"] == 1 and oom["message"] == "CUDA out of memory. Tried to allocate 2.00 GiB"
    assert not error_record(ValueError("bad shape"), 0)["oom"]
    try:  # as torch.distributed.pipelining wraps a stage's error: the root cause is what the row says
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        except torch.cuda.OutOfMemoryError as cause:
            raise RuntimeError("Failed to run stage backward:\nStage output: ...") from cause
    except RuntimeError as wrapped:
        record = error_record(wrapped, 0)
    assert record["oom"] and record["type"] == "OutOfMemoryError"
    assert record["message"] == "CUDA out of memory. Tried to allocate 1.00 GiB (in: Failed to run stage backward)"


def test_a_result_reads_back_as_the_worker_wrote_it_and_a_malformed_one_fails_the_case():
    from helpers import worker_result
    from pipebench.bench.launch.worker_report import WorkerResult

    written = worker_result(step_ms=[10.0, 12.0], peak_memory_bytes=[2**30, 0], compile_s=1.5, graph_breaks=0,
                            timeline=[{"kind": "F", "stage": 0, "micro": 0, "device": 0, "start_ms": 0.0, "end_ms": 1.0}])
    assert WorkerResult.from_record(json.loads(json.dumps(written.to_record()))) == written
    missing = written.to_record()
    del missing["step_ms"]
    with pytest.raises(WorkerError, match="missing field 'step_ms'"):
        WorkerResult.from_record(missing)
    with pytest.raises(WorkerError, match="peak_memory_bytes"):
        WorkerResult.from_record({**written.to_record(), "peak_memory_bytes": "lots"})


def test_a_failing_case_becomes_a_row_and_the_suite_goes_on(monkeypatch, tmp_path, capsys, profiles):
    from pipebench.bench.launch import sessions

    class OutOfMemory:
        def __init__(self, job, **kw):
            self.job = job

        def __enter__(self):
            if self.job.strategy == "ddp":
                raise WorkerError("rank 1: OutOfMemoryError: CUDA out of memory", oom=True)
            if self.job.strategy == "fsdp":
                raise WorkerError("timeout: fsdp ran past its limit of 5 s (--timeout); stopped", timeout=True)
            raise WorkerError("rank 0: RuntimeError: boom")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(sessions, "Session", OutOfMemory)
    code, _, err = run(capsys, "run", *DEEP_MLP, "--strategies", "ddp,fsdp,pp-1f1b", "--profiles", str(profiles),
                       "--out", str(tmp_path))
    assert code == 0, err
    rows = load(sorted(tmp_path.glob("*.json")))
    assert [(r.strategy, r.status) for r in rows] == [("ddp", "oom"), ("fsdp", "timeout"), ("pp-1f1b", "failed")]
    assert rows[0].reason == "rank 1: OutOfMemoryError: CUDA out of memory"


@pytest.mark.ci  # process handling, run by CI after the default run
def test_pytest_benchmark_suite_times_cases_and_writes_rows(tmp_path):
    """bench/benchmarks/bench_suite.py through pytest-benchmark, in its own pytest: two cases, their rows in
    extra_info and in the results file."""
    root = Path(__file__).resolve().parents[1]
    report = tmp_path / "benchmark.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "bench/benchmarks/bench_suite.py", "-q", "-p", "no:cacheprovider",
         "--suite-quick", "--suite-models", "gpt", "--suite-strategies", "single,pp-1f1b", "--suite-steps", "2",
         "--suite-warmup", "1", "--suite-out", str(tmp_path), f"--benchmark-json={report}"],
        cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    benchmarks = {b["extra_info"]["strategy"]: b for b in json.loads(report.read_text())["benchmarks"]}
    assert set(benchmarks) == {"single", "pp-1f1b"}
    for b in benchmarks.values():
        assert b["stats"]["rounds"] == 2 and b["extra_info"]["status"] == "ok"
        assert b["extra_info"]["samples_per_s"] > 0 and b["extra_info"]["duration_s"] > 0
    assert benchmarks["pp-1f1b"]["extra_info"]["predicted_step_ms"] > 0
    rows = [row for path in tmp_path.glob("*.json") if path != report for row in load(path)]
    assert sorted(r.strategy for r in rows) == ["pp-1f1b", "single"]


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_pytest_benchmark_suite_rejects_a_bad_option_in_one_line():
    done = subprocess.run([sys.executable, "-m", "pytest", "bench/benchmarks/bench_suite.py", "-q", "-p", "no:cacheprovider",
                           "--suite-strategies", "hand-split"],
                          cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=300)
    assert done.returncode == 4  # pytest's usage error
    assert "ERROR: unknown strategy 'hand-split'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_timeout_ends_the_case_whatever_its_steps_do():
    """`run --steps 1000000000 --timeout 20` ends the case at 20 s: the limit holds for the whole case, not
    for each wait on a step, which a million quick steps never reach."""
    import time

    job = Job.by_hand("mlp", "single", flavour="tiny", batch=8, devices=1, device_type="cpu")
    bound = time.monotonic() + 300  # the test's own bound: far beyond the 4 s the case may take
    with pytest.raises(WorkerError, match=r"timeout: single ran past its limit of 4 s \(--timeout\); stopped") as info:
        with Session(job, timeout=4) as workers:
            while time.monotonic() < bound:
                workers.step()
    assert info.value.timeout
