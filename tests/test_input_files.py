"""Files pipebench reads (profiles, plans, results, model and data files) that are corrupt, say what no
measurement could, or are not regular files: one line and exit status 2 (or a record error), never a
traceback, a wait on a FIFO, or a read without end."""
from __future__ import annotations

import json

import pytest

from helpers import DATA, NET, profile_file, refused
from pipebench.bench.cli import main

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# ------------------------------------------------------------------------------------------------ profiles

def every_layer(key, value):
    def edit(entry):
        for layer in entry["layers"]:
            layer[key] = value
    return edit


def test_a_good_profile_plans(capsys, tmp_path):
    """The profile the tests below spoil is a good one."""
    assert main(["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2",
                 "--speeds", "1,0.5", "--link-gbps", "10"]) == 0, capsys.readouterr().err


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


@pytest.mark.parametrize("field, value, message", [
    ("repeats", 0, "p.repeats: must be at least 1, got 0"),
    ("repeats", -1, "repeats: must be >= 0, got -1"),
    ("repeats", 1.5, "repeats: expected int, got 1.5"),
    ("repeats", "5", "repeats: expected int, got '5'"),
    ("repeats", True, "repeats: expected int, got True"),
    ("batch", 0, "p.batch: must be at least 1, got 0"),
])
def test_a_profile_of_no_repeats_is_refused(capsys, tmp_path, field, value, message):
    """A profile file with "repeats": 0 (a mean of no runs) is refused, not used."""
    path = profile_file(tmp_path / "p.json", lambda e: e.update({field: value}))
    refused(capsys, ["plan", "--profile", str(path), "--stages", "2"], message.replace("p.", ""))


@pytest.mark.parametrize("number, message", [("9" * 5000, "an integer of 5,000 digits"),
                                             ("1e400", "the number 1e400 is beyond any measurement")])
@pytest.mark.parametrize("command", ["plan", "advise"])
def test_a_profile_with_numbers_beyond_any_measurement_is_one_line(capsys, tmp_path, number, message, command):
    """A profile whose numbers lie beyond any measurement (past Python's 4,300-digit limit, or past a float)
    is one line, not a ValueError or OverflowError traceback."""
    path = profile_file(tmp_path / "p.json")
    path.write_text(path.read_text().replace('"param_bytes": 40', f'"param_bytes": {number}', 1))
    refused(capsys, [command, "--profile", str(path), "--stages", "2"], message)


def test_an_empty_profile_path_is_one_line_about_it(capsys):
    """`--profile ''` names no file: it is refused as an empty path, not read as the working folder or taken
    as no --profile at all (which asks for --model); the API's load_profiles('') the same."""
    import pipebench
    from pipebench.partition.profiling.profile_record import ProfileError

    for command in ("plan", "advise"):
        refused(capsys, [command, "--profile", "", "--stages", "2"], "the profile file: an empty path; name a file")
    with pytest.raises(ProfileError, match="an empty path"):
        pipebench.load_profiles("")


def test_a_profile_that_is_a_folder_is_one_line(capsys, tmp_path):
    """os.fdopen refused the folder first: an IsADirectoryError traceback."""
    refused(capsys, ["plan", "--profile", str(tmp_path), "--stages", "2"], "is a folder, not a profile file")


# --------------------------------------------------------------------------------------------------- plans

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
    """Plan.load refuses a step of -5 ms, a bubble of 5.0, a calibration of 0 and a stage of no layers, as a
    profile's would be refused: split_spec() and export() never see them."""
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


@pytest.mark.parametrize("edit, message", [
    (dict(micro_batches=0), "plan: micro_batches must be at least 1, got 0"),
    (dict(virtual_stages=0), "plan: virtual_stages must be at least 1, got 0"),
    (dict(batch=7), "plan: batch 7 is not "),  # its micro-batches would not be the batch
    (dict(schedule="bogus"), "unknown schedule 'bogus'"),
    (dict(placement=[5, 9]), "plan: placement [5, 9] names devices beyond the 2 of 2 stages"),
    (dict(bounds=[0, 3, 4]), "plan: bounds [0, 3, 4] and the stages' layers are not contiguous"),
])
def test_a_plan_file_of_nonsense_is_refused_when_loaded(tmp_path, edit, message):
    """Plan.load refuses micro_batches 0 (else 'need at least one micro-batch' when simulated), virtual_stages
    0 (else a ZeroDivisionError), an unknown schedule and placements on devices the plan has not."""
    import pipebench

    profiles = pipebench.load_profiles(profile_file(tmp_path / "p.json"))
    plan = pipebench.plan(profiles=profiles, stages=2)
    assert pipebench.Plan.from_dict(plan.to_dict()) == plan
    with pytest.raises(pipebench.UserError) as caught:
        pipebench.Plan.from_dict({**plan.to_dict(), **edit})
    assert message in str(caught.value), caught.value


# ------------------------------------------------------------------------------------------------- results

@pytest.mark.parametrize("field", ["samples_per_s", "step_ms"])
def test_an_ok_row_of_zero_is_refused_when_read(capsys, tmp_path, field):
    """An ok row of 0 samples/s is refused in one line when read (and so by `report`): no "infx one CPU
    process" in the report, no inf in summary.csv."""
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


def resume_folder(tmp_path):
    from test_results_file import _row_dict, _write_json

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    _write_json(json_path, [_row_dict()])
    return csv_path, json_path


def test_a_resumed_csv_that_is_a_fifo_is_refused_unopened(tmp_path):
    """run --resume refuses a results CSV that is a FIFO without opening it, as it refuses its JSON twin as a
    FIFO: opened, it would wait for ever."""
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
    """A results CSV that is a link to /dev/null is refused, not moved aside and replaced by a file."""
    import os

    from pipebench.bench.store.results import ResultsError, start_run

    csv_path, json_path = resume_folder(tmp_path)
    os.symlink("/dev/null", csv_path)
    with pytest.raises(ResultsError) as raised:
        start_run(csv_path, json_path, resume=True)
    assert "is a character device, not a results file; give a regular file" in str(raised.value)
    assert os.readlink(csv_path) == "/dev/null"


# ------------------------------------------------------------------------------------------- special files

@pytest.mark.parametrize("argv", [["plan", "--stages", "2", "--profile"], ["advise", "--stages", "2", "--profile"],
                                  ["report"]])
def test_a_fifo_is_refused_not_waited_on(capsys, tmp_path, within_seconds, argv):
    """`--profile fifo` and `report x.json` on a FIFO waited for a writer forever."""
    import os

    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    refused(capsys, [*argv, str(fifo)], "x.json: is a FIFO, not a")


@pytest.mark.parametrize("argv", [["plan", "--stages", "2", "--profile"], ["report"]])
def test_a_link_to_dev_zero_is_refused_before_a_byte_is_read(capsys, tmp_path, within_seconds, argv):
    """A `*.json` link to /dev/zero: a MemoryError traceback, or the machine's memory without a limit."""
    (tmp_path / "z.json").symlink_to("/dev/zero")
    refused(capsys, [*argv, str(tmp_path / "z.json")], "z.json: is a character device, not a")


def test_reads_are_bounded(tmp_path):
    from pipebench.base.errors import UserError
    from pipebench.base.fileio.files import read_text

    (tmp_path / "big.json").write_text("x" * 2000)
    with pytest.raises(UserError, match="big.json: larger than"):
        read_text(tmp_path / "big.json", kind="profile", limit=1000)


@pytest.mark.parametrize("make, argv, message", [
    ("fifo", ["train", "--data", "tokens:{t}/x"], "--data tokens:{t}/x: is a FIFO, not a tokens file; give a regular"),
    ("zero", ["train", "--data", "tokens:{t}/x"], "is a character device, not a tokens file"),
    ("fifo", ["train", "--data", "{t}/x.py:data"], "is a FIFO, not a data file; give a regular file"),
    ("fifo", ["plan", "--stages", "2"], "x.py:Net: is a FIFO, not a model file; give a regular file"),
    ("zero", ["plan", "--stages", "2"], "x.py:Net: is a character device, not a model file"),
])
def test_special_files_as_data_or_model_say_what_they_are(capsys, tmp_path, make, argv, message):
    """`--data tokens:FIFO`, a data file that is a FIFO, and a model file that is a link to a FIFO or
    /dev/zero are each refused with what they are, not "no such file" or "ModuleNotFoundError: No module named
    '/dev/zero'"."""
    import os

    target = tmp_path / ("x.py" if "x.py" in " ".join(argv) or argv[0] == "plan" else "x")
    if make == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    (tmp_path / "net.py").write_text(NET)
    (tmp_path / "data.py").write_text(DATA)
    model = f"{target}:Net" if argv[0] == "plan" else f"{tmp_path / 'net.py'}:Net"
    rest = ["--batch", "8", "--steps", "2", "--strategy", "single"] if argv[0] == "train" else []
    code = main_of([argv[0], "--model", model, "--input-shape", "4", "--device", "cpu", *rest,
                    *(a.format(t=tmp_path) for a in argv[1:])])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("pipebench: error: ") and message.format(t=tmp_path) in last, last


def main_of(argv):
    from pipebench.bench.cli import main

    return main(argv)
