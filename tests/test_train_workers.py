"""What `pipebench train`'s workers are handed: paths made whole before a data function can change folder, and
none of the launcher variables of a job that pipebench itself runs inside. These tests profile and train,
so they take no `nothing_runs`."""
from __future__ import annotations

import pytest

from helpers import DATA, NET, TRAIN
from pipebench.bench.cli import main


# ----------------------------------------------------------------------------- what the workers are handed

CHDIR_DATA = '''
import os
import torch


def data():
    os.chdir("/")
    return torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 4, (16,)))
'''


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_a_data_function_that_changes_folder_leaves_the_workers_paths_whole(capsys, monkeypatch, tmp_path):
    """A relative --model net.py:Net, --save and --csv reach the workers as absolute paths, so a --data
    function that calls os.chdir("/") does not send them looking for /net.py."""
    from pipebench.bench.train import parent

    handed = {}

    def launch(job, settings, *args):
        handed.update(model=job.model, save=settings.save, csv=settings.csv)
        return {"steps": 2, "total": 2, "seconds": 0.0, "stopped": False, "diverged": ""}

    monkeypatch.setattr(parent, "_launch", launch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(CHDIR_DATA)
    assert main(["train", "--model", "net.py:Net", "--input-shape", "4", "--data", "data.py:data", "--batch", "8",
                 "--steps", "2", "--device", "cpu", "--strategy", "single", "--save", "m.pt", "--csv", "log.csv"]) == 0
    assert handed == {"model": f"{tmp_path / 'net.py'}:Net", "save": str(tmp_path / "m.pt"),
                      "csv": str(tmp_path / "log.csv")}


LAUNCHER = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
            "MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "theirs", "PET_NNODES": "3"}


def test_a_callers_launcher_variables_stay_out_of_the_workers(monkeypatch):
    """RANK, WORLD_SIZE, LOCAL_RANK and the rest of torchrun's variables, inherited from a caller inside
    another job, stay out of the workers' environment: they would join the caller's group or take its rank."""
    from pipebench.bench.launch.spawn import child_env

    for name, value in LAUNCHER.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PETS", "kept")
    env = child_env(None)
    assert not set(LAUNCHER) & set(env) and env["PETS"] == "kept"


@pytest.mark.ci  # a whole train: run by CI after the default run
def test_train_inside_another_jobs_variables_trains(capsys, monkeypatch, tmp_path):
    """`RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 pipebench train ...` trains on its own workers, which take none of
    the caller's ranks."""
    for name, value in LAUNCHER.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(DATA)
    argv = ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--data", f"{tmp_path / 'data.py'}:data", *TRAIN]
    assert main(argv) == 0, capsys.readouterr().err[-500:]
