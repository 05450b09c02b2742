"""Command-line options, model settings and environment variables that mean nothing are refused in one
line and exit status 2, before anything is profiled, run or trained.

Every call runs in this process with measuring and the suite replaced by a failure (tests/conftest.py
nothing_runs), so that a check that comes too late fails the test at once."""
from __future__ import annotations

import pytest

from helpers import NET_AND_DATA as NET
from helpers import TINY, profile_file, refused
from pipebench.bench.cli import main

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# ---------------------------------------------------------------------------------------------------- plan

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
    (["--data-dir", ""], "--data-dir: an empty path; name a folder"),  # not the working folder
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


@pytest.mark.parametrize("name", ["PIPEBENCH_DRIFT_SECONDS", "PIPEBENCH_IMPORT_SECONDS"])
@pytest.mark.parametrize("digits", ["\u0662", "\uff12", "1_0"])
def test_seconds_in_the_environment_are_ascii_numbers(capsys, monkeypatch, name, digits):
    """float() reads an Arabic-Indic or a full-width 2, and 1_0 as 10; the options take ASCII digits only."""
    monkeypatch.setenv(name, digits)
    refused(capsys, ["plan", "--model", "mlp", "--stages", "2"], f"{name}={digits!r} should be a number of seconds")


def test_more_stages_than_layers_is_refused_before_profiling(capsys):
    """The convnet has 10 layers: --stages 11 is refused before any profiling, by advise as by plan (and as
    both refuse it from a saved profile)."""
    refused(capsys, ["plan", "--model", "convnet", "--stages", "11"], "more stages than layers (11 > 10)")
    refused(capsys, ["advise", "--model", "convnet", "--stages", "11"], "more stages than layers (11 > 10)")
    refused(capsys, ["plan", "--model", "gpt", *TINY, "--stages", "4", "--schedule", "interleaved"],
            "more stages than layers (8 > 7)")


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
    import pipebench.api

    monkeypatch.setattr(pipebench.api, "profile", lambda *a, **k: pytest.fail("profiled before refusing"))
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--schedule", "zbv",
                     "--checkpoint", "always"], "activation checkpointing needs a backward in one piece")


def test_a_schedule_typo_is_one_line(capsys):
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--schedule", "1f1c"],
            "unknown schedule '1f1c'; choose one of: gpipe, 1f1b")


def test_a_depth_beyond_what_pipebench_plans_is_one_line_at_once(capsys, tmp_path):
    """`plan --set depth=20000` is one line at once, not 40,000 layers built for minutes in silence."""
    refused(capsys, ["plan", "--model", "gpt", "--flavour", "tiny", "--set", "depth=20000", "--stages", "2",
                     "--device", "cpu", "--batch", "8"], "--set depth=20000: pipebench plans models of at most 512")
    refused(capsys, ["run", "--models", "gpt", "--set", "depth=20000", "--out", str(tmp_path)], "at most 512 blocks")


@pytest.mark.parametrize("command", ["plan", "advise"])
def test_device_beside_gpus_is_refused(tmp_path, capsys, command):
    refused(capsys, [command, "--profile", str(profile_file(tmp_path / "p.json")), "--gpus", "0,1", "--device", "cpu"],
            "--device cpu with --gpus: the GPUs named are the devices")


# ----------------------------------------------------------------------------------------- devices and run

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


@pytest.mark.parametrize("extra, message", [
    (["--timeout=-5"], "--timeout takes a number from 0.001 to 1e+07 (got '-5')"),
    (["--timeout", "nan"], "--timeout takes a number from 0.001"),
    (["--set", "nosuch=1"], "unknown setting(s) nosuch for model 'mlp'"),
    (["--set", "depth=abc"], "mlp depth must be a positive integer (got 'abc')"),
    (["--set", "depth=0"], "mlp depth must be a positive integer (got 0)"),
    (["--flavour", "huge"], "unknown flavour 'huge'"),
    (["--micro-batches", "16"], "--micro-batches 16: mlp: batch 8 does not split into 16 equal micro-batches"),
    (["--batch", "6", "--micro-batches", "4"], "--micro-batches 4: mlp: batch 6 does not split"),
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
    (["--cpu-processes", "0"], "--cpu-processes takes a positive integer up to 1,024 (got '0')"),
    (["--cpu-processes", "two"], "--cpu-processes takes a positive integer"),
    (["--cpu-processes", "2", "--gpus", "0"], "--cpu-processes is for the CPU: with --gpus, the GPUs named are the devices"),
    (["--stages", "2", "--gpus", "0"], "--cpu-processes is for the CPU: with --gpus"),  # its old name, the same option
])
def test_run_refuses_before_running(capsys, tmp_path, extra, message):
    refused(capsys, ["run", "--models", "mlp", "--out", str(tmp_path), *extra], message)


def test_a_batch_that_does_not_split_over_the_replicas_is_refused(capsys, tmp_path):
    """`run --batch 3 --strategies ddp` on 2 processes is refused before profiling, not an unavailable row."""
    refused(capsys, ["run", "--models", "mlp", "--batch", "3", "--strategies", "single,ddp", "--out", str(tmp_path)],
            "--batch 3: mlp: batch 3 does not split evenly over 2 ddp replicas; use a multiple of 2")


# ------------------------------------------------------------------------------- counts, numbers and sizes

@pytest.mark.parametrize("argv, message", [
    # Unicode digits pass str.isdigit() but not int(): tracebacks before
    (["devices", "--gpus", "auto:²"], "--gpus auto:N takes a number of GPUs, e.g. auto:2 (got 'auto:²')"),
    (["plan", "--model", "mlp", "--gpus", "auto²"], "--gpus auto:N takes a number of GPUs"),
    (["advise", "--model", "mlp", "--stages", "2", "--micro-batches", "²"], "--micro-batches takes positive integers and/or auto"),
    (["advise", "--model", "mlp", "--stages", "2", "--micro-batches", "auto,²"], "--micro-batches takes positive integers"),
    (["run", "--models", "mlp", "--strategies", "auto:²"], "--strategies auto takes a count of strategies"),
    (["run", "--models", "mlp", "--strategies", "auto:"], "--strategies auto takes a count of strategies"),
    (["run", "--models", "mlp", "--strategies", "single,,ddp"], "--strategies names an empty strategy"),
    (["run", "--models", "mlp", "--strategies", "single,"], "--strategies names an empty strategy"),
    (["run", "--models", "mlp", "--micro-batches", "²"], "--micro-batches takes positive integers and/or auto"),
    (["plan", "--model", "mlp", "--micro-batches", "²"], "--micro-batches takes a positive integer or auto"),
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


@pytest.mark.parametrize("argv, message", [
    (["--max-memory", "-1GB"], "--max-memory: cannot read memory size '-1GB'"),
    (["--max-memory", "-nan"], "--max-memory: cannot read memory size '-nan'"),
    (["--link-gbps", "-inf"], "--link-gbps takes 0"),
    (["--repeats", "-1e3"], "--repeats takes a positive integer"),
    (["--batch", "-8x"], "--batch takes a positive integer"),
])
def test_a_value_that_starts_with_a_minus_is_one_line(capsys, argv, message):
    """`-1GB` is the option's value, refused in one line as a size, not taken by argparse for an option (its
    usage message and "expected one argument")."""
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", *argv], message)


def test_repeated_micro_batch_counts_count_once():
    """`P --micro-batches auto,auto` counts auto once, as the docs say repeated values do, with no ValueError.
    """
    from pipebench.base.errors import UserError
    from pipebench.base.text.parse import parse_micro_batches

    assert parse_micro_batches("auto,auto", single=True) == [None]
    assert parse_micro_batches("4, 4", single=True) == [4]
    assert parse_micro_batches("2,auto,2,auto") == [2, None]
    with pytest.raises(UserError, match="one count or auto here"):
        parse_micro_batches("auto,4", single=True)


# --------------------------------------------------------------------------------- data folders and caches

@pytest.mark.parametrize("folder, message", [("nonexistent", "--data-dir {}: no such folder"),
                                             ("a-file", "--data-dir {}: not a folder")])
def test_a_data_dir_that_is_not_a_folder_is_one_line(capsys, tmp_path, folder, message):
    """A --data-dir that is not a folder is one line, not a traceback."""
    (tmp_path / "a-file").write_text("")
    path = str(tmp_path / folder)
    refused(capsys, ["plan", "--model", "convnet", "--stages", "2", "--data-dir", path], message.format(path))
    refused(capsys, ["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2", "--data-dir", path],
            message.format(path))  # beside saved profiles too


def test_unusable_mnist_data_is_a_user_error(tmp_path):
    from pipebench.base.errors import UserError
    from pipebench.models.mnist import load_mnist

    with pytest.raises(UserError, match="MNIST data in .* is unusable: missing file"):
        load_mnist(tmp_path)


@pytest.mark.parametrize("cache", ["file", "file/below"])
def test_a_cache_folder_that_is_a_file_is_refused_first(capsys, tmp_path, monkeypatch, cache):
    """PIPEBENCH_CACHE naming a regular file is refused before any work, not a cache whose every entry fails
    to be written."""
    (tmp_path / "file").write_text("mine\n")
    monkeypatch.setenv("PIPEBENCH_CACHE", str(tmp_path / cache))
    tiny = ["plan", "--model", "mlp", "--flavour", "tiny", "--batch", "8", "--stages", "2"]
    refused(capsys, tiny, f"PIPEBENCH_CACHE {tmp_path / cache} ")
    refused(capsys, tiny, "a file, not a folder; point PIPEBENCH_CACHE")
    assert (tmp_path / "file").read_text() == "mine\n"


@pytest.mark.parametrize("variable, value, message", [
    ("PIPEBENCH_CACHE", "/tmp/" + "x" * 5000, "is not a folder this system can use (File name too long)"),
    ("PIPEBENCH_CACHE", "~nosuchuser7/c", "PIPEBENCH_CACHE: the cache folder cannot be found"),
    ("PIPEBENCH_LINK_CACHE", "~nosuchuser7/c", "PIPEBENCH_LINK_CACHE: the cache folder cannot be found"),
])
def test_a_cache_folder_the_system_cannot_use_is_one_line(capsys, monkeypatch, variable, value, message):
    """A cache folder whose name is too long for the file system, or under a ~user that does not exist, is one
    line, not an OSError or RuntimeError traceback (exit 1)."""
    monkeypatch.setenv(variable, value)
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--batch", "8", "--stages", "2"], message)


# --------------------------------------------------------------------------------------------------- train

def test_train_refuses_cudagraphs_on_the_cpu_before_the_model_is_built(tmp_path, capsys):
    (tmp_path / "m.py").write_text(NET + "\nraise SystemExit('built')\n")  # never imported: refused before
    refused(capsys, ["train", "--model", f"{tmp_path / 'm.py'}:Net", "--input-shape", "4", "--data",
                     f"{tmp_path / 'm.py'}:data", "--batch", "8", "--steps", "2", "--strategy", "single",
                     "--device", "cpu", "--compile", "cudagraphs"], "--compile cudagraphs records CUDA graphs")


@pytest.mark.parametrize("extra, message", [
    (["--loader-workers", "5000"], "--loader-workers takes an integer from 0 up to 64 (got '5000')"),
    (["--lr", "1e300"], "--lr takes a number from 1e-38 to 1e+38 (got '1e300')"),
])
def test_train_bounds_loader_workers_and_lr(capsys, monkeypatch, tmp_path, extra, message):
    """--loader-workers 5000 (hundreds of forked processes, hung) and --lr 1e300 (an overflow in a worker) are
    refused in one line."""
    from helpers import DATA, NET

    from pipebench.bench.train import parent

    monkeypatch.setattr(parent, "_launch", lambda *a, **k: pytest.fail("a worker started"))
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(DATA)
    code = main(["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
                 f"{tmp_path / 'data.py'}:data", "--batch", "8", "--steps", "2", "--device", "cpu", "--strategy",
                 "single", *extra])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("pipebench: error: ") and message in last, last


@pytest.mark.parametrize("extra, message", [
    (["--epochs", "0"], "--epochs takes a positive integer up to 1,000,000 (got '0')"),
    (["--save-every", "0"], "--save-every takes a positive integer up to 1,000,000 (got '0')"),
    (["--log-every", "-1"], "--log-every takes an integer from 0 up to 1,000,000 (got '-1')"),
    (["--nodes", "1025"], "--nodes takes a positive integer up to 1,024 (got '1025')"),
    (["--loader-workers", "x"], "--loader-workers takes an integer from 0 up to 64 (got 'x')"),
    (["--lr", "0"], "--lr takes a number from 1e-38 to 1e+38 (got '0')"),
])
def test_train_counts_are_read_by_the_table_of_limits(tmp_path, capsys, extra, message):
    """Every count of train's, and --lr, is bounded by pipebench/base/text/parse.py LIMITS before the command
    starts: one line, exit 2, the model file never imported."""
    (tmp_path / "m.py").write_text(NET + "\nraise SystemExit('built')\n")  # never imported: refused before
    refused(capsys, ["train", "--model", f"{tmp_path / 'm.py'}:Net", "--input-shape", "4", "--data",
                     f"{tmp_path / 'm.py'}:data", "--batch", "8", "--strategy", "single", "--device", "cpu", *extra],
            message)


def test_a_removed_working_folder_is_one_line(capsys, monkeypatch, tmp_path):
    """In a working folder since removed, the command line and the API ended in a FileNotFoundError
    traceback from os.getcwd(): one line, exit 2, before anything is imported or built."""
    import pipebench
    from pipebench.base.errors import UserError

    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    refused(capsys, ["plan", "--model", "mlp", *TINY, "--stages", "2"], "the working folder no longer exists")
    with pytest.raises(UserError, match="the working folder no longer exists"):
        pipebench.plan("mlp", flavour="tiny", stages=2, batch=8)
