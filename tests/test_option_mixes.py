"""Options and values refused in one line before any work: a compile mode the device cannot run (train as
run), --device beside --gpus (plan and advise as run), a CSV the csv module cannot read (report), and the
API's device and strategies of the wrong kind."""
from __future__ import annotations

from pathlib import Path

import pytest

import pipebench
from pipebench.base.errors import UserError
from test_refused_options import profile_file, refused
from test_user_code import NET


def test_train_refuses_cudagraphs_on_the_cpu_before_the_model_is_built(tmp_path, capsys):
    (tmp_path / "m.py").write_text(NET + "\nraise SystemExit('built')\n")  # never imported: refused before
    refused(capsys, ["train", "--model", f"{tmp_path / 'm.py'}:Net", "--input-shape", "4", "--data",
                     f"{tmp_path / 'm.py'}:data", "--batch", "8", "--steps", "2", "--strategy", "single",
                     "--device", "cpu", "--compile", "cudagraphs"], "--compile cudagraphs records CUDA graphs")


@pytest.mark.parametrize("command", ["plan", "advise"])
def test_device_beside_gpus_is_refused(tmp_path, capsys, command):
    refused(capsys, [command, "--profile", str(profile_file(tmp_path / "p.json")), "--gpus", "0,1", "--device", "cpu"],
            "--device cpu with --gpus: the GPUs named are the devices")


def test_a_cell_over_the_csv_field_limit_is_one_line(tmp_path, capsys):
    log = tmp_path / "log.csv"
    log.write_text("step,epoch,loss,samples_per_s,time_s\n1,1," + "9" * 200_000 + ",100,0.1\n")
    refused(capsys, ["report", str(log), "--out", str(tmp_path / "r")], f"{log}: line 2: field larger than field limit")


def test_the_api_refuses_a_device_that_is_no_name():
    with pytest.raises(UserError, match=r"device takes a device name such as 'cpu' or a torch.device \(got PosixPath\)"):
        pipebench.plan("mlp", flavour="tiny", stages=2, batch=8, device=Path("cpu"))


def test_the_api_refuses_no_strategies(tmp_path):
    profiles = pipebench.load_profiles(profile_file(tmp_path / "p.json"))
    with pytest.raises(UserError, match="strategies takes a non-empty list of names"):
        pipebench.advise(profiles=profiles, stages=2, strategies=[])
