"""A model file's import runs in pipebench's own process (models/imports.py): what it changes there that
pipebench relies on is put back, a torch function it replaces is refused in one line, and an exit handler
it registers cannot set pipebench's exit status."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.ci  # whole commands in fresh interpreters: CI runs them after the default set

from test_model_file_limits import one_line, pipebench
from test_user_code import NET

PLAN = ("plan", "--model", "m.py:Net", "--input-shape", "4", "--stages", "2", "--batch", "8", "--device", "cpu",
        "--fresh")


def planned(tmp_path, prelude: str):
    (tmp_path / "m.py").write_text(prelude + NET)
    return pipebench(tmp_path, *PLAN, env={"OMP_NUM_THREADS": "1", "PIPEBENCH_CACHE": "off"})


def test_a_replaced_torch_function_is_refused_in_one_line(tmp_path):
    one_line(planned(tmp_path, "import torch\ntorch.randn = None\n"),
             "importing " + str(tmp_path / "m.py") + " replaced torch.randn, which pipebench calls")


@pytest.mark.parametrize("prelude", [
    "import torch\ntorch.set_default_device('meta')\n",
    "import sys\nsys.stdout = None\n",
    "import atexit, os\natexit.register(lambda: os._exit(7))\n",
], ids=["default-device-meta", "stdout-none", "atexit-exit-7"])
def test_what_the_import_changes_is_put_back_and_the_plan_stands(tmp_path, prelude):
    result = planned(tmp_path, prelude)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "predicted" in result.stdout
