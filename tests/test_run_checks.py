"""`pipebench run` and its results file: which cases --resume counts as done,
and what is checked before the first case runs. The cases are faked (no worker starts), so these are fast."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import worker_result
from pipebench.bench.cases import run_options, run_suite
from pipebench.bench.store.results import ResultsError, load
from pipebench.bench.cases.prepare import Prepared
from pipebench.bench.cases.case_rows import make_row
from pipebench.bench.cases.machine import Machine


@pytest.fixture
def ran(monkeypatch):
    """Cases that are neither profiled nor planned and 'run' at once, each ok with a 10 ms step; the rows
    are the suite's own (make_row). The list holds the cases that ran."""
    cases = []

    def fake_prepare(case, machine, profiled, *, steps, warmup, try_anyway=False):
        return Prepared(case, SimpleNamespace(processes=2, micro_batches=1), plan=None, gpus=None)

    def fake_rounds(prepared, machine, *, rounds, steps, timeout, groups=None, min_seconds=0.0, note=None):
        cases.extend(p.case for p in prepared)
        return [make_row(p, machine, status="ok", step_ms=[10.0], result=worker_result(first_loss=1.0),
                         started_at="2026-11-30T10:00:00") for p in prepared]
    monkeypatch.setattr(run_suite, "profile_case_model", lambda *args, **kwargs: None)
    monkeypatch.setattr(run_suite, "prepare", fake_prepare)
    monkeypatch.setattr(run_suite, "run_rounds", fake_rounds)  # what run_suite measures its cases with
    return cases


def run(out: Path, *, resume=False, again=False, **overrides):
    options = run_options.RunOptions(models={"mlp": 8}, strategies=["ddp"], micro_batches=[None], flavour="tiny",
                                   overrides=overrides, out=out, resume=resume, again=again, steps=1, warmup=0,
                                   timeout=60)
    notes = []
    rows, _, json_path = run_suite.run_suite(options, Machine(None, 2, "cpu"), note=notes.append)
    return rows, json_path, notes


def test_resume_runs_a_case_again_with_other_set_values(tmp_path, ran):
    """After a `--set depth=3` run, `--resume --set depth=4` runs its case, not "done already"."""
    _, json_path, _ = run(tmp_path, depth=3)
    _, _, notes = run(tmp_path, resume=True, depth=4)
    assert not any("done already" in n for n in notes) and len(ran) == 2
    assert sorted(r.settings for r in load(json_path)) == ["depth=3", "depth=4"]
    _, _, notes = run(tmp_path, resume=True, depth=4)
    assert any("done already (--resume)" in n for n in notes) and len(ran) == 2


def test_a_second_run_into_one_file_without_resume_is_refused(tmp_path, ran):
    run(tmp_path)
    with pytest.raises(ResultsError, match="already holds 1 row.*add --resume"):
        run(tmp_path)
    assert len(ran) == 1  # refused before anything ran
    (json_path,) = tmp_path.glob("*.json")
    assert len(load(json_path)) == 1


def test_a_csv_without_its_json_is_refused_before_any_case_runs(tmp_path, ran):
    """A results CSV without its JSON is refused before any case runs, not when the first finished case is
    appended, which would lose that case."""
    _, json_path, _ = run(tmp_path)
    json_path.unlink()
    with pytest.raises(ResultsError, match="exists without its JSON file"):
        run(tmp_path, resume=True)
    assert len(ran) == 1


def test_two_resuming_runs_never_both_run_a_case(tmp_path, ran, monkeypatch):
    """A case another live run holds (its claim beside the results) is skipped; so is one that another run
    wrote after this one began. A claim whose run is gone (killed with -9) is taken over."""
    import os
    import socket

    from pipebench.bench.store import results as res

    run(tmp_path, depth=1)  # the results file exists: the next runs resume into it
    (json_path,) = tmp_path.glob("*.json")
    real_claim = res.claim

    def held_by(pid):
        def claim(key, path):
            folder = path.with_name(f".{path.name}.claims")
            folder.mkdir(exist_ok=True)
            import hashlib
            (folder / hashlib.sha256(repr(key).encode()).hexdigest()[:24]).write_text(f"{socket.gethostname()} {pid}")
            return real_claim(key, path)
        return claim

    monkeypatch.setattr(res, "claim", held_by(os.getppid()))  # a live process holds it
    _, _, notes = run(tmp_path, resume=True, depth=2)
    assert len(ran) == 1 and any("run by another run" in n for n in notes)
    monkeypatch.setattr(res, "claim", held_by(2**22 + 12345))  # no such process: its run is gone
    _, _, notes = run(tmp_path, resume=True, depth=2)
    assert len(ran) == 2 and not any("run by another run" in n for n in notes)
    assert not list((tmp_path / f".{json_path.name}.claims").iterdir())  # released when the case ended


def test_a_case_written_by_another_run_meanwhile_is_not_run_again(tmp_path, ran, monkeypatch):
    from pipebench.bench.store import results as res

    run(tmp_path, depth=1)
    (json_path,) = tmp_path.glob("*.json")
    first = load(json_path)[0]
    real_start = res.start_run

    def start_then_another_run_writes(csv_path, path, **kwargs):  # between this run's start and its case
        done = real_start(csv_path, path, **kwargs)
        res.append(res.Row(**{**first.__dict__, "settings": "depth=2"}), csv_path, path)
        return done

    monkeypatch.setattr(res, "start_run", start_then_another_run_writes)
    _, _, notes = run(tmp_path, resume=True, depth=2)
    assert len(ran) == 1 and any("run by another run" in n for n in notes)
    assert sorted(r.settings for r in load(json_path)) == ["depth=1", "depth=2"]


def test_again_runs_a_case_the_file_held_before_it_began(tmp_path, ran):
    """`--again` runs a case the file held from before, with no other run alive, and does not say "run by
    another run ...; skipped"."""
    run(tmp_path)
    _, json_path, notes = run(tmp_path, again=True)
    assert len(ran) == 2 and not any("another run" in n for n in notes)
    assert len(load(json_path)) == 2


def test_a_rows_step_time_is_the_workers_clock_not_the_parents(monkeypatch):
    """The parent's clock holds its command's round trip through the store; the row takes the workers' own
    times of the timed steps (the traced step after them left out), the parent's only where those lack."""
    from pipebench.bench.launch import sessions
    from pipebench.bench.cases.case import Case
    from pipebench.bench.cases.rounds import run_prepared

    class Workers:
        own = [1.0, 2.0, 3.0, 50.0]

        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def step(self, trace=False):
            return 100.0

        def finish(self):
            return worker_result(first_loss=1.0, step_ms=self.own)

    monkeypatch.setattr(sessions, "Session", Workers)
    prepared = Prepared(Case("mlp", "tiny", 8, "single"), SimpleNamespace(processes=1, micro_batches=1), plan=None,
                        gpus=None)
    row = run_prepared(prepared, Machine(None, 1, "cpu"), steps=3, timeout=60)
    assert row.step_ms == pytest.approx(2.0)
    Workers.own = []
    assert run_prepared(prepared, Machine(None, 1, "cpu"), steps=3, timeout=60).step_ms == pytest.approx(100.0)


@pytest.mark.parametrize("folder", ["claims", "plans"])
def test_resume_into_a_folder_whose_own_folder_is_a_file_is_refused_first(tmp_path, ran, folder):
    """A claims or -plans folder that is a file is refused before any case runs, not a FileExistsError
    traceback (the plans' one after the case has run)."""
    from pipebench.base.errors import UserError

    _, json_path, _ = run(tmp_path)
    ran.clear()
    run_other = json_path.with_name(json_path.stem + "-plans") if folder == "plans" else \
        json_path.with_name(f".{json_path.name}.claims")
    if run_other.is_dir():
        run_other.rmdir()
    run_other.write_text("in the way\n")
    with pytest.raises(UserError, match="a file is in the way"):
        run(tmp_path, resume=True, depth=4)
    assert ran == []


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("chattr") is None, reason="chattr +i needs root")
def test_resume_into_a_results_file_that_cannot_be_written_is_refused_first(tmp_path, ran):
    """An immutable results JSON is refused before the case runs, not after, when its row would be lost to a
    PermissionError."""
    _, json_path, _ = run(tmp_path)
    ran.clear()
    subprocess.run(["chattr", "+i", str(json_path)], check=True)
    try:
        with pytest.raises(ResultsError, match="cannot be rewritten"):
            run(tmp_path, resume=True, depth=4)
    finally:
        subprocess.run(["chattr", "-i", str(json_path)], check=True)
    assert ran == [] and len(load(json_path)) == 1


def test_resume_replaces_a_failed_row_rather_than_adding_one(tmp_path, ran, monkeypatch):
    """After a run whose single case failed, --resume runs it again and the file holds one row for it, the new
    one."""
    ok = run_suite.run_rounds
    monkeypatch.setattr(run_suite, "run_rounds", lambda prepared, machine, **kwargs: [make_row(
        p, machine, status="failed", reason="rank 0: RuntimeError: injected", started_at="2026-11-30T09:00:00")
        for p in prepared])
    _, json_path, _ = run(tmp_path)
    assert [r.status for r in load(json_path)] == ["failed"]
    monkeypatch.setattr(run_suite, "run_rounds", ok)
    run(tmp_path, resume=True)
    assert [r.status for r in load(json_path)] == ["ok"]


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_loss_that_becomes_nan_is_a_diverged_row_not_a_lost_one(tmp_path):
    """A loss that becomes NaN is a timed row that says `diverged` and when, and the report shows it as such;
    the worker's result writer does not fail on the NaN (ValueError: Out of range float values are not JSON
    compliant) and lose the measurement."""
    from pipebench.bench.launch.job import Job
    from pipebench.bench.report.tables import frame, markdown_table, summarise
    from pipebench.bench.store.results import append
    from pipebench.bench.cases.rounds import run_prepared

    model = f"{Path(__file__).parent / 'fixtures' / 'diverging_model.py'}:Diverges"
    job = Job.by_hand(model, "single", batch=4, devices=1, device_type="cpu", steps=2, warmup=1)
    case = run_suite.make_cases({model: 4}, ["single"], [1])[0]
    row = run_prepared(Prepared(case, job, plan=None, gpus=None), Machine(None, 2, "cpu"), steps=2, timeout=120)
    assert row.status == "diverged", row.reason
    assert row.reason.startswith("the loss became nan at step 1") and row.first_loss is None
    assert row.step_ms > 0 and row.samples_per_s > 0  # the measurement is kept
    append(row, tmp_path / "r.csv", tmp_path / "r.json")
    (again,) = load(tmp_path / "r.json")
    assert again.status == "diverged"
    table = markdown_table(summarise(frame([again])))
    assert "diverged: the loss became nan" in table


def test_run_options_are_checked_once_when_made_and_changed_as_new_values(tmp_path):
    """RunOptions are frozen and checked once, when made: each change (quick_options, check_run) is a new
    value, checked again, not a change in place."""
    import dataclasses

    from pipebench.base.errors import UserError

    asked = dict(models={"mlp": 64}, strategies=["single"], micro_batches=[None], flavour=None, overrides={},
                 out=str(tmp_path / "out"), resume=False, steps=5, warmup=2, timeout=60)
    with pytest.raises(UserError, match="steps takes a positive integer"):
        run_options.RunOptions(**{**asked, "steps": 0})
    options = run_options.RunOptions(**asked)
    assert options.out == tmp_path / "out"  # a Path, once
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.steps = 1
    quick = run_options.quick_options(options, given=["steps"])
    assert (quick.models, quick.flavour, quick.steps, quick.warmup, quick.rounds) == ({"mlp": 8}, "tiny", 5, 1, 3)
    assert (options.models, options.flavour, options.rounds) == ({"mlp": 64}, None, 2)  # the original as it was
    with pytest.raises(UserError, match="rounds takes a positive integer"):
        dataclasses.replace(options, rounds=0)
    checked = run_options.check_run(quick, Machine(None, 2, "cpu"))
    assert checked.out.is_dir() and checked.out.is_absolute() and checked is not quick


def test_the_api_and_the_command_line_settle_a_run_alike(tmp_path, monkeypatch):
    """pipebench.run(["gpt"]) on the CPU runs what `pipebench run` runs, the tiny GPT at batch 8, not the
    full-size one at its default batch: both come through run_options.settle, the quick values for what is not
    given."""
    import pipebench

    seen = []
    monkeypatch.setattr(run_suite, "run_suite", lambda options, machine, note: seen.append(options) or ([], None, None))
    cpu = Machine(None, 2, "cpu")
    pipebench.run(["mlp"], strategies=["single"], machine=cpu, out=tmp_path / "a", note=None)
    pipebench.run({"mlp": 16}, strategies=["single"], machine=cpu, out=tmp_path / "b", steps=3, note=None)
    quick, given = seen
    assert (quick.models, quick.flavour, quick.steps, quick.warmup, quick.rounds) == ({"mlp": 8}, "tiny", 2, 1, 3)
    assert (given.models, given.flavour, given.steps) == ({"mlp": 16}, "tiny", 3)


def test_a_compile_mode_in_the_training_is_the_runs_one_mode():
    """pipebench.run(training=Training(compile="default")) compiles, as its line says: the Training's mode
    becomes the run's compiles, and both at once is refused."""
    from pipebench.base.errors import UserError
    from pipebench.base.training import Training

    options = run_options.RunOptions(models={"mlp": 8}, strategies=["single"], training=Training(compile="default"))
    assert options.compiles == ("default",) and options.training.compile is None
    assert "compiled default" in run_options.describe_options(options)
    with pytest.raises(UserError, match="not both"):
        run_options.RunOptions(models={"mlp": 8}, strategies=["single"], training=Training(compile="default"),
                               compiles=("default", None))


def test_a_run_refused_by_its_first_checks_is_one_line_without_the_device_line(tmp_path, ran, capsys):
    """`run --device cpu` refused by run_suite's first checks (a damaged --resume folder) is one line: the
    device line ("--device cpu: running on the CPU, ...") comes with the suite's own first line, after those
    checks."""
    from helpers import refused
    from pipebench.bench.cli import main

    argv = ["run", "--models", "mlp", "--flavour", "tiny", "--batch", "8", "--strategies", "ddp", "--device", "cpu",
            "--out", str(tmp_path), "--steps", "1", "--warmup", "0"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "--device cpu: running on the CPU" in capsys.readouterr().err
    (plans,) = tmp_path.glob("*-plans")
    plans.rmdir() if not any(plans.iterdir()) else shutil.rmtree(plans)
    plans.write_text("in the way\n")
    refused(capsys, [*argv, "--resume"], "a file is in the way")


def test_a_run_refused_for_its_profiles_folder_leaves_no_out_folder(tmp_path, capsys):
    """--profiles naming a file is refused in one line, and the --out folder (and its parents) that the run
    would have made are not left behind, empty."""
    from helpers import refused
    from pipebench.bench.cli import main

    (tmp_path / "p.json").write_text("{}\n")
    out = tmp_path / "new" / "o1"
    refused(capsys, ["run", "--quick", "--models", "mlp", "--strategies", "single", "--device", "cpu",
                     "--profiles", str(tmp_path / "p.json"), "--out", str(out)], "a file is in the way")
    assert not (tmp_path / "new").exists()


def test_resume_and_again_contradict_and_are_refused(tmp_path, capsys):
    """--resume skips the cases done, --again runs them anew: both at once is one line (exit 2), and one
    UserError from pipebench.run, before any folder is made."""
    import pipebench
    from helpers import refused
    from pipebench.base.errors import UserError
    from pipebench.bench.cli import main

    refused(capsys, ["run", "--quick", "--models", "mlp", "--strategies", "single", "--device", "cpu", "--resume",
                     "--again", "--out", str(tmp_path / "o")], "--resume skips the cases")
    with pytest.raises(UserError, match="not both"):
        pipebench.run(["mlp"], strategies=["single"], machine=Machine(None, 2, "cpu"), out=tmp_path / "o",
                      resume=True, again=True, note=None)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("quick", ["yes", 1, None])
def test_run_takes_quick_as_true_or_false_only(tmp_path, quick):
    """quick='yes' is one UserError, as resume's is: a value other than True or False is not taken as True."""
    import pipebench
    from pipebench.base.errors import UserError

    with pytest.raises(UserError, match=r"quick takes True or False \(got "):
        pipebench.run(["mlp"], strategies=["single"], machine=Machine(None, 2, "cpu"), out=tmp_path / "o",
                      quick=quick, note=None)
    assert not (tmp_path / "o").exists()
