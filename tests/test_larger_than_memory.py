"""Models, micro-batches and data sets larger than the free memory are refused before they are built or run:
one line naming both sizes, never the kernel's OOM killer."""
from __future__ import annotations

import pytest

from helpers import refused
from pipebench.partition.profiling.measure import profile_sizes as PROFILE_SIZES  # before nothing_runs replaces it

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


HUGE = '''
import psutil
import torch
from torch import nn

TWICE = 2 * psutil.virtual_memory().total // 4  # float32 parameters of twice this machine's memory


class Huge(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.zeros(TWICE))

    def forward(self, x):
        return x * self.a[:4]
'''


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_model_larger_than_the_free_memory_is_refused_before_it_is_built(capsys, tmp_path, command):
    """A model larger than the free memory is refused from its size, before it is built on the CPU (where only
    the machine's memory limit would stop it)."""
    import psutil

    (tmp_path / "huge.py").write_text(HUGE)
    model = f"{tmp_path / 'huge.py'}:Huge"
    free = psutil.virtual_memory().available
    argv = ["plan", "--model", model, "--stages", "2", "--input-shape", "4", "--device", "cpu"] if command == "plan" \
        else ["run", "--models", model, "--out", str(tmp_path / "out"), "--input-shape", "4"]
    refused(capsys, argv, "its parameters and buffers take")
    refused(capsys, argv, "GiB of memory free here; it is not built")
    assert free > 0  # both figures are in the line: the model's size, and what was free


def test_a_zoo_model_larger_than_the_free_memory_is_refused_before_it_is_built(capsys):
    import math

    import psutil

    depth = max(40, math.ceil(2 * psutil.virtual_memory().total / (12 * 4096 ** 2 * 4)))  # twice the memory
    refused(capsys, ["plan", "--model", "gpt", "--flavour", "8b", "--set", f"depth={depth}", "--stages", "2",
                     "--device", "cpu", "--batch", "8"],
            "model 'gpt' (8b): its parameters and buffers take")


def _little_free(monkeypatch, module, free: int) -> None:
    """`module`'s free memory reads `free` bytes: a check against it allocates nothing."""
    monkeypatch.setattr(module, "free_bytes", lambda device: free)


def test_a_micro_batch_whose_activations_exceed_the_free_memory_is_refused_before_it_runs(capsys, monkeypatch):
    """Activations beyond the memory (gpt at seq_len 10,000,000, resnet18 at batch 16,777,216) are refused
    before they run on the CPU, where the kernel's OOM killer would end pipebench with exit 137 and no line.
    """
    from pipebench.bench.cli import main
    from pipebench.partition.profiling import activations, measure

    monkeypatch.setattr(measure, "profile_sizes", PROFILE_SIZES)  # the sizes are judged, none is run
    _little_free(monkeypatch, activations, 1000)
    monkeypatch.setattr(measure, "profile_model", lambda *a, **k: pytest.fail("the size was run"))
    code = main(["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--batch", "8", "--micro-batches", "2",
                 "--device", "cpu", "--link-gbps", "1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the line that says what is profiled
    assert code == 2 and last.startswith("pipebench: error: cannot run mlp with micro-batches of 4: its "
                                         "activations need about "), last
    assert last.endswith("more than the 1000 B free on cpu (a smaller --batch or model settings, or more --micro-batches)")


def test_only_the_sizes_whose_activations_exceed_the_free_memory_are_skipped():
    """Judged from the largest down: the sizes that fit are kept for the sweep, one estimate when all fit."""
    import torch
    from torch import nn

    from pipebench import models
    from pipebench.models.source import object_model
    from pipebench.partition.profiling import activations

    model = models.get_model("resnet18", "tiny")
    before = {name: b.clone() for name, b in model.module.named_buffers()}
    four, eight = (activations.activation_bytes(model, n, torch.device("cpu")) for n in (4, 8))
    assert 0 < four < eight  # twice the samples, more activations
    assert all(torch.equal(before[name], b) for name, b in model.module.named_buffers())  # BatchNorm's untouched
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        _little_free(m, activations, four)
        assert list(activations.oversized(model, torch.device("cpu"), [2, 4, 8])) == [8]
    # A caller's module and its example inputs (pipebench.plan(module, x)) are judged too.
    given = object_model(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(2, 4), None, None)
    assert activations.activation_bytes(given, 8, torch.device("cpu")) > 0


def test_a_data_set_whose_sampler_order_exceeds_the_free_memory_is_refused(capsys, monkeypatch, tmp_path):
    """`train --data tokens:big.bin` on a 100G sparse file is refused before the workers start: their
    DistributedSampler order (a list of Python ints a sample) would be OOM-killed, "workers exited with status
    -9"."""
    from pipebench.bench.cli import main
    from pipebench.bench.train import data
    from pipebench.hardware import free_memory

    big = tmp_path / "big.bin"
    with open(big, "wb") as file:
        file.truncate(2 * (32 * 1_000_000 + 1))  # sparse: a million sequences of gpt tiny's 32 tokens, no disk used
    _little_free(monkeypatch, free_memory, 1_000_000)  # read where data.py asks it, when it asks
    monkeypatch.setattr(data, "_checked_samples", lambda *a: pytest.fail("samples were read"))
    code = main(["train", "--model", "gpt", "--flavour", "tiny", "--batch", "8", "--steps", "2", "--strategy",
                 "single", "--device", "cpu", "--data", f"tokens:{big}"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after train's line of the devices
    assert code == 2 and last.startswith("pipebench: error: the data set's 1,000,000 samples need about 61.04 MiB "
                                         "for the sampler's shuffled order"), last
    assert "more than the 976.56 KiB free here" in last, last
