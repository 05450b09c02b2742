"""`pipebench models` and `pipebench plan`, including every kind of bad input: exit 2, one line."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipebench import models
from pipebench.bench.cli import main

TINY_GPT = ["plan", "--model", "gpt", "--flavour", "tiny", "--batch", "8", "--repeats", "1"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_usage_error(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert lines[-1].startswith("pipebench: error: ") and message in lines[-1], err
    assert "Traceback" not in err


def test_models_lists_the_registry(capsys):
    code, out, _ = run(capsys, "models")
    assert code == 0
    for name in models.model_names():
        assert name in out
    assert "40" in out  # ResNet-101's layer count


def test_plan_prints_stages_and_baseline(capsys):
    code, out, err = run(capsys, *TINY_GPT, "--stages", "2")
    assert code == 0, err
    assert "stage" in out and "by parameters" in out and "balance (slowest/mean)" in out
    assert "micro-batch counts tried" in out
    assert "profiled in" in err


def test_plan_json_and_profile_round_trip(capsys, tmp_path):
    plan_file, profile_file = tmp_path / "plan.json", tmp_path / "profile.json"
    code, out, _ = run(capsys, *TINY_GPT, "--stages", "3", "--micro-batches", "2", "--json", str(plan_file),
                       "--save-profile", str(profile_file))
    assert code == 0
    first = json.loads(plan_file.read_text())
    assert len(first["stages"]) == 3 and first["micro_batches"] == 2
    # Planning again from the saved profile touches no model and gives the same cuts.
    again = tmp_path / "again.json"
    code, _, err = run(capsys, "plan", "--profile", str(profile_file), "--stages", "3", "--json", str(again))
    assert code == 0
    assert "profiling" not in err
    assert json.loads(again.read_text())["bounds"] == first["bounds"]


def test_plan_with_memory_cap_honours_it(capsys, tmp_path):
    plan_file = tmp_path / "plan.json"
    code, out, _ = run(capsys, *TINY_GPT, "--stages", "2", "--micro-batches", "1", "--max-memory", "2MiB",
                       "--json", str(plan_file))
    assert code == 0
    assert all(s["predicted_memory_bytes"] <= 2 * 2**20 for s in json.loads(plan_file.read_text())["stages"])


@pytest.mark.parametrize("argv, message", [
    (["plan", "--model", "nosuch", "--stages", "2"], "unknown model 'nosuch'; choose one of: "),
    (["plan", "--model", "gpt", "--flavour", "huge", "--stages", "2"], "huge"),
    ([*TINY_GPT, "--stages", "9"], "more stages than layers (9 > 7)"),
    ([*TINY_GPT, "--stages", "2", "--micro-batches", "3"], "batch 8 does not split into 3 equal micro-batches"),
    ([*TINY_GPT, "--stages", "2", "--micro-batches", "many"], "--micro-batches takes a positive integer or auto"),
    ([*TINY_GPT, "--gpus", "99"], "GPU"),  # no machine has a GPU 99, with or without CUDA
    ([*TINY_GPT, "--gpus", "0,0"], "names a GPU twice"),
    ([*TINY_GPT, "--stages", "2", "--max-memory", "1KiB"], "leanest split needs"),
    ([*TINY_GPT, "--stages", "2", "--max-memory", "lots"], "cannot read memory size 'lots'"),
    ([*TINY_GPT, "--stages", "2", "--set", "depth"], "--set takes KEY=VALUE"),
    ([*TINY_GPT, "--stages", "2", "--set", "colour=3"], "colour"),
    (["plan", "--stages", "2"], "--model NAME is required"),
    (["plan", "--model", "mlp", "--stages", "0"], "--stages takes a positive integer up to 1,024 (got '0')"),
    (["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--batch", "0"], "--batch takes a positive integer up to 16,777,216 (got '0')"),
    ([*TINY_GPT, "--stages", "2", "--repeats", "0"], "--repeats takes a positive integer up to 1,000 (got '0')"),
    ([*TINY_GPT, "--stages", "2", "--schedule", "zbv", "--virtual-stages", "3"], "zbv runs exactly 2 stages per device"),
    ([*TINY_GPT, "--stages", "2", "--virtual-stages", "2"], "1f1b runs one stage per device"),
    ([*TINY_GPT, "--stages", "2", "--speeds", "1"], "--speeds needs one positive factor per device (2)"),
    ([*TINY_GPT, "--stages", "2", "--speeds", "fast"], "--speeds takes auto or comma-separated positive numbers"),
    ([*TINY_GPT, "--stages", "2", "--speeds", "auto"], "--speeds auto probes GPUs"),
    ([*TINY_GPT, "--stages", "4", "--schedule", "interleaved"], "more stages than layers (8 > 7)"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    assert_usage_error(capsys, argv, message)


def test_missing_gpu_is_named(capsys, monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert_usage_error(capsys, [*TINY_GPT, "--gpus", "0,3"], "GPU 3 does not exist: GPUs 0-1 visible")


def test_malformed_profile_file(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "pipebench-profile", "version": 1, "profiles": [{"model": "gpt"}]}))
    assert_usage_error(capsys, ["plan", "--profile", str(bad), "--stages", "2"], "missing field 'flavour'")
    assert_usage_error(capsys, ["plan", "--profile", str(tmp_path / "none.json"), "--stages", "2"], "no such file")


def test_profile_mismatch(capsys, tmp_path):
    profile_file = tmp_path / "profile.json"
    assert run(capsys, *TINY_GPT, "--stages", "2", "--micro-batches", "1", "--save-profile", str(profile_file))[0] == 0
    assert_usage_error(capsys, ["plan", "--profile", str(profile_file), "--model", "mlp", "--stages", "2"],
                       "does not match the profile's model gpt")
    assert_usage_error(capsys, ["plan", "--profile", str(profile_file), "--stages", "2", "--micro-batches", "2"],
                       "no profile at micro-batch size 4")
    # What a saved profile was measured in is checked where given, and otherwise taken as the profile's own.
    saved = ["plan", "--profile", str(profile_file), "--stages", "2", "--micro-batches", "1"]
    assert_usage_error(capsys, [*saved, "--precision", "bf16"], "precision bf16 does not match the profiles' tf32")
    assert_usage_error(capsys, [*saved, "--compile", "default"], "compile default does not match the profiles' eager")
    assert_usage_error(capsys, ["plan", "--profile", str(profile_file), "--gpus", "0,1", "--speeds", "auto"],
                       "--speeds auto probes the GPUs; with --profile give the factors")
    assert run(capsys, *saved, "--precision", "tf32")[0] == 0
    assert run(capsys, *saved)[0] == 0


@pytest.mark.usefixtures("nothing_runs")
@pytest.mark.parametrize("command", ["plan", "advise"])
def test_a_saved_profile_is_checked_against_flavour_and_settings(capsys, tmp_path, command):
    """--flavour and --set name the model as --model does: with --profile they must be what the profile
    records (omitted, they are its own), else its tiny mlp would be planned for a `--set depth=8` asked."""
    from helpers import profile_file

    config = {"in_features": 64, "hidden": 64, "depth": 3, "classes": 10}
    saved = [command, "--profile", str(profile_file(tmp_path / "p.json", lambda e: e.update(config=config))),
             "--stages", "2"]
    assert_usage_error(capsys, [*saved, "--flavour", "small"], "--flavour small does not match the profile's tiny")
    assert_usage_error(capsys, [*saved, "--set", "depth=8"], "--set depth=8 does not match the profile's depth=3")
    assert_usage_error(capsys, [*saved, "--set", "width=3"],
                       "--set width=3: the profile's mlp (tiny) has no setting width (its settings: in_features, "
                       "hidden, depth, classes)")
    assert_usage_error(capsys, [*saved, "--input-shape", "4"], "--input-shape is for a model of your own")
    assert run(capsys, *saved, "--model", "mlp", "--flavour", "tiny", "--set", "depth=3", "--set", "hidden=64")[0] == 0


@pytest.mark.usefixtures("nothing_runs")
def test_a_saved_profile_of_a_model_file_takes_the_file_named_relatively(capsys, tmp_path, monkeypatch):
    """A model file's profile records its absolute path: `--model m.py:Net` from its folder is that file."""
    from helpers import profile_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.py").write_text("")
    saved = profile_file(tmp_path / "p.json", lambda e: e.update(model=f"{tmp_path.resolve()}/m.py:Net", flavour="",
                                                                 config={"input_shape": [4]}))
    argv = ["plan", "--profile", str(saved), "--stages", "2", "--model", "m.py:Net"]
    assert run(capsys, *argv, "--input-shape", "4")[0] == 0
    assert_usage_error(capsys, [*argv, "--input-shape", "5"], "--input-shape [5] does not match the profile's "
                       "input_shape=[4]")
    assert_usage_error(capsys, [*argv, "--flavour", "tiny"], "--flavour tiny: the profile's")


@pytest.mark.ci  # process handling, run by CI after the default run
def test_console_script_ignores_a_models_py_in_the_current_folder(tmp_path):
    """Many users keep a models.py of their own; it must not shadow pipebench's models package."""
    script = shutil.which("pipebench", path=str(Path(sys.executable).parent)) or shutil.which("pipebench")
    if script is None:
        pytest.skip("pipebench is not installed as a console script")
    (tmp_path / "models.py").write_text("raise SystemExit('the wrong models module was imported')\n")
    (tmp_path / "partition.py").write_text("raise SystemExit('the wrong partition module was imported')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([script, "models"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "resnet101" in result.stdout


def test_plan_interleaved_stages(capsys):
    code, out, _ = run(capsys, *TINY_GPT, "--set", "depth=4", "--stages", "2", "--schedule", "interleaved")
    assert code == 0
    assert "on 4 stages (2 per device on 2 devices)" in out and ", interleaved," in out


def test_plan_shows_the_profiled_backward_split_for_zero_bubble_schedules(capsys):
    code, zbv, _ = run(capsys, *TINY_GPT, "--set", "depth=4", "--stages", "2", "--schedule", "zbv")
    code2, plain, _ = run(capsys, *TINY_GPT, "--set", "depth=4", "--stages", "2")
    assert code == code2 == 0
    assert " I ms " in zbv and " W ms " in zbv and "bwd ms" not in zbv
    assert "bwd ms" in plain and " I ms " not in plain


def test_plan_with_speed_factors_gives_the_slow_device_fewer_layers(capsys, tmp_path):
    # Both plans from one saved profile: two profilings on a busy CPU could differ more than the speeds do.
    profile = tmp_path / "profile.json"
    code, equal, _ = run(capsys, *TINY_GPT, "--set", "depth=6", "--stages", "2", "--micro-batches", "2",
                         "--save-profile", str(profile))
    code2, slow, _ = run(capsys, "plan", "--profile", str(profile), "--stages", "2", "--micro-batches", "2",
                         "--speeds", "1,0.25")
    assert code == code2 == 0
    layers = lambda out: int(out.split("\n     1 ")[1].split("(")[1].split(")")[0])  # noqa: E731 - stage 1's count
    assert layers(slow) < layers(equal)


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("models", "plan", "run", "devices", "report"):
        assert command in out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out  # the registry's strategies, one line each
    from pipebench.bench.strategies import STRATEGIES

    assert all(f"  {name} " in out for name in STRATEGIES) and "ScheduleZBVZeroBubble" in out


def test_cli_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "pipebench.bench.cli", "--help"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "models" in result.stdout and "report" in result.stdout


def test_profile_sizes_skips_a_size_that_fails_and_says_why(monkeypatch):
    from pipebench.base.errors import UserError
    from pipebench.partition.profiling import measure

    from types import SimpleNamespace

    def fake_profile(model, device, micro_batch, batch, **kwargs):
        if micro_batch < 2:
            raise RuntimeError("Expected more than 1 value per channel when training\nmore")
        return SimpleNamespace(micro_batches=batch // micro_batch, size=micro_batch)

    monkeypatch.setattr(measure, "profile_model", fake_profile)
    model = models.get_model("mlp", "tiny", device="meta")
    notes = []
    got = measure.profile_sizes(model, "cpu", 8, [1, 2, 8], repeats=1, warmup=0, note=notes.append)
    assert [p.size for p in got] == [8, 4]  # in the order asked, though the smallest ran first
    assert notes[1].startswith("  micro-batch 1 (1 of 3): skipped, Expected more than 1 value per channel when training")
    assert notes[-1].startswith("profiled in ")
    with pytest.raises(UserError, match="cannot run mlp with micro-batches of 1: Expected more than 1 value"):
        measure.profile_sizes(model, "cpu", 8, [8], repeats=1, warmup=0)
    with pytest.raises(UserError, match="mlp runs at none of the micro-batch sizes tried; the last: micro-batch 1: "):
        measure.profile_sizes(model, "cpu", 2, [2, 4], repeats=1, warmup=0)


def test_version_names_pipebench_and_torch(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("pipebench ") and "(torch " in out


def test_token_ids_given_as_floats_hint_at_the_input_dtype(tmp_path, capsys):
    model = tmp_path / "tokens.py"
    model.write_text("import torch\n\ndef net():\n    return torch.nn.Sequential(torch.nn.Embedding(100, 8), "
                     "torch.nn.Flatten(), torch.nn.Linear(8 * 16, 4))\n")
    assert main(["plan", "--model", f"{model}:net", "--input-shape", "16", "--stages", "2", "--device", "cpu",
                 "--batch", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--input-dtype int64" in err[0]


def test_a_model_built_in_float64_hints_at_the_input_dtype(tmp_path, capsys):
    """A file that sets float64 as torch's default dtype builds float64 parameters; the made-up inputs are
    float32, so the line says which --input-dtype matches them."""
    model = tmp_path / "m.py"
    model.write_text("import torch\ntorch.set_default_dtype(torch.float64)\n\n"
                     "class Net(torch.nn.Sequential):\n    def __init__(self):\n"
                     "        super().__init__(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))\n")
    assert main(["plan", "--model", f"{model}:Net", "--input-shape", "4", "--stages", "2", "--device", "cpu",
                 "--batch", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipebench: error: ") and "rejects an input" in err[0], err
    assert err[0].endswith("; its parameters are float64: give --input-dtype float64 "
                           "(the API's settings={'input_dtype': 'float64'})"), err


# ------------------------------------------------------------------- what argparse refuses: one line each

COMMANDS = ["models", "plan", "advise", "run", "train", "devices", "report"]


def usage_line(capsys, argv) -> str:
    """argparse's refusal as one line on stderr, exit 2: no usage block, nothing on stdout."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and out == "" and "usage:" not in err and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_option_is_one_line_for_every_command(capsys, command):
    required = ["--model", "mlp", "--data", "x.py:f", "--batch", "4"] if command == "train" else []
    assert usage_line(capsys, [command, *required, "--zzz"]) == (
        f"pipebench {command}: error: unrecognized arguments: --zzz; `pipebench {command} --help` lists the options")


@pytest.mark.parametrize("argv", [["plan", "--model"], ["advise", "--batch"], ["run", "--strategies"],
                                  ["train", "--data"], ["devices", "--gpus"], ["report", "--out"]])
def test_a_missing_value_is_one_line_for_every_command(capsys, argv):
    command, option = argv
    assert usage_line(capsys, argv).startswith(f"pipebench {command}: error: argument {option}: expected one argument;")


@pytest.mark.parametrize("argv, message", [
    (["plan", "--mod", "-x", "--stages", "2"], "pipebench: error: unknown model '-x'"),
    (["run", "--mod", "-x"], "pipebench: error: unknown model '-x'"),
    (["plan", "--max-mem", "-1GB", "--model", "mlp", "--stages", "2"], "cannot read memory size '-1GB'"),
    (["train", "--model", "mlp", "--data", "x.py:f", "--bat", "-4"], "--batch takes a positive integer"),
])
def test_an_abbreviated_option_with_a_value_that_starts_with_a_minus(capsys, argv, message):
    """`--mod -x`: the abbreviation is the option and `-x` its value, which its own check refuses in one line,
    not argparse's "expected one argument" and its usage block."""
    assert message in usage_line(capsys, argv)


@pytest.mark.parametrize("argv, message", [
    (["bogus"], "pipebench: error: argument COMMAND: invalid choice: 'bogus' (choose from 'models', "),
    ([], "pipebench: error: the following arguments are required: COMMAND; `pipebench --help`"),
    (["--zzz", "plan"], "pipebench: error: unrecognized arguments: --zzz;"),
    (["plan", "--balance", "x"], "pipebench plan: error: argument --balance: invalid choice: 'x' (choose from"),
    (["plan", "--gpus", "0", "--stages", "2"], "argument --stages: not allowed with argument --gpus"),
    (["plan", "--stagse", "2"], "unrecognized arguments: --stagse 2 (did you mean --stages?)"),
    (["run", "--s", "2"], "pipebench run: error: ambiguous option: --s could match --strategies, --stages"),
    (["plan", "--export", "deepspeed"], "argument --export: expected 2 arguments"),
    (["train", "--steps", "3"], "pipebench train: error: the following arguments are required: --model, --data"),
    (["plan", "--\x1b[2J\r"], "unrecognized arguments: --\\x1b[2J\\r;"),
])
def test_every_kind_of_argparse_error_is_one_line(capsys, argv, message):
    assert message in usage_line(capsys, argv)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_still_prints_in_full(capsys, command):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: pipebench {command}") and "options:" in out and "--help" in out


@pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test
@pytest.mark.parametrize("argv, message", [
    (["run", "--models", "mlp", "--cpu-processes", "2", "--stages", "3"],
     "pipebench run: error: argument --stages: 3 disagrees with --cpu-processes 2, another spelling of it; give one"),
    (["train", "--model", "mlp", "--data", "nowhere.py:f", "--batch", "4", "--stages=3", "--cpu-processes", "2"],
     "pipebench train: error: argument --cpu-processes: 2 disagrees with --stages 3, another spelling of it"),
    (["plan", "--model", "mlp", "--stages", "2", "--micro-batches", "2", "--chunks", "4"],
     "pipebench plan: error: argument --chunks: 4 disagrees with --micro-batches 2, another spelling of it"),
    (["advise", "--model", "mlp", "--chunks", "4", "--micro-batches", "2"], "argument --micro-batches: 2 disagrees with --chunks 4"),
    (["run", "--models", "mlp", "--micro-batches", "2", "--chunks", "2,4"], "argument --chunks: 2,4 disagrees with --micro-batches 2"),
])
def test_two_spellings_of_one_option_that_disagree_are_refused(capsys, argv, message):
    """`run --cpu-processes 2 --stages 3` and `plan --micro-batches 2 --chunks 4` are refused in one line
    naming both spellings: the last spelling does not win without a word."""
    assert message in usage_line(capsys, argv)


def test_two_spellings_of_one_option_that_agree_are_one_value():
    from pipebench.bench.cli import _parse, build_parser

    args = _parse(build_parser(), ["run", "--cpu-processes", "2", "--stages", " 2", "--chunks", "4", "--micro-batches", "4"])
    assert (args.cpu_processes.strip(), args.micro_batches) == ("2", "4")
    args = _parse(build_parser(), ["advise", "--model", "mlp", "--micro-batches", "1,2", "--chunks", "2,1"])  # one set
    assert args.micro_batches == "2,1"
    args = _parse(build_parser(), ["plan", "--model", "mlp", "--micro-batches", "2", "--chunks", "02"])
    assert args.micro_batches == "02"
    args = _parse(build_parser(), ["plan", "--model", "mlp", "--chunks", "4", "--chunks", "8"])  # one spelling: the last
    assert args.micro_batches == "8"
