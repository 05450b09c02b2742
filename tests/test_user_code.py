"""The user's code that ends the process or escapes pipebench's catch: a builder that exits, a BaseException
that is no Exception, an import that hangs off the main thread, file names too long to exist, and what an
import changes in pipebench's process, put back. Each is one line and exit status 2, or the plan stands."""
from __future__ import annotations

import sys

import pytest

from helpers import NET_AND_DATA as NET
from helpers import TRAIN, one_line, pipebench, refused


# ------------------------------------------------------------------------------------ exits in the builder

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
    """--model builtins:exit is one line, not exit 0 with no output as if the plan were made."""
    result = pipebench(tmp_path, "plan", "--model", "builtins:exit", "--input-shape", "4", "--stages", "2",
                       "--batch", "8")
    one_line(result, "builtins:exit: building it failed: it calls sys.exit(None) or exit() when built")


# -------------------------------------------------------------------- BaseExceptions that are no Exception

OWN = "class E(BaseException):\n    pass\n"


@pytest.mark.parametrize("body, message", [
    (OWN + "raise E('weird')\n", "importing {path} failed: E: weird"),
    ("raise GeneratorExit('ge')\n", "importing {path} failed: GeneratorExit: ge"),
    (OWN + NET.replace("super().__init__()", "super().__init__()\n        raise E('in init')"),
     "building it failed: E: in init"),
    (OWN + NET.replace("return self.b(self.a(x))", "raise E('in forward')"), "its forward raised E: in forward"),
])
def test_a_base_exception_of_the_model_file_is_one_line(capsys, tmp_path, body, message):
    """A model file's own BaseException subclass (or GeneratorExit), at import, in __init__ or in forward, is
    one line: pipebench catches more than Exception and SystemExit, so there is no traceback and exit 1."""
    path = tmp_path / "baseexc.py"
    path.write_text(body)
    refused(capsys, ["plan", "--model", f"{path}:Net", "--input-shape", "4", "--stages", "2", "--batch", "8"],
            message.format(path=path))


def test_a_base_exception_at_import_is_a_user_error_for_run_too(capsys, tmp_path):
    path = tmp_path / "baseexc.py"
    path.write_text(OWN + "raise E('weird')\n")
    refused(capsys, ["run", "--models", f"{path}:Net", "--input-shape", "4", "--strategies", "single", "--out",
                     str(tmp_path / "out")], "failed: E: weird")


# --------------------------------------------------------------------------------- names too long to exist

def test_a_model_file_name_too_long_is_one_line(capsys, tmp_path):
    """--model /tmp/aaa...(300).py:Net is one line, not a traceback of OSError [Errno 36] (pathlib's is_file).
    """
    refused(capsys, ["plan", "--model", f"{tmp_path / ('a' * 300)}.py:Net", "--input-shape", "4", "--stages", "2"],
            "File name too long")


def test_a_write_job_folder_name_too_long_is_one_line(capsys, tmp_path):
    """train --write-job /tmp/aaa...(300) is one line, not a traceback of OSError [Errno 36]
    (creatable_folder's exists)."""
    (tmp_path / "net.py").write_text(NET)
    refused(capsys, ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--data", f"{tmp_path / 'net.py'}:data",
                     *TRAIN, "--write-job", str(tmp_path / ("a" * 300))],
            "cannot create the folder (File name too long)")


# -------------------------------------------------------------- what an import does to pipebench's process

@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
def test_a_hanging_import_off_the_main_thread_is_stopped(tmp_path):
    """pipebench.plan("hang.py:Net") from a thread of the caller's, where no timer can be set, ends at the
    limit: the watchdog ends the process with the line, exit status 2."""
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


PLAN = ("plan", "--model", "m.py:Net", "--input-shape", "4", "--stages", "2", "--batch", "8", "--device", "cpu",
        "--fresh")


def planned(tmp_path, prelude: str):
    (tmp_path / "m.py").write_text(prelude + NET)
    return pipebench(tmp_path, *PLAN, env={"OMP_NUM_THREADS": "1", "PIPEBENCH_CACHE": "off"})


@pytest.mark.ci  # whole commands in fresh interpreters: CI runs them after the default set
def test_a_replaced_torch_function_is_refused_in_one_line(tmp_path):
    one_line(planned(tmp_path, "import torch\ntorch.randn = None\n"),
             "importing " + str(tmp_path / "m.py") + " replaced torch.randn, which pipebench calls")


@pytest.mark.ci  # whole commands in fresh interpreters: CI runs them after the default set
@pytest.mark.parametrize("prelude", [
    "import torch\ntorch.set_default_device('meta')\n",
    "import sys\nsys.stdout = None\n",
    "import atexit, os\natexit.register(lambda: os._exit(7))\n",
], ids=["default-device-meta", "stdout-none", "atexit-exit-7"])
def test_what_the_import_changes_is_put_back_and_the_plan_stands(tmp_path, prelude):
    result = planned(tmp_path, prelude)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "predicted" in result.stdout
