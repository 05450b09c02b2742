"""Names that carry control characters (a model's, its layers', a file's) reach the terminal escaped: in
progress lines, answers, the lines that name a file written, advise's check command and error lines."""
from __future__ import annotations

import pytest

from helpers import profile_file, refused
from pipebench.bench.cli import main


HOSTILE = "m\x1b[2J\r\n\x07x"  # clears the screen, rewrites the line, starts another, rings


def test_progress_lines_escape_control_characters(capsys):
    from pipebench.base.text.progress import say

    say(f"profiling {HOSTILE} on cpu")
    assert capsys.readouterr().err == "profiling m\\x1b[2J\\r\\n\\x07x on cpu\n"


def test_a_plans_answer_escapes_the_models_and_layers_names(capsys, tmp_path):
    """A model and its layers named with escape sequences reached the terminal raw, in the plan's header
    and its table (stdout) and in `plan written to` (a path of the user's)."""
    def hostile(entry):
        entry["model"] = HOSTILE
        for i, layer in enumerate(entry["layers"]):
            layer["name"] = f"l{i}\x1b]0;owned\x07"

    path = profile_file(tmp_path / "p.json", hostile)
    out_file = tmp_path / "o\x1b[31m\r.json"
    assert main(["plan", "--profile", str(path), "--stages", "2", "--json", str(out_file)]) == 0, capsys.readouterr()
    out, err = capsys.readouterr()
    for stream in (out, err):
        assert not any(c in stream for c in "\x1b\r\x07"), stream
    assert "m\\x1b[2J\\r\\n\\x07x (tiny) on 2 stages" in out and "l1\\x1b]0;owned\\x07" in out
    assert "plan written to " + str(tmp_path) + "/o\\x1b[31m\\r.json" in out
    assert out_file.is_file()


EVIL = "mlp\x1b[2J\r\nEVIL"
"""A model name that would clear the terminal and end the line it is in."""


@pytest.mark.usefixtures("nothing_runs")
def test_a_file_name_with_a_line_feed_stays_on_its_answer_line(capsys, tmp_path):
    """`plan --json $'a\\nb.json'` says "plan written to .../a\\nb.json" on one line, not "b.json" on a line
    of its own."""
    from pipebench.bench.cli import main

    path = profile_file(tmp_path / "p.json")
    assert main(["plan", "--profile", str(path), "--stages", "2", "--json", str(tmp_path / "a\nb.json")]) == 0
    assert f"plan written to {tmp_path}/a\\nb.json\n" in capsys.readouterr().out
    assert (tmp_path / "a\nb.json").is_file()  # the file has the name asked for; only the line escapes it


@pytest.mark.usefixtures("nothing_runs")
def test_a_model_name_with_a_line_feed_stays_on_advises_check_line(capsys, tmp_path):
    """A profile of a model named "mlp\\x1b[2J\\r\\nEVIL" leaves advise's `check it with:` line one line: its
    line feed is escaped, as its ESC and CR are."""
    from pipebench.bench.cli import main

    path = profile_file(tmp_path / "p.json", lambda entry: entry.update(model=EVIL))
    assert main(["advise", "--profile", str(path), "--stages", "2"]) == 0
    check = next(line for line in capsys.readouterr().out.splitlines() if "check it with:" in line)
    assert "pipebench run --models 'mlp\\x1b[2J\\r\\nEVIL' --batch 8" in check, check


@pytest.mark.usefixtures("nothing_runs")
def test_control_characters_in_an_error_line_are_escaped(capsys, tmp_path):
    """A model name of `\\x1b[2J` cleared the terminal of whoever read the error; `\\r` rewrote the line."""
    refused(capsys, ["plan", "--model", "m\x1b[2J\r\x00x", "--stages", "2"], "unknown model 'm\\x1b[2J\\r\\x00x'")
    path = tmp_path / "n\x1b]0;owned\x07\r.py"
    path.write_text("raise ValueError('bad\\x1b[31m cell')\n")
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2"], "n\\x1b]0;owned\\x07\\r.py")
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2"], "ValueError: bad\\x1b[31m cell")
