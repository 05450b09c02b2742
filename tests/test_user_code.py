"""Bad input, the user's own code (issue 42, third battery: F1, F2, F9, F10, F12, F16): a model's builder or
a --data function that exits, a BaseException that is no Exception, names too long for the file system, one
file for --model and --data, data sets whose samples or length are wrong, and an import that hangs off the
main thread.

Each was a silent exit with the file's own code, a traceback, a false refusal or a hang; now it is one line
and exit 2 (a UserError from Python), or, for the one file read twice, the training."""
from __future__ import annotations

import sys

import pytest

from test_refused_options import refused
from test_model_file_limits import one_line, pipebench

NET = '''
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

def refused_after_notes(capsys, argv: list[str], message: str) -> None:
    """refused, for train: its last line, after the note of where it trains ("training on the CPU ...")."""
    from pipebench.bench.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("pipebench: error: ") and message in last, err


TRAIN = ["--input-shape", "4", "--batch", "8", "--steps", "2", "--strategy", "single", "--device", "cpu"]


# ----------------------------------------------------------------------- F1: exits in the builder, the data

@pytest.mark.parametrize("body, name, message", [
    ("import sys\ndef Net():\n    sys.exit(3)\n", "Net",
     "exits.py:Net: building it failed: it calls sys.exit(3) or exit() when built; a model must not end the process"),
    ("import os\ndef Net():\n    os._exit(6)\n", "Net",
     "exits.py:Net: it calls os._exit(6) when built; a model must not end the process"),
    (NET.replace("super().__init__()", "super().__init__()\n        import sys; sys.exit(5)"), "Net",
     "building it failed: it calls sys.exit(5) or exit() when built"),
])
@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_an_exit_in_the_model_builder_is_one_line(tmp_path, body, name, message):
    """sys.exit(3) in NAME (or its __init__) ended plan with exit 3 and no word; os._exit(6) with 6."""
    (tmp_path / "exits.py").write_text(body)
    result = pipebench(tmp_path, "plan", "--model", f"{tmp_path / 'exits.py'}:{name}", "--input-shape", "4",
                       "--stages", "2", "--batch", "8")
    one_line(result, message)


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_builtins_exit_as_a_model_is_one_line_not_exit_0(tmp_path):
    """--model builtins:exit exited 0 with no output, as if the plan had been made."""
    result = pipebench(tmp_path, "plan", "--model", "builtins:exit", "--input-shape", "4", "--stages", "2",
                       "--batch", "8")
    one_line(result, "builtins:exit: building it failed: it calls sys.exit(None) or exit() when built")


def test_an_exit_in_the_builder_is_a_user_error_from_python():
    """pipebench.plan("builtins:exit") let SystemExit through to the caller."""
    import pipebench
    from pipebench.base.errors import UserError

    with pytest.raises(UserError, match="it calls sys.exit"):
        pipebench.plan("builtins:exit", batch=8, stages=2)


@pytest.mark.parametrize("body, message", [
    ("import sys\ndef d():\n    sys.exit(4)\n",
     "exitdata.py:d: d() failed: it calls sys.exit(4) or exit() in d(); a data file must not end the process"),
    ("import os\ndef d():\n    os._exit(5)\n", "exitdata.py:d: it calls os._exit(5) in d()"),
    ("import sys\nsys.exit(7)\ndef d():\n    pass\n",
     "importing the file failed: it calls sys.exit(7) or exit() when imported"),
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


# ------------------------------------------------------------------- F2: BaseExceptions that are no Exception

OWN = "class E(BaseException):\n    pass\n"


@pytest.mark.parametrize("body, message", [
    (OWN + "raise E('weird')\n", "importing {path} failed: E: weird"),
    ("raise GeneratorExit('ge')\n", "importing {path} failed: GeneratorExit: ge"),
    (OWN + NET.replace("super().__init__()", "super().__init__()\n        raise E('in init')"),
     "building it failed: E: in init"),
    (OWN + NET.replace("return self.b(self.a(x))", "raise E('in forward')"), "its forward raised E: in forward"),
])
def test_a_base_exception_of_the_model_file_is_one_line(capsys, tmp_path, body, message):
    """A model file's own BaseException subclass (or GeneratorExit), at import, in __init__ or in forward, was
    a traceback and exit 1: pipebench caught Exception and SystemExit only."""
    path = tmp_path / "baseexc.py"
    path.write_text(body)
    refused(capsys, ["plan", "--model", f"{path}:Net", "--input-shape", "4", "--stages", "2", "--batch", "8"],
            message.format(path=path))


def test_a_base_exception_at_import_is_a_user_error_for_run_too(capsys, tmp_path):
    path = tmp_path / "baseexc.py"
    path.write_text(OWN + "raise E('weird')\n")
    refused(capsys, ["run", "--models", f"{path}:Net", "--input-shape", "4", "--strategies", "single", "--out",
                     str(tmp_path / "out")], "failed: E: weird")


# ----------------------------------------------------------------------------- F9: names too long to exist

def test_a_model_file_name_too_long_is_one_line(capsys, tmp_path):
    """--model /tmp/aaa...(300).py:Net was a traceback of OSError [Errno 36] (pathlib's is_file)."""
    refused(capsys, ["plan", "--model", f"{tmp_path / ('a' * 300)}.py:Net", "--input-shape", "4", "--stages", "2"],
            "File name too long")


def test_a_write_job_folder_name_too_long_is_one_line(capsys, tmp_path):
    """train --write-job /tmp/aaa...(300) was a traceback of OSError [Errno 36] (creatable_folder's exists)."""
    (tmp_path / "net.py").write_text(NET)
    refused(capsys, ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--data", f"{tmp_path / 'net.py'}:data",
                     *TRAIN, "--write-job", str(tmp_path / ("a" * 300))],
            "--write-job: the folder's name is not one the file system takes (File name too long)")


# ------------------------------------------------------------------------- F10: one file, two inputs

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


# ------------------------------------------------------------------------ F12: data sets of other shapes

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


# ---------------------------------------------------- fourth battery F5: a data set that never answers

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


# --------------------------------------------------------------------- F16: a hanging import off the main thread

@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
def test_a_hanging_import_off_the_main_thread_is_stopped(tmp_path):
    """pipebench.plan("hang.py:Net") from a thread of the caller's hung for ever: no timer can be set off the
    main thread. Now the watchdog ends the process at the limit with the line, exit status 2."""
    import os
    import subprocess

    (tmp_path / "hang.py").write_text("import time\ntime.sleep(1000)\n")
    script = ("import threading, pipebench\n"
              f"target = {str(tmp_path / 'hang.py') + ':Net'!r}\n"
              "t = threading.Thread(target=lambda: pipebench.plan(target, batch=8, stages=2, "
              "settings={'input_shape': [4]}))\n"
              "t.start(); t.join()\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=200, cwd=tmp_path,
                            env={**os.environ, "PIPEBENCH_IMPORT_SECONDS": "1", "CUDA_VISIBLE_DEVICES": ""})
    one_line(result, "hang.py:Net: importing " + str(tmp_path / "hang.py") + " did not finish within 1 s")
