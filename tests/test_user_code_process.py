"""The caller's own script and pipebench's children: a script that calls pipebench.run outside `if __name__
== "__main__":` runs once (spawn's children do not run it again), and its row is measured."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ci  # a whole script in a fresh interpreter: CI runs it after the default set

SCRIPT = '''
import pipebench
open("marks.txt", "a").write("x")
rows, csv_path, json_path = pipebench.run(["mlp"], strategies=["single"], out="out", steps=1, warmup=0, rounds=1,
                                          note=None)
print("ROWS", [row.status for row in rows])
'''


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    result = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
                                 "PIPEBENCH_CACHE": "off"})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "marks.txt").read_text() == "x"
    assert "ROWS ['ok']" in result.stdout and "Traceback" not in result.stderr, result.stderr


def pipebench(tmp_path, *argv, timeout=240):
    return subprocess.run([sys.executable, "-m", "pipebench", *map(str, argv)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "",
                                                           "PIPEBENCH_CACHE": "off"})


NET = '''
from torch import nn


class Net(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
'''

DATA = '''
import torch


def data():
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g))


def interrupts():
    raise KeyboardInterrupt
'''

TRAIN = ("train", "--input-shape", "4", "--num-classes", "2", "--batch", "8", "--steps", "2", "--strategy", "single")


def test_a_thread_started_at_import_does_not_keep_train_running(tmp_path):
    """train trained, and then never ended: the child that profiled the model waited, as
    Python does at exit, for the non-daemon thread its import started."""
    (tmp_path / "thread.py").write_text(NET + "import threading, time\n"
                                        "threading.Thread(target=time.sleep, args=(10 ** 6,)).start()\n")
    (tmp_path / "data.py").write_text(DATA)
    result = pipebench(tmp_path, *TRAIN, "--model", "thread.py:Net", "--data", "data.py:data", timeout=200)
    assert result.returncode == 0, result.stderr
    assert "done: 2/2 steps" in result.stdout + result.stderr


def one_line(result, message: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("pipebench: error: ") and message in last and "Traceback" not in result.stderr, \
        result.stderr


OWN = "KeyboardInterrupt of its own (no Ctrl-C or SIGTERM arrived)"


@pytest.mark.parametrize("argv, message", [
    (("plan", "--model", "kbint.py:Net", "--input-shape", "4", "--stages", "2", "--batch", "8"),
     f"importing {{tmp}}/kbint.py failed: {OWN}"),
    (("run", "--models", "kbint.py:Net", "--input-shape", "4", "--batch", "8", "--strategies", "single", "--out", "r"),
     f"importing {{tmp}}/kbint.py failed: {OWN}"),
    ((*TRAIN, "--model", "net.py:Net", "--data", "data.py:interrupts"), f"interrupts() failed: {OWN}"),
])
def test_a_keyboard_interrupt_the_users_code_raises_is_its_failure(tmp_path, argv, message):
    """A KeyboardInterrupt raised by a model file or a --data function, with no signal sent, is the user's
    code failing, like SystemExit, not Ctrl-C ("interrupted", exit 130, the run ended)."""
    (tmp_path / "kbint.py").write_text(NET + "raise KeyboardInterrupt\n")
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(DATA)
    one_line(pipebench(tmp_path, *argv, timeout=200), message.format(tmp=tmp_path.resolve()))
