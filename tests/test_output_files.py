"""Where plan, advise, run and report write: every output path is checked, alone and against the others and
the inputs, before any work, and a device, link or FIFO named for output is written through, not replaced."""
from __future__ import annotations

import json

from pathlib import Path

import pytest

from helpers import NET, TINY, profile_file, refused
from pipebench.bench.cli import main

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# ------------------------------------------------------------------ folders and files no command can write

def bad_folders(tmp_path: Path) -> list[tuple[str, str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    folders = [(str(a_file), "a file is in the way"), (str(a_file / "below"), "cannot create the folder")]
    if Path("/etc/hostname").is_file():
        folders.append(("/etc/hostname", "a file is in the way"))
    if Path("/proc/self").exists():
        folders.append(("/proc/nope", "cannot create the folder"))
    return folders


@pytest.mark.parametrize("option", ["--out", "--profiles"])
def test_run_refuses_folders_it_cannot_write(capsys, tmp_path, option):
    """run refuses an --out or --profiles folder it cannot write in one line, before the first case is
    profiled."""
    for folder, message in bad_folders(tmp_path):
        refused(capsys, ["run", "--models", "mlp", "--out", str(tmp_path / "out"), option, folder],
                f"{option} {folder}: {message}")


def bad_outputs(tmp_path: Path) -> list[tuple[str, str]]:
    """Output files no command can write, and the start of what each is told."""
    outputs = [(str(tmp_path), "is a folder; name a file"), ("x" * 10_000, "the file name is 10,000 characters"),
               (str(tmp_path / ("d/" * 3000) / "p.json"), "File name too long")]
    if Path("/proc/self").exists():
        outputs += [("/proc/nope/p.json", "cannot create the folder"), ("/proc/self/p.json", "not writable")]
    return outputs


@pytest.mark.parametrize("command", ["plan", "advise"])
@pytest.mark.parametrize("option", ["--json", "--save-profile"])
def test_plan_and_advise_check_their_outputs_before_profiling(capsys, tmp_path, command, option):
    """plan and advise refuse a --json or --save-profile file they cannot write in one line before profiling,
    not with an IsADirectoryError, FileNotFoundError or OSError once profiling has ended."""
    for path, message in bad_outputs(tmp_path):
        refused(capsys, [command, "--model", "mlp", *TINY, "--stages", "2", option, path], message)


def test_report_checks_its_folder_before_reading(capsys, tmp_path):
    (tmp_path / "a-file").write_text("")
    bad = [(str(tmp_path / "a-file"), "a file is in the way"), ("x" * 10_000, "cannot create the folder")]
    if Path("/proc/self").exists():
        bad.append(("/proc/nope", "cannot create the folder"))
    for folder, message in bad:
        refused(capsys, ["report", str(tmp_path / "none.json"), "--out", folder], message)


def test_a_refused_report_leaves_no_folder(capsys, tmp_path):
    """`report nothere.csv --out qr8` is refused and makes no qr8/."""
    out = tmp_path / "deep" / "qr8"
    refused(capsys, ["report", str(tmp_path / "nothere.csv"), "--out", str(out)], "no such file")
    assert not (tmp_path / "deep").exists()


@pytest.mark.parametrize("command, output", [("plan", ["--json"]), ("plan", ["--export", "deepspeed"]),
                                             ("advise", ["--json"])])
def test_a_refused_plan_or_advise_leaves_no_folder(capsys, tmp_path, command, output):
    """`plan --profile P --flavour small --json new/a/b/p.json`, P of another flavour, is refused and makes no
    new/: an output's folders are made when it is written. Accepted, the same command writes there."""
    argv = [command, "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2", *output,
            str(tmp_path / "new" / "a" / "b" / "out.json")]
    refused(capsys, [*argv, "--flavour", "small"], "--flavour")
    assert not (tmp_path / "new").exists()
    assert main(argv) == 0
    assert (tmp_path / "new" / "a" / "b" / "out.json").is_file()


def test_a_refused_plan_leaves_no_folder_for_its_profile(capsys, tmp_path):
    """`plan --model mlp --flavour huge --save-profile new/a/p.json` is refused before profiling and makes no
    new/."""
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "huge", "--stages", "2", "--device", "cpu",
                     "--save-profile", str(tmp_path / "new" / "a" / "p.json")], "huge")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("option", ["--json", "--save-profile"])
def test_outputs_that_name_a_folder_or_a_kernel_file_are_refused_first(capsys, tmp_path, option):
    """`--json out/` (a folder's name) and `--save-profile /proc/self/status` (a kernel file) are refused
    before profiling: no file named out, no OSError traceback after profiling."""
    plan = ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--batch", "8"]
    refused(capsys, [*plan, option, f"{tmp_path}/out/"], "names a folder (it ends with /); name a file")
    assert not (tmp_path / "out").exists()
    refused(capsys, [*plan, option, "/proc/self/status"], "is a file of the kernel's (in /proc or /sys)")


@pytest.mark.parametrize("command", ["plan", "advise"])
def test_json_dash_is_refused_not_a_file_named_dash(capsys, monkeypatch, tmp_path, command):
    """`--json -` is refused in one line, not written to a file named "-" in the current folder."""
    monkeypatch.chdir(tmp_path)
    refused(capsys, [command, "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2", "--json", "-"],
            "--json -: --json writes a file, and stdout carries the answer; name a file")
    assert not (tmp_path / "-").exists()


def test_an_export_into_a_folder_is_refused_before_profiling(capsys, tmp_path):
    """`--export deepspeed d`, d a folder: an IsADirectoryError traceback after profiling."""
    (tmp_path / "d").mkdir()
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--device", "cpu",
                     "--export", "deepspeed", str(tmp_path / "d")], "--export")


# --------------------------------------------------------- outputs checked together and against the inputs

@pytest.mark.parametrize("outputs, message", [
    (["--json", "same.json", "--save-profile", "same.json"], "--json and --save-profile name the same file"),
    (["--json", "same.json", "--export", "deepspeed", "same.json"], "--json and --export name the same file"),
    (["--json", "link.json", "--save-profile", "same.json"], "--json and --save-profile name the same file"),
    (["--json", "p.json"], "--profile and --json name the same file"),
])
def test_two_outputs_of_one_path_are_refused(capsys, tmp_path, monkeypatch, outputs, message):
    """`--json same.json --save-profile same.json` is refused: the plan would replace the profile."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.json").symlink_to(tmp_path / "same.json")
    profile_file(tmp_path / "p.json")
    # --save-profile saves what is measured: with a model, not --profile (which is refused with it too)
    source = (["--model", "mlp", "--flavour", "tiny", "--device", "cpu", "--batch", "8"] if "--save-profile" in outputs
              else ["--profile", "p.json"])
    refused(capsys, ["plan", *source, "--stages", "2", *outputs], message)


@pytest.mark.parametrize("command", ["plan", "advise"])
def test_a_profile_read_and_saved_at_once_is_refused(capsys, tmp_path, command):
    """`--profile P --save-profile Q` is refused: with --profile nothing is measured, so nothing would be
    saved."""
    argv = [command, "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2", "--device", "cpu",
            "--save-profile", str(tmp_path / "q.json")]
    refused(capsys, argv, "--save-profile saves a profile measured here; with --profile nothing is measured")
    assert not (tmp_path / "q.json").exists()


def test_report_into_a_folder_it_reads_is_refused(capsys, tmp_path):
    """`report DIR --out DIR` is refused: its summary.csv among the results would make every later `report
    DIR` refused."""
    from pipebench.bench.cli import main
    from helpers import results_file
    from test_report import make_row

    folder = results_file(tmp_path / "r", [make_row("single", gpus="0", samples_per_s=100.0)]).parent
    refused(capsys, ["report", str(folder), "--out", str(folder)], "is a folder read: its summary.csv would be")
    assert not (folder / "summary.csv").exists()
    assert main(["report", str(folder)]) == 0, capsys.readouterr().err


def test_an_export_over_an_earlier_export_is_written_again(capsys, tmp_path):
    """The check of --export above writes an engine export, of any engine, again."""
    profiles, out = str(profile_file(tmp_path / "p.json")), tmp_path / "export.json"
    for engine in ("deepspeed", "megatron"):
        assert main(["plan", "--profile", profiles, "--stages", "2", "--export", engine, str(out)]) == 0, \
            capsys.readouterr().err
    assert json.loads(out.read_text())["engine"] == "megatron"


def test_report_never_replaces_its_input_or_a_file_of_the_users(capsys, tmp_path):
    """`report rq/summary.csv --out rq` is refused (the report's summary would replace the results it reads),
    and so is a --out whose report.md is the user's own. An earlier report there is written again."""
    from helpers import results_file
    from pipebench.bench.store.results import _csv_text, load
    from test_report import make_row

    rows = load(results_file(tmp_path / "r", [make_row("single", gpus="0", samples_per_s=100.0)]))
    folder = tmp_path / "rq"
    folder.mkdir()
    (folder / "summary.csv").write_text(_csv_text(rows))
    held = (folder / "summary.csv").read_text()
    refused(capsys, ["report", str(folder / "summary.csv"), "--out", str(folder)],
            "the report's summary.csv would replace")
    assert (folder / "summary.csv").read_text() == held
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("my own report\n")
    refused(capsys, ["report", str(tmp_path / "r"), "--out", str(mine)], "holds something other than a pipebench report")
    assert (mine / "report.md").read_text() == "my own report\n"
    (mine / "report.md").unlink()
    (mine / "summary.csv").write_text("my own table\n")
    refused(capsys, ["report", str(tmp_path / "r"), "--out", str(mine)], "holds something other than a pipebench report's")
    (mine / "summary.csv").unlink()
    for _ in range(2):
        assert main(["report", str(tmp_path / "r"), "--out", str(mine)]) == 0, capsys.readouterr().err
    assert (mine / "report.md").read_text().startswith("# pipebench report")


def test_run_profiles_into_its_results_folder_is_refused(capsys, tmp_path):
    """`run --out D --profiles D` put profile JSONs among the results: `report D` then refused the folder."""
    refused(capsys, ["run", "--models", "mlp", "--device", "cpu", "--out", str(tmp_path), "--profiles", str(tmp_path)],
            "--profiles and --out name one folder")


@pytest.mark.parametrize("command, output", [("plan", ["--json"]), ("plan", ["--save-profile"]),
                                             ("plan", ["--export", "deepspeed"]), ("advise", ["--json"])])
def test_an_output_onto_the_model_file_is_refused(capsys, tmp_path, command, output):
    """`plan --model net.py:Net --json net.py` is refused before profiling: the plan would replace the user's
    model file."""
    (tmp_path / "net.py").write_text(NET)
    refused(capsys, [command, "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--stages", "2",
                     "--device", "cpu", *output, str(tmp_path / "net.py")], "--model and ")
    assert (tmp_path / "net.py").read_text() == NET


@pytest.mark.parametrize("option", [["--json"], ["--save-profile"], ["--export", "deepspeed"]])
def test_an_output_onto_python_source_is_refused_before_the_import(capsys, tmp_path, option):
    """`--json layers.py`, layers.py a helper the model file imports (`from layers import Block`), is refused
    before the import: JSON in its place would leave the model file unable to import. Python source is never
    an output."""
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
    """`--json link.json`, link.json a link to victim.py, is refused: the guard reads the file the name leads
    to, not the name's suffix."""
    victim = tmp_path / "victim.py"
    victim.write_text("print('mine')\n")
    (tmp_path / "link.json").symlink_to(victim)
    source = ["--model", "mlp", "--flavour", "tiny", "--device", "cpu", "--batch", "8"] if option == "--save-profile" \
        else ["--profile", str(profile_file(tmp_path / "p.json"))]
    refused(capsys, ["plan", *source, "--stages", "2", option, str(tmp_path / "link.json")],
            f"link.json (a link to {victim}): is Python source, which the output would replace")
    assert victim.read_text() == "print('mine')\n" and (tmp_path / "link.json").is_symlink()


# --------------------------------------------------------------- devices, links and FIFOs named for output

def character_device(path: Path) -> Path:
    """A null device at `path`, as `--json /dev/null` names one (mknod c 1 3 needs root)."""
    import os
    import stat

    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


def test_a_device_named_for_output_is_written_through_not_replaced(capsys, tmp_path):
    """`--json null`, null a character device: the plan is written through it, and it stays a device."""
    import stat

    null = character_device(tmp_path / "null")
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--json", str(null)]) == 0, capsys.readouterr().err
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_profile_saved_to_a_device_leaves_the_device(tmp_path):
    """`--save-profile null` writes through the device too, as --json does (both writes go through
    files.write_text)."""
    import stat

    from pipebench.partition.profiling.profile_record import load_profiles, save_profiles

    null = character_device(tmp_path / "null")
    save_profiles(load_profiles(profile_file(tmp_path / "p.json")), null)
    assert stat.S_ISCHR(null.stat().st_mode)


@pytest.mark.parametrize("out", ["a file", "a pipe"])
def test_a_link_to_stdout_writes_the_plan_to_stdout(tmp_path, out):
    """`--json stdout`, stdout a link to /proc/self/fd/1: the link stays a link and stdout gets the plan's
    table, its JSON and the line naming where it went, in that order, whether stdout is a file (`> out.txt`)
    or a pipe."""
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
    target.write_text("")  # empty: a file of other content is refused (test_an_output_holding_another_file...)
    (tmp_path / "link.json").symlink_to(target)
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--json", str(tmp_path / "link.json")]) == 0, capsys.readouterr().err
    assert (tmp_path / "link.json").is_symlink() and "pipebench-plan" in target.read_text()


def test_a_fifo_output_without_a_reader_is_refused_before_any_work(capsys, tmp_path, within_seconds, nothing_runs):
    """`--json FIFO` with nothing reading it is refused before any work, not when the plan is written after
    profiling."""
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


@pytest.mark.parametrize("command, option, held, what", [
    ("plan", "--json", "model,strategy,status\nmlp,single,ok\n", "a plan (pipebench-plan JSON)"),  # a run's CSV
    ("plan", "--json", '{"format": "pipebench-results", "version": 1, "rows": []}\n', "a plan"),
    ("plan", "--json", '{"format": "pipebench-profile", "version": 1, "profiles": []}\n', "a plan"),
    ("plan", "--json", "my notes\n", "a plan"),
    ("plan", "--save-profile", '{"format": "pipebench-plan", "version": 1}\n', "profiles (pipebench-profile JSON)"),
    ("advise", "--json", '{"format": "pipebench-plan", "version": 1}\n', "a ranking of advise's (pipebench-advice"),
    ("plan", "--export", "model,strategy,status\nmlp,single,ok\n", "an engine export"),
    ("plan", "--export", '{"format": "pipebench-profile", "version": 1, "profiles": []}\n', "an engine export"),
    ("plan", "--export", "my notes\n", "an engine export"),
])
def test_an_output_holding_another_file_is_refused_not_replaced(capsys, tmp_path, command, option, held, what):
    """`plan --json results.csv` (a run's results) and `--save-profile plan.json` (a plan) are refused, not
    replaced with exit 0: an output file holds what the command writes there or nothing."""
    out = tmp_path / "out.file"
    out.write_text(held)
    model = ["--profile", str(profile_file(tmp_path / "p.json"))] if option != "--save-profile" else ["--model", "mlp", *TINY]
    given = [option, "deepspeed", str(out)] if option == "--export" else [option, str(out)]
    refused(capsys, [command, *model, "--stages", "2", *given], f"holds something other than {what}")
    assert out.read_text() == held


@pytest.mark.parametrize("command", ["plan", "advise"])
def test_an_output_of_the_commands_own_is_written_again(capsys, tmp_path, command):
    """The check above leaves a command its own file: a plan's --json, advise's --json, is written again."""
    profiles, out = str(profile_file(tmp_path / "p.json")), tmp_path / "out.json"
    for _ in range(2):
        assert main([command, "--profile", profiles, "--stages", "2", "--json", str(out)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("name", ["report.md", "summary.csv"])
@pytest.mark.parametrize("kind", ["a FIFO", "a folder"])
def test_a_report_file_that_is_not_a_regular_file_is_refused_before_anything_is_printed(capsys, tmp_path,
                                                                                       within_seconds, name, kind):
    """`report r0 --out o4` with o4/report.md a FIFO, or o4/summary.csv a FIFO or a folder, is refused before
    the table is printed, and the FIFO is never read (which would wait for ever)."""
    import os

    from helpers import results_file
    from test_report import make_row

    folder = results_file(tmp_path / "r", [make_row("single", gpus="0", samples_per_s=100.0)]).parent
    out = tmp_path / "o4"
    out.mkdir()
    os.mkfifo(out / name) if kind == "a FIFO" else (out / name).mkdir()
    code, captured = main(["report", str(folder), "--out", str(out)]), capsys.readouterr()
    assert code == 2 and captured.out == "", captured
    assert captured.err.count("\n") == 1 and captured.err.startswith("pipebench: error: --out "), captured.err
    assert f"{name} is {kind}" in captured.err, captured.err


def test_report_out_empty_is_refused(capsys, tmp_path):
    """`report r0 --out ''` is refused, as `train --save ''` is, not written into the default folder."""
    from helpers import results_file
    from test_report import make_row

    folder = results_file(tmp_path / "r", [make_row("single", gpus="0", samples_per_s=100.0)]).parent
    refused(capsys, ["report", str(folder), "--out", ""], "--out: an empty path; name a folder")
    assert not (folder / "report").exists()


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_report_of_a_file_into_its_own_folder_is_refused(capsys, tmp_path, suffix):
    """`report o1/res.csv --out o1` is refused: its summary.csv would be read as results by a later `report
    o1`, which would then be refused."""
    from helpers import results_file
    from pipebench.bench.store.results import _csv_text, load
    from test_report import make_row

    source = results_file(tmp_path / "r", [make_row("single", gpus="0", samples_per_s=100.0)])
    folder = tmp_path / "o1"
    folder.mkdir()
    given = folder / f"res{suffix}"
    given.write_text(_csv_text(load(source)) if suffix == ".csv" else source.read_text())
    refused(capsys, ["report", str(given), "--out", str(folder)], "is the folder of")
    assert sorted(p.name for p in folder.iterdir()) == [given.name]
    assert main(["report", str(folder)]) == 0, capsys.readouterr().err
