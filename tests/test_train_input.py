"""What `pipebench train` reads: token files, data files and data sets of the user's that are missing, empty,
of NaN, labels out of range, the wrong shape or kind, or never answer are refused in one line before any
worker starts; train's options are checked once, when made."""
from __future__ import annotations

import re

import numpy as np
import pytest

from helpers import NET_AND_DATA as NET
from helpers import GPT, TRAIN, pipebench, train
from pipebench.bench.cli import main


# --------------------------------------------------------------------------------- token files and options

def refused(capsys, *args) -> str:
    assert train(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("pipebench: error: ") and "Traceback" not in "\n".join(err)
    return err[-1]


def test_bad_data_is_one_line_before_any_worker(tmp_path, capsys, text):
    assert "no such file" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{tmp_path}/none.bin")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert "empty" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{empty}")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"abc")
    assert "uint16" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{odd}")
    short = tmp_path / "short.bin"
    np.arange(10, dtype=np.uint16).tofile(short)
    assert "longer than the data" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{short}")
    wide = tmp_path / "wide.bin"  # a 50,000-token vocabulary's ids for a model of 256
    (np.fromfile(text, dtype=np.uint16)[:4096] * 200).astype(np.uint16).tofile(wide)
    assert "beyond the model's 256 tokens" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{wide}")
    assert "--data takes" in refused(capsys, *GPT, "--data", "images:/x")


def test_a_dataset_that_does_not_fit_and_a_save_that_cannot_be_written(tmp_path, capsys, text):
    source = tmp_path / "data.py"
    source.write_text("import torch\n\ndef wrong():\n    return torch.utils.data.TensorDataset(torch.zeros(64, 3, 5), "
                      "torch.zeros(64, dtype=torch.long))\n\ndef nothing():\n    return 3\n")
    assert "do not fit gpt" in refused(capsys, *GPT, "--strategy", "single", "--data", f"{source}:wrong")
    assert "not a torch Dataset" in refused(capsys, *GPT, "--strategy", "single", "--data", f"{source}:nothing")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "--save" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{text}",
                               "--save", f"{blocker}/model.pth")
    # Several machines: a job written for torchrun on each, of a strategy that can span them
    assert "--write-job" in refused(capsys, *GPT, "--strategy", "ddp", "--data", f"tokens:{text}", "--nodes", 2)
    assert "one process" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{text}", "--nodes", 2,
                                    "--write-job", tmp_path / "job")
    assert not (tmp_path / "job").exists()


def test_train_options_are_checked_once_when_made():
    """TrainOptions were checked inside run_training (and --lr's sign in the command line apart): now
    frozen, and its bounds (the command line's, from LIMITS), flags, data and nodes refused when made; so are
    what the command line cannot say (steps with epochs, which argparse keeps apart, a timeout of -1 s, a seed
    of text, overrides of pairs)."""
    import dataclasses

    from pipebench.bench.train.data import DataSpec
    from pipebench.bench.train.options import TrainOptions
    from pipebench.base.errors import UserError

    options = TrainOptions(model="mlp", strategy="ddp", data=DataSpec("tokens", "/t.bin", seq_len=4), batch=8, lr=0.1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.lr = 1.0
    for changes, message in ((dict(lr=-1.0), "lr takes a number from 1e-38 to 1e+38 (got '-1.0')"),
                             (dict(lr=1e300), "lr takes a number from 1e-38 to 1e+38 (got '1e+300')"),
                             (dict(loader_workers=65), "loader_workers takes an integer from 0 up to 64 (got 65)"),
                             (dict(resume="no", save="/m.pt"), "resume takes True or False (got 'no')"),
                             (dict(data="tokens:/t.bin"), "data takes a DataSpec (bench/train/data.py parse_data), "
                                                          "not str"),
                             (dict(training="fp32"), "training takes a Training (pipebench.base.training), not str"),
                             (dict(nodes=2), "give --write-job DIR"),
                             (dict(save_every=1), "--save-every 1: checkpoints are written to --save; give --save PATH"),
                             (dict(steps=2, epochs=1), "--steps 2 and --epochs 1: give one, not both"),
                             (dict(timeout=-1), "timeout takes a number from 0.001 to 1e+07 (got '-1.0')"),
                             (dict(timeout="10"), "timeout takes a number from 0.001 to 1e+07 (got str '10')"),
                             (dict(seed="1"), "seed takes an integer from 0 (got str '1')"),
                             (dict(seed=True), "seed takes an integer from 0 (got bool True)"),
                             (dict(overrides=[("depth", 2)]),
                              "overrides takes a dict such as {'loss': 'mse'}, got a list"),
                             (dict(overrides={1: 2}), "overrides takes a dict such as {'loss': 'mse'} keyed by setting "
                                                      "names, got the key 1")):
        with pytest.raises(UserError, match=re.escape(message)):
            dataclasses.replace(options, **changes)


def test_train_options_from_keywords_check_what_the_api_is_given(tmp_path):
    """The one path from `pipebench.train`'s keywords (and so from the command line's) to TrainOptions: the
    names as text, no unknown keyword, the data parsed into its DataSpec before the options are made, the
    loader's workers by the machine."""
    from pipebench.bench.cases.machine import detect_machine
    from pipebench.bench.train.data import DataSpec
    from pipebench.bench.train.options import TrainOptions
    from pipebench.base.errors import UserError

    machine = detect_machine(None, 1, cpu=True)
    options = TrainOptions.from_keywords("gpt", f"tokens:{tmp_path / 't.bin'}", machine, batch=8, flavour="tiny",
                                         strategy="single")
    assert options.data == DataSpec("tokens", str(tmp_path / "t.bin"), seq_len=options.data.seq_len)
    assert options.data.seq_len and options.loader_workers == 0
    for model, keywords, message in ((3, {}, "model takes a name (text), not int"),
                                     ("gpt", dict(bogus=1), "train takes no option bogus"),
                                     ("gpt", dict(workers=1), "train takes no option workers"),
                                     ("gpt", dict(resume=1, save=str(tmp_path / "m.pt")),
                                      "resume takes True or False (got 1)"),
                                     ("gpt", dict(overrides=3),
                                      "overrides takes a dict such as {'loss': 'mse'}, got a int"),
                                     ("gpt", dict(steps=2, epochs=1), "--steps 2 and --epochs 1: give one, not both"),
                                     ("gpt", dict(timeout=-1), "timeout takes a number from 0.001 to 1e+07")):
        with pytest.raises(UserError, match=re.escape(message)):
            TrainOptions.from_keywords(model, f"tokens:{tmp_path / 't.bin'}", machine, batch=8, **keywords)


# --------------------------------------------------------------------------------- data sets of the user's

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


def refused_after_notes(capsys, argv: list[str], message: str) -> None:
    """refused, for train: its last line, after the note of where it trains ("training on the CPU ...")."""
    from pipebench.bench.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pipebench: error: ") and message in last, err


@pytest.mark.parametrize("body, message", [
    ("import sys\ndef d():\n    sys.exit(4)\n",
     "exitdata.py:d: d() failed: it calls sys.exit(4) or exit() in d(); a data file must not end the process"),
    pytest.param("import os\ndef d():\n    os._exit(5)\n", "exitdata.py:d: it calls os._exit(5) in d()", marks=pytest.mark.ci),
    pytest.param("import sys\nsys.exit(7)\ndef d():\n    pass\n",
                 "importing the file failed: it calls sys.exit(7) or exit() when imported", marks=pytest.mark.ci),
])
def test_an_exit_in_the_data_function_is_one_line(tmp_path, body, message):
    """train --data exitdata.py:d whose d() calls sys.exit(4) ended train with exit 4, after the devices line."""
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "exitdata.py").write_text(body)
    result = pipebench(tmp_path, "train", "--model", f"{tmp_path / 'net.py'}:Net", "--data",
                       f"{tmp_path / 'exitdata.py'}:d", *TRAIN)
    assert result.returncode == 2, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]  # after the "training on the CPU" note
    assert last.startswith("pipebench: error: ") and message in last and "Traceback" not in result.stderr, \
        result.stderr


DATASETS = '''
import time

import torch
from torch.utils.data import Dataset

X, Y = torch.randn(32, 4), torch.randint(0, 3, (32,))


def dataset(length, item):
    class D(Dataset):
        def __len__(self):
            return length()

        def __getitem__(self, i):
            return item(i)
    return D()


def dicts():
    return dataset(lambda: 32, lambda i: {"x": X[i], "y": Y[i]})


def len_raises():
    def length():
        raise RuntimeError("no len")
    return dataset(length, lambda i: (X[i], Y[i]))


def neg_len():
    return dataset(lambda: -5, lambda i: (X[i], Y[i]))


def str_targets():
    return dataset(lambda: 32, lambda i: (X[i], "cat"))


def on_meta():
    return torch.utils.data.TensorDataset(X.to("meta"), Y.to("meta"))


def never_answers():
    return dataset(lambda: 32, lambda i: time.sleep(1000))


def never_returns():
    time.sleep(1000)
'''


@pytest.mark.parametrize("name, message", [
    ("dicts", "the data set's sample 0 is no (input, target) pair (TypeError: a dict of 'x', 'y'; return "
              "(input, target))"),
    ("len_raises", "the data set's length cannot be read (len() raised RuntimeError: no len)"),
    ("neg_len", "the data set's length cannot be read (len() raised ValueError: __len__() should return >= 0)"),
    ("str_targets", "the data set's sample 0 has a target of str ('cat'), not a tensor or number the loss takes"),
    ("on_meta", "the data set's sample 0 has its input on the meta device, which holds no values"),
])
def test_a_data_set_of_dicts_or_without_a_length_is_one_line(capsys, tmp_path, name, message):
    """Samples that are dicts were a KeyError: 1 traceback; a __len__ that raises or is negative, theirs;
    string targets an AttributeError (no .max()), tensors on the meta device a RuntimeError (.item())."""
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "ds.py").write_text(DATASETS)
    refused_after_notes(capsys, ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--data",
                                 f"{tmp_path / 'ds.py'}:{name}", *TRAIN], message)


@pytest.mark.parametrize("name, message", [
    ("never_answers", "ds.py:never_answers: reading its sample 0 did not finish within 1 s (an endless loop, or "
                      "something it waits for); set PIPEBENCH_IMPORT_SECONDS to wait longer"),
    ("never_returns", "ds.py:never_returns: never_returns() did not finish within 1 s"),
])
def test_a_data_set_that_never_answers_stops_at_the_import_limit(capsys, monkeypatch, tmp_path, name, message):
    """A __getitem__ (or a data function) that never returns hung train with no word: the data check ran
    outside any time limit, unlike a model file's import and first forward."""
    monkeypatch.setenv("PIPEBENCH_IMPORT_SECONDS", "1")
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "ds.py").write_text(DATASETS)
    refused_after_notes(capsys, ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--data",
                                 f"{tmp_path / 'ds.py'}:{name}", *TRAIN], message)


# ------------------------------------------------------------------------- one file for --model and --data

def test_two_inputs_may_name_one_file_but_an_output_may_not():
    """same_outputs compared the inputs with each other: --model F.py:Net --data F.py:data was refused with
    "the second would replace the first", though nothing writes either."""
    from pipebench.base.errors import UserError
    from pipebench.base.fileio.files import same_outputs

    same_outputs({"--data": __file__, "--model": __file__}, {"--csv": None})
    with pytest.raises(UserError, match="--data and --save name the same file"):
        same_outputs({"--data": __file__, "--model": __file__}, {"--save": __file__})
    with pytest.raises(UserError, match="--save and --csv name the same file"):
        same_outputs({}, {"--save": "/tmp/x.pt", "--csv": "/tmp/x.pt"})


@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
def test_train_takes_its_model_and_data_from_one_file(tmp_path):
    (tmp_path / "both.py").write_text(NET)
    result = pipebench(tmp_path, "train", "--model", f"{tmp_path / 'both.py'}:Net", "--data",
                       f"{tmp_path / 'both.py'}:data", *TRAIN)
    assert result.returncode == 0, result.stderr
    assert "done: 2/2 steps" in result.stdout + result.stderr


# --------------------------------------------------------------------------------- the Python API

@pytest.mark.usefixtures("nothing_runs")
def test_the_api_train_refuses_a_note_that_is_no_function(tmp_path):
    """train(note=3) was a TypeError ('int' object is not callable); now one UserError, as run's, before
    anything is made."""
    import pipebench
    from pipebench.base.errors import UserError

    tokens = tmp_path / "t.bin"
    np.arange(4096, dtype=np.uint16).__mod__(256).astype(np.uint16).tofile(tokens)
    with pytest.raises(UserError, match="note takes a function, got a int"):
        pipebench.train("gpt", f"tokens:{tokens}", batch=8, strategy="single", flavour="tiny", steps=1,
                        save=str(tmp_path / "new" / "gpt.pt"), note=3)
    assert list(tmp_path.iterdir()) == [tokens]


def test_the_api_trains_as_the_command_line_does_and_refuses_in_one_line(tmp_path):
    """`pipebench.train` was missing: a lab's script had to build argv for `pipebench train`. It trains to a
    checkpoint the model's own class loads, and refuses what the command line refuses, before any work."""
    import torch

    import pipebench
    from pipebench import models
    from pipebench.base.errors import UserError
    from pipebench.bench.cases.machine import detect_machine

    tokens = tmp_path / "tokens.bin"
    np.arange(4096, dtype=np.uint16).__mod__(256).astype(np.uint16).tofile(tokens)
    machine = detect_machine(None, 1, cpu=True)
    result = pipebench.train("gpt", f"tokens:{tokens}", batch=8, strategy="single", flavour="tiny", steps=2,
                             machine=machine, save=str(tmp_path / "gpt.pt"), note=None)
    assert result["steps"] == 2 and result["save"] == str(tmp_path / "gpt.pt")
    model = models.get_model("gpt", "tiny").module
    model.load_state_dict(torch.load(tmp_path / "gpt.pt"))  # the model's own names
    for call, message in ((dict(batch="8"), "batch takes"), (dict(batch=8, epochs=0), "epochs"),
                          (dict(batch=8, bogus=1), "train takes no option bogus"),
                          (dict(batch=8, save=str(tmp_path / "data.py")), None),
                          (dict(batch=8, training="fp32"), "training takes a Training")):
        if message is None:
            (tmp_path / "data.py").write_text("x = 1\n")
            call, message = dict(batch=8, save=str(tmp_path / "data.py")), "--data and --save name the same file"
            data = f"{tmp_path / 'data.py'}:data"
        else:
            data = f"tokens:{tokens}"
        with pytest.raises(UserError, match=re.escape(message)):
            pipebench.train("gpt", data, strategy="single", flavour="tiny", steps=1, machine=machine, note=None, **call)
