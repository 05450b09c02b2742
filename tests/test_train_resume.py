"""`pipebench train --resume` reads the training state safely and refuses, before any worker starts, one it
could not continue: damaged, crafted, of another batch, optimizer or precision, or already past --steps."""
from __future__ import annotations

import json
import re

import pytest

from helpers import DATA, checkpoint
from pipebench.bench.cli import main

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# --------------------------------------------------------------------------------- damaged training states

def _write(name, text):
    return lambda state: (state / name).unlink() or (state / name).write_text(text)


@pytest.mark.parametrize("spoil, message", [
    (_write("rank0.pt", "garbage\n"), "rank0.pt is not a training state torch.save wrote; the training state is damaged"),
    (lambda s: (s / "rank0.pt").unlink() or (s / "rank0.pt").mkdir(), "rank0.pt is not a regular file"),
    (lambda s: (s / "rank0.pt").unlink() or (s / "rank0.pt").symlink_to("/dev/zero"), "rank0.pt is not a regular file"),
    (lambda s: (s / "rank0.pt").unlink(), "rank0.pt is missing; the training state is incomplete"),
    (lambda s: (s / "latest.json").write_text((s / "latest.json").read_text().replace('"step": 2', '"step": -3')),
     "field 'step' should be a whole number of at least 0, got -3"),
    (lambda s: __import__("torch").save({"another": __import__("torch").ones(3)}, s.with_suffix("")),
     "m.pt was written after its training state at step 2, by something else or a kill between the two"),
])
def test_resume_refuses_a_damaged_training_state_before_any_worker(capsys, tmp_path, spoil, message):
    """A garbage, missing or folder rank0.pt, and a step of -3, are refused before any worker starts, not a
    worker's ValueError, IsADirectoryError or UnpicklingError (exit 1), nor resumed."""
    from pipebench.bench.cli import main

    path = checkpoint(tmp_path, spoil)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", "--batch", "8", "--steps", "4", "--device", "cpu", "--strategy",
                 "single", "--save", str(path), "--resume"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after train's line of the devices
    assert code == 2 and last.startswith("pipebench: error: ") and message in last, last


def test_the_checkpoint_the_damage_test_spoils_is_read():
    """The checkpoint above, unspoiled, passes read_latest."""
    import tempfile
    from pathlib import Path

    from pipebench.bench.train import checkpoint as ckpt

    with tempfile.TemporaryDirectory() as folder:
        assert ckpt.read_latest(checkpoint(Path(folder), lambda state: None))["step"] == 2


def _rank_state(**changes):
    """Spoil rank0.pt: its dict with `changes` (None removes the field)."""
    def spoil(state):
        import torch

        saved = torch.load(state / "rank0.pt", weights_only=True)
        saved.update(changes)
        torch.save({k: v for k, v in saved.items() if v is not None}, state / "rank0.pt")
    return spoil


def _rank_file(write):
    def spoil(state):
        (state / "rank0.pt").unlink()
        write(state / "rank0.pt")
    return spoil


def _other_zip(path):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x", "y")


def _truncated(path):
    import torch

    torch.save({"step": 2}, path)
    path.write_bytes(path.read_bytes()[:200])


def _latest(**changes):
    def spoil(state):
        latest = json.loads((state / "latest.json").read_text())
        (state / "latest.json").write_text(json.dumps({**latest, **changes}))
    return spoil


def _resume(capsys, monkeypatch, tmp_path, spoil) -> str:
    """train --resume of the checkpoint spoilt by `spoil`: its exit status 2 asserted and its last line, with
    no worker started."""
    from helpers import DATA, checkpoint

    from pipebench.bench.train import parent

    monkeypatch.setattr(parent, "_launch", lambda *a, **k: pytest.fail("a worker started"))
    path = checkpoint(tmp_path, spoil)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", "--batch", "8", "--steps", "4", "--device", "cpu", "--strategy",
                 "single", "--save", str(path), "--resume"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("pipebench: error: "), last
    return last


@pytest.mark.ci  # whole commands: run by CI after the default run
def test_a_crafted_training_state_runs_no_code(capsys, monkeypatch, tmp_path):
    """A crafted rank0.pt runs no code: it is read with weights_only, so its pickle cannot run its author's
    code (here a folder made), and it is refused in one line, not "rank 0: KeyError: 'layout'", exit 1."""
    import os

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return os.mkdir, (str(marker),)

    def spoil(state):
        import torch

        torch.save({"x": Payload()}, state / "rank0.pt")

    last = _resume(capsys, monkeypatch, tmp_path, spoil)
    assert "rank0.pt: cannot read the training state: UnpicklingError" in last, last
    assert not marker.exists()


@pytest.mark.parametrize("spoil, message", [
    (_rank_file(_other_zip), "rank0.pt: cannot read the training state: RuntimeError"),
    (_rank_file(_truncated), "rank0.pt: cannot read the training state: RuntimeError"),
    (_rank_file(lambda p: __import__("torch").save([1, 2, 3], p)), "rank0.pt: the training state is a list, not a dict"),
    (_rank_state(layout=None), "rank0.pt: field 'layout' should be a dict, got None"),
    (_rank_state(layout="x"), "rank0.pt: field 'layout' should be a dict, got 'x'"),
    (_rank_state(optimizer=[1]), "rank0.pt: field 'optimizer' should be a dict, got [1]"),
    (_rank_state(step="two"), "rank0.pt: field 'step' should be 2, latest.json's step, got 'two'"),
    (_rank_state(step=10 ** 9), "rank0.pt: field 'step' should be 2, latest.json's step, got 1000000000"),
    (_rank_state(step=True), "rank0.pt: field 'step' should be 2, latest.json's step, got True"),
    (_rank_state(rng=__import__("torch").zeros(3, dtype=__import__("torch").uint8)),
     "rank0.pt: field 'rng' should be torch's random state"),
    (_rank_state(rng="x"), "rank0.pt: field 'rng' should be torch's random state"),
    (_rank_state(cuda_rng="x"), "rank0.pt: field 'cuda_rng' should be a list of CUDA random states"),
    (_latest(layout="x"), "latest.json: field 'layout' should be an object, got 'x'; not a pipebench checkpoint"),
])
@pytest.mark.ci  # whole commands: run by CI after the default run
def test_a_training_state_the_worker_could_not_resume_is_refused_first(capsys, monkeypatch, tmp_path, spoil,
                                                                       message):
    """A zip of another kind, a truncated one, a list, no layout, a bad RNG state, a step of 1e9 and a
    latest.json layout of "x" are each refused before the model is built: no worker's RuntimeError, KeyError
    or TypeError (exit 1), no "done: 1000000000/4 steps" with exit 0, no AttributeError traceback."""
    last = _resume(capsys, monkeypatch, tmp_path, spoil)
    assert message in last, last


# -------------------------------------------------------------------------------- states of other settings

def _with_layout(**fields):
    """The checkpoint with latest.json's layout holding `fields` (a setting and its value)."""
    def spoil(state):
        latest = json.loads((state / "latest.json").read_text())
        latest["layout"].update(fields)
        (state / "latest.json").write_text(json.dumps(latest))
    return spoil


def _at_step(step):
    """The checkpoint at `step`: latest.json's and the process's state's alike."""
    def spoil(state):
        import torch

        latest = json.loads((state / "latest.json").read_text())
        latest["step"] = step
        (state / "latest.json").write_text(json.dumps(latest))
        torch.save({**torch.load(state / "rank0.pt", weights_only=True), "step": step}, state / "rank0.pt")
    return spoil


@pytest.mark.parametrize("spoil, extra, message", [
    (_at_step(800), ["--batch", "8"],  # it said "done: 800/4 steps in 0.0 s", exit 0
     "is at step 800, and --steps 4 ends there or before: nothing is left to train"),
    (lambda state: None, ["--batch", "4"],
     "the training state is of batch 8, this run's is 4; resume with --batch 8"),
    (_with_layout(optimizer="sgd"), ["--batch", "8", "--optimizer", "adamw"],
     "the training state is of optimizer sgd, this run's is adamw; resume with --optimizer sgd"),
])
@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
def test_a_resume_that_cannot_continue_is_refused_before_any_worker(capsys, monkeypatch, tmp_path, spoil, extra,
                                                                   message):
    """train --resume with another --batch or another --optimizer, or past its length, is refused before any
    worker starts: not a worker's "rank 1: UserError" or "KeyError: 'betas'" (exit 1), nor "done: 800/4
    steps"."""
    from helpers import DATA, checkpoint

    from pipebench.bench.train import parent

    monkeypatch.setattr(parent, "_launch", lambda *a, **k: pytest.fail("a worker started"))
    path = checkpoint(tmp_path, spoil)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", *extra, "--steps", "4", "--device", "cpu", "--strategy",
                 "single", "--save", str(path), "--resume"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after train's line of the devices
    assert code == 2 and last.startswith("pipebench: error: ") and message in last, last


@pytest.mark.parametrize("spoil, extra, message", [
    (lambda state: None, ["--strategy", "auto", "--batch", "4"],
     "the training state is of batch 8, this run's is 4; resume with --batch 8"),
    (_with_layout(optimizer="sgd"), ["--strategy", "auto", "--batch", "8", "--optimizer", "adamw"],
     "the training state is of optimizer sgd, this run's is adamw; resume with --optimizer sgd"),
    (lambda state: None, ["--strategy", "pp-1f1b", "--batch", "8"],
     "the training state is of strategy single, this run's is pp-1f1b; resume with --strategy single"),
    (_with_layout(precision="tf32"), ["--strategy", "auto", "--batch", "8", "--precision", "fp32"],
     "the training state is of precision tf32, this run's is fp32; resume with --precision tf32"),
])
def test_a_resume_of_other_settings_is_refused_before_profiling(capsys, monkeypatch, tmp_path, spoil, extra,
                                                                message):
    """The batch, the optimizer, the precision and a named strategy are known without the profile that auto
    and a pipeline plan from: a state of others is refused first, the profiler never called."""
    from pipebench.bench.cases import prepare

    monkeypatch.setattr(prepare, "profile_case_model", lambda *a, **k: pytest.fail("profiled first"))
    path = checkpoint(tmp_path, spoil)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", *extra, "--steps", "4", "--device", "cpu", "--save", str(path),
                 "--resume"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("pipebench: error: ") and message in last, last


def test_a_checkpoint_layout_names_its_optimizer_and_precision():
    """The layout a worker saves and checks holds the optimizer and the precision, so that the parent can
    check them; a layout without them (an older pipebench's checkpoint) is not checked for them."""
    from pipebench.base.errors import UserError
    from pipebench.bench.train import checkpoint as ckpt

    ckpt.check_resumed_settings({"strategy": "single", "batch": 8}, {"strategy": "single", "batch": 8,
                                                                     "optimizer": "adamw", "precision": "fp32"}, "m.pt")
    saved = {"strategy": "single", "processes": 1, "batch": 8, "optimizer": "sgd", "precision": "tf32", "params": []}
    for now, message in (
            ({**saved, "optimizer": "adamw"},
             "m.pt: the training state is of optimizer sgd, this run's is adamw; resume with --optimizer sgd"),
            ({**saved, "precision": "bf16"},
             "m.pt: the training state is of precision tf32, this run's is bf16; resume with --precision tf32")):
        with pytest.raises(UserError, match=re.escape(message)):
            ckpt.check_layout(saved, now, "m.pt")


# ----------------------------------------------------------------------------------- states that read back

def test_the_training_state_train_writes_reads_back_safely(tmp_path):
    """The state a worker saves (an AdamW optimizer's, the RNG) loads with weights_only and passes the
    check the parent and the worker share."""
    import torch

    from pipebench.bench.train import checkpoint as ckpt

    net = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(net.parameters())
    net(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    path = tmp_path / "rank0.pt"
    torch.save({"step": 7, "layout": {"strategy": "single"}, "optimizer": optimizer.state_dict(),
                "rng": torch.get_rng_state(), "cuda_rng": None}, path)
    state = ckpt.load_rank_state(path, step=7)
    torch.optim.AdamW(net.parameters()).load_state_dict(state["optimizer"])


SAVE_DTENSOR_STATE = """
import os, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
shard = distribute_tensor(torch.randn(4, 2), init_device_mesh("cpu", (1,)))
torch.save({"step": 3, "layout": {"strategy": "fsdp"}, "optimizer": {"state": {0: {"exp_avg": shard}}},
            "rng": torch.get_rng_state(), "cuda_rng": None}, sys.argv[1])
dist.destroy_process_group()
"""


@pytest.mark.ci  # two fresh interpreters: run by CI after the default run
def test_an_fsdp_state_of_dtensors_reads_back_in_a_fresh_process(tmp_path):
    """FSDP's optimizer state holds DTensors, which weights_only reads only once torch.distributed.tensor is
    imported: the parent's check imports it, and reads an FSDP --resume in a fresh process (not "must be
    imported to load DTensors")."""
    import subprocess
    import sys

    from pipebench.bench.launch.loopback import free_port

    path = tmp_path / "rank0.pt"
    subprocess.run([sys.executable, "-c", SAVE_DTENSOR_STATE, str(path), str(free_port())], check=True, timeout=120)
    check = ("import sys; from pathlib import Path; from pipebench.bench.train import checkpoint as ckpt; "
             "state = ckpt.load_rank_state(Path(sys.argv[1]), step=3, mapped=True); "
             "print(type(state['optimizer']['state'][0]['exp_avg']).__name__)")
    done = subprocess.run([sys.executable, "-c", check, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "DTensor", done.stderr[-500:]
