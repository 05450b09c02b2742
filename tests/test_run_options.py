"""What `pipebench run` makes of the options it is given on the CPU: where its rows go by default, the quick
defaults only where the user gave nothing, a case named twice run once, and as many processes as asked."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import refused
from pipebench.bench.cases import run_suite
from pipebench.bench.cli import main

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


@pytest.fixture
def suite_options(monkeypatch):
    """The options and machine run_suite would have been given (it returns no rows)."""
    seen = {}

    def fake_run_suite(options, machine, note=print):
        seen.update(options=options, machine=machine)
        return [], options.out / "rows.csv", options.out / "rows.json"

    monkeypatch.setattr(run_suite, "run_suite", fake_run_suite)
    return seen


def test_rows_go_to_a_folder_of_their_own_by_default(capsys, tmp_path, monkeypatch, suite_options):
    """Not beside the reference results committed in the checkout's results/."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--models", "mlp", "--strategies", "single"]) == 0
    assert suite_options["options"].out == tmp_path / "pipebench-results" and (tmp_path / "pipebench-results").is_dir()
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

    assert main(["run", "--models", "mlp", "--quick", "--micro-batches", "2,4", "--out", str(tmp_path)]) == 0
    assert suite_options["options"].micro_batches == [2, 4]
    assert main(["run", "--models", "mlp", "--quick", "--chunks", "2,8", "--out", str(tmp_path)]) == 0  # the old name
    assert suite_options["options"].micro_batches == [2, 8]


def test_chunks_is_an_alias_of_micro_batches():
    """--chunks, the micro-batch count's first name, is the same option as --micro-batches in plan, advise and
    run, and their help names --micro-batches first."""
    from pipebench.bench.cli import _subparsers, build_parser

    commands = _subparsers(build_parser())
    for command in (commands["plan"], commands["advise"], commands["run"]):
        (option,) = [action for action in command._actions if "--chunks" in action.option_strings]
        assert option.option_strings == ["--micro-batches", "--chunks"] and option.dest == "micro_batches"
        assert "--micro-batches" in command.format_help()


def test_run_takes_chunks_as_the_old_name_of_micro_batches(tmp_path, suite_options):
    """pipebench.run takes chunks=, the old name of micro_batches, as the same option; both at once is one
    TypeError, before anything runs."""
    import pipebench

    for name in ("micro_batches", "chunks"):
        pipebench.run({"mlp": 8}, strategies=["pp-1f1b"], flavour="tiny", note=None, out=tmp_path, **{name: [2, None]})
        assert suite_options["options"].micro_batches == [2, None]
        suite_options.clear()
    with pytest.raises(TypeError, match=r"run takes micro_batches or its alias chunks, not both"):
        pipebench.run({"mlp": 8}, strategies=["pp-1f1b"], note=None, out=tmp_path, micro_batches=[2], chunks=[2])
    assert not suite_options


def test_stages_is_an_alias_of_cpu_processes_in_run_and_train():
    """run and train take --stages, the old name of their count of CPU processes (plan and advise keep it for
    pipeline stages), as the same option as --cpu-processes, and their help names --cpu-processes first."""
    from pipebench.bench.cli import _subparsers, build_parser

    commands = _subparsers(build_parser())
    for command in (commands["run"], commands["train"]):
        (option,) = [action for action in command._actions if "--stages" in action.option_strings]
        assert option.option_strings == ["--cpu-processes", "--stages"] and option.dest == "cpu_processes"
    for command in (commands["plan"], commands["advise"]):
        (option,) = [action for action in command._actions if "--stages" in action.option_strings]
        assert option.option_strings == ["--stages"]


def test_a_case_named_twice_is_one_case(capsys, tmp_path, suite_options):
    """`--strategies single,single` and `--micro-batches auto,auto` are one case each, one row, not two rows
    with one case key."""
    assert main(["run", "--models", "mlp,mlp", "--strategies", "single,single", "--micro-batches", "auto,auto,2,2",
                 "--out", str(tmp_path)]) == 0, capsys.readouterr().err
    options = suite_options["options"]
    assert (list(options.models), options.strategies, options.micro_batches) == (["mlp"], ["single"], [None, 2])


def test_the_cpu_run_takes_as_many_processes_as_asked(capsys, tmp_path, monkeypatch, suite_options):
    """--device cpu --cpu-processes 3: three CPU processes, even where a GPU is visible (advise's check
    command on a GPU machine); --cpu-processes alone where GPUs are visible is refused: it counts CPU
    processes. --stages, its old name, is the same option."""
    import torch

    assert main(["run", "--models", "mlp", "--batch", "12", "--cpu-processes", "3", "--out", str(tmp_path)]) == 0  # no GPU: the CPU
    assert suite_options["machine"].devices == 3 and suite_options["machine"].gpus is None
    assert main(["run", "--models", "mlp", "--batch", "12", "--stages", "4", "--out", str(tmp_path)]) == 0  # the old name
    assert suite_options["machine"].devices == 4 and suite_options["machine"].gpus is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert main(["run", "--models", "mlp", "--batch", "12", "--device", "cpu", "--cpu-processes", "3",
                 "--out", str(tmp_path)]) == 0
    assert suite_options["machine"].devices == 3 and suite_options["machine"].gpus is None
    assert "--device cpu: running on the CPU, 3 processes standing in for devices" in capsys.readouterr().err
    refused(capsys, ["run", "--models", "mlp", "--cpu-processes", "3", "--out", str(tmp_path)],
            "--cpu-processes is for the CPU: add --device cpu")


def test_a_model_file_that_changes_folder_moves_none_of_the_runs_paths(capsys, tmp_path, monkeypatch, suite_options):
    """`run --models m/chdir.py:Net --out cd10run` with a model file calling os.chdir("/") when imported
    writes ./cd10run and finds its model file: --models' files, --out and --profiles (and --data-dir) are made
    absolute before any model file is imported."""
    from helpers import NET

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "chdir.py").write_text("import os\nos.chdir('/')\n" + NET)
    assert main(["run", "--models", "m/chdir.py:Net", "--input-shape", "4", "--strategies", "single", "--device", "cpu",
                 "--out", "cd10run", "--profiles", "saved"]) == 0, capsys.readouterr().err
    options = suite_options["options"]
    assert os.getcwd() == "/"  # the file was imported here, before the suite
    assert list(options.models) == [f"{tmp_path / 'm' / 'chdir.py'}:Net"]
    assert (options.out, options.profiles) == (tmp_path / "cd10run", tmp_path / "saved")
    assert (tmp_path / "cd10run").is_dir() and not Path("/cd10run").exists()


@pytest.mark.parametrize("option", ["--out", "--profiles", "--data-dir"])
def test_an_empty_folder_is_refused(capsys, tmp_path, monkeypatch, suite_options, option):
    """`run --out ''` and `--profiles ''` are refused, as `report --out ''` is: an empty path names no folder
    (neither the working folder nor none given)."""
    monkeypatch.chdir(tmp_path)
    out = [] if option == "--out" else ["--out", str(tmp_path / "r")]
    refused(capsys, ["run", "--models", "mlp", "--strategies", "single", *out, option, ""],
            f"{option}: an empty path; name a folder")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["out", "profiles", "data_dir"])
def test_run_options_refuse_an_empty_folder(name):
    from pipebench.base.errors import UserError
    from pipebench.bench.cases.run_options import RunOptions

    with pytest.raises(UserError, match=f"^{name}: an empty path; name a folder$"):
        RunOptions(models={"mlp": 8}, strategies=["single"], **{name: ""})


def test_run_options_keep_numpy_values_as_pythons():
    """A numpy batch or setting (pipebench.run({"mlp": np.int64(8)}) or overrides={"depth": np.int64(2)}) is
    kept as the Python value it holds, which json can write, an array (or a tuple of numpy numbers) as a list
    (tuple) of Python numbers."""
    import json

    import numpy as np

    from pipebench.bench.cases.run_options import RunOptions

    options = RunOptions(models={"mlp": np.int64(8)}, strategies=["single"],
                         overrides={"depth": np.int64(2), "scale": np.float32(0.5), "input_shape": np.array([1, 28]),
                                    "sizes": (np.int64(3), 4), "loss": "mse"})
    assert options.models == {"mlp": 8} and type(options.models["mlp"]) is int
    assert options.overrides == {"depth": 2, "scale": 0.5, "input_shape": [1, 28], "sizes": (3, 4), "loss": "mse"}
    assert [type(v) for v in (options.overrides["depth"], options.overrides["scale"], *options.overrides["sizes"])] \
        == [int, float, int, int]
    assert json.loads(json.dumps({"models": options.models, "overrides": options.overrides}))["models"] == {"mlp": 8}


def test_the_api_caps_and_speeds_the_machine_as_the_command_does(capsys, tmp_path, suite_options):
    """pipebench.run takes what `pipebench run --max-memory --speeds` is given (the command calls it): the
    machine capped and its speeds set before the options are checked, and on_start told what runs; on the
    CPU --gpu-memory and --speeds auto are refused in the command's words, from either."""
    import pipebench
    from pipebench.base.errors import UserError

    started = []
    pipebench.run(["mlp"], strategies=["single"], out=tmp_path, note=None, max_memory=2**30, speeds=[1, 0.5],
                  on_start=lambda options, machine: started.append((options.out, machine.speeds)))
    assert suite_options["machine"].caps == [2**30] * 2 and suite_options["machine"].speeds == [1, 0.5]
    assert started == [(tmp_path, [1, 0.5])]
    assert main(["run", "--models", "mlp", "--strategies", "single", "--out", str(tmp_path), "--max-memory", "1GiB",
                 "--speeds", "1,0.5"]) == 0
    assert suite_options["machine"].caps == [2**30] * 2 and suite_options["machine"].speeds == [1, 0.5]
    capsys.readouterr()
    for keywords, option, message in ((dict(gpu_memory=2**30), ["--gpu-memory", "1GiB"], "--gpu-memory caps GPU memory"),
                                      (dict(speeds="auto"), ["--speeds", "auto"], "--speeds auto probes GPUs")):
        with pytest.raises(UserError, match=message):
            pipebench.run(["mlp"], strategies=["single"], out=tmp_path, note=None, **keywords)
        refused(capsys, ["run", "--models", "mlp", "--out", str(tmp_path), *option], message)
