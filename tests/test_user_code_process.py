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
