"""Bad input, a second pass of issue 42's kinds: names with control characters in progress lines and
answers, NaN or infinite samples in train's own data sets, and what the second battery found.

Each case was a raw escape sequence on the terminal, a traceback, or work started on bad input before;
now it is escaped, or one line and exit 2 before any worker."""
from __future__ import annotations

import pytest

from pipebench.bench.cli import main
from test_bad_input import profile_file

HOSTILE = "m\x1b[2J\r\n\x07x"  # clears the screen, rewrites the line, starts another, rings


def test_progress_lines_escape_control_characters(capsys):
    from pipebench.progress import say

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
