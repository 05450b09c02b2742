"""Bad input, third round (issue 42): nonsense a model file or a profile file says, CSV cells a spreadsheet
would run, model files that misbehave at import, models larger than memory, and diverging losses in train.

Each case was accepted, a traceback, a hang or a silent exit before; now it is one line and exit 2, or the
right result."""
from __future__ import annotations

import json

import pytest

from test_refused_options import nothing_runs, profile_file, refused  # noqa: F401 - nothing_runs: no profiling, no runs

NET = '''
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x))
'''

SHORT = "\nimport torch" + NET + '''

def make_batch(batch_size):
    return torch.randn({inputs}, 4), torch.randint(0, 4, ({targets},))
'''


@pytest.mark.parametrize("inputs, targets, message", [
    ("3", "3", "make_batch(2) returned 3 samples (shape [3, 4]); it must return batch_size (2) samples"),
    ("batch_size", "3", "make_batch(2) returned 3 samples (shape [3]); it must return batch_size (2) samples"),
    ("batch_size * 2", "batch_size", "make_batch(2) returned 4 samples (shape [4, 4])"),
])
def test_a_make_batch_of_another_size_is_refused(capsys, tmp_path, inputs, targets, message):
    """A make_batch that always returns 3 samples was profiled and planned as batch 8, exit 0."""
    path = tmp_path / "short.py"
    path.write_text(SHORT.format(inputs=inputs, targets=targets))
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"], message)


@pytest.mark.parametrize("field, value, message", [
    ("repeats", 0, "p.repeats: must be at least 1, got 0"),
    ("repeats", -1, "repeats: must be >= 0, got -1"),
    ("repeats", 1.5, "repeats: expected int, got 1.5"),
    ("repeats", "5", "repeats: expected int, got '5'"),
    ("repeats", True, "repeats: expected int, got True"),
    ("batch", 0, "p.batch: must be at least 1, got 0"),
])
def test_a_profile_of_no_repeats_is_refused(capsys, tmp_path, field, value, message):
    """A profile file with "repeats": 0 (a mean of no runs) was used."""
    path = profile_file(tmp_path / "p.json", lambda e: e.update({field: value}))
    refused(capsys, ["plan", "--profile", str(path), "--stages", "2"], message.replace("p.", ""))


# ------------------------------------------------------------------------------- CSV a spreadsheet opens

HOSTILE = ["\r=1+1", "=1+1", "+1+1", "-1+1", "@SUM(A1)", "\t=1+1", "\n=1+1", "a\r=1+1", "a\n=1+1", "a\r\n@x",
           "'=1+1", "'plain", "-", "'", "plain, with a comma", 'say "hi"']


def spreadsheet_cells(path) -> list[list[str]]:
    """The rows and cells a spreadsheet sees: RFC 4180's quoting, and a bare CR or LF ends a row."""
    import csv

    with open(path, newline="") as f:
        return list(csv.reader(f))


def assert_no_formula(rows: list[list[str]], columns: int) -> None:
    assert all(len(cells) == columns for cells in rows), rows  # no cell broke into a new row
    for cells in rows:
        for cell in cells:
            assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r", "\n") or is_number(cell), cell


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_results_csv_cells_start_no_formula_and_read_back(tmp_path):
    """The results CSV wrote model names as they were: `\\r=1+1` unquoted, a new row starting with =1+1."""
    from pipebench.bench.store import results
    from test_report import make_row

    rows = [make_row("single", model=name, gpus="0", samples_per_s=100.0, first_loss=-1.5) for name in HOSTILE]
    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    for row in rows:
        results.append(row, csv_path, json_path)
    cells = spreadsheet_cells(csv_path)
    assert len(cells) == len(rows) + 1
    assert_no_formula(cells, len(results.CSV_COLUMNS))
    assert [r.model for r in results.load(csv_path)] == HOSTILE  # pipebench's reader: what it wrote
    assert [r.first_loss for r in results.load(csv_path)] == [-1.5] * len(rows)  # numbers stay numbers


def test_summary_csv_cells_start_no_formula(capsys, tmp_path):
    """summary.csv kept `\\r` unquoted behind its ': a spreadsheet's next row began with =1+1."""
    from pipebench.bench.cli import main
    from test_output_files import results_file
    from test_report import make_row

    rows = [make_row("single", model=name, gpus="0", samples_per_s=100.0) for name in HOSTILE]
    path = results_file(tmp_path / "r", rows)
    assert main(["report", str(path), "--out", str(tmp_path / "report")]) == 0
    cells = spreadsheet_cells(tmp_path / "report" / "summary.csv")
    assert len(cells) == len(rows) + 1
    assert_no_formula(cells, len(cells[0]))
    models = {c[cells[0].index("model")] for c in cells[1:]}
    assert models == {"'" + name if name[0] in "=+-@\t\r\n'" else name for name in HOSTILE}


def test_a_spreadsheet_edited_csv_still_reads(tmp_path):
    """What a spreadsheet saves: a byte-order mark, CRLF, the ' of a formula taken off, numbers as typed."""
    from pipebench.bench.store import results
    from test_report import make_row

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    results.append(make_row("single", model="=1+1", gpus="0", samples_per_s=100.0), csv_path, json_path)
    edited = tmp_path / "edited.csv"
    edited.write_bytes(b"\xef\xbb\xbf" + csv_path.read_bytes().replace(b"'=1+1", b"=1+1"))
    assert [r.model for r in results.load(edited)] == ["=1+1"]
    lf = tmp_path / "lf.csv"
    lf.write_bytes(csv_path.read_bytes().replace(b"\r\n", b"\n"))
    assert [r.model for r in results.load(lf)] == ["=1+1"]


@pytest.mark.parametrize("command", ["report", "fidelity"])
def test_a_csv_with_a_byte_order_mark_is_read(capsys, tmp_path, command):
    """A CSV saved by a spreadsheet, with a UTF-8 byte-order mark, was refused as "missing column 'model'"."""
    from pipebench.bench.predict import fidelity
    from pipebench.bench.store import results
    from pipebench.bench.cli import main
    from test_report import make_row

    csv_path, json_path = tmp_path / "r.csv", tmp_path / "r.json"
    for strategy, speed in (("single", 100.0), ("ddp", 150.0)):
        results.append(make_row(strategy, gpus="0", samples_per_s=speed, predicted_step_ms=500.0), csv_path,
                       json_path)
    marked = tmp_path / "marked.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + csv_path.read_bytes())
    if command == "report":
        assert main(["report", str(marked), "--out", str(tmp_path / "report")]) == 0, capsys.readouterr().err
        assert "ddp" in (tmp_path / "report" / "summary.csv").read_text()
    else:
        assert fidelity.main([str(marked)]) == 0, capsys.readouterr().err


# ------------------------------------------------------------------------ model files that misbehave at import

def pipebench(tmp_path, *argv, env=None, timeout=240):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "pipebench", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})})


def one_line(result, message: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    err = result.stderr.strip()
    assert len(err.splitlines()) == 1 and err.startswith("pipebench: error: ") and message in err, err


@pytest.mark.parametrize("body, message", [
    ("while True:\n    pass\n", "loop.py did not finish within 1 s (an endless loop, or something it waits for); "
                                 "set PIPEBENCH_IMPORT_SECONDS to wait longer"),
    ("try:\n    while True:\n        pass\nexcept BaseException:\n    while True:\n        pass\n",
     "did not finish within 1 s"),
    ("import os\nos._exit(3)\n", "it calls os._exit(3) when imported; a model file must only define things"),
    ("from os import _exit\ntry:\n    _exit(4)\nexcept Exception:\n    pass\n", "it calls os._exit(4) when imported"),
])
@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_an_import_that_hangs_or_exits_is_one_line(tmp_path, body, message):
    """An endless loop at import hung pipebench with no bound; os._exit(3) ended it with exit 3 and no word."""
    (tmp_path / "loop.py").write_text(NET + body)
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "loop.py:Net", "--input-shape", "4", "--stages", "2",
                       env={"PIPEBENCH_IMPORT_SECONDS": "1"}, timeout=120)
    one_line(result, message)


LATE = '''
import time

import torch
from torch import nn


class Net(nn.Module):
    calls = 0

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        Net.calls += 1
        if Net.calls > 3:  # after the checked first forward, once profiling is under way
            {hang}
        return self.b(self.a(x))
'''


@pytest.mark.parametrize("hang", [
    "while True:\n                time.sleep(0.05)",  # stopped by the timer's exception
    "while True:\n                try:\n                    time.sleep(0.05)\n                except BaseException:\n"
    "                    pass",  # swallows it: the watchdog ends the process
])
@pytest.mark.ci  # whole commands in subprocesses: run by CI after the default run
def test_a_forward_that_hangs_while_profiling_stops_at_the_time_limit(tmp_path, hang):
    """plan's profiling had no time limit (run's has --timeout): a forward that hung after its first call
    hung the command. Now --timeout bounds it and the line names what it waited for."""
    (tmp_path / "late.py").write_text(LATE.format(hang=hang))
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "late.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--timeout", "3", "--fresh", timeout=120)
    last = result.stderr.strip().splitlines()[-1]  # after the profile's own progress lines
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert last.startswith("pipebench: error: profiling ") and "late.py:Net did not finish within --timeout 3 s (at: " \
        in last and last.endswith("a forward or backward that never returns, or give a longer --timeout"), last


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon", "inf"])
def test_a_bad_import_limit_is_one_line(tmp_path, value, monkeypatch, capsys):
    from test_refused_options import refused as refused_here

    (tmp_path / "net.py").write_text(NET)
    monkeypatch.setenv("PIPEBENCH_IMPORT_SECONDS", value)
    refused_here(capsys, ["plan", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--stages", "2"],
                 f"PIPEBENCH_IMPORT_SECONDS={value!r} should be a number of seconds above 0")


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_thread_started_at_import_does_not_keep_pipebench_running(tmp_path):
    """The plan printed, and the process never exited: Python waits for every thread that is not a daemon."""
    (tmp_path / "threads.py").write_text(NET + "import threading, time\n"
                                         "threading.Thread(target=time.sleep, args=(10 ** 6,)).start()\n")
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "threads.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--repeats", "1", "--device", "cpu", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "stage" in result.stdout.lower()


# ------------------------------------------------------------------------------------ larger than memory

HUGE = '''
import psutil
import torch
from torch import nn

TWICE = 2 * psutil.virtual_memory().total // 4  # float32 parameters of twice this machine's memory


class Huge(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.zeros(TWICE))

    def forward(self, x):
        return x * self.a[:4]
'''


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_model_larger_than_the_free_memory_is_refused_before_it_is_built(capsys, tmp_path, command):
    """It was built on the CPU with no size check first (the battery's memory limit stopped it)."""
    import psutil

    (tmp_path / "huge.py").write_text(HUGE)
    model = f"{tmp_path / 'huge.py'}:Huge"
    free = psutil.virtual_memory().available
    argv = ["plan", "--model", model, "--stages", "2", "--input-shape", "4", "--device", "cpu"] if command == "plan" \
        else ["run", "--models", model, "--out", str(tmp_path / "out"), "--input-shape", "4"]
    refused(capsys, argv, "its parameters and buffers take")
    refused(capsys, argv, "GiB of memory free here; it is not built")
    assert free > 0  # both figures are in the line: the model's size, and what was free


def test_a_zoo_model_larger_than_the_free_memory_is_refused_before_it_is_built(capsys):
    import math

    import psutil

    depth = max(40, math.ceil(2 * psutil.virtual_memory().total / (12 * 4096 ** 2 * 4)))  # twice the memory
    refused(capsys, ["plan", "--model", "gpt", "--flavour", "8b", "--set", f"depth={depth}", "--stages", "2",
                     "--device", "cpu", "--batch", "8"],
            "model 'gpt' (8b): its parameters and buffers take")


from pipebench.partition.profiling.measure import profile_sizes as PROFILE_SIZES  # noqa: E402 - before nothing_runs

def _little_free(monkeypatch, module, free: int) -> None:
    """`module`'s free memory reads `free` bytes: a check against it allocates nothing."""
    monkeypatch.setattr(module, "free_bytes", lambda device: free)


def test_a_micro_batch_whose_activations_exceed_the_free_memory_is_refused_before_it_runs(capsys, monkeypatch):
    """Activations beyond the memory (gpt at seq_len 10,000,000, resnet18 at batch 16,777,216) were run on
    the CPU: the kernel's OOM killer ended pipebench, exit 137 and no line."""
    from pipebench.bench.cli import main
    from pipebench.partition.profiling import activations, measure

    monkeypatch.setattr(measure, "profile_sizes", PROFILE_SIZES)  # the sizes are judged, none is run
    _little_free(monkeypatch, activations, 1000)
    monkeypatch.setattr(measure, "profile_model", lambda *a, **k: pytest.fail("the size was run"))
    code = main(["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--batch", "8", "--chunks", "2",
                 "--device", "cpu", "--link-gbps", "1"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the line that says what is profiled
    assert code == 2 and last.startswith("pipebench: error: cannot run mlp with micro-batches of 4: its "
                                         "activations need about "), last
    assert last.endswith("more than the 1000 B free on cpu (a smaller --batch or model settings, or more --chunks)")


def test_only_the_sizes_whose_activations_exceed_the_free_memory_are_skipped():
    """Judged from the largest down: the sizes that fit are kept for the sweep, one estimate when all fit."""
    import torch
    from torch import nn

    from pipebench import models
    from pipebench.models.source import object_model
    from pipebench.partition.profiling import activations

    model = models.get_model("resnet18", "tiny")
    before = {name: b.clone() for name, b in model.module.named_buffers()}
    four, eight = (activations.activation_bytes(model, n, torch.device("cpu")) for n in (4, 8))
    assert 0 < four < eight  # twice the samples, more activations
    assert all(torch.equal(before[name], b) for name, b in model.module.named_buffers())  # BatchNorm's untouched
    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        _little_free(m, activations, four)
        assert list(activations.oversized(model, torch.device("cpu"), [2, 4, 8])) == [8]
    # A caller's module and its example inputs (pipebench.plan(module, x)) are judged too.
    given = object_model(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(2, 4), None, None)
    assert activations.activation_bytes(given, 8, torch.device("cpu")) > 0


def test_a_data_set_whose_sampler_order_exceeds_the_free_memory_is_refused(capsys, monkeypatch, tmp_path):
    """`train --data tokens:big.bin` on a 100G sparse file: the workers' DistributedSampler order (a list of
    Python ints a sample) was OOM-killed, "workers exited with status -9"."""
    from pipebench.bench.cli import main
    from pipebench.bench.train import data
    from pipebench.hardware import memory

    big = tmp_path / "big.bin"
    with open(big, "wb") as file:
        file.truncate(2 * (32 * 1_000_000 + 1))  # sparse: a million sequences of gpt tiny's 32 tokens, no disk used
    _little_free(monkeypatch, memory, 1_000_000)  # read where data.py asks it, when it asks
    monkeypatch.setattr(data, "_checked_samples", lambda *a: pytest.fail("samples were read"))
    code = main(["train", "--model", "gpt", "--flavour", "tiny", "--batch", "8", "--steps", "2", "--strategy",
                 "single", "--device", "cpu", "--data", f"tokens:{big}"])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after train's line of the devices
    assert code == 2 and last.startswith("pipebench: error: the data set's 1,000,000 samples need about 61.04 MiB "
                                         "for the sampler's shuffled order"), last
    assert "more than the 976.56 KiB free here" in last, last


# ------------------------------------------------------------------------------- names in answer lines

EVIL = "mlp\x1b[2J\r\nEVIL"
"""A model name that would clear the terminal and end the line it is in."""


def test_a_file_name_with_a_line_feed_stays_on_its_answer_line(capsys, tmp_path):
    """`plan --json $'a\\nb.json'` printed "plan written to .../a" and then "b.json" on a line of its own."""
    from pipebench.bench.cli import main

    path = profile_file(tmp_path / "p.json")
    assert main(["plan", "--profile", str(path), "--stages", "2", "--json", str(tmp_path / "a\nb.json")]) == 0
    assert f"plan written to {tmp_path}/a\\nb.json\n" in capsys.readouterr().out
    assert (tmp_path / "a\nb.json").is_file()  # the file has the name asked for; only the line escapes it


def test_a_model_name_with_a_line_feed_stays_on_advises_check_line(capsys, tmp_path):
    """A profile of a model named "mlp\\x1b[2J\\r\\nEVIL" made advise's `check it with:` line carry a raw
    line feed (its ESC and CR were escaped)."""
    from pipebench.bench.cli import main

    path = profile_file(tmp_path / "p.json", lambda entry: entry.update(model=EVIL))
    assert main(["advise", "--profile", str(path), "--stages", "2"]) == 0
    check = next(line for line in capsys.readouterr().out.splitlines() if "check it with:" in line)
    assert "pipebench run --models 'mlp\\x1b[2J\\r\\nEVIL' --batch 8" in check, check


def test_repeated_chunks_count_once():
    """`P --chunks auto,auto` was a ValueError traceback, though the docs say repeated values count once."""
    from pipebench.base.errors import UserError
    from pipebench.base.text.parse import parse_chunks

    assert parse_chunks("auto,auto", single=True) == [None]
    assert parse_chunks("4, 4", single=True) == [4]
    assert parse_chunks("2,auto,2,auto") == [2, None]
    with pytest.raises(UserError, match="one count or auto here"):
        parse_chunks("auto,4", single=True)


# ------------------------------------------------------------------------- found by the second pass

def test_a_profile_that_is_a_folder_is_one_line(capsys, tmp_path):
    """os.fdopen refused the folder first: an IsADirectoryError traceback."""
    refused(capsys, ["plan", "--profile", str(tmp_path), "--stages", "2"], "is a folder, not a profile file")


@pytest.mark.parametrize("option", ["--json", "--save-profile"])
def test_outputs_that_name_a_folder_or_a_kernel_file_are_refused_first(capsys, tmp_path, option):
    """`--json out/` wrote a file named out; `--save-profile /proc/self/status` was an OSError traceback
    after profiling."""
    plan = ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--batch", "8"]
    refused(capsys, [*plan, option, f"{tmp_path}/out/"], "names a folder (it ends with /); name a file")
    assert not (tmp_path / "out").exists()
    refused(capsys, [*plan, option, "/proc/self/status"], "is a file of the kernel's (in /proc or /sys)")


@pytest.mark.parametrize("returns, message", [
    ('"abc", "def"', "make_batch(2) must return (inputs, targets): inputs a tensor, a tuple of tensors or a dict"),
    ("torch.randn(n, 4)", "make_batch(2) must return (inputs, targets), got one tensor of shape [2, 4]"),
    ("torch.randn(n, 4), [0] * n", "make_batch(2) must return (inputs, targets): targets a tensor; got a list"),
    ("{1: torch.randn(n, 4)}, torch.zeros(n)", "inputs a tensor, a tuple of tensors or a dict"),
    ("(), torch.zeros(n)", "inputs a tensor, a tuple of tensors or a dict"),
    ("None", "make_batch(2) must return (inputs, targets), got a NoneType"),
])
def test_a_make_batch_of_other_things_than_tensors_is_one_line(capsys, tmp_path, returns, message):
    """Strings were an AttributeError traceback; one tensor was unpacked along its batch as (inputs, targets)."""
    path = tmp_path / "odd.py"
    path.write_text(SHORT.format(inputs="n", targets="n").replace("def make_batch(batch_size):", "def make_batch(n):")
                    .replace("return torch.randn(n, 4), torch.randint(0, 4, (n,))", f"return {returns}"))
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"], message)


@pytest.mark.parametrize("kwargs, message", [
    ({"loss_fn": 3}, "loss_fn takes a function loss_fn(outputs, targets), got a int"),
    ({"loss_fn": lambda outputs, targets: outputs.sum(1)}, "the loss must be one number (a scalar tensor), got [2]"),
    ({"settings": [1]}, "settings takes a dict such as {'loss': 'mse'}, got a list"),
])
def test_the_api_checks_a_modules_loss_and_settings(kwargs, message):
    """A loss_fn of 3 was a TypeError deep in the profiler; a loss of one number per sample was planned;
    settings=[1] was a TypeError from dict()."""
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
    with pytest.raises(UserError, match=None) as caught:
        pipebench.plan(net, torch.randn(2, 4), batch=8, stages=2, **kwargs)
    assert message in str(caught.value)


def test_the_api_refuses_a_module_without_parameters_and_profiles_that_are_not_profiles():
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    with pytest.raises(UserError, match="ReLU: has no parameters that require grad"):
        pipebench.plan(nn.ReLU(), torch.randn(2, 4), batch=8, stages=2)
    with pytest.raises(UserError, match="profiles takes Profile objects .*, got a NoneType"):
        pipebench.plan(profiles=[None], stages=2)  # an AttributeError before


# -------------------------------------------------------------------------------------- found by the third pass

THREAD_EXIT = '''
import os
import threading
import time


def later():
    time.sleep(0.3)
    os._exit(0)


threading.Thread(target=later, daemon=True).start()
'''


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_thread_that_calls_os_exit_after_the_import_is_one_line(tmp_path):
    """A daemon thread started at import, calling os._exit(0) once the import was over, ended the run with exit 0
    and no word."""
    (tmp_path / "later.py").write_text(NET + THREAD_EXIT)
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "later.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--repeats", "1", "--device", "cpu", timeout=120)
    assert result.returncode == 2, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]  # after the progress lines of the profiling it cut short
    assert last.startswith("pipebench: error: ") and \
        "later.py:Net: a thread it starts when imported calls os._exit(0); a model file must only define" in last, last


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_an_import_that_stops_the_timer_is_stopped_all_the_same(tmp_path):
    """signal.alarm(0), or a handler of its own for SIGALRM, let a model file's endless import run forever."""
    (tmp_path / "loop.py").write_text(NET + "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                            "signal.alarm(0)\nwhile True:\n    time.sleep(1)\n")
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "loop.py:Net", "--input-shape", "4", "--stages", "2",
                       env={"PIPEBENCH_IMPORT_SECONDS": "1"}, timeout=120)
    one_line(result, "loop.py did not finish within 1 s")


@pytest.mark.parametrize("cache", ["file", "file/below"])
def test_a_cache_folder_that_is_a_file_is_refused_first(capsys, tmp_path, monkeypatch, cache):
    """PIPEBENCH_CACHE naming a regular file: every entry failed to be written, and the cache went unused."""
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
    """Sixth pass S4: a name too long for the file system, or a ~user that does not exist, was an OSError or
    RuntimeError traceback (exit 1)."""
    monkeypatch.setenv(variable, value)
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--batch", "8", "--stages", "2"], message)


@pytest.mark.parametrize("argv, message", [
    (["--max-memory", "-1GB"], "--max-memory: cannot read memory size '-1GB'"),
    (["--max-memory", "-nan"], "--max-memory: cannot read memory size '-nan'"),
    (["--link-gbps", "-inf"], "--link-gbps takes 0"),
    (["--repeats", "-1e3"], "--repeats takes a positive integer"),
    (["--batch", "-8x"], "--batch takes a positive integer"),
])
def test_a_value_that_starts_with_a_minus_is_one_line(capsys, argv, message):
    """argparse took `-1GB` for an option: its usage message and "expected one argument", not one line."""
    refused(capsys, ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", *argv], message)


def test_control_characters_in_an_error_line_are_escaped(capsys, tmp_path):
    """A model name of `\\x1b[2J` cleared the terminal of whoever read the error; `\\r` rewrote the line."""
    refused(capsys, ["plan", "--model", "m\x1b[2J\r\x00x", "--stages", "2"], "unknown model 'm\\x1b[2J\\r\\x00x'")
    path = tmp_path / "n\x1b]0;owned\x07\r.py"
    path.write_text("raise ValueError('bad\\x1b[31m cell')\n")
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2"], "n\\x1b]0;owned\\x07\\r.py")
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2"], "ValueError: bad\\x1b[31m cell")


@pytest.mark.parametrize("value", ["float('nan')", "float('inf')", "-float('inf')"])
def test_a_make_batch_of_nan_or_infinite_inputs_is_refused(capsys, tmp_path, value):
    """NaN inputs were profiled and planned: every loss NaN, and what was timed was not the model's arithmetic."""
    path = tmp_path / "nan.py"
    path.write_text("import torch" + NET + f"""
def make_batch(batch_size):
    x = torch.randn(batch_size, 4)
    x[-1, 0] = {value}
    return x, torch.randint(0, 4, (batch_size,))
""")
    refused(capsys, ["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8"],
            "make_batch(2) returned NaN or infinite values (in the tensor of shape [2, 4])")


def test_the_api_refuses_nan_example_inputs():
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    x = torch.randn(2, 4)
    x[1, 2] = float("nan")
    with pytest.raises(UserError, match="example_inputs hold NaN or infinite values"):
        pipebench.plan(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), x, batch=8, stages=2)


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_loss_that_is_not_finite_is_refused_and_the_callers_weights_stay(value):
    """A loss of NaN (or inf) was profiled: the timed update at lr 0 wrote 0 * nan = nan into every weight of the
    caller's module, and the profile timed NaN arithmetic."""
    import torch
    from torch import nn

    import pipebench
    from pipebench.base.errors import UserError

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(UserError, match=f"Sequential: the loss is {value} on a batch of two"):
        pipebench.profile(model, torch.randn(2, 4), batch=8, micro_batches=1, repeats=1, cache=False,
                          loss_fn=lambda out, target: out.sum() * float(value))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_model_file_cannot_keep_its_signal_handlers_or_os_exit(tmp_path):
    """A file that ignored SIGINT and SIGTERM at import made the command one that neither Ctrl-C nor SIGTERM
    ends; one that replaced os._exit made pipebench's own exits (a worker's, the command's) do nothing."""
    import os
    import signal

    from pipebench.models.imports import import_target

    (tmp_path / "deaf.py").write_text(NET + "import os, signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nos._exit = print\n")
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert before[0] is not signal.SIG_IGN and before[1] is not signal.SIG_IGN
    namespace, name = import_target(f"{tmp_path / 'deaf.py'}:Net")
    assert name == "Net" and "Net" in namespace
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert os._exit is not print


@pytest.mark.parametrize("kwargs, message", [
    (dict(stages=10**6, batch=8), "stages takes a positive integer up to 1,024 (got 1000000)"),
    (dict(batch=2**63), "batch takes a positive integer up to 16,777,216 (got 9223372036854775808)"),
    (dict(micro_batches=10**9, batch=8), "micro_batches takes a positive integer up to 65,536 (got 1000000000)"),
    (dict(micro_batches=[2, 10**9], batch=8), "micro_batches takes a positive integer up to 65,536"),
    (dict(repeats=10**9, batch=8), "repeats takes a positive integer up to 1,000 (got 1000000000)"),
    (dict(devices=["cpu"] * 2000, batch=8), "devices takes up to 1,024 devices (got 2,000)"),
])
def test_the_api_bounds_counts_as_the_cli_does(kwargs, message):
    """The second pass: plan(stages=10**6) hung building a million-device plan (the CLI refuses --stages
    1000000 at once), and plan(batch=2**63) profiled before it said a micro-batch of 2**63 did not run."""
    import torch
    from torch import nn

    import pipebench

    with pytest.raises(pipebench.UserError, match=None) as caught:
        pipebench.plan(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), torch.randn(2, 4), device="cpu", **kwargs)
    assert message in str(caught.value), caught.value


# ------------------------------------------------------------------ train's outputs (the open cases)

DATA = '''
import torch


def data():
    return torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 4, (16,)))
'''


def train_files(tmp_path):
    """A model file that leaves a mark when imported, and a data file: train of them, its outputs to add."""
    (tmp_path / "net.py").write_text(NET + f"\nopen({str(tmp_path / 'imported')!r}, 'w').close()\n")
    (tmp_path / "data.py").write_text(DATA)
    return ["train", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--data",
            f"{tmp_path / 'data.py'}:data", "--batch", "8", "--steps", "2", "--device", "cpu", "--strategy", "single"]


LAUNCHER = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
            "MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "theirs", "PET_NNODES": "3"}


def test_a_callers_launcher_variables_stay_out_of_the_workers(monkeypatch):
    """Fourth pass, F2: RANK, WORLD_SIZE, LOCAL_RANK and the rest of torchrun's variables, inherited from a
    caller inside another job, reached the workers, which joined the caller's group (env://) or took its rank."""
    from pipebench.bench.launch.spawn import child_env

    for name, value in LAUNCHER.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PETS", "kept")
    env = child_env(None)
    assert not set(LAUNCHER) & set(env) and env["PETS"] == "kept"


@pytest.mark.ci  # a whole train: run by CI after the default run
def test_train_inside_another_jobs_variables_trains(capsys, monkeypatch, tmp_path):
    """Fourth pass, F2: `RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 pipebench train ...` was exit 1, "workers exited with
    status 0 and no result" (the single worker, rank 3 by RANK, wrote none)."""
    from pipebench.bench.cli import main

    for name, value in LAUNCHER.items():
        monkeypatch.setenv(name, value)
    assert main(train_files(tmp_path)) == 0, capsys.readouterr().err[-500:]


@pytest.mark.parametrize("outputs, message", [
    (["--csv", "{t}/data.py"], "--data and --csv name the same file"),
    (["--save", "{t}/data.py"], "--data and --save name the same file"),
    (["--save", "{t}/net.py"], "--model and --save name the same file"),
    (["--save", "{t}/x.pt", "--csv", "{t}/x.pt"], "--save and --csv name the same file"),
    (["--save", "{t}/link.pt", "--csv", "{t}/x.pt"], "--save and --csv name the same file"),
    (["--csv", "{t}/fifo"], "--csv {t}/fifo: is a FIFO; --csv is written more than once or read back: name a regular"),
    (["--save", "{t}/fifo"], "--save {t}/fifo: is a FIFO"),
    (["--save", "/dev/null"], "--save /dev/null: is a character device"),
    (["--save", "{t}/folder"], "--save {t}/folder: is a folder; name a file"),
    (["--save", "{t}/blocked.pt"], "blocked.pt.train is in the way (a file, where the training state's folder goes)"),
    (["--write-job", "{t}/data.py"], "--write-job {t}/data.py: a file is in the way; name a folder"),
    (["--write-job", "{t}/job", "--save", "{t}/job/job.json"], "--save and --write-job's job.json name the same file"),
    (["--write-job", "{t}/job", "--csv", "{t}/job/train.json"], "--csv and --write-job's train.json name the same"),
    (["--write-job", "{t}/folderjob"], "folderjob/job.json: is a folder; name a file"),
    (["--csv", "{t}/results.csv"], "--csv {t}/results.csv: holds something other than a train log (header step,"),
    (["--save", "{t}/p.json"], "--save {t}/p.json: holds something other than a checkpoint of torch.save's"),
    (["--save", "{t}/photos.zip"], "--save {t}/photos.zip: holds something other than a checkpoint of torch.save's"),
])
def test_train_outputs_are_checked_by_type_and_together_before_the_model_is_imported(capsys, tmp_path, outputs,
                                                                                      message):
    """`train --csv DATA` and `--save DATA` overwrote the user's data file; `--save X --csv X` was accepted;
    `--csv FIFO` hung in the worker. Now each is one line before the model file is imported."""
    import os
    import zipfile

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "blocked.pt.train").write_text("")
    (tmp_path / "folderjob" / "job.json").mkdir(parents=True)
    (tmp_path / "link.pt").symlink_to(tmp_path / "x.pt")
    (tmp_path / "results.csv").write_text("model,strategy,status\nmlp,single,ok\n")  # a run's (sixth pass S5)
    (tmp_path / "p.json").write_text('{"format": "pipebench-profile"}\n')
    with zipfile.ZipFile(tmp_path / "photos.zip", "w") as archive:  # someone's archive (seventh pass, D2)
        archive.writestr("holiday/data.txt", "not a checkpoint")
    argv = train_files(tmp_path)
    before = (tmp_path / "data.py").read_text()
    refused(capsys, [*argv, *(o.format(t=tmp_path) for o in outputs)], message.format(t=tmp_path))
    assert not (tmp_path / "imported").exists()
    assert (tmp_path / "data.py").read_text() == before


def test_train_writes_again_over_its_own_log_and_checkpoint_whatever_their_names(tmp_path):
    """The S5 check refuses another file at --csv or --save, not train's own: a train log under any name (--csv
    takes one), a checkpoint torch.save wrote, and an empty file are written again."""
    import argparse

    import torch

    from pipebench.bench.cli.train import check_outputs
    from pipebench.bench.train.curves import COLUMNS

    train_files(tmp_path)
    (tmp_path / "log.txt").write_text(",".join(COLUMNS) + "\n1,0,2.3,100,0.1\n")
    torch.save({"weight": torch.ones(1)}, tmp_path / "earlier.pt")
    (tmp_path / "empty.csv").write_text("")
    for csv, save in ((tmp_path / "log.txt", tmp_path / "earlier.pt"), (tmp_path / "empty.csv", None)):
        args = argparse.Namespace(model=f"{tmp_path / 'net.py'}:Net", data=f"{tmp_path / 'data.py'}:data",
                                  csv=str(csv), save=None if save is None else str(save), write_job=None)
        check_outputs(args)
        assert args.csv == str(csv)


# ------------------------------------------------------------------ the Python API, wrong types (the open cases)

@pytest.mark.parametrize("call, message", [
    (lambda pb: pb.solve(None, 2), "costs takes a list of numbers, got 'None' (NoneType)"),
    (lambda pb: pb.solve(["a", 1], 2), "costs takes a list of numbers"),
    (lambda pb: pb.solve([1, 2], "2"), "stages takes a positive integer, got '2' (str)"),
    (lambda pb: pb.solve([1, 2], 2, speeds=[1, None]), "speeds takes a list of numbers"),
    (lambda pb: pb.solve([1, 2], 2, memory=[1, 2], caps="x"), "caps takes a list of numbers, got 'x' (str)"),
    (lambda pb: pb.load_profiles(123), "the profile file's path must be a str or a pathlib.Path, got 123 (int)"),
    (lambda pb: pb.load_profiles(None), "the profile file's path must be a str or a pathlib.Path, got None"),
    (lambda pb: pb.Plan.load(5), "the plan file's path must be a str or a pathlib.Path, got 5 (int)"),
    (lambda pb: pb.save_profiles("x", [1]), "save_profiles(profiles, path) takes the profiles first, then the path"),
    (lambda pb: pb.save_profiles(3, "x"), "need at least one profile (pipebench.profile makes them), got int"),
    (lambda pb: pb.save_profiles([3], "x"), "profiles takes Profile objects (pipebench.profile makes them), got a int"),
])
def test_the_api_refuses_wrong_types_in_one_line(tmp_path, monkeypatch, call, message):
    """Each was a raw TypeError or AttributeError from deep inside (len(None), os.open(123), 'str' has no
    to_dict)."""
    import pipebench

    monkeypatch.chdir(tmp_path)
    with pytest.raises(pipebench.UserError) as caught:
        call(pipebench)
    assert message in str(caught.value), caught.value
    assert not (tmp_path / "x").exists()


def test_the_solver_still_takes_tuples_and_numpy():
    import numpy as np

    import pipebench

    assert pipebench.solve(np.array([1.0, 2, 3, 4]), np.int64(2)) == pipebench.solve((1, 2, 3, 4), 2) == [0, 3, 4]


# ------------------------------------------------------------------ the second pass of issue 42's done-criterion

@pytest.mark.parametrize("command", ["plan", "advise"])
def test_a_profile_read_and_saved_at_once_is_refused(capsys, tmp_path, command):
    """`--profile P --save-profile Q` exited 0 and wrote nothing: with --profile nothing is measured."""
    argv = [command, "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2", "--device", "cpu",
            "--save-profile", str(tmp_path / "q.json")]
    refused(capsys, argv, "--save-profile saves a profile measured here; with --profile nothing is measured")
    assert not (tmp_path / "q.json").exists()


def test_report_into_a_folder_it_reads_is_refused(capsys, tmp_path):
    """`report DIR --out DIR` wrote summary.csv among the results, and every later `report DIR` was refused."""
    from pipebench.bench.cli import main
    from test_output_files import results_file
    from test_report import make_row

    folder = results_file(tmp_path / "r", [make_row("single", gpus="0", samples_per_s=100.0)]).parent
    refused(capsys, ["report", str(folder), "--out", str(folder)], "is a folder read: its summary.csv would be")
    assert not (folder / "summary.csv").exists()
    assert main(["report", str(folder)]) == 0, capsys.readouterr().err


def test_run_profiles_into_its_results_folder_is_refused(capsys, tmp_path):
    """`run --out D --profiles D` put profile JSONs among the results: `report D` then refused the folder."""
    refused(capsys, ["run", "--models", "mlp", "--device", "cpu", "--out", str(tmp_path), "--profiles", str(tmp_path)],
            "--profiles and --out name one folder")


@pytest.mark.parametrize("call, message", [
    (lambda pb, p: pb.make_plan(p, None), "make_plan(profiles, request) takes a pipebench Request, got a NoneType"),
    (lambda pb, p: pb.make_plan(p, {"batch": 8}), "takes a pipebench Request, got a dict"),
    (lambda pb, p: pb.save_profiles(p, p.folder), "{t}: is a folder; name a file"),
    (lambda pb, p: pb.plan(profiles=p, stages=2).save(p.folder), "{t}: is a folder; name a file"),
    (lambda pb, p: pb.plan(profiles=p, stages=2).export("megatron", "x"), "need at least one profile"),
    (lambda pb, p: pb.plan(profiles=p, stages=2, precision="bf16"), "precision bf16 does not match the profiles' tf32"),
    (lambda pb, p: pb.solve([float("nan"), 1], 2), "layer costs must be finite and >= 0"),
    (lambda pb, p: pb.solve([1, 2], 2, speeds=[1]), "need one speed per stage (1 != 2)"),
    (lambda pb, p: pb.solve([1, 2], 2, memory=[1, 2], caps=[float("nan"), 5]), "memory caps must be numbers >= 0"),
    (lambda pb, p: pb.solve([1, 2], 2, memory=[float("nan"), 2], caps=[5, 5]), "layer memory must be finite"),
    (lambda pb, p: pb.solve([1, 2, 3], 2, cut_prices=[float("nan"), 0]), "cut prices must be finite and >= 0"),
    (lambda pb, p: pb.profile("mlp", [1], batch=8), "example_inputs is for an nn.Module object"),
    (lambda pb, p: pb.profile("convnet", flavour="tiny", data_dir=3, batch=8), "data_dir's path must be a str"),
])
def test_the_api_refuses_wrong_values_in_one_user_error(tmp_path, call, message):
    """Each was an AttributeError, an IsADirectoryError, a plain ValueError, a TypeError of pathlib, or
    accepted: a NaN cap fitted everything, an example for a zoo model was ignored, a tf32 profile planned
    as bf16 (the CLI refuses `--precision bf16` with a tf32 --profile)."""
    import pipebench

    class Profiles(list):
        folder = str(tmp_path)

    profiles = Profiles(pipebench.load_profiles(profile_file(tmp_path / "p.json")))
    with pytest.raises(pipebench.UserError) as caught:
        call(pipebench, profiles)
    assert message.format(t=tmp_path) in str(caught.value), caught.value
    assert pipebench.plan(profiles=profiles, stages=2, precision="tf32").batch == 8  # the profile's own: taken


@pytest.mark.parametrize("kwargs, message", [
    ({"note": 3}, "note takes a function, got a int"),
    ({"progress": "x"}, "progress takes a function, got a str"),
    ({"settings": {"depth": 3}}, "unknown setting(s) depth for python:Sequential; valid settings: num_classes"),
    ({"settings": {"input_shape": [4]}}, "unknown setting(s) input_shape for python:Sequential"),
    ({"settings": {"num_classes": "x"}}, "num_classes takes a positive integer (got str 'x')"),
    ({"settings": {"granularity": 1.5}}, "granularity takes a positive integer (got float 1.5)"),
])
def test_the_api_checks_a_modules_callbacks_and_settings(kwargs, message):
    """A TypeError each: 'int' object is not callable deep in the profiler, ModelSource's unexpected keyword,
    `'<' not supported between str and int`."""
    import torch
    from torch import nn

    import pipebench

    with pytest.raises(pipebench.UserError) as caught:
        pipebench.plan(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4)), torch.randn(2, 4), batch=8, stages=2,
                       **kwargs)
    assert message in str(caught.value), caught.value


@pytest.mark.parametrize("call, message", [
    ("import sys; sys.exit(3)", "it calls sys.exit(3) or exit() in its forward; a model must not end the process"),
    ("import os; os._exit(5)", "it calls os._exit(5) in its forward; a model must not end the process"),
])
@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_forward_that_ends_the_process_is_one_line(tmp_path, call, message):
    """pipebench ended with the model's exit status (3, 5) and no word."""
    (tmp_path / "ends.py").write_text(NET.replace("        return self.b(self.a(x))",
                                                  f"        {call}\n        return self.b(self.a(x))"))
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "ends.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--device", "cpu", timeout=120)
    one_line(result, message)


@pytest.mark.parametrize("command, output", [("plan", ["--json"]), ("plan", ["--save-profile"]),
                                             ("plan", ["--export", "deepspeed"]), ("advise", ["--json"])])
def test_an_output_onto_the_model_file_is_refused(capsys, tmp_path, command, output):
    """`plan --model net.py:Net --json net.py` profiled, then replaced the user's model file with the plan."""
    (tmp_path / "net.py").write_text(NET)
    refused(capsys, [command, "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--stages", "2",
                     "--device", "cpu", *output, str(tmp_path / "net.py")], "--model and ")
    assert (tmp_path / "net.py").read_text() == NET


@pytest.mark.parametrize("edit, message", [
    (dict(repeats=0), "profiles[0].repeats: must be at least 1, got 0"),
    (dict(batch="8"), "profiles[0].batch: expected int, got '8'"),
    (dict(layer=dict(params="x")), "profiles[0].layers[0].params: expected int, got 'x'"),
    (dict(layer=dict(forward_ms=float("nan"))), "profiles[0].layers[0].forward_ms: expected a finite number"),
])
def test_profiles_a_caller_edited_are_checked_as_a_files_are(tmp_path, edit, message):
    """plan(profiles=...) planned a Profile of no repeats (a file's is refused), and batch='8' or a layer's
    params='x' were TypeErrors of `//` and `+`; save_profiles wrote them."""
    import dataclasses

    import pipebench

    profile = pipebench.load_profiles(profile_file(tmp_path / "p.json"))[0]
    layer = edit.pop("layer", None)
    if layer:
        edit["layers"] = [dataclasses.replace(profile.layers[0], **layer), *profile.layers[1:]]
    edited = dataclasses.replace(profile, **edit)
    for call in (lambda: pipebench.plan(profiles=[edited], stages=2),
                 lambda: pipebench.save_profiles([edited], tmp_path / "q.json")):
        with pytest.raises(pipebench.UserError) as caught:
            call()
        assert message in str(caught.value), caught.value
    assert not (tmp_path / "q.json").exists()
    assert pipebench.plan(profiles=[profile], stages=2).batch == 8


def test_a_closed_stdout_or_descriptor_is_one_line(capsys, tmp_path):
    """`plan ... >&-` was an AttributeError traceback (sys.stdout is None) after the work; `--json /dev/fd/987`
    (no such descriptor open) a FileNotFoundError traceback, writing in /proc/<pid>/fd."""
    import subprocess
    import sys

    profile = profile_file(tmp_path / "p.json")
    refused(capsys, ["plan", "--profile", str(profile), "--stages", "2", "--json", "/dev/fd/987"],
            "--json /dev/fd/987: leads to a file descriptor that is not open; name a file")
    result = subprocess.run(f"{sys.executable} -m pipebench plan --profile {profile} --stages 2 >&-", shell=True,
                            capture_output=True, text=True, timeout=120)
    one_line(result, "stdout is closed (>&-); send it somewhere, e.g. > /dev/null")


@pytest.mark.parametrize("stdout", [">&-", "1</dev/null"])
def test_a_stdout_that_takes_nothing_is_one_line_before_the_work(tmp_path, stdout):
    """Fourth pass, F6: under `flock LOCK pipebench ... >&-` the lock file took descriptor 1, open for reading
    only: every answer was an EBADF traceback, `OSError: [Errno 9] Bad file descriptor`, after the work.
    `1</dev/null` is that descriptor."""
    import subprocess
    import sys

    profile = profile_file(tmp_path / "p.json")
    result = subprocess.run(f"{sys.executable} -m pipebench plan --profile {profile} --stages 2 {stdout}",
                            shell=True, capture_output=True, text=True, timeout=120)
    one_line(result, "stdout is closed (>&-); send it somewhere, e.g. > /dev/null")


@pytest.mark.parametrize("stderr", ["2>&-", "2</dev/null"])
def test_a_refusal_exits_2_where_stderr_takes_nothing(tmp_path, stderr):
    """Fourth pass, F6: with stderr closed a refused input exited 1 (the error line's own EBADF), and an answer
    was an EBADF traceback at the first progress line; now the refusal exits 2 and the answer is given."""
    import subprocess
    import sys

    profile = profile_file(tmp_path / "p.json")
    command = f"{sys.executable} -m pipebench plan --stages 2 --profile"
    refused = subprocess.run(f"{command} {tmp_path / 'nope.json'} {stderr}", shell=True, capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and refused.stdout == "", (refused.returncode, refused.stdout)
    answered = subprocess.run(f"{command} {profile} {stderr}", shell=True, capture_output=True, text=True,
                              timeout=120)
    assert answered.returncode == 0 and "on 2 stages" in answered.stdout, (answered.returncode, answered.stdout)


def test_a_descriptor_that_takes_nothing_is_output_lost():
    """Fourth pass, F6: EBADF (a descriptor closed, or open for reading only) is the output lost, as EPIPE and
    ENOSPC are, one line rather than a traceback."""
    import errno

    from pipebench.bench.cli import _output_lost

    assert _output_lost(OSError(errno.EBADF, "Bad file descriptor"))


def checkpoint(tmp_path, spoil):
    """A checkpoint of NET's Net as `train --save` leaves it after 2 steps of single, `spoil(path)` applied."""
    import torch

    from test_model_file_limits import NET  # noqa: F401 - the model file's text

    (tmp_path / "net.py").write_text(NET)
    namespace: dict = {}
    exec(NET, namespace)
    path, state = tmp_path / "m.pt", tmp_path / "m.pt.train"
    state.mkdir()
    net = namespace["Net"]()
    torch.save(net.state_dict(), path)
    layout = {"strategy": "single", "processes": 1, "batch": 8, "params": [n for n, _ in net.named_parameters()]}
    torch.save({"step": 2, "layout": layout, "optimizer": {}, "rng": torch.get_rng_state()}, state / "rank0.pt")
    latest = {"step": 2, "size": path.stat().st_size, "mtime_ns": path.stat().st_mtime_ns, "layout": layout}
    (state / "latest.json").write_text(json.dumps(latest))
    spoil(state)
    return path


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
    """A garbage, missing or folder rank0.pt was a worker's ValueError, IsADirectoryError or UnpicklingError
    (exit 1) once the workers had started; a step of -3 was resumed."""
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


@pytest.mark.parametrize("edit, message", [
    (dict(micro_batches=0), "plan: micro_batches must be at least 1, got 0"),
    (dict(virtual_stages=0), "plan: virtual_stages must be at least 1, got 0"),
    (dict(batch=7), "plan: batch 7 is not "),  # its micro-batches would not be the batch
    (dict(schedule="bogus"), "unknown schedule 'bogus'"),
    (dict(placement=[5, 9]), "plan: placement [5, 9] names devices beyond the 2 of 2 stages"),
    (dict(bounds=[0, 3, 4]), "plan: bounds [0, 3, 4] and the stages' layers are not contiguous"),
])
def test_a_plan_file_of_nonsense_is_refused_when_loaded(tmp_path, edit, message):
    """Plan.load took micro_batches 0 (then 'need at least one micro-batch' when simulated), virtual_stages 0
    (a ZeroDivisionError), an unknown schedule and placements on devices the plan has not."""
    import pipebench

    profiles = pipebench.load_profiles(profile_file(tmp_path / "p.json"))
    plan = pipebench.plan(profiles=profiles, stages=2)
    assert pipebench.Plan.from_dict(plan.to_dict()) == plan
    with pytest.raises(pipebench.UserError) as caught:
        pipebench.Plan.from_dict({**plan.to_dict(), **edit})
    assert message in str(caught.value), caught.value


@pytest.mark.parametrize("make, argv, message", [
    ("fifo", ["train", "--data", "tokens:{t}/x"], "--data tokens:{t}/x: is a FIFO, not a tokens file; give a regular"),
    ("zero", ["train", "--data", "tokens:{t}/x"], "is a character device, not a tokens file"),
    ("fifo", ["train", "--data", "{t}/x.py:data"], "is a FIFO, not a data file; give a regular file"),
    ("fifo", ["plan", "--stages", "2"], "x.py:Net: is a FIFO, not a model file; give a regular file"),
    ("zero", ["plan", "--stages", "2"], "x.py:Net: is a character device, not a model file"),
])
def test_special_files_as_data_or_model_say_what_they_are(capsys, tmp_path, make, argv, message):
    """`--data tokens:FIFO` and a data file that is a FIFO said "no such file"; a model file that is a link to a
    FIFO or /dev/zero was "ModuleNotFoundError: No module named '/dev/zero'"."""
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


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_forward_that_never_returns_is_one_line(tmp_path):
    """A model whose forward never returns hung `plan` and `run` at their first forward (run's in its parent,
    checking the model), with no bound and no word."""
    (tmp_path / "hang.py").write_text(NET.replace("        return self.b(self.a(x))",
                                                  "        import time\n        time.sleep(10 ** 6)"))
    result = pipebench(tmp_path, "plan", "--model", f"{tmp_path / 'hang.py'}:Net", "--input-shape", "4", "--stages",
                       "2", "--device", "cpu", env={"PIPEBENCH_IMPORT_SECONDS": "1"}, timeout=120)
    one_line(result, "hang.py:Net: running its forward did not finish within 1 s (an endless loop, or something it")


LATER = """
    def forward(self, x):
        import time
        Net.calls = getattr(Net, "calls", 0) + 1
        if Net.calls > 6:  # past the checks of the model: while it is profiled
            time.sleep(10 ** 6)
        return self.b(self.a(x))
"""


@pytest.mark.ci  # a whole run or train through the command line, 10-20 s: CI runs it after the default set
def test_a_forward_that_hangs_while_profiled_is_bounded_by_the_runs_timeout(tmp_path):
    """`run --timeout 20` of a model whose forward hung once profiling had begun hung for ever: the profiling
    child had no bound."""
    import json as json_

    (tmp_path / "later.py").write_text(NET.split("    def forward")[0] + LATER)
    result = pipebench(tmp_path, "run", "--models", f"{tmp_path / 'later.py'}:Net", "--input-shape", "4",
                       "--strategies", "single", "--device", "cpu", "--out", tmp_path / "out", "--timeout", "8",
                       timeout=150)
    assert result.returncode == 0, result.stderr
    rows = json_.loads(next((tmp_path / "out").glob("*.json")).read_text())["rows"]
    assert [r["status"] for r in rows] == ["unavailable"], rows
    assert "profiling" in rows[0]["reason"] and "did not finish within --timeout 8 s" in rows[0]["reason"], rows


@pytest.mark.parametrize("option", ["--save", "--csv"])
def test_an_empty_output_path_is_refused(capsys, tmp_path, option):
    """`train --save ''` trained and saved nothing, exit 0: the empty value read as no --save."""
    refused(capsys, [*train_files(tmp_path), option, ""], f"{option}: an empty path; name a file")
    assert not (tmp_path / "imported").exists()


def test_a_limit_that_passes_as_the_block_starts_is_its_one_line():
    """`--timeout 0.001`: the alarm came while the timer's watchdog thread was starting, before the block's
    `try`, and the internal exception escaped as a traceback (fourth pass, F10)."""
    import threading

    from pipebench.base.errors import UserError
    from pipebench.base.time_limit import time_limit

    import signal

    for _ in range(30):
        with pytest.raises(UserError, match="too late"):
            with time_limit(1e-6, lambda: "too late"):
                threading.Event().wait(0.05)
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # it was left armed, raising into later code


def test_a_train_refused_by_its_first_checks_is_one_line_without_the_device_line(capsys, tmp_path):
    """`train` said "--device cpu: training on the CPU, ..." before run_training's first checks refused the
    data, so a refusal was two lines (seventh pass, a note): the device line now comes with the first line
    of the training itself."""
    argv = train_files(tmp_path)
    (tmp_path / "data.py").write_text(DATA.replace("(16, 4)", "(16, 5)"))  # samples of 5 for a model of 4
    refused(capsys, argv, "the data's samples do not fit")
