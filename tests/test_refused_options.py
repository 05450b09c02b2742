"""Bad input to plan, run and devices: one line on stderr and exit status 2, before any profiling or running;
and what a run on the CPU uses when the user gives only some of the options.

Every call runs in this process, with measuring and the suite replaced by a failure, so that a check that
comes too late fails the test at once instead of profiling or running a case. (pipebench.profile itself
runs: it looks in the profile cache before anything is checked that needs the model, and builds the model
only to measure it.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipebench.bench.cases import suite_run
from pipebench.bench.cli import main

TINY = ["--flavour", "tiny", "--batch", "8", "--repeats", "1"]


@pytest.fixture(autouse=True)
def nothing_runs(monkeypatch):
    """No GPU (the CPU path), and neither measuring nor the suite may start: bad input stops before both."""
    import torch

    from pipebench.partition.profiling import measure

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)

    def too_far(*args, **kwargs):
        raise AssertionError("got as far as profiling or running")

    monkeypatch.setattr(measure, "profile_sizes", too_far)
    monkeypatch.setattr(suite_run, "run_suite", too_far)


def refused(capsys, argv: list[str], message: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.strip().splitlines() == [err.strip()], err  # one line
    assert err.startswith("pipebench: error: ") and message in err, err


def profile_file(path: Path, edit=None, layers: int = 4) -> Path:
    """A small valid profile file, as `plan --save-profile` writes it; `edit(entry)` spoils it."""
    layer = {"name": "", "params": 10, "param_bytes": 40, "forward_ms": 1.0, "backward_ms": 2.0, "output_bytes": 64,
             "output_shape": [4, 4], "output_dtype": "float32", "saved_bytes": 64}
    entry = {"model": "mlp", "flavour": "tiny", "device": "cpu", "device_name": "cpu", "torch_version": "2",
             "batch": 8, "micro_batch": 4, "repeats": 1, "warmup": 1, "input_shape": [4, 4],
             "input_dtype": "float32", "layers": [{**layer, "name": f"layer_{i}"} for i in range(layers)]}
    if edit:
        edit(entry)
    path.write_text(json.dumps({"format": "pipebench-profile", "version": 1, "profiles": [entry]}))
    return path


def every_layer(key, value):
    def edit(entry):
        for layer in entry["layers"]:
            layer[key] = value
    return edit


def test_a_good_profile_plans(capsys, tmp_path):
    """The profile the tests below spoil is a good one."""
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--speeds", "1,0.5", "--link-gbps", "10"]) == 0, capsys.readouterr().err


# ------------------------------------------------------------------------------- plan: options and settings

@pytest.mark.parametrize("extra, message", [
    # values that are not numbers or devices
    (["--set", "depth=abc"], "mlp depth must be a positive integer (got 'abc')"),
    (["--set", "depth=1.5"], "mlp depth must be a positive integer (got 1.5)"),
    (["--device", "bogus"], "--device takes cpu, cuda or cuda:N (got 'bogus')"),
    (["--device", "cuda:x"], "--device takes cpu, cuda or cuda:N"),
    # numbers that mean nothing
    (["--set", "depth=-1"], "mlp depth must be a positive integer (got -1)"),
    (["--set", "hidden=0"], "mlp hidden must be a positive integer (got 0)"),
    (["--link-gbps", "-1"], "--link-gbps takes 0 (transfers not priced) or GB/s from 0.001 up (got '-1')"),
    (["--link-gbps", "nan"], "--link-gbps takes 0"),
    (["--link-gbps", "fast"], "--link-gbps takes 0"),
    (["--speeds", "inf,1"], "--speeds factors lie between 0.001 and 1000"),
    (["--speeds", "1e-300,1"], "--speeds factors lie between 0.001 and 1000"),
])
def test_plan_refuses_before_profiling(capsys, extra, message):
    refused(capsys, ["plan", "--model", "mlp", *TINY, "--stages", "2", *extra], message)


@pytest.mark.parametrize("model, setting, message", [
    ("gpt", "depth=0", "gpt depth must be a positive integer (got 0)"),
    ("gpt", "width=0", "gpt width must be a positive integer (got 0)"),
    ("gpt", "ffn=0", "gpt ffn must be a positive integer (got 0)"),
    ("resnet18", "width=0", "resnet18 width must be a positive integer (got 0)"),
    ("vit_b_16", "patch_size=5", "vit_b_16 image_size (32) must be divisible by patch_size (5)"),
    ("vit_b_16", "heads=3", "vit_b_16 width (32) must be divisible by heads (3)"),
    ("convnet", "classes=ten", "convnet classes must be a positive integer (got 'ten')"),
])
def test_every_model_checks_its_counts(capsys, model, setting, message):
    refused(capsys, ["plan", "--model", model, *TINY, "--stages", "2", "--set", setting], message)


@pytest.mark.parametrize("command", [["plan", "--model", "mlp", "--stages", "2"], ["advise", "--model", "mlp"]])
def test_a_bad_drift_window_is_refused_before_profiling(capsys, monkeypatch, command):
    monkeypatch.setenv("PIPEBENCH_DRIFT_SECONDS", "two")
    refused(capsys, command, "PIPEBENCH_DRIFT_SECONDS='two' should be a number of seconds above 0")


def test_more_stages_than_layers_is_refused_before_profiling(capsys):
    """The convnet has 10 layers: --stages 11 is refused before any profiling."""
    refused(capsys, ["plan", "--model", "convnet", "--stages", "11"], "more stages than layers (11 > 10)")
    refused(capsys, ["plan", "--model", "gpt", *TINY, "--stages", "4", "--schedule", "interleaved"],
            "more stages than layers (8 > 7)")


# ------------------------------------------------------------------------------------------- profile files

@pytest.mark.parametrize("edit, message", [
    (every_layer("forward_ms", float("nan")), "forward_ms: expected a finite number, got nan"),
    (every_layer("backward_ms", float("inf")), "backward_ms: expected a finite number, got inf"),
    (every_layer("forward_ms", -1.0), "forward_ms: must be >= 0, got -1.0"),
    (every_layer("forward_ms", 1e308), "forward_ms: 1e+308 ms is not a measurement"),
    (lambda e: [every_layer("forward_ms", 0.0)(e), every_layer("backward_ms", 0.0)(e)],
     "every forward and backward time is 0"),
    (lambda e: e.update(config={"a": json.loads("[" * 200 + "]" * 200)}), "JSON nested deeper than 100 levels"),
])
def test_nonsense_profiles_are_refused(capsys, tmp_path, edit, message):
    """Times that are no measurement: refused in one line, not planned into "nanx" or a traceback."""
    refused(capsys, ["plan", "--profile", str(profile_file(tmp_path / "p.json", edit)), "--stages", "2"], message)


def test_a_deeply_nested_profile_is_one_line(capsys, tmp_path):
    """Deeper than Python's recursion limit, where json.loads itself raises RecursionError."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    refused(capsys, ["plan", "--profile", str(deep), "--stages", "2"], "JSON nested too deeply")


@pytest.mark.parametrize("speeds, message", [
    ("nan,1", "--speeds needs one positive factor per device (2), got 'nan,1'"),
    ("inf,1", "--speeds factors lie between 0.001 and 1000"),
    ("1,1e-300", "--speeds factors lie between 0.001 and 1000"),
    ("1000,0.01", "within 1000x of each other"),
])
def test_speed_factors_are_finite_and_in_range(capsys, tmp_path, speeds, message):
    refused(capsys, ["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                     "--speeds", speeds], message)


def test_checkpointing_a_zero_bubble_plan_is_refused_before_profiling(capsys, monkeypatch):
    import pipebench

    monkeypatch.setattr(pipebench, "profile", lambda *a, **k: pytest.fail("profiled before refusing"))
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--schedule", "zbv",
                     "--checkpoint", "always"], "activation checkpointing needs a backward in one piece")


# ------------------------------------------------------------------------------------------------ devices

@pytest.mark.parametrize("gpus, message", [
    ("a,b", "--gpus takes comma-separated GPU ids such as 0,1 (got 'a,b')"),
    ("1_0", "--gpus takes comma-separated GPU ids"),
    ("0", "--gpus 0: no NVIDIA GPU is visible here"),
])
def test_devices_refuses_gpus_it_cannot_have(capsys, monkeypatch, gpus, message):
    from pipebench.hardware import gpus as nvml

    monkeypatch.setattr(nvml, "query_gpus", lambda *a, **k: [])
    refused(capsys, ["devices", "--gpus", gpus], message)
    assert main(["devices"]) == 0 and "no NVIDIA GPU visible" in capsys.readouterr().out  # without --gpus: fine


# ---------------------------------------------------------------------------------------------------- run

@pytest.mark.parametrize("extra, message", [
    (["--timeout=-5"], "--timeout takes a number from 0.001 to 1e+07 (got '-5')"),
    (["--timeout", "nan"], "--timeout takes a number from 0.001"),
    (["--set", "nosuch=1"], "unknown setting(s) nosuch for model 'mlp'"),
    (["--set", "depth=abc"], "mlp depth must be a positive integer (got 'abc')"),
    (["--set", "depth=0"], "mlp depth must be a positive integer (got 0)"),
    (["--flavour", "huge"], "unknown flavour 'huge'"),
    (["--chunks", "16"], "--chunks 16: mlp: batch 8 does not split into 16 equal micro-batches"),
    (["--batch", "6", "--chunks", "4"], "--chunks 4: mlp: batch 6 does not split"),
    (["--precision", "bogus"], "unknown precision 'bogus'; choose one of: fp32, tf32, bf16"),
    (["--optimizer", "adam"], "unknown optimizer 'adam'; choose one of: sgd, adamw"),
    (["--checkpoint", "sometimes"], "unknown checkpoint 'sometimes'"),
    (["--strategies", "single,pp-zbv", "--checkpoint", "always"], "--checkpoint always: pp-zbv cannot recompute activations"),
    (["--gpu-memory", "10GiB"], "--gpu-memory caps GPU memory, and no CUDA GPU is visible here"),
    (["--gpu-memory", "0"], "--gpu-memory must be a positive size such as 10GiB (got '0')"),
    (["--gpu-memory", "0.5"], "--gpu-memory must be a positive size"),
    (["--gpu-memory=-1GiB"], "--gpu-memory: cannot read memory size '-1GiB'"),
    (["--gpu-memory", "nan"], "--gpu-memory: cannot read memory size 'nan'"),
    (["--gpu-memory", "abc"], "--gpu-memory: cannot read memory size 'abc'"),
    (["--gpu-memory", "1e999"], "--gpu-memory: memory size '1e999' is too large"),
    (["--device", "cuda"], "--device cuda: run takes --device cpu (CPU processes); name GPUs with --gpus"),
    (["--device", "cpu", "--gpus", "0"], "--device cpu runs CPU processes: leave out --gpus"),
    (["--stages", "0"], "--stages takes a positive integer up to 1,024 (got '0')"),
    (["--stages", "two"], "--stages takes a positive integer"),
    (["--stages", "2", "--gpus", "0"], "--stages counts CPU processes: with --gpus, the GPUs named are the devices"),
])
def test_run_refuses_before_running(capsys, tmp_path, extra, message):
    refused(capsys, ["run", "--models", "mlp", "--out", str(tmp_path), *extra], message)


def bad_folders(tmp_path: Path) -> list[tuple[str, str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    folders = [(str(a_file), "a file is in the way"), (str(a_file / "below"), "cannot create the folder")]
    if Path("/etc/hostname").is_file():
        folders.append(("/etc/hostname", "a file is in the way"))
    if Path("/proc/self").exists():
        folders.append(("/proc/nope", "cannot create the folder"))
    return folders


@pytest.mark.parametrize("option", ["--out", "--profiles"])
def test_run_refuses_folders_it_cannot_write(capsys, tmp_path, option):
    """Items 8 and 9: these failed with a traceback once the first case had been profiled."""
    for folder, message in bad_folders(tmp_path):
        refused(capsys, ["run", "--models", "mlp", "--out", str(tmp_path / "out"), option, folder],
                f"{option} {folder}: {message}")


@pytest.fixture
def suite_options(monkeypatch):
    """The options and machine run_suite would have been given (it returns no rows)."""
    seen = {}

    def fake_run_suite(options, machine, note=print):
        seen.update(options=options, machine=machine)
        return [], options.out / "rows.csv", options.out / "rows.json"

    monkeypatch.setattr(suite_run, "run_suite", fake_run_suite)
    return seen


def test_rows_go_to_a_folder_of_their_own_by_default(capsys, tmp_path, monkeypatch, suite_options):
    """Not beside the reference results committed in the checkout's results/."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--models", "mlp", "--strategies", "single"]) == 0
    assert suite_options["options"].out == Path("pipebench-results") and (tmp_path / "pipebench-results").is_dir()
    assert "pipebench-results/rows.csv" in capsys.readouterr().out


def test_the_cpu_run_keeps_what_the_user_gave(capsys, tmp_path, suite_options):
    """On the CPU, the quick defaults fill only what the user left out: --batch 1000000 stays."""
    assert main(["run", "--models", "mlp", "--batch", "1000000", "--out", str(tmp_path)]) == 0
    options, err = suite_options["options"], capsys.readouterr().err
    assert options.models == {"mlp": 1000000} and options.flavour == "tiny"  # the flavour was not given
    assert "running on the CPU" in err and "flavour tiny, batch 1000000, 2 timed step(s) after 1 warm-up" in err

    assert main(["run", "--models", "mlp", "--flavour", "full", "--steps", "7", "--warmup", "3",
                 "--out", str(tmp_path)]) == 0
    options, err = suite_options["options"], capsys.readouterr().err
    assert (options.flavour, options.models, options.steps, options.warmup) == ("full", {"mlp": 8}, 7, 3)
    assert "flavour full, batch 8, 7 timed step(s) after 3 warm-up" in err

    assert main(["run", "--models", "mlp", "--quick", "--chunks", "2,4", "--out", str(tmp_path)]) == 0
    assert suite_options["options"].chunks == [2, 4]


@pytest.mark.parametrize("costs, speeds", [
    ([1.0, 2.0, 3.0], [float("nan"), 1.0]),
    ([1.0, 2.0, 3.0], [float("inf"), 1.0]),
    ([1.0, float("nan"), 3.0], None),
])
def test_the_solver_refuses_nan_and_infinity(costs, speeds):
    """From Python too: speeds=[nan, 1] was an AssertionError deep in the solver's bisection."""
    from pipebench.partition.planning.solver import solve

    with pytest.raises(ValueError, match="must be finite"):
        solve(costs, 2, speeds=speeds)


# ------------------------------------------------------------------ issue 27: counts, numbers and sizes

@pytest.mark.parametrize("argv, message", [
    # Unicode digits pass str.isdigit() but not int(): tracebacks before
    (["devices", "--gpus", "auto:²"], "--gpus auto:N takes a number of GPUs, e.g. auto:2 (got 'auto:²')"),
    (["plan", "--model", "mlp", "--gpus", "auto²"], "--gpus auto:N takes a number of GPUs"),
    (["advise", "--model", "mlp", "--stages", "2", "--chunks", "²"], "--chunks takes positive integers and/or auto"),
    (["advise", "--model", "mlp", "--stages", "2", "--chunks", "auto,²"], "--chunks takes positive integers"),
    (["run", "--models", "mlp", "--strategies", "auto:²"], "--strategies auto takes a count of strategies"),
    (["run", "--models", "mlp", "--chunks", "²"], "--chunks takes positive integers and/or auto"),
    (["plan", "--model", "mlp", "--chunks", "²"], "--chunks takes a positive integer or auto"),
    # other scripts' digits, which int() takes: accepted silently before
    (["plan", "--model", "mlp", "--batch", "١٢"], "--batch takes a positive integer up to 16,777,216 (got '١٢')"),
    (["run", "--models", "mlp", "--steps", "١"], "--steps takes a positive integer"),
    # overflow
    (["plan", "--model", "mlp", "--stages", "999999999999", "--device", "cpu"],
     "--stages takes a positive integer up to 1,024 (got '999999999999')"),
    (["plan", "--model", "mlp", "--stages", "2", "--max-memory", "1e999"], "memory size '1e999' is too large"),
    (["advise", "--model", "mlp", "--stages", "2", "--max-memory", "1e999"], "memory size '1e999' is too large"),
    (["run", "--models", "mlp", "--max-memory", "1e999"], "memory size '1e999' is too large"),
    (["run", "--models", "mlp", "--batch", "1000000000000000000"], "--batch takes a positive integer up to"),
    (["run", "--models", "mlp", "--timeout", "1e999"], "--timeout takes a number from 0.001 to 1e+07"),
    (["plan", "--model", "mlp", "--stages", "2", "--set", "depth=99999999999"], "--set depth takes an integer up to"),
    (["plan", "--model", "mlp", "--stages", "2", "--virtual-stages", "x"], "--virtual-stages takes a positive integer"),
    # accepted silently before
    (["devices", "--gpus", ""], "--gpus names no GPU (got '')"),
])
def test_counts_and_sizes_are_read_strictly(capsys, tmp_path, argv, message):
    if argv[0] == "run":
        argv = [*argv, "--out", str(tmp_path)]
    refused(capsys, argv, message)


# --------------------------------------------------------------------------- issue 27: output paths

def bad_outputs(tmp_path: Path) -> list[tuple[str, str]]:
    """Output files no command can write, and the start of what each is told."""
    outputs = [(str(tmp_path), "is a folder; name a file"), ("x" * 10_000, "the file name is 10,000 characters"),
               (str(tmp_path / ("d/" * 3000) / "p.json"), "File name too long")]
    if Path("/proc/self").exists():
        outputs += [("/proc/nope/p.json", "cannot create the folder"), ("/proc/self/p.json", "not writable")]
    return outputs


@pytest.mark.parametrize("command", ["plan", "advise"])
@pytest.mark.parametrize("option", ["--json", "--save-profile"])
def test_plan_and_advise_check_their_outputs_before_profiling(capsys, tmp_path, command, option):
    """IsADirectoryError, FileNotFoundError or OSError once profiling had ended, before."""
    for path, message in bad_outputs(tmp_path):
        refused(capsys, [command, "--model", "mlp", *TINY, "--stages", "2", option, path], message)


def test_report_checks_its_folder_before_reading(capsys, tmp_path):
    (tmp_path / "a-file").write_text("")
    bad = [(str(tmp_path / "a-file"), "a file is in the way"), ("x" * 10_000, "cannot create the folder")]
    if Path("/proc/self").exists():
        bad.append(("/proc/nope", "cannot create the folder"))
    for folder, message in bad:
        refused(capsys, ["report", str(tmp_path / "none.json"), "--out", folder], message)


def test_a_refused_report_leaves_no_folder(capsys, tmp_path):
    """`report nothere.csv --out qr8` made qr8/ before it found nothing to read (seventh pass, D1)."""
    out = tmp_path / "deep" / "qr8"
    refused(capsys, ["report", str(tmp_path / "nothere.csv"), "--out", str(out)], "no such file")
    assert not (tmp_path / "deep").exists()


# ------------------------------------------------------------------ issue 27: models that cannot train

MODELS = '''
import sys
import torch
import torch.nn.functional as F
from torch import nn


class Good(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x))


class Frozen(Good):
    def __init__(self):
        super().__init__()
        self.requires_grad_(False)


class NoParameters(nn.Module):
    def forward(self, x):
        return x * 2


class Integers(Good):
    def forward(self, x):
        return super().forward(x).argmax(-1, keepdim=True).expand(-1, 4)
'''


@pytest.mark.parametrize("name, extra, message", [
    ("models.py:Frozen", [], "has no parameters that require grad; there is nothing to train"),
    ("models.py:NoParameters", [], "has no parameters that require grad"),
    ("models.py:Integers", [], "returns int64 outputs; gradients flow only through floating-point ones"),
    ("vector_loss.py:Good", [], "the loss must be one number (a scalar tensor), got [2]"),
    ("exits.py:Good", [], "it calls sys.exit(0) or exit() when imported"),
    ("exit_call.py:Good", [], "it calls sys.exit(None) or exit() when imported"),
    ("raises.py:Good", [], "it calls sys.exit('bye') or exit() when imported"),
    ("models.py:Good", ["--input-shape", "999999999,999999999"],
     "an input batch of 2 x [999999999, 999999999] float32 takes 14901161164.05 GiB, more than this machine's"),
])
@pytest.mark.parametrize("command", ["plan", "run"])
def test_models_that_cannot_train_are_refused(capsys, tmp_path, monkeypatch, name, extra, message, command):
    """Profiled and "planned" before (exit 0), or exit 0 with no word at all (sys.exit on import), or the
    allocator's traceback asking for 8e18 bytes."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "vector_loss.py").write_text("from models import Good\nimport torch.nn.functional as F\n\n"
                                             "def loss_fn(outputs, targets):\n"
                                             "    return F.cross_entropy(outputs, targets, reduction='none')\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "exit_call.py").write_text("exit()\n")
    (tmp_path / "raises.py").write_text("raise SystemExit('bye')\n")
    model = str(tmp_path / name)
    shape = ["--input-shape", "4"] if not extra else extra
    if command == "plan":  # loading the model is profiling's first step, before anything is timed
        refused(capsys, ["plan", "--model", model, "--stages", "2", *shape], message)
    else:
        refused(capsys, ["run", "--models", model, "--out", str(tmp_path / "out"), *shape], message)


@pytest.mark.parametrize("folder, message", [("nonexistent", "--data-dir {}: no such folder"),
                                             ("a-file", "--data-dir {}: not a folder")])
def test_a_data_dir_that_is_not_a_folder_is_one_line(capsys, tmp_path, folder, message):
    """The message was good, but it came as a traceback."""
    (tmp_path / "a-file").write_text("")
    path = str(tmp_path / folder)
    refused(capsys, ["plan", "--model", "convnet", "--stages", "2", "--data-dir", path], message.format(path))


def test_unusable_mnist_data_is_a_user_error(tmp_path):
    from pipebench.base.errors import UserError
    from pipebench.models.mnist import load_mnist

    with pytest.raises(UserError, match="MNIST data in .* is unusable: missing file"):
        load_mnist(tmp_path)


def test_a_batch_that_does_not_split_over_the_replicas_is_refused(capsys, tmp_path):
    """`run --batch 3 --strategies ddp` on 2 processes profiled, then wrote an unavailable row."""
    refused(capsys, ["run", "--models", "mlp", "--batch", "3", "--strategies", "single,ddp", "--out", str(tmp_path)],
            "--batch 3: mlp: batch 3 does not split evenly over 2 ddp replicas; use a multiple of 2")


def test_a_case_named_twice_is_one_case(capsys, tmp_path, suite_options):
    """`--strategies single,single` and `--chunks auto,auto` wrote two rows with one case key."""
    assert main(["run", "--models", "mlp,mlp", "--strategies", "single,single", "--chunks", "auto,auto,2,2",
                 "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    options = suite_options["options"]
    assert (list(options.models), options.strategies, options.chunks) == (["mlp"], ["single"], [None, 2])


def test_a_depth_beyond_what_pipebench_plans_is_one_line_at_once(capsys, tmp_path):
    """`plan --set depth=20000` built 40,000 layers for minutes, saying nothing, until it was killed."""
    refused(capsys, ["plan", "--model", "gpt", "--flavour", "tiny", "--set", "depth=20000", "--stages", "2",
                     "--device", "cpu", "--batch", "8"], "--set depth=20000: pipebench plans models of at most 512")
    refused(capsys, ["run", "--models", "gpt", "--set", "depth=20000", "--out", str(tmp_path)], "at most 512 blocks")


def test_the_cpu_run_takes_as_many_processes_as_asked(capsys, tmp_path, monkeypatch, suite_options):
    """--device cpu --stages 3: three CPU processes, even where a GPU is visible (advise's check command on a
    GPU machine); --stages alone where GPUs are visible is refused: it counts CPU processes."""
    import torch

    assert main(["run", "--models", "mlp", "--batch", "12", "--stages", "3", "--out", str(tmp_path)]) == 0  # no GPU: the CPU
    assert suite_options["machine"].devices == 3 and suite_options["machine"].gpus is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["run", "--models", "mlp", "--batch", "12", "--device", "cpu", "--stages", "3",
                 "--out", str(tmp_path)]) == 0
    assert suite_options["machine"].devices == 3 and suite_options["machine"].gpus is None
    assert "--device cpu: running on the CPU, 3 processes standing in for devices" in capsys.readouterr().err
    refused(capsys, ["run", "--models", "mlp", "--stages", "3", "--out", str(tmp_path)],
            "--stages counts CPU processes: add --device cpu")


def test_a_schedule_typo_is_one_line(capsys):
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--schedule", "1f1c"],
            "unknown schedule '1f1c'; choose one of: gpipe, 1f1b")
