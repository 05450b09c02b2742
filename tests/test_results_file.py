"""The results file: round-trips, appends that survive a crash, resume keys, and errors that name the field."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from dataclasses import asdict
from datetime import date
from pathlib import Path

import pytest

from pipebench.bench.store import results
from pipebench.bench.store.row import settings_text, timeline_from_ops
from pipebench.bench.store.results import CSV_COLUMNS, ResultsError, Row, append, case_key, done_keys, load, results_paths

REPO = Path(__file__).resolve().parents[1]


def make_row(**changes) -> Row:
    values = dict(
        model="gpt", flavour="tiny", strategy="pp-1f1b", gpus="0,1", world_size=2, batch=8, micro_batches=4,
        schedule="1f1b", virtual_stages=1, status="ok", samples_per_s=123.456789, step_ms=64.8, step_ms_std=0.25,
        peak_memory_bytes=[1000, 2000], first_loss=9.42918, predicted_step_ms=60.0,
        predicted_memory_bytes=[900, 2100], bubble_fraction=0.2, bounds=[0, 3, 6], device_name="NVIDIA H200",
        torch_version="2.11.0+cu130", host="gpu1", started_at="2026-11-29T10:00:00", duration_s=12.5,
        timeline=[{"stage": 0, "device": 0, "kind": "F", "micro": 0, "start_ms": 0.0, "end_ms": 1.5}],
        predicted_timeline=[{"stage": 1, "device": "cuda:1", "kind": "B", "micro": 3, "start_ms": 2.0, "end_ms": 4.0}],
    )
    values.update(changes)
    return Row(**values)


@pytest.fixture
def paths(tmp_path):
    return tmp_path / "r.csv", tmp_path / "r.json"


def test_json_round_trip_keeps_every_field(paths):
    rows = [make_row(), make_row(strategy="single", gpus="0", world_size=1, micro_batches=1, schedule="",
                                 status="oom", reason="CUDA out of memory", samples_per_s=None, step_ms=None,
                                 timeline=[], predicted_timeline=[])]
    for row in rows:
        append(row, *paths)
    assert load(paths[1]) == rows
    data = json.loads(paths[1].read_text())
    assert data["format"] == "pipebench-results" and data["version"] == 1 and len(data["rows"]) == 2
    assert len(paths[1].read_text().splitlines()) == 4  # header line, one line per row, closing line


def test_csv_is_the_flat_view_and_reads_back_without_timelines(paths):
    row = make_row()
    append(row, *paths)
    with open(paths[0], newline="") as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(CSV_COLUMNS)
    assert "timeline" not in table[0] and "predicted_timeline" not in table[0]
    assert table[0]["peak_memory_bytes"] == "1000;2000" and table[0]["gpus"] == "0,1"
    back = load(paths[0])
    assert back == [make_row(timeline=[], predicted_timeline=[])]
    assert back[0].samples_per_s == 123.456789  # floats come back exactly


def test_files_from_before_the_speeds_field_still_load(paths):
    """`speeds` is a later field (LATER_FIELDS): JSON rows and CSV columns without it load with the default.
    """
    append(make_row(speeds="1;0.5"), *paths)
    data = json.loads(paths[1].read_text())
    del data["rows"][0]["speeds"]
    paths[1].write_text(json.dumps(data))
    assert load(paths[1])[0].speeds == ""
    with open(paths[0], newline="") as f:
        table = list(csv.reader(f))
    at = table[0].index("speeds")
    with open(paths[0], "w", newline="") as f:
        csv.writer(f).writerows(cells[:at] + cells[at + 1:] for cells in table)
    assert load(paths[0])[0].speeds == ""
    append(make_row(), *paths)  # appending rewrites the older file with the new column
    assert [r.speeds for r in load(paths[1])] == ["", ""]


def test_none_and_empty_lists_survive_the_csv(paths):
    row = make_row(status="unavailable", reason="no torch.distributed.pipelining", samples_per_s=None, step_ms=None,
                   step_ms_std=None, first_loss=None, predicted_step_ms=None, bubble_fraction=None,
                   peak_memory_bytes=[], predicted_memory_bytes=[], bounds=[], schedule="", timeline=[],
                   predicted_timeline=[])
    append(row, *paths)
    assert load(paths[0]) == [row]


def test_numpy_like_numbers_and_nan_are_normalised():
    np = pytest.importorskip("numpy")
    row = make_row(batch=np.int64(8), samples_per_s=np.float64(2.5), step_ms_std=float("nan"),
                   peak_memory_bytes=[np.int64(5)])
    assert type(row.batch) is int and type(row.samples_per_s) is float
    assert row.step_ms_std is None and row.peak_memory_bytes == [5] and type(row.peak_memory_bytes[0]) is int


@pytest.mark.parametrize("changes, message", [
    (dict(status="done"), "Row.status: 'done' is not one of: ok, oom, failed, timeout, unavailable"),
    (dict(status="failed", reason=""), "Row.reason: say why the case is 'failed'"),
    (dict(samples_per_s=None), "status 'ok' needs samples_per_s and step_ms"),
    (dict(micro_batches=0), "Row.micro_batches: must be at least 1 (got 0)"),
    (dict(batch="8"), "Row.batch: expected int, got '8'"),
    (dict(duration_s=float("inf")), "Row.duration_s: expected a finite number, got inf"),
    (dict(timeline=[{"stage": 0}]), "Row.timeline[0]: missing key 'device'"),
])
def test_bad_rows_are_refused_with_the_value(changes, message):
    with pytest.raises(ValueError) as info:
        make_row(**changes)
    assert message in str(info.value)


def test_case_key_names_the_case():
    assert case_key(make_row()) == ("gpt", "tiny", "pp-1f1b", "0,1", 8, 4, "1f1b", 1, "", "", "", "tf32", "sgd",
                                    "never", None)
    assert case_key(make_row(speeds="1;0.5")) != case_key(make_row())  # planned for a busy GPU: another case
    assert case_key(make_row(status="failed", reason="x", samples_per_s=None)) == case_key(make_row())
    assert case_key(make_row(virtual_stages=2)) != case_key(make_row())


def test_case_key_holds_every_setting_that_changes_what_runs():
    """--set values and the memory cap are other cases, like speeds."""
    plain = make_row()
    assert case_key(make_row(settings="depth=4")) != case_key(plain)
    assert case_key(make_row(settings="depth=4")) != case_key(make_row(settings="depth=8"))
    assert case_key(make_row(max_memory="20;20")) != case_key(plain)
    assert case_key(make_row(max_memory="20;20")) != case_key(make_row(max_memory="10;10"))
    assert settings_text({"width": 64, "depth": 4, "input_shape": (3, 8, 8)}) == \
        "depth=4;input_shape=3,8,8;width=64"  # sorted: the same settings always key alike
    assert settings_text({}) == ""


def test_the_suite_records_overrides_and_caps_in_the_row():
    from pipebench.bench.cases.case import Case
    from pipebench.bench.cases.case_rows import case_caps, unavailable_row
    from pipebench.bench.cases.machine import Machine

    machine = Machine(None, 2, "cpu", caps=[2**30, 2**30])
    case = Case("mlp", "tiny", 8, "pp-1f1b", 2, (("depth", 3), ("width", 16)))
    row = unavailable_row(case, machine, "not run yet")
    assert (row.settings, row.max_memory) == ("depth=3;width=16", "1;1")
    assert unavailable_row(Case("mlp", "tiny", 8, "single"), machine, "x").max_memory == "1"  # one device
    assert unavailable_row(Case("mlp", "tiny", 8, "ddp"), machine, "x").max_memory == ""  # no Plan, no cap
    assert case_caps(case, Machine(None, 2, "cpu")) == ""


def test_files_from_before_the_settings_fields_still_load(paths):
    append(make_row(settings="depth=4", max_memory="2;2"), *paths)
    data = json.loads(paths[1].read_text())
    del data["rows"][0]["settings"], data["rows"][0]["max_memory"]
    paths[1].write_text(json.dumps(data))
    (row,) = load(paths[1])
    assert (row.settings, row.max_memory) == ("", "")


def test_results_paths(tmp_path):
    csv_path, json_path = results_paths(tmp_path, date(2026, 11, 29), "gpu1.lab", "2xNVIDIA H200")
    assert csv_path == tmp_path / "2026-11-29-gpu1.lab-2xNVIDIA-H200.csv"
    assert json_path == tmp_path / "2026-11-29-gpu1.lab-2xNVIDIA-H200.json"
    assert results_paths("out", "2026-11-29", "h", "NVIDIA A100-SXM4-80GB / 4")[0].name == \
        "2026-11-29-h-NVIDIA-A100-SXM4-80GB-4.csv"
    with pytest.raises(ValueError, match="hardware '  /  ' leaves nothing"):
        results_paths("out", "2026-11-29", "h", "  /  ")


def test_every_file_name_part_is_one_slug():
    """pipebench/base/fileio/files.py slug names the results files, the profiles beside them, the plots and
    advise's check folder alike: only what each keeps or strips differs."""
    from pipebench.bench.cli.advise import model_slug
    from pipebench.bench.report.plots import _slug as plot_slug
    from pipebench.base.fileio.file_names import slug

    assert slug("convnet.py:ConvNet") == "convnet.py-ConvNet" and slug(" résumé / 中文 ") == "r-sum"
    assert slug("a--b+c", keep="._+-", strip="") == "a--b+c" and slug("-.x.-", strip="-.") == "x" and slug("") == ""
    assert model_slug("models/my net.py:Net") == "my-net.py-Net"
    assert plot_slug("GPT b64 / pp-1f1b") == "gpt-b64-pp-1f1b"
    assert results.results_paths("out", "2026-11-29", "é.host", "x")[0].name == "2026-11-29-host-x.csv"


def test_a_crash_while_replacing_leaves_the_old_files_whole(paths, monkeypatch):
    first = make_row()
    append(first, *paths)
    before = [p.read_bytes() for p in paths]

    def crash(src, dst):
        raise KeyboardInterrupt  # Ctrl-C at the worst moment
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        append(make_row(model="resnet18"), *paths)
    monkeypatch.undo()
    assert [p.read_bytes() for p in paths] == before
    assert load(paths[1]) == [first]
    assert sorted(p.name for p in paths[0].parent.iterdir()) == [".r.json.lock", "r.csv", "r.json"]  # no temporary file


def test_a_crash_between_the_two_files_is_repaired_by_the_next_append(paths, monkeypatch):
    append(make_row(), *paths)
    real_replace = os.replace

    def json_then_crash(src, dst):
        if str(dst).endswith(".csv"):
            raise OSError("disk full")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", json_then_crash)
    with pytest.raises(OSError, match="disk full"):
        append(make_row(model="second"), *paths)
    monkeypatch.undo()
    assert [r.model for r in load(paths[1])] == ["gpt", "second"]  # the JSON has the finished row
    assert [r.model for r in load(paths[0])] == ["gpt"]  # the CSV lags one row, still whole
    append(make_row(model="third"), *paths)
    assert [r.model for r in load(paths[0])] == ["gpt", "second", "third"]


def test_append_refuses_to_overwrite_a_csv_without_its_json(paths):
    paths[0].write_text("precious\n")
    with pytest.raises(ResultsError, match="exists without its JSON file"):
        append(make_row(), *paths)
    assert paths[0].read_text() == "precious\n"


def test_append_refuses_a_corrupt_json_rather_than_replacing_it(paths):
    paths[1].write_text("{not json")
    with pytest.raises(ResultsError, match="not JSON"):
        append(make_row(), *paths)
    assert paths[1].read_text() == "{not json"


def test_done_keys_skip_failed_cases_and_missing_files(paths, tmp_path):
    append(make_row(micro_batches=1), *paths)
    append(make_row(micro_batches=2, status="oom", reason="out of memory", samples_per_s=None), *paths)
    append(make_row(micro_batches=4, status="failed", reason="NCCL error", samples_per_s=None), *paths)
    append(make_row(micro_batches=8, status="unavailable", reason="no such schedule", samples_per_s=None), *paths)
    keys = done_keys([paths[1], tmp_path / "not-yet.json"])
    assert {k[5] for k in keys} == {1, 2, 8}
    assert done_keys(paths[0]) == keys  # the CSV gives the same keys, typed alike


def test_load_folder_prefers_json_over_its_csv_twin(tmp_path):
    append(make_row(), tmp_path / "a.csv", tmp_path / "a.json")
    append(make_row(model="other"), tmp_path / "b.csv", tmp_path / "b.json")
    (tmp_path / "b.json").unlink()  # a CSV alone still counts
    rows = load(tmp_path)
    assert sorted(r.model for r in rows) == ["gpt", "other"]
    assert load([tmp_path / "a.csv", tmp_path / "a.json"])[0].timeline  # the JSON twin wins


def _write_json(path: Path, rows, **header):
    path.write_text(json.dumps({"format": "pipebench-results", "version": 1, **header, "rows": rows}))


def _row_dict(**changes):
    data = asdict(make_row())
    data.update(changes)
    return data


@pytest.mark.parametrize("content, message", [
    ("{oops", "not JSON"),
    ('{"format": "pipebench-profile", "version": 1, "profiles": []}',
     "not a pipebench results file (field 'format' should be 'pipebench-results', got 'pipebench-profile')"),
    ('[1, 2]', "not a pipebench results file"),
    ('{"format": "pipebench-results", "version": 2, "rows": []}', "results version 2 is not supported (expected 1)"),
    ('{"format": "pipebench-results", "version": 1, "rows": {}}', "field 'rows' should be a list"),
])
def test_bad_files_name_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ResultsError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("row, message", [
    ({k: v for k, v in _row_dict().items() if k != "status"}, "rows[1]: missing field 'status'"),
    (_row_dict(batch="64"), "rows[1]: field 'batch': expected int, got '64'"),
    (_row_dict(batch=True), "rows[1]: field 'batch': expected int, got True"),
    (_row_dict(samples_per_s="fast"), "rows[1]: field 'samples_per_s': expected float, got 'fast'"),
    (_row_dict(peak_memory_bytes=[1, "2"]), "rows[1]: field 'peak_memory_bytes': expected int, got '2'"),
    (_row_dict(timeline=[{"stage": 0, "device": 0, "kind": "F", "micro": 0, "start_ms": "a", "end_ms": 1}]),
     "rows[1]: field 'timeline'[0].start_ms: expected float, got 'a'"),
    (_row_dict(status="maybe"), "rows[1]: field 'status': 'maybe' is not one of"),
    (_row_dict(colour="red"), "rows[1]: unknown field 'colour'"),
    ("row", "rows[1]: expected an object, got 'row'"),
])
def test_bad_rows_name_the_row_and_the_field(tmp_path, row, message):
    path = tmp_path / "x.json"
    _write_json(path, [_row_dict(), row])
    with pytest.raises(ResultsError) as info:
        load(path)
    assert str(info.value).startswith(f"{path}: {message}")


def test_bad_csv_names_the_line_and_the_field(tmp_path, paths):
    append(make_row(), *paths)
    text = paths[0].read_text().replace(",8,4,1f1b,", ",eight,4,1f1b,")
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    with pytest.raises(ResultsError, match=r"bad.csv: line 2: field 'batch': expected int, got 'eight'"):
        load(bad)
    old = tmp_path / "old.csv"
    old.write_text("model,strategy,batch\ngpt,single,64\n")
    with pytest.raises(ResultsError, match="old.csv: not a pipebench results CSV: missing column 'flavour'"):
        load(old)
    (tmp_path / "x.txt").write_text("notes")
    with pytest.raises(ResultsError, match="x.txt: not a results file"):
        load(tmp_path / "x.txt")
    with pytest.raises(ResultsError, match="nothing.json: no such file or folder"):
        load(tmp_path / "nothing.json")


def test_a_path_that_is_not_there_is_named(tmp_path):
    """`report /nonexistent` names the missing path, not "no results rows"."""
    with pytest.raises(ResultsError, match=r"nonexistent: no such file or folder$"):
        load(tmp_path / "nonexistent")


def test_timeline_from_schedule_ops():
    from pipebench.partition.planning.simulator import simulate

    timeline = timeline_from_ops(simulate([1.0, 2.0], [2.0, 4.0], 2, "1f1b").ops)
    assert timeline[0] == {"stage": 0, "device": 0, "kind": "F", "micro": 0, "start_ms": 0.0, "end_ms": 1.0}
    assert len(timeline) == 8 and make_row(predicted_timeline=timeline).predicted_timeline == timeline
    hand_made = type("Op", (), dict(stage=2, kind="W", micro=1, start=3, end=4, device=None))
    assert timeline_from_ops([hand_made])[0]["device"] == 2


def test_results_module_imports_no_torch():
    code = "import sys, bench.store.results; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# ------------------------------------------------------------------------------------ sharing and repair

def _append_many(csv_path, json_path, writer, count, barrier):
    """In a spawned process: wait for the other writer, then append `count` rows as fast as possible."""
    barrier.wait()
    for i in range(count):
        append(make_row(model=f"{writer}-{i}", timeline=[], predicted_timeline=[]), csv_path, json_path)


@pytest.mark.ci  # process handling, run by CI after the default run
def test_two_processes_appending_to_one_file_lose_no_row(paths):
    """Two jobs on one server write one date-host-hardware file under its lock and keep all 300 rows (without
    the lock, 176 of 300 are kept)."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(2)
    writers = [spawn.Process(target=_append_many, args=(*paths, name, 50, barrier)) for name in ("a", "b")]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=300)
        assert w.exitcode == 0
    expected = {f"{name}-{i}" for name in ("a", "b") for i in range(50)}
    assert sorted(r.model for r in load(paths[1])) == sorted(expected)
    assert sorted(r.model for r in load(paths[0])) == sorted(expected)  # the CSV as well


def test_every_atomic_write_has_its_own_temporary_name(tmp_path, monkeypatch):
    """A fixed name (or one per process) lets two writers of one file, say two threads, clobber each other's
    temporary file."""
    from pipebench.base.fileio import files

    used = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: (used.append(Path(src).name), real_replace(src, dst)))
    files.write_text(tmp_path / "p.profile.json", "one")
    files.write_text(tmp_path / "p.profile.json", "two")
    assert len(set(used)) == 2 and all(name.startswith(".p.profile.json.") for name in used)
    assert (tmp_path / "p.profile.json").read_text() == "two"


def test_rows_only_in_the_csv_are_kept_aside_and_told(paths):
    append(make_row(), *paths)
    with open(paths[0], "a", newline="") as f:  # a row added by hand, or by another tool, to the CSV only
        csv.writer(f, lineterminator="\n").writerow(
            results._csv_cells(make_row(model="by-hand", timeline=[], predicted_timeline=[])))
    heard = []
    append(make_row(model="second"), *paths, warn=heard.append)
    assert [r.model for r in load(paths[0])] == ["gpt", "second"]  # rewritten from the JSON
    (aside,) = paths[0].parent.glob("r.csv-only-*.csv")
    assert [r.model for r in load(aside)] == ["by-hand"]  # nothing lost
    assert heard == [f"{paths[0]}: 1 row(s) were in the CSV but not in its JSON; kept in {aside.name}"]
    append(make_row(model="third"), *paths, warn=heard.append)
    assert len(heard) == 1  # a CSV that only lags its JSON is no news


def test_an_unreadable_csv_is_moved_aside_and_told(paths, capsys):
    append(make_row(), *paths)
    paths[0].write_text("garbage, not a results csv\n")
    append(make_row(model="second"), *paths)
    err = capsys.readouterr().err
    assert err.startswith("pipebench: warning: ") and "moved it to r.csv.unreadable-" in err
    assert len(err.strip().splitlines()) == 1
    (aside,) = paths[0].parent.glob("r.csv.unreadable-*")
    assert aside.read_text() == "garbage, not a results csv\n"
    assert [r.model for r in load(paths[0])] == ["gpt", "second"]


def test_a_folder_with_a_bad_csv_twin_warns_and_reports_from_the_json(tmp_path):
    """The JSON is the source of truth, so a broken CSV beside it is a warning (one line), not an error;
    a broken CSV without a JSON twin stays an error (test_bad_csv_names_the_line_and_the_field)."""
    append(make_row(), tmp_path / "a.csv", tmp_path / "a.json")
    (tmp_path / "a.csv").write_text("broken\n")
    heard = []
    assert [r.model for r in load(tmp_path, warn=heard.append)] == ["gpt"]
    assert heard == [f"{tmp_path / 'a.csv'}: unreadable (not a pipebench results CSV: missing column 'model'); "
                     "reporting from a.json"]
    append(make_row(), tmp_path / "b.csv", tmp_path / "b.json")
    (tmp_path / "b.csv").write_text((tmp_path / "b.csv").read_text() * 2)  # the header again: a bad line
    heard.clear()
    load(tmp_path / "b.json", warn=heard.append)
    assert len(heard) == 1 and "b.csv: unreadable" in heard[0]


def test_start_run_checks_the_files_before_anything_runs(paths):
    assert results.start_run(*paths, resume=False) == set()  # nothing there yet: claimed, empty
    assert results.load(paths[1]) == []
    paths[1].unlink()
    paths[0].write_text("precious\n")
    with pytest.raises(ResultsError, match="exists without its JSON file"):
        results.start_run(*paths, resume=True)
    paths[0].unlink()
    paths[1].write_text("{not json")
    with pytest.raises(ResultsError, match="not JSON"):
        results.start_run(*paths, resume=True)


def test_start_run_refuses_a_second_run_into_one_file_without_resume(paths):
    """Running twice without --resume added a second row per case, and the report kept only the later."""
    append(make_row(), *paths)
    append(make_row(micro_batches=2, status="failed", reason="boom", samples_per_s=None), *paths)
    with pytest.raises(ResultsError) as info:
        results.start_run(*paths, resume=False)
    assert str(info.value) == (f"{paths[1]}: already holds 2 row(s) from an earlier run; add --resume to skip the "
                               "cases done there and run the rest, or give another --out")
    assert results.start_run(*paths, resume=True) == {case_key(make_row())}  # the failed one runs again


def test_two_runs_into_one_fresh_folder_the_second_is_refused(paths):
    """Of two runs into one fresh folder the second is refused: neither finds a row, and both would write
    their own row for every case."""
    assert results.start_run(*paths, resume=False) == set()
    with pytest.raises(ResultsError, match="was started by another run; add --resume"):
        results.start_run(*paths, resume=False)
    assert results.start_run(*paths, resume=True) == set()


def test_a_lock_file_planted_as_a_link_is_not_followed(paths, tmp_path):
    """`.<name>.json.lock` linked to another file: append opened, created or touched what it points at."""
    target = tmp_path / "elsewhere" / "victim"
    lock = paths[1].with_name(f".{paths[1].name}.lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.symlink_to(target)
    for attempt in (lambda: results.start_run(*paths, resume=False), lambda: append(make_row(), *paths)):
        with pytest.raises(ResultsError, match="the lock file is a link; remove it"):
            attempt()
    assert not target.exists() and not target.parent.exists()


def test_a_negative_measurement_is_a_corrupt_file(tmp_path):
    """`report` on a file with negative throughput refuses it in one line as corrupt, not "-133.14x one GPU".
    """
    from pipebench.bench.cli import main

    path = tmp_path / "bad.json"
    good = Row(model="gpt", flavour="tiny", strategy="single", gpus="cpu", world_size=1, batch=8, micro_batches=1,
               status="ok", samples_per_s=100.0, step_ms=80.0, device_name="cpu", host="h", started_at="x")
    data = {"format": "pipebench-results", "version": 1, "rows": [{**good.__dict__, "samples_per_s": -5.0}]}
    path.write_text(json.dumps(data))
    assert main(["report", str(path)]) == 2
    with pytest.raises(ResultsError, match="samples_per_s: must not be negative"):
        Row(**{**good.__dict__, "samples_per_s": -5.0})
