"""stdout and stderr that take nothing: closed, full, open for reading only, or unable to encode the answer.
Each is one line and the right exit status, not a traceback after the work."""
from __future__ import annotations

import pytest

from helpers import one_line, profile_file, refused

pytestmark = pytest.mark.usefixtures("nothing_runs")  # conftest.py: profiling or a run fails the test


def test_a_full_stdout_is_one_line(tmp_path):
    """`plan > /dev/full`: an OSError Errno 28 traceback."""
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "pipebench", "plan", "--profile",
                               str(profile_file(tmp_path / "p.json")), "--stages", "2"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["pipebench: error: cannot write the output (No space left on device)"]


def test_a_closed_stdout_or_descriptor_is_one_line(capsys, tmp_path):
    """`plan ... >&-` (sys.stdout is None) and `--json /dev/fd/987` (no such descriptor open) are one line,
    not an AttributeError traceback after the work or a FileNotFoundError traceback writing in /proc/<pid>/fd.
    """
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
    """A stdout open for reading only, as under `flock LOCK pipebench ... >&-` where the lock file takes
    descriptor 1, is one line before the work, not an EBADF traceback (`OSError: [Errno 9] Bad file
    descriptor`) after it. `1</dev/null` is that descriptor."""
    import subprocess
    import sys

    profile = profile_file(tmp_path / "p.json")
    result = subprocess.run(f"{sys.executable} -m pipebench plan --profile {profile} --stages 2 {stdout}",
                            shell=True, capture_output=True, text=True, timeout=120)
    one_line(result, "stdout is closed (>&-); send it somewhere, e.g. > /dev/null")


@pytest.mark.parametrize("stderr", ["2>&-", "2</dev/null"])
def test_a_refusal_exits_2_where_stderr_takes_nothing(tmp_path, stderr):
    """With stderr closed a refused input exits 2 (not 1, from the error line's own EBADF), and an answer is
    given, with no EBADF traceback at the first progress line."""
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
    """EBADF (a descriptor closed, or open for reading only) is the output lost, as EPIPE and
    ENOSPC are, one line rather than a traceback."""
    import errno

    from pipebench.bench.cli import _output_lost

    assert _output_lost(OSError(errno.EBADF, "Bad file descriptor"))


@pytest.mark.ci  # a whole command in a subprocess: run by CI after the default run
def test_a_stdout_that_cannot_encode_the_answer_gets_escapes(tmp_path):
    """Under PYTHONIOENCODING=ascii the plan's own "±" is escaped, not a UnicodeEncodeError traceback."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONIOENCODING": "ascii", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "pipebench", "plan", "--model", "mlp", "--flavour", "tiny", "--stages",
                           "2", "--device", "cpu", "--batch", "8"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert "\\xb1" in done.stdout
