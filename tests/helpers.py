"""What the tests of refused input share: the one-line refusal they assert, small valid files to spoil,
model and data files' text, pipebench as a command of its own, and the byte-token data `pipebench train` reads.

Fixtures are in conftest.py; these are plain functions and constants, imported by name."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pipebench.bench.cli import main
from pipebench.bench.store.results import Row, _json_text


# ------------------------------------------------------------------------------------------------ refusals

TINY = ["--flavour", "tiny", "--batch", "8", "--repeats", "1"]


def refused(capsys, argv: list[str], message: str) -> None:
    """`pipebench ARGV` in this process exits 2 with one line on stderr, the error naming `message`."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [err.strip()], err  # one line
    assert err.startswith("pipebench: error: ") and message in err, err


# --------------------------------------------------------------------------------------------- input files

def profile_file(path: Path, edit=None, layers: int = 4) -> Path:
    """A small valid profile file, as `plan --save-profile` writes it; `edit(entry)` spoils it."""
    layer = {"name": "", "params": 10, "param_bytes": 40, "forward_ms": 1.0, "backward_ms": 2.0, "output_bytes": 64,
             "output_shape": [4, 4], "output_dtype": "float32", "saved_bytes": 64}
    entry = {"model": "mlp", "flavour": "tiny", "device": "cpu", "device_name": "cpu", "torch_version": "2",
             "batch": 8, "micro_batch": 4, "repeats": 1, "warmup": 1, "input_shape": [4, 4],
             "input_dtype": "float32", "layers": [{**layer, "name": f"layer_{i}"} for i in range(layers)]}
    if edit:
        edit(entry)
    path.write_text(json.dumps({"format": "pipebench-profile", "version": 1, "profiles": [entry]}))
    return path


def results_file(folder: Path, rows) -> Path:
    """`rows` as the results JSON `pipebench run` writes, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "r.json"
    path.write_text(_json_text(rows))
    return path


def row(**changes) -> Row:
    """An ok row of a ddp case of mlp on two GPUs, `changes` applied."""
    values = dict(model="mlp", flavour="tiny", strategy="ddp", gpus="0,1", world_size=2, batch=8, micro_batches=1,
                  status="ok", samples_per_s=100.0, step_ms=80.0, started_at="2026-12-01T10:00:00")
    return Row(**{**values, **changes})


def worker_result(**changes):
    """Rank 0's result of a single case of mlp on the CPU (bench/launch/worker_report.py WorkerResult), as
    a worker that timed two 10 ms steps writes it, `changes` applied."""
    from pipebench.bench.launch.worker_report import WorkerResult

    values = dict(strategy="single", world_size=1, devices=["cpu"], device_name="cpu", torch_version="2",
                  first_loss=1.0, diverged="", step_ms=[10.0, 10.0], step_ms_mean=10.0, step_ms_std=0.0,
                  samples_per_s=800.0, peak_memory_bytes=[0], warmup_ms=[], compile_s=None, graph_breaks=None,
                  timeline=[])
    return WorkerResult(**{**values, **changes})


# ---------------------------------------------------------------------------------- pipebench as a command

def pipebench(tmp_path, *argv, env=None, timeout=240):
    """`python -m pipebench ARGV`, a process of its own in `tmp_path` on the CPU: its output and exit status."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "pipebench", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})})


def one_line(result, message: str) -> None:
    """A `pipebench` process ended with status 2 and one line on stderr naming `message`."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pipebench: error: ") and message in err, err


# ------------------------------------------------------------------------------------ model and data files

# A model file's text: two linear layers (train's checkpoint tests name their parameters).
NET = '''
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x))
'''


# A model file that is also a data file: Net, and data() of 32 samples for it.
NET_AND_DATA = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(self.a(x))


def data():
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(32, 4, generator=g), torch.randint(0, 3, (32,), generator=g))
'''


# A data file for NET: data() of 16 samples.
DATA = '''
import torch


def data():
    return torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 4, (16,)))
'''

# train's options beside --model and --data: two steps of single on the CPU.
TRAIN = ["--input-shape", "4", "--batch", "8", "--steps", "2", "--strategy", "single", "--device", "cpu"]


def checkpoint(tmp_path, spoil):
    """A checkpoint of NET's Net as `train --save` leaves it after 2 steps of single, `spoil(path)` applied."""
    import torch

    (tmp_path / "net.py").write_text(NET)
    namespace: dict = {}
    exec(NET, namespace)
    path, state = tmp_path / "m.pt", tmp_path / "m.pt.train"
    state.mkdir()
    net = namespace["Net"]()
    torch.save(net.state_dict(), path)
    layout = {"strategy": "single", "processes": 1, "batch": 8, "params": [n for n, _ in net.named_parameters()]}
    torch.save({"step": 2, "layout": layout, "optimizer": {}, "rng": torch.get_rng_state()}, state / "rank0.pt")
    latest = {"step": 2, "size": path.stat().st_size, "mtime_ns": path.stat().st_mtime_ns, "layout": layout}
    (state / "latest.json").write_text(json.dumps(latest))
    spoil(state)
    return path


# ---------------------------------------------------------------------------- pipebench train on real data

# train of the zoo's tiny GPT (on byte tokens) and of the ConvNet (on the digits) on the CPU, in fp32.
GPT = ["--model", "gpt", "--flavour", "tiny", "--batch", "16", "--device", "cpu", "--precision", "fp32", "--log-every", "0"]
DIGITS = ["--model", "convnet", "--batch", "64", "--lr", "0.01", "--device", "cpu", "--precision", "fp32", "--log-every", "0"]
ROOT = Path(__file__).resolve().parent.parent


def digits(folder: Path) -> Path:
    """scikit-learn's handwritten digits as MNIST IDX files (scripts/digits_mnist.py); skipped without it."""
    pytest.importorskip("sklearn")
    spec = importlib.util.spec_from_file_location("digits_mnist", ROOT / "scripts" / "digits_mnist.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_digits(folder)


def losses(csv: Path) -> list[float]:
    """The losses of a train log, step by step."""
    return [float(line.split(",")[2]) for line in csv.read_text().splitlines()[1:]]


def train(*args, capsys=None) -> int:
    """`pipebench train ARGS` in this process: its exit status."""
    return main(["train", *map(str, args)])
