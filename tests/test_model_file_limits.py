"""What a model file cannot do to pipebench: hang it (its import, first forward and profiling are bounded in
time), end it (an exit, or a thread's os._exit, is one line), keep it running (a thread at import), or keep
the signal handlers and os._exit it replaced."""
from __future__ import annotations

import pytest

from helpers import NET, one_line, pipebench

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


# --------------------------------------------------------------------------------------------- time limits

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
    """An endless loop at import is bounded in time and os._exit(3) is caught: each is one line, not a hang or
    exit 3 with no word."""
    (tmp_path / "loop.py").write_text(NET + body)
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "loop.py:Net", "--input-shape", "4", "--stages", "2",
                       env={"PIPEBENCH_IMPORT_SECONDS": "1"}, timeout=120)
    one_line(result, message)


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_an_import_that_stops_the_timer_is_stopped_all_the_same(tmp_path):
    """signal.alarm(0), or a handler of its own for SIGALRM, let a model file's endless import run forever."""
    (tmp_path / "loop.py").write_text(NET + "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
                                            "signal.alarm(0)\nwhile True:\n    time.sleep(1)\n")
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "loop.py:Net", "--input-shape", "4", "--stages", "2",
                       env={"PIPEBENCH_IMPORT_SECONDS": "1"}, timeout=120)
    one_line(result, "loop.py did not finish within 1 s")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "soon", "inf"])
def test_a_bad_import_limit_is_one_line(tmp_path, value, monkeypatch, capsys):
    from helpers import refused as refused_here

    (tmp_path / "net.py").write_text(NET)
    monkeypatch.setenv("PIPEBENCH_IMPORT_SECONDS", value)
    refused_here(capsys, ["plan", "--model", f"{tmp_path / 'net.py'}:Net", "--input-shape", "4", "--stages", "2"],
                 f"PIPEBENCH_IMPORT_SECONDS={value!r} should be a number of seconds above 0")


def test_a_bad_import_limit_is_refused_where_no_model_file_is_imported(tmp_path, monkeypatch, capsys):
    """A bad import limit is refused even where a saved (or cached) profile means no model file is imported.
    """
    from helpers import profile_file, refused as refused_here

    monkeypatch.setenv("PIPEBENCH_IMPORT_SECONDS", "abc")
    refused_here(capsys, ["plan", "--profile", str(profile_file(tmp_path / "p.json")), "--stages", "2"],
                 "PIPEBENCH_IMPORT_SECONDS='abc' should be a number of seconds above 0")


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_forward_that_never_returns_is_one_line(tmp_path):
    """A model whose forward never returns is one line at the limit, at `plan`'s and `run`'s first forward
    (run's in its parent, checking the model), not a hang with no word."""
    (tmp_path / "hang.py").write_text(NET.replace("        return self.b(self.a(x))",
                                                  "        import time\n        time.sleep(10 ** 6)"))
    result = pipebench(tmp_path, "plan", "--model", f"{tmp_path / 'hang.py'}:Net", "--input-shape", "4", "--stages",
                       "2", "--device", "cpu", env={"PIPEBENCH_IMPORT_SECONDS": "1"}, timeout=120)
    one_line(result, "hang.py:Net: running its forward did not finish within 1 s (an endless loop, or something it")


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
    """plan's --timeout bounds its profiling, as run's bounds a run: a forward that hangs after its first call
    ends the command at the limit, in a line that names what it waited for."""
    (tmp_path / "late.py").write_text(LATE.format(hang=hang))
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "late.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--timeout", "3", "--fresh", timeout=120)
    last = result.stderr.strip().splitlines()[-1]  # after the profile's own progress lines
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert last.startswith("pipebench: error: profiling ") and "late.py:Net did not finish within --timeout 3 s (at: " \
        in last and last.endswith("a forward or backward that never returns, or give a longer --timeout"), last


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
    """`run --timeout 20` bounds the profiling child too: a model whose forward hangs once profiling has begun
    ends at the limit instead of hanging for ever."""
    import json as json_

    (tmp_path / "later.py").write_text(NET.split("    def forward")[0] + LATER)
    result = pipebench(tmp_path, "run", "--models", f"{tmp_path / 'later.py'}:Net", "--input-shape", "4",
                       "--strategies", "single", "--device", "cpu", "--out", tmp_path / "out", "--timeout", "8",
                       timeout=150)
    assert result.returncode == 0, result.stderr
    rows = json_.loads(next((tmp_path / "out").glob("*.json")).read_text())["rows"]
    assert [r["status"] for r in rows] == ["unavailable"], rows
    assert "profiling" in rows[0]["reason"] and "did not finish within --timeout 8 s" in rows[0]["reason"], rows


def test_a_limit_that_passes_as_the_block_starts_is_its_one_line():
    """`--timeout 0.001`: an alarm that comes while the timer's watchdog thread is starting, before the
    block's `try`, is the limit's one line, not the internal exception as a traceback."""
    import threading

    from pipebench.base.errors import UserError
    from pipebench.base.time_limit import time_limit

    import signal

    for _ in range(30):
        with pytest.raises(UserError, match="too late"):
            with time_limit(1e-6, lambda: "too late"):
                threading.Event().wait(0.05)
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # it was left armed, raising into later code


# ---------------------------------------------------------------------- exits, threads and signal handlers

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


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_thread_started_at_import_does_not_keep_pipebench_running(tmp_path):
    """A thread started at import that is not a daemon does not keep the process running once the plan is
    printed (Python waits for every such thread)."""
    (tmp_path / "threads.py").write_text(NET + "import threading, time\n"
                                         "threading.Thread(target=time.sleep, args=(10 ** 6,)).start()\n")
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "threads.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--repeats", "1", "--device", "cpu", timeout=300)
    assert result.returncode == 0, result.stderr
    assert "stage" in result.stdout.lower()


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
    """A daemon thread started at import, calling os._exit(0) once the import is over, is one line, not the
    run's end with exit 0 and no word."""
    (tmp_path / "later.py").write_text(NET + THREAD_EXIT)
    result = pipebench(tmp_path, "plan", "--model", tmp_path / "later.py:Net", "--input-shape", "4", "--stages", "2",
                       "--batch", "8", "--repeats", "1", "--device", "cpu", timeout=120)
    assert result.returncode == 2, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]  # after the progress lines of the profiling it cut short
    assert last.startswith("pipebench: error: ") and \
        "later.py:Net: a thread it starts when imported calls os._exit(0); a model file must only define" in last, last


def test_a_model_file_cannot_keep_its_signal_handlers_or_os_exit(tmp_path):
    """A file that ignores SIGINT and SIGTERM at import, or replaces os._exit, has them put back: Ctrl-C and
    SIGTERM end the command, and pipebench's own exits (a worker's, the command's) exit."""
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


@pytest.mark.parametrize("seconds", ["1e-9", "1e-6", "1e-4"])
def test_a_limit_that_passes_before_the_file_runs_names_the_limit(tmp_path, monkeypatch, seconds):
    """A limit so short that the timer fires while the guard itself is being set up (before or after the
    file's own code) is the time limit too, not the guard's internal exception as the file's failure."""
    from pipebench.base.errors import UserError
    from pipebench.models.imports import import_target

    monkeypatch.setenv("PIPEBENCH_IMPORT_SECONDS", seconds)
    for tries in range(20):  # where the timer fires varies: each import a file of its own name
        path = tmp_path / f"good{seconds}_{tries}.py"
        path.write_text(NET)
        try:
            import_target(f"{path}:Net")
        except UserError as exc:
            assert "_Stopped" not in str(exc) and "set PIPEBENCH_IMPORT_SECONDS to wait longer" in str(exc), exc


def test_a_umask_the_import_sets_is_put_back(tmp_path):
    """os.umask(0o777) in a model file is put back: the plan's JSON is not written mode 000, and
    pipebench.plan's caller keeps its own umask."""
    import os

    from pipebench.models.imports import import_target

    (tmp_path / "masked.py").write_text("import os\nos.umask(0o777)\n" + NET)
    before = os.umask(0o022)
    try:
        import_target(f"{tmp_path / 'masked.py'}:Net")
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(before)
