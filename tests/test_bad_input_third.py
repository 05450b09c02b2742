"""Bad input, third round (issue 42): nonsense a model file or a profile file says, CSV cells a spreadsheet
would run, model files that misbehave at import, models larger than memory, and diverging losses in train.

Each case was accepted, a traceback, a hang or a silent exit before; now it is one line and exit 2, or the
right result."""
from __future__ import annotations

import json

import pytest

from test_bad_input import nothing_runs, profile_file, refused  # noqa: F401 - nothing_runs: no profiling, no runs

SHORT = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x))


def make_batch(batch_size):
    return torch.randn({inputs}, 4), torch.randint(0, 4, ({targets},))
'''


@pytest.mark.parametrize("inputs, targets, message", [
    ("3", "3", "make_batch(2) returned 3 samples (shape [3, 4]); it must return batch_size (2) samples"),
    ("batch_size", "3", "make_batch(2) returned 3 samples (shape [3]); it must return batch_size (2) samples"),
    ("batch_size * 2", "batch_size", "make_batch(2) returned 4 samples (shape [4, 4])"),
])
def test_a_make_batch_of_another_size_is_refused(capsys, tmp_path, inputs, targets, message):
    """A make_batch that always returns 3 samples was profiled and planned as batch 8, exit 0."""
    path = tmp_path / "short.py"
    path.write_text(SHORT.format(inputs=inputs, targets=targets))
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"], message)


@pytest.mark.parametrize("field, value, message", [
    ("repeats", 0, "p.repeats: must be at least 1, got 0"),
    ("repeats", -1, "repeats: must be >= 0, got -1"),
    ("repeats", 1.5, "repeats: expected int, got 1.5"),
    ("repeats", "5", "repeats: expected int, got '5'"),
    ("repeats", True, "repeats: expected int, got True"),
    ("batch", 0, "p.batch: must be at least 1, got 0"),
])
def test_a_profile_of_no_repeats_is_refused(capsys, tmp_path, field, value, message):
    """A profile file with "repeats": 0 (a mean of no runs) was used."""
    path = profile_file(tmp_path / "p.json", lambda e: e.update({field: value}))
    refused(capsys, ["plan", "--profile", str(path), "--stages", "2"], message.replace("p.", ""))
