"""Models that cannot be trained or fed are refused before profiling, in one line: no parameters to train,
integer outputs, a loss of more than one number, an exit at import, a make_batch of another size, of
other things than tensors, or of NaN."""
from __future__ import annotations

import pytest

from helpers import NET, refused

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# -------------------------------------------------------------------------------- models that cannot train

MODELS = '''
import sys
import torch
import torch.nn.functional as F
from torch import nn


class Good(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x))


class Frozen(Good):
    def __init__(self):
        super().__init__()
        self.requires_grad_(False)


class NoParameters(nn.Module):
    def forward(self, x):
        return x * 2


class Integers(Good):
    def forward(self, x):
        return super().forward(x).argmax(-1, keepdim=True).expand(-1, 4)
'''


@pytest.mark.parametrize("name, extra, message", [
    ("models.py:Frozen", [], "has no parameters that require grad; there is nothing to train"),
    ("models.py:NoParameters", [], "has no parameters that require grad"),
    ("models.py:Integers", [], "returns int64 outputs; gradients flow only through floating-point ones"),
    ("vector_loss.py:Good", [], "the loss must be one number (a scalar tensor), got [2]"),
    ("exits.py:Good", [], "it calls sys.exit(0) or exit() when imported"),
    ("exit_call.py:Good", [], "it calls sys.exit(None) or exit() when imported"),
    ("raises.py:Good", [], "it calls sys.exit('bye') or exit() when imported"),
    ("models.py:Good", ["--input-shape", "999999999,999999999"],
     "an input batch of 2 x [999999999, 999999999] float32 takes 14901161164.05 GiB, more than this machine's"),
])
@pytest.mark.parametrize("command", ["plan", "run"])
def test_models_that_cannot_train_are_refused(capsys, tmp_path, monkeypatch, name, extra, message, command):
    """Each is refused in one line before profiling: not profiled and "planned" (exit 0), nor exit 0 with no
    word at all (sys.exit on import), nor the allocator's traceback asking for 8e18 bytes."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "vector_loss.py").write_text("from models import Good\nimport torch.nn.functional as F\n\n"
                                             "def loss_fn(outputs, targets):\n"
                                             "    return F.cross_entropy(outputs, targets, reduction='none')\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "exit_call.py").write_text("exit()\n")
    (tmp_path / "raises.py").write_text("raise SystemExit('bye')\n")
    model = str(tmp_path / name)
    shape = ["--input-shape", "4"] if not extra else extra
    if command == "plan":  # loading the model is profiling's first step, before anything is timed
        refused(capsys, ["plan", "--model", model, "--stages", "2", *shape], message)
    else:
        refused(capsys, ["run", "--models", model, "--out", str(tmp_path / "out"), *shape], message)


# ---------------------------------------------------------------------------------------------- make_batch

SHORT = "\nimport torch" + NET + '''

def make_batch(batch_size):
    return torch.randn({inputs}, 4), torch.randint(0, 4, ({targets},))
'''


@pytest.mark.parametrize("inputs, targets, message", [
    ("3", "3", "make_batch(2) returned 3 samples (shape [3, 4]); it must return batch_size (2) samples"),
    ("batch_size", "3", "make_batch(2) returned 3 samples (shape [3]); it must return batch_size (2) samples"),
    ("batch_size * 2", "batch_size", "make_batch(2) returned 4 samples (shape [4, 4])"),
])
def test_a_make_batch_of_another_size_is_refused(capsys, tmp_path, inputs, targets, message):
    """A make_batch that always returns 3 samples is refused for batch 8, not profiled and planned with exit
    0."""
    path = tmp_path / "short.py"
    path.write_text(SHORT.format(inputs=inputs, targets=targets))
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"], message)


@pytest.mark.parametrize("returns, message", [
    ('"abc", "def"', "make_batch(2) must return (inputs, targets): inputs a tensor, a tuple of tensors or a dict"),
    ("torch.randn(n, 4)", "make_batch(2) must return (inputs, targets), got one tensor of shape [2, 4]"),
    ("torch.randn(n, 4), [0] * n", "make_batch(2) must return (inputs, targets): targets a tensor; got a list"),
    ("{1: torch.randn(n, 4)}, torch.zeros(n)", "inputs a tensor, a tuple of tensors or a dict"),
    ("(), torch.zeros(n)", "inputs a tensor, a tuple of tensors or a dict"),
    ("None", "make_batch(2) must return (inputs, targets), got a NoneType"),
])
def test_a_make_batch_of_other_things_than_tensors_is_one_line(capsys, tmp_path, returns, message):
    """A make_batch of strings is one line, not an AttributeError traceback; one tensor is refused, not
    unpacked along its batch as (inputs, targets)."""
    path = tmp_path / "odd.py"
    path.write_text(SHORT.format(inputs="n", targets="n").replace("def make_batch(batch_size):", "def make_batch(n):")
                    .replace("return torch.randn(n, 4), torch.randint(0, 4, (n,))", f"return {returns}"))
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"], message)


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "-float('inf')"])
def test_a_make_batch_of_nan_or_infinite_inputs_is_refused(capsys, tmp_path, value):
    """NaN or infinite inputs are refused, not profiled and planned: every loss would be NaN, and what is
    timed would not be the model's arithmetic."""
    path = tmp_path / "nan.py"
    path.write_text("import torch" + NET + f"""
def make_batch(batch_size):
    x = torch.randn(batch_size, 4)
    x[-1, 0] = {value}
    return x, torch.randint(0, 4, (batch_size,))
""")
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"],
            "make_batch(2) returned NaN or infinite values (in the tensor of shape [2, 4])")
