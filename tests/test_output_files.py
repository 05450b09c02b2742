"""Files pipebench reads and the report it writes, given bad or huge input (issue 27): numbers beyond any
measurement, link loops, extreme timelines, long names, thousands of cases or lanes, spreadsheet formulas.

Each case was a traceback, or a file no viewer opens, before; now it is one line and exit 2, or a report
of a readable size."""
from __future__ import annotations

import csv
import struct
from pathlib import Path

import pytest

from pipebench.bench.cli import main
from pipebench.bench.store.results import _json_text
from test_refused_options import profile_file, refused  # noqa: F401 - nothing_runs: profiling and runs fail the test
from test_refused_options import nothing_runs  # noqa: F401
from test_report import gantt, make_row


def results_file(folder: Path, rows) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "r.json"
    path.write_text(_json_text(rows))
    return path


def two_rows(**changes):
    """A single row and a pipeline row with a timeline: enough for every plot."""
    return [make_row("single", gpus="0", samples_per_s=100.0, **changes),
            make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=160.0, step_ms=400.0,
                     timeline=gantt(), predicted_timeline=gantt(), **changes)]


def png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


# ----------------------------------------------------------------------------------- numbers in files

@pytest.mark.parametrize("number, message", [("9" * 5000, "an integer of 5,000 digits"),
                                             ("1e400", "the number 1e400 is beyond any measurement")])
@pytest.mark.parametrize("command", ["plan", "advise"])
def test_a_profile_with_numbers_beyond_any_measurement_is_one_line(capsys, tmp_path, number, message, command):
    """A ValueError (Python's 4,300-digit limit) or OverflowError traceback before."""
    path = profile_file(tmp_path / "p.json")
    path.write_text(path.read_text().replace('"param_bytes": 40', f'"param_bytes": {number}', 1))
    refused(capsys, [command, "--profile", str(path), "--stages", "2"], message)


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


# ---------------------------------------------------------------------------------------- folders, links

def test_report_walks_a_folder_with_a_link_loop(capsys, tmp_path):
    """RuntimeError: Symlink loop, from resolving every file found in the folder."""
    folder = tmp_path / "results"
    results_file(folder, two_rows())
    (folder / "x.json").symlink_to("y.json")
    (folder / "y.json").symlink_to("x.json")
    (folder / "self.csv").symlink_to("self.csv")
    code, err = main(["report", str(folder)]), capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    refused(capsys, ["report", str(folder / "x.json")], "x.json: a link that leads nowhere")


# --------------------------------------------------------------------------------------------- the report

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


def test_summary_csv_escapes_what_a_spreadsheet_would_evaluate(capsys, tmp_path):
    """=HYPERLINK(...) was copied verbatim, so a spreadsheet ran it as a formula."""
    rows = [make_row("single", model=name, gpus="0", samples_per_s=100.0)
            for name in ('=HYPERLINK("http://x")', "+A1", "-cmd", "@SUM(A1)", "plain")]
    path = results_file(tmp_path / "r", rows)
    assert main(["report", str(path), "--out", str(tmp_path / "report")]) == 0
    with open(tmp_path / "report" / "summary.csv", newline="") as f:
        models = [line["model"] for line in csv.DictReader(f)]
    assert sorted(models) == sorted(["'=HYPERLINK(\"http://x\")", "'+A1", "'-cmd", "'@SUM(A1)", "plain"])


# ------------------------------------------------------------------------ files that are not regular files

def character_device(path: Path) -> Path:
    """A null device at `path`, as `--json /dev/null` names one (mknod c 1 3 needs root)."""
    import os
    import stat

    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


@pytest.fixture
def within_seconds():
    """A read that waits (a FIFO's open) fails the test instead of hanging it."""
    import signal

    def late(signum, frame):
        raise AssertionError("waited on a file")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_device_named_for_output_is_written_through_not_replaced(capsys, tmp_path):
    """`--json null`, null a character device: it became a regular file holding the plan."""
    import stat

    null = character_device(tmp_path / "null")
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--json", str(null)]) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_profile_saved_to_a_device_leaves_the_device(tmp_path):
    """`--save-profile null` replaced the device as --json did (the write both go through: files.write_text)."""
    import stat

    from pipebench.partition.profiling.profile_record import load_profiles, save_profiles

    null = character_device(tmp_path / "null")
    save_profiles(load_profiles(profile_file(tmp_path / "p.json")), null)
    assert stat.S_ISCHR(null.stat().st_mode)


@pytest.mark.parametrize("out", ["a file", "a pipe"])
def test_a_link_to_stdout_writes_the_plan_to_stdout(tmp_path, out):
    """`--json stdout`, stdout a link to /proc/self/fd/1: the link became a regular file and stdout got
    nothing. Now the plan's table, its JSON and the line naming where it went, in that order, whether
    stdout is a file (`> out.txt`) or a pipe."""
    import subprocess
    import sys

    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    command = [sys.executable, "-m", "pipebench", "plan", "--profile", str(profile_file(tmp_path / "p.json")),
               "--stages", "2", "--json", "stdout"]
    if out == "a file":
        with open(tmp_path / "out.txt", "w") as f:
            done = subprocess.run(command, cwd=tmp_path, stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)
        text = (tmp_path / "out.txt").read_text()
    else:
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        text = done.stdout
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "stdout").is_symlink()
    table, _, rest = text.partition("{")
    assert "stage" in table and '"format": "pipebench-plan"' in rest and rest.rstrip().endswith("stdout"), text


def test_a_link_to_a_file_stays_a_link(capsys, tmp_path):
    """The file it names gets the plan; the link is not replaced by a file of its own."""
    target = tmp_path / "real.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--json", str(tmp_path / "link.json")]) == 0, capsys.readouterr().err
    assert (tmp_path / "link.json").is_symlink() and "pipebench-plan" in target.read_text()


@pytest.mark.parametrize("argv", [["plan", "--stages", "2", "--profile"], ["advise", "--stages", "2", "--profile"],
                                  ["report"]])
def test_a_fifo_is_refused_not_waited_on(capsys, tmp_path, within_seconds, argv):
    """`--profile fifo` and `report x.json` on a FIFO waited for a writer forever."""
    import os

    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    refused(capsys, [*argv, str(fifo)], "x.json: is a FIFO, not a")


def test_a_fifo_output_without_a_reader_is_refused_before_any_work(capsys, tmp_path, within_seconds, nothing_runs):
    """`--json FIFO` with nothing reading it was refused only when the plan was written, after profiling."""
    import os

    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--batch", "8", "--json",
                     str(fifo)], "out.json: a FIFO that nothing reads; start its reader first")


def test_a_fifo_output_with_a_reader_gets_the_plan_whole(capsys, tmp_path, within_seconds):
    """The FIFO is opened when checked and held to the write: its reader sees one plan, then the end."""
    import json
    import os
    import threading

    fifo, got = tmp_path / "out.json", []
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--json", str(fifo)]) == 0, capsys.readouterr().err
    reader.join(30)
    assert json.loads(got[0])["format"] == "pipebench-plan"


@pytest.mark.parametrize("argv", [["plan", "--stages", "2", "--profile"], ["report"]])
def test_a_link_to_dev_zero_is_refused_before_a_byte_is_read(capsys, tmp_path, within_seconds, argv):
    """A `*.json` link to /dev/zero: a MemoryError traceback, or the machine's memory without a limit."""
    (tmp_path / "z.json").symlink_to("/dev/zero")
    refused(capsys, [*argv, str(tmp_path / "z.json")], "z.json: is a character device, not a")


def test_reads_are_bounded(tmp_path):
    from pipebench.base.errors import UserError
    from pipebench.base.fileio.files import read_text

    (tmp_path / "big.json").write_text("x" * 2000)
    with pytest.raises(UserError, match="big.json: larger than"):
        read_text(tmp_path / "big.json", kind="profile", limit=1000)


@pytest.mark.parametrize("outputs, message", [
    (["--json", "same.json", "--save-profile", "same.json"], "--json and --save-profile name the same file"),
    (["--json", "same.json", "--export", "deepspeed", "same.json"], "--json and --export name the same file"),
    (["--json", "link.json", "--save-profile", "same.json"], "--json and --save-profile name the same file"),
    (["--json", "p.json"], "--profile and --json name the same file"),
])
def test_two_outputs_of_one_path_are_refused(capsys, tmp_path, monkeypatch, outputs, message):
    """`--json same.json --save-profile same.json` exited 0, the plan replacing the profile."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.json").symlink_to(tmp_path / "same.json")
    profile_file(tmp_path / "p.json")
    # --save-profile saves what is measured: with a model, not --profile (which is refused with it too)
    source = (["--model", "mlp", "--flavour", "tiny", "--device", "cpu", "--batch", "8"] if "--save-profile" in outputs
              else ["--profile", "p.json"])
    refused(capsys, ["plan", *source, "--stages", "2", *outputs], message)


@pytest.mark.parametrize("option", [["--json"], ["--save-profile"], ["--export", "deepspeed"]])
def test_an_output_onto_python_source_is_refused_before_the_import(capsys, tmp_path, option):
    """`--json layers.py`, layers.py a helper the model file imports (`from layers import Block`), replaced the
    helper with JSON: the model file no longer imported. Python source is never an output."""
    (tmp_path / "layers.py").write_text("from torch import nn\nBlock = nn.Linear\n")
    (tmp_path / "net.py").write_text("open(__file__ + '.imported', 'w').close()\nfrom torch import nn\n"
                                     "from layers import Block\n\n\ndef Net():\n    return nn.Sequential(Block(4, 4), "
                                     "Block(4, 4))\n")
    refused(capsys, ["plan", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--stages", "2",
                     *option, str(tmp_path / "layers.py")], "layers.py: is Python source, which the output would replace")
    assert (tmp_path / "layers.py").read_text().startswith("from torch")
    assert not (tmp_path / "net.py.imported").exists()


@pytest.mark.parametrize("option", ["--json", "--save-profile"])
def test_an_output_through_a_link_onto_python_source_is_refused(capsys, tmp_path, option):
    """Fourth pass, F4: `--json link.json`, link.json a link to victim.py, replaced victim.py with the plan: the
    guard read the name's suffix, not the file's."""
    victim = tmp_path / "victim.py"
    victim.write_text("print('mine')\n")
    (tmp_path / "link.json").symlink_to(victim)
    source = ["--model", "mlp", "--flavour", "tiny", "--device", "cpu", "--batch", "8"] if option == "--save-profile" \
        else ["--profile", str(profile_file(tmp_path / "p.json"))]
    refused(capsys, ["plan", *source, "--stages", "2", option, str(tmp_path / "link.json")],
            f"link.json (a link to {victim}): is Python source, which the output would replace")
    assert victim.read_text() == "print('mine')\n" and (tmp_path / "link.json").is_symlink()


def test_an_export_into_a_folder_is_refused_before_profiling(capsys, tmp_path):
    """`--export deepspeed d`, d a folder: an IsADirectoryError traceback after profiling."""
    (tmp_path / "d").mkdir()
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--device", "cpu",
                     "--export", "deepspeed", str(tmp_path / "d")], "--export")


def test_a_full_stdout_is_one_line(tmp_path):
    """`plan > /dev/full`: an OSError Errno 28 traceback."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "pipebench", "plan", "--profile",
                               str(profile_file(tmp_path / "p.json")), "--stages", "2"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["pipebench: error: cannot write the output (No space left on device)"]


@pytest.mark.ci  # a whole command in a subprocess: run by CI after the default run
def test_a_stdout_that_cannot_encode_the_answer_gets_escapes(tmp_path):
    """Under PYTHONIOENCODING=ascii the plan's own "±" was a UnicodeEncodeError traceback (fourth pass, F7)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONIOENCODING": "ascii", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pipebench", "plan", "--model", "mlp", "--flavour", "tiny", "--stages",
                           "2", "--device", "cpu", "--batch", "8"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert "\\xb1" in done.stdout
