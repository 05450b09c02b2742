"""Where `pipebench train` writes and what its workers are handed: --csv, --save and --write-job checked by
type and together before the model file is imported, train's own files written again, a refusal by its
first checks in one line."""
from __future__ import annotations

import pytest

from helpers import NET, DATA, refused
from pipebench.bench.cli import main

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# ------------------------------------------------------------------------------------------------- outputs

def train_files(tmp_path):
    """A model file that leaves a mark when imported, and a data file: train of them, its outputs to add."""
    (tmp_path / "net.py").write_text(NET + f"\nopen({str(tmp_path / 'imported')!r}, 'w').close()\n")
    (tmp_path / "data.py").write_text(DATA)
    return ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
            f"{tmp_path / 'data.py'}:data", "--batch", "8", "--steps", "2", "--device", "cpu", "--strategy", "single"]


@pytest.mark.parametrize("outputs, message", [
    (["--csv", "{t}/data.py"], "--data and --csv name the same file"),
    (["--save", "{t}/data.py"], "--data and --save name the same file"),
    (["--save", "{t}/net.py"], "--model and --save name the same file"),
    (["--save", "{t}/x.pt", "--csv", "{t}/x.pt"], "--save and --csv name the same file"),
    (["--save", "{t}/link.pt", "--csv", "{t}/x.pt"], "--save and --csv name the same file"),
    (["--csv", "{t}/fifo"], "--csv {t}/fifo: is a FIFO; --csv is written more than once or read back: name a regular"),
    (["--save", "{t}/fifo"], "--save {t}/fifo: is a FIFO"),
    (["--save", "/dev/null"], "--save /dev/null: is a character device"),
    (["--save", "{t}/folder"], "--save {t}/folder: is a folder; name a file"),
    (["--save", "{t}/blocked.pt"], "blocked.pt.train is in the way (a file, where the training state's folder goes)"),
    (["--save", "{t}/dangling.pt"], "dangling.pt.train is in the way (a link, where the training state's folder"),
    (["--save", "{t}/linked.pt"], "linked.pt.train is in the way (a link, where the training state's folder"),
    (["--write-job", "{t}/data.py"], "--write-job {t}/data.py: a file is in the way; name a folder"),
    (["--write-job", "{t}/job", "--save", "{t}/job/job.json"], "--save and --write-job's job.json name the same file"),
    (["--write-job", "{t}/job", "--csv", "{t}/job/train.json"], "--csv and --write-job's train.json name the same"),
    (["--write-job", "{t}/folderjob"], "folderjob/job.json: is a folder; name a file"),
    (["--write-job", "{t}/mine"], "--write-job {t}/mine: {t}/mine/job.json: holds something other than a job train wrote"),
    (["--write-job", "{t}/notes"], "--write-job {t}/notes: train.json is a link; remove it or name another folder"),
    (["--save", "{t}/s.pt", "--write-job", "{t}/s.pt.train"], "is inside --save's training state folder"),
    (["--csv", "{t}/results.csv"], "--csv {t}/results.csv: holds something other than a train log (header step,"),
    (["--save", "{t}/p.json"], "--save {t}/p.json: holds something other than a checkpoint of torch.save's"),
    (["--save", "{t}/photos.zip"], "--save {t}/photos.zip: holds something other than a checkpoint of torch.save's"),
])
def test_train_outputs_are_checked_by_type_and_together_before_the_model_is_imported(capsys, tmp_path, outputs,
                                                                                      message):
    """Each is one line before the model file is imported: `train --csv DATA` and `--save DATA` (the user's
    data file), `--save X --csv X`, `--csv FIFO` (which would hang the worker), and `--save P` with P.train a
    link that leads nowhere (which would train, then fail at the checkpoint) or a link to a user's folder
    (which would get the state written into it)."""
    import os
    import zipfile

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "job.json").write_text('{"mine": 1}\n')  # the user's own job.json
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes.txt").write_text("my notes\n")
    (tmp_path / "notes" / "train.json").symlink_to(tmp_path / "notes.txt")
    (tmp_path / "folder").mkdir()
    (tmp_path / "blocked.pt.train").write_text("")
    (tmp_path / "folderjob" / "job.json").mkdir(parents=True)
    (tmp_path / "link.pt").symlink_to(tmp_path / "x.pt")
    (tmp_path / "dangling.pt.train").symlink_to(tmp_path / "nowhere")
    (tmp_path / "linked.pt.train").symlink_to(tmp_path / "folder")
    (tmp_path / "results.csv").write_text("model,strategy,status\nmlp,single,ok\n")  # a run's
    (tmp_path / "p.json").write_text('{"format": "pipebench-profile"}\n')
    with zipfile.ZipFile(tmp_path / "photos.zip", "w") as archive:  # someone's archive
        archive.writestr("holiday/data.txt", "not a checkpoint")
    argv = train_files(tmp_path)
    before = (tmp_path / "data.py").read_text()
    refused(capsys, [*argv, *(o.format(t=tmp_path) for o in outputs)], message.format(t=tmp_path))
    assert not (tmp_path / "imported").exists()
    assert (tmp_path / "data.py").read_text() == before


def test_train_writes_again_over_its_own_log_and_checkpoint_whatever_their_names(tmp_path):
    """The check of train's outputs refuses another file at --csv or --save, not train's own: a train log
    under any name (--csv takes one), a checkpoint torch.save wrote, and an empty file are written again."""
    import torch

    from pipebench.bench.train.outputs import check_train_outputs
    from pipebench.bench.train.curves import COLUMNS

    train_files(tmp_path)
    (tmp_path / "log.txt").write_text(",".join(COLUMNS) + "\n1,0,2.3,100,0.1\n")
    torch.save({"weight": torch.ones(1)}, tmp_path / "earlier.pt")
    (tmp_path / "empty.csv").write_text("")
    for csv, save in ((tmp_path / "log.txt", tmp_path / "earlier.pt"), (tmp_path / "empty.csv", None)):
        checked = check_train_outputs(None if save is None else str(save), str(csv), None,
                                data=f"{tmp_path / 'data.py'}:data", model=f"{tmp_path / 'net.py'}:Net")
        assert checked.csv == str(csv)
    from pipebench.bench.launch.job import Job

    (tmp_path / "job").mkdir()
    Job(model="mlp", strategy="ddp", batch=8, devices=1).save(tmp_path / "job" / "job.json")
    from pipebench.base.fileio.files import write_json
    from pipebench.bench.train.data import DataSpec
    from pipebench.bench.train.settings import TrainSettings

    settings = TrainSettings(DataSpec("file", str(tmp_path / "data.py"), "data"), print_every=10)
    write_json(tmp_path / "job" / "train.json", settings.to_json())
    checked = check_train_outputs(None, None, str(tmp_path / "job"), data=f"{tmp_path / 'data.py'}:data", model="mlp")
    assert checked.write_job == str(tmp_path / "job")


@pytest.mark.parametrize("option, name", [("--save", "ck.pt"), ("--csv", "log.csv")])
@pytest.mark.parametrize("spoil, message", [(["--strategy", "nope"], "nope"), (["--model", "nofile.py:Net"], "nofile.py")])
def test_a_refused_train_leaves_no_folder(capsys, tmp_path, option, name, spoil, message):
    """`train --strategy nope --save new/a/ck.pt` (or a model file that is not there) is refused and makes no
    new/: an output's folders are made when it is written."""
    refused(capsys, [*train_files(tmp_path), *spoil, option, str(tmp_path / "new" / "a" / name)], message)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("option, names", [("--save", "a file"), ("--csv", "a file"), ("--write-job", "a folder")])
def test_an_empty_output_path_is_refused(capsys, tmp_path, option, names):
    """`train --save ''` and `--write-job ''` are refused: read as the option not given, they would train and
    save nothing, or train here instead of writing the job."""
    refused(capsys, [*train_files(tmp_path), option, ""], f"{option}: an empty path; name {names}")
    assert not (tmp_path / "imported").exists()


def test_save_every_without_save_is_refused(capsys, tmp_path):
    """Checkpoints every step with nowhere to write them would train and save nothing."""
    refused(capsys, [*train_files(tmp_path), "--save-every", "1"], "--save-every 1: checkpoints are written to --save")
    assert not (tmp_path / "imported").exists()


def test_a_train_refused_by_its_first_checks_is_one_line_without_the_device_line(capsys, tmp_path):
    """`train` refused by run_training's first checks (its data) is one line: the device line ("--device cpu:
    training on the CPU, ...") comes with the first line of the training itself, after those checks."""
    argv = train_files(tmp_path)
    (tmp_path / "data.py").write_text(DATA.replace("(16, 4)", "(16, 5)"))  # samples of 5 for a model of 4
    refused(capsys, argv, "the data's samples do not fit")


# ------------------------------------------------------------------------------- a written job, read back

def written_job(tmp_path, edit) -> list[str]:
    """A job folder as --write-job writes it (job.json, train.json), train.json spoilt by `edit(settings)`: the
    command that starts its worker, as train prints it."""
    import sys

    from pipebench.base.fileio.files import write_json
    from pipebench.bench.launch.job import Job
    from pipebench.bench.train.data import DataSpec
    from pipebench.bench.train.settings import TrainSettings

    (tmp_path / "data.py").write_text(DATA)
    folder = tmp_path / "j"
    Job(model="mlp", flavour="tiny", strategy="ddp", batch=8, devices=1, device_type="cpu").save(folder / "job.json")
    settings = TrainSettings(DataSpec("file", str(tmp_path / "data.py"), "data"), steps=2).to_json()
    edit(settings)
    write_json(folder / "train.json", settings)
    return [sys.executable, "-P", "-m", "pipebench.bench.train.loop", str(folder / "job.json"), str(folder)]


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update(mine=1), "train.json: unknown field 'mine'"),
    (lambda s: s.pop("data"), "train.json: missing field 'data'"),
    (lambda s: s.update(steps="2"), "train.json.steps: expected"),
    (lambda s: s["data"].update(seq_len="8"), "train.json.data.seq_len: expected"),
    (lambda s: s["data"].pop("kind"), "train.json.data: missing field 'kind'"),
])
def test_train_json_is_read_back_checked(tmp_path, edit, message):
    """A train.json edited by hand (a key added or taken out, a value of another type) is one UserError naming
    its field, not a TypeError or a KeyError in the worker; as written, it reads back whole."""
    import json

    from pipebench.base.errors import UserError
    from pipebench.bench.train.settings import TrainSettings

    written_job(tmp_path, edit)
    path = tmp_path / "j" / "train.json"
    with pytest.raises(UserError, match=f"^{tmp_path}/j/{message}"):
        TrainSettings.read(path)
    written_job(tmp_path, lambda s: None)
    assert TrainSettings.read(path).to_json() == json.loads(path.read_text())


@pytest.mark.parametrize("edit, message", [(lambda s: s.update(mine=1), "train.json: unknown field 'mine'"),
                                           (lambda s: s["data"].update(path="/nonexistent.py"), "no such file")])
def test_a_written_jobs_worker_says_bad_input_in_one_line(tmp_path, edit, message):
    """The command train prints for a written job, run on a train.json edited wrong (or naming a data file that
    is not there), says so in one line on stderr with exit status 2, as pipebench does, and still writes
    error-rank0.json for a parent, the same line: no silent exit 1 with the error only in the file."""
    import json
    import os
    import subprocess

    from helpers import one_line
    from pipebench.bench.launch.loopback import free_port

    launcher = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    result = subprocess.run(written_job(tmp_path, edit), capture_output=True, text=True, timeout=120,
                            env={**os.environ, **launcher, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
    one_line(result, message)
    error = json.loads((tmp_path / "j" / "error-rank0.json").read_text())
    assert result.stdout == "" and f"pipebench: error: {error['message']}" == result.stderr.strip()
