"""The report of results at the edges: numbers beyond any measurement refused rather than plotted, a folder
with a link loop walked, and file names and plots that stay a readable size however long the names or many
the cases and lanes."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest

from helpers import refused, results_file
from pipebench.bench.cli import main
from test_report import gantt, make_row

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


def two_rows(**changes):
    """A single row and a pipeline row with a timeline: enough for every plot."""
    return [make_row("single", gpus="0", samples_per_s=100.0, **changes),
            make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=160.0, step_ms=400.0,
                     timeline=gantt(), predicted_timeline=gantt(), **changes)]


def png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


@pytest.mark.parametrize("number, message", [("9" * 5000, "an integer of 5,000 digits"),
                                             ("1e400", "the number 1e400 is beyond any measurement")])
def test_a_results_file_with_numbers_beyond_any_measurement_is_one_line(capsys, tmp_path, number, message):
    path = results_file(tmp_path / "r", two_rows())
    path.write_text(path.read_text().replace('"batch": 64', f'"batch": {number}', 1))
    refused(capsys, ["report", str(path), "--out", str(tmp_path / "report")], message)


@pytest.mark.parametrize("change, message", [
    (lambda rows: rows[1].timeline.__setitem__(0, dict(rows[1].timeline[0], start_ms=-1.7e308)),
     "field 'timeline'[0].start_ms: -1.7e+308 ms is not a time in a step"),
    (lambda rows: rows[1].timeline.__setitem__(-1, dict(rows[1].timeline[-1], end_ms=1.7e308)),
     "end_ms: 1.7e+308 ms is not a time in a step"),
    (lambda rows: setattr(rows[0], "samples_per_s", 1.7e308), "field 'samples_per_s': 1.7e+308 is not a measurement"),
])
def test_extreme_figures_are_refused_rather_than_plotted(capsys, tmp_path, change, message):
    """matplotlib's "Axis limits cannot be NaN or Inf" traceback: a span of 3.4e308 ms is infinity."""
    rows = two_rows()
    change(rows)  # after the rows were checked: as a corrupt or hand-made file would hold them
    path = results_file(tmp_path / "r", rows)
    refused(capsys, ["report", str(path), "--out", str(tmp_path / "report")], message)


def test_report_walks_a_folder_with_a_link_loop(capsys, tmp_path):
    """report walks a folder with a link loop, with no "RuntimeError: Symlink loop" from resolving every file
    found in it."""
    folder = tmp_path / "results"
    results_file(folder, two_rows())
    (folder / "x.json").symlink_to("y.json")
    (folder / "y.json").symlink_to("x.json")
    (folder / "self.csv").symlink_to("self.csv")
    code, err = main(["report", str(folder)]), capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    refused(capsys, ["report", str(folder / "x.json")], "x.json: a link that leads nowhere")


def test_a_long_unicode_model_name_makes_file_names_that_fit(capsys, tmp_path):
    """OSError: File name too long, building the timeline PNG's name from the model's."""
    path = results_file(tmp_path / "r", two_rows(model="aé" * 200))
    code, err = main(["report", str(path), "--out", str(tmp_path / "report")]), capsys.readouterr().err
    assert code == 0, err
    pngs = list((tmp_path / "report").glob("*.png"))
    assert len(pngs) == 2 and all(len(p.name.encode()) <= 100 for p in pngs)


def test_plots_stay_a_readable_size_however_many_cases_and_lanes(capsys, tmp_path):
    """2,000 cases drew a PNG 84,288 pixels tall; 1,500 lanes one of 214 megapixels."""
    from pipebench.bench.report.plots import MAX_BARS, MAX_LANES

    lanes = [{"stage": i, "device": i, "kind": "F", "micro": 0, "start_ms": float(i), "end_ms": i + 1.0}
             for i in range(MAX_LANES * 4)]
    rows = [make_row("single", gpus="0", samples_per_s=100.0),
            *(make_row("pp-gpipe", world_size=2, micro_batches=m, schedule="gpipe", samples_per_s=100.0 + m,
                       step_ms=400.0, gpus=f"0,{g}") for m in (1, 2, 4, 8) for g in range(1, MAX_BARS)),
            make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=10_000.0, step_ms=400.0,
                     timeline=lanes)]
    path = results_file(tmp_path / "r", rows)
    assert main(["report", str(path), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    assert f"the {MAX_BARS} fastest of {len(rows)} cases of one model drawn" in err
    assert f"the first {MAX_LANES} of {MAX_LANES * 4} lanes drawn" in err
    for png in (tmp_path / "report").glob("*.png"):
        width, height = png_size(png)
        assert width * height < 10_000_000 and height < 8_000, (png.name, width, height)
