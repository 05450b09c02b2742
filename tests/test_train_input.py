"""Bad input, a second pass of issue 42's kinds: names with control characters in progress lines and
answers, NaN or infinite samples in train's own data sets, and what the second battery found.

Each case was a raw escape sequence on the terminal, a traceback, or work started on bad input before;
now it is escaped, or one line and exit 2 before any worker."""
from __future__ import annotations

import pytest

from pipebench.bench.cli import main
from test_refused_options import profile_file

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


# ------------------------------------------------------------------- train --data FILE.py:NAME, NaN and labels

DATA = '''import torch


def spoiled():
    x, y = torch.randn(200, 1, 28, 28), torch.randint(0, 10, (200,))
    {spoil}
    return torch.utils.data.TensorDataset(x, y)
'''


@pytest.mark.parametrize("spoil, message", [
    ("x[199, 0, 3, 3] = float('nan')", "sample 199 has NaN or infinite values in its input (shape [1, 28, 28]); "
                                       "train checks 64 samples"),
    ("x[0, 0, 0, 0] = float('inf')", "sample 0 has NaN or infinite values in its input"),
    ("x[100:110] = -float('inf')", "has NaN or infinite values in its input"),
    ("y[199] = 10", "the data holds label 10, beyond the model's 10 classes (0-9)"),
    ("y[199] = -3", "the data holds label -3, below 0"),
    ("y = y.float(); y[0] = float('nan')", "sample 0 has NaN or infinite values in its target"),
])
def test_a_dataset_of_nan_or_labels_out_of_range_is_refused_before_any_worker(capsys, tmp_path, monkeypatch,
                                                                              spoil, message):
    """NaN or infinite inputs in a data set of the user's went unchecked: every worker started and trained
    on no numbers (only the first two samples' labels were looked at)."""
    from pipebench.bench.launch import spawn

    def no_workers(*args, **kwargs):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(spawn, "start_workers", no_workers)
    source = tmp_path / "data.py"
    source.write_text(DATA.format(spoil=spoil))
    code = main(["train", "--model", "convnet", "--strategy", "single", "--batch", "8", "--device", "cpu",
                 "--data", f"{source}:spoiled", "--steps", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("pipebench: error: ") and message in err[-1], err
    assert not any("Traceback" in line for line in err)


def test_the_samples_checked_are_spread_and_bounded():
    import torch

    from pipebench.bench.train.data import SAMPLES_CHECKED, _checked_samples

    class Counted(torch.utils.data.Dataset):
        def __init__(self):
            self.read = []

        def __len__(self):
            return 10_000_000

        def __getitem__(self, i):
            self.read.append(i)
            return torch.zeros(2), torch.tensor(-100 if i % 2 else 3)  # -100: cross_entropy's ignored target

    data = Counted()
    assert _checked_samples(data, len(data), [""]) == (3, 3)
    assert len(data.read) == SAMPLES_CHECKED and data.read[0] == 0 and data.read[-1] == len(data) - 1
