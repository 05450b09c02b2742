"""A training that fails: a loss that becomes NaN stops in one line and saves no NaN weights (the last finite
checkpoint stays), and a worker's error is one line and exit status 1."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import ROOT, train


DATA = '''
import torch
from torch.utils.data import TensorDataset


def data():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 4, (64,), generator=g))
'''


@pytest.mark.ci  # a whole run or train through the command line, 10-20 s: CI runs it after the default set
def test_a_diverging_loss_stops_in_one_line_and_saves_no_nan_weights(tmp_path, capsys):
    """A NaN loss stops train in one line and saves no NaN weights over the checkpoint, not training on to the
    end with exit 0."""
    model, message = "diverging_model.py:Diverges", "the loss became nan at step 1; stopped after 1/3 steps"
    (tmp_path / "data.py").write_text(DATA)
    save = tmp_path / "model.pth"
    torch.save({"weight": torch.ones(1)}, save)  # an earlier run's checkpoint (train refuses another file there)
    earlier = save.read_bytes()
    code = train("--model", ROOT / "tests" / "fixtures" / model, "--data", f"{tmp_path / 'data.py'}:data",
                 "--strategy", "single", "--batch", 8, "--steps", 3, "--device", "cpu", "--log-every", 0,
                 "--csv", tmp_path / "loss.csv", "--save", save, "--save-every", 1)
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 1 and out[-1] == f"diverged: {message}; {save} not written", out
    assert save.read_bytes() == earlier
    assert (tmp_path / "loss.csv").read_text().splitlines()[1].split(",")[2] == "nan"  # the step is recorded


LATE = '''
import torch
from torch import nn


class Late(nn.Module):
    """Finite at first; a learning rate of 1e30 makes its weights overflow a step later."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 64)
        self.b = nn.Linear(64, 4)

    def forward(self, x):
        return self.b(self.a(x))


def make_batch(batch_size):
    return torch.randn(batch_size, 8), torch.randint(0, 4, (batch_size,))
'''


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_loss_that_diverges_later_keeps_the_checkpoint_before_it(tmp_path, capsys):
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "late.py").write_text(LATE)
    save = tmp_path / "model.pth"
    code = train("--model", f"{tmp_path / 'late.py'}:Late", "--data", f"{tmp_path / 'data.py'}:data",
                 "--strategy", "single", "--batch", 8, "--steps", 6, "--device", "cpu", "--log-every", 0,
                 "--save", save, "--save-every", 1, "--lr", "1e30")
    printed = capsys.readouterr()
    out = printed.out.strip().splitlines()
    assert code == 1 and out[-1] == f"diverged: the loss became nan at step 2; stopped after 2/6 steps; checkpoint {save} of step 1", printed
    state = torch.load(save)
    assert all(torch.isfinite(t).all() for t in state.values())  # the last finite weights, never NaN ones


def test_a_workers_failure_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    """A rank that raises inside training (a bug of ours or of the model's) ends train in one line naming the
    rank and the error, exit status 1, not the parent's traceback through the launcher."""
    from pipebench.bench.train import parent
    from pipebench.bench.launch.spawn import WorkerError

    def fails(*args, **kwargs):
        raise WorkerError("rank 1: IndexError: index out of range in self")

    monkeypatch.setattr(parent, "run_training", fails)
    tokens = tmp_path / "tokens.bin"
    np.arange(4096, dtype=np.uint16).__mod__(256).astype(np.uint16).tofile(tokens)
    assert train("--model", "gpt", "--flavour", "tiny", "--data", f"tokens:{tokens}", "--batch", 8, "--steps", 1, "--device", "cpu", "--strategy", "single") == 1
    err = capsys.readouterr().err
    assert "failed: rank 1: IndexError: index out of range in self" in err and "Traceback" not in err
