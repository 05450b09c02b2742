"""Bad input, third round's records (issue 42): advise under --checkpoint always, Plan files, results
rows and --resume folders that say what no measurement or run could, and counts beyond any machine.

Each case was accepted, a traceback, a hang or a late failure before; now it is one line and exit 2 (or
a record error), or the right answer."""
from __future__ import annotations

import json

import pytest

from pipebench.bench.cli import main
from test_refused_options import nothing_runs, profile_file, refused  # noqa: F401 - nothing_runs: no profiling, no runs


def two_sizes(entry):
    """The profile at the whole batch and at the replicas' share (advise prices both)."""
    entry["micro_batch"] = 8


def advise_profile(tmp_path):
    """A profile of batch 8 at micro-batches of 8 and 4: every strategy on two devices has a figure."""
    whole = json.loads(profile_file(tmp_path / "a.json", two_sizes).read_text())["profiles"][0]
    half = json.loads(profile_file(tmp_path / "b.json").read_text())["profiles"][0]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "pipebench-profile", "version": 1, "profiles": [whole, half]}))
    return path


# ------------------------------------------------------------------------------- F17 advise --checkpoint always

CANNOT = ("dataparallel", "device-map", "pp-zb", "pp-zbv")


def test_advise_never_fits_a_strategy_that_cannot_recompute(capsys, tmp_path):
    """advise --checkpoint always called dataparallel, device-map, pp-zb and pp-zbv "fits", and its check
    command named them, which `run` refuses."""
    import pipebench

    profiles = pipebench.load_profiles(str(advise_profile(tmp_path)))
    advice = pipebench.advise(profiles=profiles, stages=2, checkpoint="always")
    by_name = {p.strategy: p for p in advice.predictions}
    for name in CANNOT:
        assert not by_name[name].fits and f"{name} cannot recompute activations" in by_name[name].reason
    assert advice.recommended not in CANNOT
    only = pipebench.advise(profiles=profiles, stages=2, strategies=["pp-zbv"], checkpoint="always")
    assert only.recommended is None
    assert main(["advise", "--profile", str(advise_profile(tmp_path)), "--stages", "2", "--device", "cpu",
                 "--checkpoint", "always"]) == 0
    out = capsys.readouterr().out
    check = out.split("check it with: ")[1].split()
    strategies = check[check.index("--strategies") + 1].split(",")
    assert not set(strategies) & set(CANNOT), out


# ------------------------------------------------------------------------------- F18 Plan files

@pytest.fixture(scope="module")
def plan_dict(tmp_path_factory):
    """A good plan of the profile the other tests spoil, as its file holds it."""
    import pipebench

    folder = tmp_path_factory.mktemp("plan")
    plan = pipebench.plan(profiles=pipebench.load_profiles(str(profile_file(folder / "p.json"))), stages=2)
    plan.save(folder / "plan.json")
    return json.loads((folder / "plan.json").read_text())


def stage_edit(**values):
    def edit(data):
        data["stages"][0].update(values)
    return edit


@pytest.mark.parametrize("edit, message", [
    (dict(predicted_step_ms=-5.0), "plan: predicted_step_ms must be from 0 to 1e+12, got -5.0"),
    (dict(predicted_samples_per_s=-1.0), "plan: predicted_samples_per_s must be from 0"),
    (dict(link_gbps=-1.0), "plan: link_gbps must be from 0"),
    (dict(bubble_fraction=5.0), "plan: bubble_fraction must be from 0 to 1, got 5.0"),
    (dict(calibration=0.0), "plan: calibration must be above 0, got 0.0"),
    (dict(step_spread=-1.0), "plan: step_spread must be from 0"),
    (dict(predicted_step_ms=1e300), "plan: predicted_step_ms must be from 0 to 1e+12, got 1e+300"),
    (stage_edit(params=-1), "plan: stages[0]: params must be >= 0, got -1"),
    (stage_edit(forward_ms=-1.0), "plan: stages[0]: forward_ms must be from 0"),
    (stage_edit(layers=[]), "plan: stages[0]: layers [0, 2) but 0 layer names"),
])
def test_a_plan_file_a_profile_would_refuse_is_refused(tmp_path, plan_dict, edit, message):
    """Plan.load took a step of -5 ms, a bubble of 5.0, a calibration of 0 and a stage of no layers, and
    split_spec() and export() worked on them."""
    from pipebench.partition.planning.plan import Plan, PlanError

    data = json.loads(json.dumps(plan_dict))
    edit(data) if callable(edit) else data.update(edit)
    (tmp_path / "e.json").write_text(json.dumps(data))
    with pytest.raises(PlanError) as raised:
        Plan.load(tmp_path / "e.json")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_good_plan_loads(tmp_path, plan_dict):
    from pipebench.partition.planning.plan import Plan

    (tmp_path / "plan.json").write_text(json.dumps(plan_dict))
    assert Plan.load(tmp_path / "plan.json").to_dict() == plan_dict


# ------------------------------------------------------------------------------- F19 ok rows of no speed

@pytest.mark.parametrize("field", ["samples_per_s", "step_ms"])
def test_an_ok_row_of_zero_is_refused_when_read(capsys, tmp_path, field):
    """An ok row of 0 samples/s was read, and the report said "infx one CPU process" and wrote inf into
    summary.csv; now reading it (and so `report`) refuses it in one line."""
    from test_results_file import _row_dict, _write_json

    from pipebench.bench.store.results import ResultsError, load

    path = tmp_path / "r.json"
    _write_json(path, [_row_dict(strategy="single", gpus="0", world_size=1, micro_batches=1, **{field: 0.0}),
                       _row_dict()])
    with pytest.raises(ResultsError) as raised:
        load(path)
    assert f"rows[0]: field '{field}'" in str(raised.value) or f"Row.{field}" in str(raised.value)
    assert "an ok row measures more than 0" in str(raised.value)
    refused(capsys, ["report", str(path), "--out", str(tmp_path / "rep")], "an ok row measures more than 0")
    assert not (tmp_path / "rep" / "summary.csv").exists()


# ------------------------------------------------------------------------------- F15 --resume special CSV

def resume_folder(tmp_path):
    from test_results_file import _row_dict, _write_json

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    _write_json(json_path, [_row_dict()])
    return csv_path, json_path


def test_a_resumed_csv_that_is_a_fifo_is_refused_unopened(tmp_path):
    """run --resume waited forever on a results CSV that is a FIFO (the JSON twin as a FIFO was refused)."""
    import os
    import threading

    from pipebench.bench.store.results import ResultsError, start_run

    csv_path, json_path = resume_folder(tmp_path)
    os.mkfifo(csv_path)
    # A writer that lets an open for reading (the old code's) end at once, so that it fails, not hangs.
    writer = threading.Thread(target=lambda: os.close(os.open(csv_path, os.O_WRONLY)), daemon=True)
    writer.start()
    try:
        with pytest.raises(ResultsError) as raised:
            start_run(csv_path, json_path, resume=True)
        assert f"{csv_path}: is a FIFO, not a results file; give a regular file" == str(raised.value)
    finally:
        os.close(os.open(csv_path, os.O_RDONLY | os.O_NONBLOCK))  # frees the writer if nothing read it
        writer.join()


def test_a_resumed_csv_that_links_to_dev_null_is_refused_not_replaced(tmp_path):
    """A results CSV that is a link to /dev/null was moved aside and replaced by a regular file."""
    import os

    from pipebench.bench.store.results import ResultsError, start_run

    csv_path, json_path = resume_folder(tmp_path)
    os.symlink("/dev/null", csv_path)
    with pytest.raises(ResultsError) as raised:
        start_run(csv_path, json_path, resume=True)
    assert "is a character device, not a results file; give a regular file" in str(raised.value)
    assert os.readlink(csv_path) == "/dev/null"


# ------------------------------------------------------------------------------- F11 train --resume settings

def _with_optimizer(name):
    def spoil(state):
        latest = json.loads((state / "latest.json").read_text())
        latest["layout"]["optimizer"] = name
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
    (_with_optimizer("sgd"), ["--batch", "8", "--optimizer", "adamw"],
     "the training state is of optimizer sgd, this run's is adamw; resume with --optimizer sgd"),
])
@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
def test_a_resume_that_cannot_continue_is_refused_before_any_worker(capsys, monkeypatch, tmp_path, spoil, extra,
                                                                   message):
    """train --resume with another --batch was a worker's "rank 1: UserError", with another --optimizer its
    "KeyError: 'betas'", exit 1, after the workers had started; past its length, "done: 800/4 steps"."""
    from test_model_file_limits import DATA, checkpoint

    from pipebench.bench import train

    monkeypatch.setattr(train, "_launch", lambda *a, **k: pytest.fail("a worker started"))
    path = checkpoint(tmp_path, spoil)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", *extra, "--steps", "4", "--device", "cpu", "--strategy",
                 "single", "--save", str(path), "--resume"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after train's line of the devices
    assert code == 2 and last.startswith("pipebench: error: ") and message in last, last


def test_a_checkpoint_layout_names_its_optimizer():
    """The layout a worker saves and checks holds the optimizer, so that the parent can check it."""
    from pipebench.bench.train import checkpoint as ckpt

    ckpt.check_resumed_settings({"strategy": "single", "batch": 8}, {"strategy": "single", "batch": 8,
                                                                     "optimizer": "adamw"}, "m.pt")  # an old one
    with pytest.raises(Exception, match="resume with --optimizer sgd"):
        ckpt.check_layout({"strategy": "single", "processes": 1, "batch": 8, "optimizer": "sgd", "params": []},
                          {"strategy": "single", "processes": 1, "batch": 8, "optimizer": "adamw", "params": []}, "m.pt")


# ------------------------------------------------------------------------------- F13 unbounded counts

@pytest.mark.parametrize("extra, message", [
    (["--loader-workers", "5000"], "--loader-workers takes an integer from 0 up to 64 (got '5000')"),
    (["--lr", "1e300"], "--lr takes a number from 0 up to 1e+38 (got 1e+300)"),
])
def test_train_bounds_loader_workers_and_lr(capsys, monkeypatch, tmp_path, extra, message):
    """--loader-workers 5000 forked hundreds of processes and hung; --lr 1e300 overflowed in a worker."""
    from test_model_file_limits import DATA, NET

    from pipebench.bench import train

    monkeypatch.setattr(train, "_launch", lambda *a, **k: pytest.fail("a worker started"))
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", "--batch", "8", "--steps", "2", "--device", "cpu", "--strategy",
                 "single", *extra])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("pipebench: error: ") and message in last, last


# ------------------------------------------------------------------------------- note: --json -

@pytest.mark.parametrize("command", ["plan", "advise"])
def test_json_dash_is_refused_not_a_file_named_dash(capsys, monkeypatch, tmp_path, command):
    """`--json -` wrote a file named "-" in the current folder."""
    monkeypatch.chdir(tmp_path)
    refused(capsys, [command, "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2", "--json", "-"],
            "--json -: --json writes a file, and stdout carries the answer; name a file")
    assert not (tmp_path / "-").exists()


# ------------------------------------------------------------------------------- fourth pass: F1, F3, F9 --resume states

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
    from test_model_file_limits import DATA, checkpoint

    from pipebench.bench import train

    monkeypatch.setattr(train, "_launch", lambda *a, **k: pytest.fail("a worker started"))
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
    """F1: rank0.pt was read with torch.load(weights_only=False) in the worker: its pickle ran its author's
    code (here a folder made), then "rank 0: KeyError: 'layout'", exit 1."""
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
    """F3, F9: a zip of another kind, a truncated one, a list, no layout or a bad RNG state were a worker's
    RuntimeError, KeyError or TypeError (exit 1) after the model was built; a step of 1e9 said "done:
    1000000000/4 steps", exit 0; a latest.json layout of "x" was a traceback, AttributeError."""
    last = _resume(capsys, monkeypatch, tmp_path, spoil)
    assert message in last, last


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
    imported: the parent's check refused every FSDP --resume ("must be imported to load DTensors")."""
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


# ------------------------------------------------------------------------------- fourth pass: F12 the working folder

CHDIR_DATA = '''
import os
import torch


def data():
    os.chdir("/")
    return torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 4, (16,)))
'''


def test_a_data_function_that_changes_folder_leaves_the_workers_paths_whole(capsys, monkeypatch, tmp_path):
    """F12: --model m.py:Net, relative, reached the workers as it was given; a --data function that called
    os.chdir("/") had them look for /m.py ("rank 0: UserError: ... no such file"), exit 1."""
    from test_model_file_limits import NET

    from pipebench.bench import train

    handed = {}

    def launch(job, settings, *args):
        handed.update(model=job.model, save=settings["save"], csv=settings["csv"])
        return {"steps": 2, "total": 2, "seconds": 0.0, "stopped": False, "diverged": ""}

    monkeypatch.setattr(train, "_launch", launch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(CHDIR_DATA)
    assert main(["train", "--model", "net.py:Net", "--input-shape", "4", "--data", "data.py:data", "--batch", "8",
                 "--steps", "2", "--device", "cpu", "--strategy", "single", "--save", "m.pt", "--csv", "log.csv"]) == 0
    assert handed == {"model": f"{tmp_path / 'net.py'}:Net", "save": str(tmp_path / "m.pt"),
                      "csv": str(tmp_path / "log.csv")}
