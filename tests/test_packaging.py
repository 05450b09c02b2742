"""The installed package: a plain wheel holds every subpackage under the one import name `pipebench`,
and its command plans and runs from a folder that has a `models.py` and a `bench.py` of its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True, timeout=300)
    (found,) = out.glob("pipebench-*.whl")
    return found


def test_the_wheel_claims_only_pipebench_and_ships_every_subpackage(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"pipebench", wheel.name.split("-py3")[0] + ".dist-info"}
    for module in ("pipebench/api.py", "pipebench/bench/strategies/planned/pp.py", "pipebench/bench/cli/__init__.py",
                   "pipebench/bench/launch/worker.py", "pipebench/partition/planning/solver.py", "pipebench/models/gpt.py",
                   "pipebench/hardware/gpus.py"):
        assert module in names
    # Every package folder of the source tree is in the wheel: pyproject lists them by hand.
    for folder in ("bench", "hardware", "models", "partition"):
        for init in (ROOT / folder).rglob("__init__.py"):
            assert f"pipebench/{init.relative_to(ROOT)}" in names
    for init in (ROOT / "pipebench").rglob("__init__.py"):
        assert init.relative_to(ROOT).as_posix() in names
    # Diagnostic GPU scripts and pytest-benchmark files are not library modules.
    assert not [n for n in names if "/gpu/" in n or "/benchmarks/" in n or n.endswith("conftest.py")]
    top_level = [n for n in names if n.endswith("top_level.txt")]
    assert not top_level or zipfile.ZipFile(wheel).read(top_level[0]).decode().split() == ["pipebench"]


@pytest.mark.ci  # an install, then three fresh processes that each import torch
def test_the_installed_wheel_plans_and_runs_from_another_folder(wheel, tmp_path):
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True, timeout=300)
    elsewhere.mkdir()
    for shadow in ("models", "bench", "partition"):  # a user's own packages must not collide with ours
        (elsewhere / f"{shadow}.py").write_text(f"raise SystemExit('the wrong {shadow} module was imported')\n")
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}

    def pipebench(*args):
        return subprocess.run([sys.executable, "-P", "-m", "pipebench", *args], cwd=elsewhere, env=env,
                              capture_output=True, text=True, timeout=600)

    where = subprocess.run([sys.executable, "-P", "-c", "import pipebench; print(pipebench.__file__)"], cwd=elsewhere,
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(site)
    planned = pipebench("plan", "--model", "convnet", "--stages", "2", "--batch", "8", "--micro-batches", "2",
                        "--json", "plan.json")
    assert planned.returncode == 0, planned.stderr
    assert json.loads((elsewhere / "plan.json").read_text())["format"] == "pipebench-plan"
    ran = pipebench("run", "--models", "convnet", "--strategies", "single,pp-1f1b", "--steps", "1", "--warmup", "0",
                    "--out", "out")
    assert ran.returncode == 0, ran.stderr[-2000:]
    rows = json.loads(next((elsewhere / "out").glob("*.json")).read_text())["rows"]
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
