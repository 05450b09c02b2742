"""`pipebench run` and its results file: which cases --resume counts as done,
and what is checked before the first case runs. The cases are faked (no worker starts), so these are fast."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from pipebench.bench import run as suite_run
from pipebench.bench.results import ResultsError, load
from pipebench.bench.suite import Machine, Prepared, make_row


@pytest.fixture
def ran(monkeypatch):
    """Cases that are neither profiled nor planned and 'run' at once, each ok with a 10 ms step; the rows
    are the suite's own (make_row). The list holds the cases that ran."""
    cases = []

    def fake_prepare(case, machine, profiled, *, steps, warmup, try_anyway=False):
        return Prepared(case, SimpleNamespace(processes=2, micro_batches=1), plan=None, gpus=None)

    def fake_run(prepared, machine, *, steps, timeout):
        cases.append(prepared.case)
        return make_row(prepared, machine, status="ok", step_ms=[10.0], result={"first_loss": 1.0},
                        started_at="2026-11-30T10:00:00")
    monkeypatch.setattr(suite_run, "profile_case_model", lambda *args, **kwargs: None)
    monkeypatch.setattr(suite_run, "prepare", fake_prepare)
    monkeypatch.setattr(suite_run, "run_prepared", fake_run)
    return cases


def run(out: Path, *, resume=False, **overrides):
    options = suite_run.RunOptions(models={"mlp": 8}, strategies=["ddp"], chunks=[None], flavour="tiny",
                                   overrides=overrides, out=out, resume=resume, steps=1, warmup=0, timeout=60)
    notes = []
    rows, _, json_path = suite_run.run_suite(options, Machine(None, 2, "cpu"), note=notes.append)
    return rows, json_path, notes


def test_resume_runs_a_case_again_with_other_set_values(tmp_path, ran):
    """After a `--set depth=3` run, `--resume --set depth=4` said "done already" and never ran."""
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
    """The missing JSON was found only when the first finished case was appended: that case was lost."""
    _, json_path, _ = run(tmp_path)
    json_path.unlink()
    with pytest.raises(ResultsError, match="exists without its JSON file"):
        run(tmp_path, resume=True)
    assert len(ran) == 1
