"""CSV files as a spreadsheet opens them: no cell pipebench writes starts a formula or a new row, and what a
spreadsheet saves (a byte-order mark, CRLF, a formula's quote taken off, huge cells) is read or refused in one line."""
from __future__ import annotations

import csv

import pytest

from helpers import refused, results_file
from pipebench.bench.cli import main
from test_report import make_row

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


HOSTILE = ["\r=1+1", "=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1+1", "\n=1+1", "a\r=1+1", "a\n=1+1", "a\r\n@x",
           "'=1+1", "'plain", "-", "'", "plain, with a comma", 'say "hi"']


def spreadsheet_cells(path) -> list[list[str]]:
    """The rows and cells a spreadsheet sees: RFC 4180's quoting, and a bare CR or LF ends a row."""
    import csv

    with open(path, newline="") as f:
        return list(csv.reader(f))


def assert_no_formula(rows: list[list[str]], columns: int) -> None:
    assert all(len(cells) == columns for cells in rows), rows  # no cell broke into a new row
    for cells in rows:
        for cell in cells:
            assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r", "\n") or is_number(cell), cell


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_results_csv_cells_start_no_formula_and_read_back(tmp_path):
    """The results CSV quotes and escapes model names such as `\\r=1+1`, so that no row starts with =1+1, and
    reads them back as they were."""
    from pipebench.bench.store import results
    from test_report import make_row

    rows = [make_row("single", model=name, gpus="0", samples_per_s=100.0, first_loss=-1.5) for name in HOSTILE]
    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    for row in rows:
        results.append(row, csv_path, json_path)
    cells = spreadsheet_cells(csv_path)
    assert len(cells) == len(rows) + 1
    assert_no_formula(cells, len(results.CSV_COLUMNS))
    assert [r.model for r in results.load(csv_path)] == HOSTILE  # pipebench's reader: what it wrote
    assert [r.first_loss for r in results.load(csv_path)] == [-1.5] * len(rows)  # numbers stay numbers


def test_summary_csv_cells_start_no_formula(capsys, tmp_path):
    """summary.csv kept `\\r` unquoted behind its ': a spreadsheet's next row began with =1+1."""
    from pipebench.bench.cli import main
    from helpers import results_file
    from test_report import make_row

    rows = [make_row("single", model=name, gpus="0", samples_per_s=100.0) for name in HOSTILE]
    path = results_file(tmp_path / "r", rows)
    assert main(["report", str(path), "--out", str(tmp_path / "report")]) == 0
    cells = spreadsheet_cells(tmp_path / "report" / "summary.csv")
    assert len(cells) == len(rows) + 1
    assert_no_formula(cells, len(cells[0]))
    models = {c[cells[0].index("model")] for c in cells[1:]}
    assert models == {"'" + name if name[0] in "=+-@\t\r\n'" else name for name in HOSTILE}


def test_summary_csv_escapes_what_a_spreadsheet_would_evaluate(capsys, tmp_path):
    """summary.csv escapes =HYPERLINK(...), which a spreadsheet would run as a formula if copied verbatim."""
    rows = [make_row("single", model=name, gpus="0", samples_per_s=100.0)
            for name in ('=HYPERLINK("http://x")', "+A1", "-cmd", "@SUM(A1)", "plain")]
    path = results_file(tmp_path / "r", rows)
    assert main(["report", str(path), "--out", str(tmp_path / "report")]) == 0
    with open(tmp_path / "report" / "summary.csv", newline="") as f:
        models = [line["model"] for line in csv.DictReader(f)]
    assert sorted(models) == sorted(["'=HYPERLINK(\"http://x\")", "'+A1", "'-cmd", "'@SUM(A1)", "plain"])


def test_a_spreadsheet_edited_csv_still_reads(tmp_path):
    """What a spreadsheet saves: a byte-order mark, CRLF, the ' of a formula taken off, numbers as typed."""
    from pipebench.bench.store import results
    from test_report import make_row

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    results.append(make_row("single", model="=1+1", gpus="0", samples_per_s=100.0), csv_path, json_path)
    edited = tmp_path / "edited.csv"
    edited.write_bytes(b"\xef\xbb\xbf" + csv_path.read_bytes().replace(b"'=1+1", b"=1+1"))
    assert [r.model for r in results.load(edited)] == ["=1+1"]
    lf = tmp_path / "lf.csv"
    lf.write_bytes(csv_path.read_bytes().replace(b"\r\n", b"\n"))
    assert [r.model for r in results.load(lf)] == ["=1+1"]


@pytest.mark.parametrize("command", ["report", "fidelity"])
def test_a_csv_with_a_byte_order_mark_is_read(capsys, tmp_path, command):
    """A CSV saved by a spreadsheet, with a UTF-8 byte-order mark, is read, not refused as "missing column
    'model'"."""
    from pipebench.bench.predict import fidelity
    from pipebench.bench.store import results
    from pipebench.bench.cli import main
    from test_report import make_row

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    for strategy, speed in (("single", 100.0), ("ddp", 150.0)):
        results.append(make_row(strategy, gpus="0", samples_per_s=speed, predicted_step_ms=500.0), csv_path,
                       json_path)
    marked = tmp_path / "marked.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + csv_path.read_bytes())
    if command == "report":
        assert main(["report", str(marked), "--out", str(tmp_path / "report")]) == 0, capsys.readouterr().err
        assert "ddp" in (tmp_path / "report" / "summary.csv").read_text()
    else:
        assert fidelity.main([str(marked)]) == 0, capsys.readouterr().err


def test_a_cell_over_the_csv_field_limit_is_one_line(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("step,epoch,loss,samples_per_s,time_s\n1,1," + "9" * 200_000 + ",100,0.1\n")
    refused(capsys, ["report", str(log), "--out", str(tmp_path / "r")], f"{log}: line 2: field larger than field limit")
