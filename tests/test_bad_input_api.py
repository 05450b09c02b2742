"""Bad input to the Python API (issue 42, third pass: F3-F8): what `pipebench.run`, `plan` and `profile`
are given, checked as the command line checks it, and the caller's model and torch's state left as found.

Each case ran anyway before (a deep error after work began, failed rows, NaN weights, a probe blamed); now it
is one UserError before any work, or the right result."""
from __future__ import annotations

import math

import pytest

import pipebench
from pipebench.errors import UserError


# --------------------------------------------------------------------------------- F6: pipebench.run's options

@pytest.mark.parametrize("option, value, message", [
    ("steps", -1, r"steps takes a positive integer \(got -1\)"),
    ("steps", 0, r"steps takes a positive integer \(got 0\)"),
    ("steps", 2.5, r"steps takes a positive integer \(got float 2.5\)"),
    ("steps", "2", r"steps takes a positive integer \(got str '2'\)"),
    ("steps", 10**7, "steps takes a positive integer up to 1,000,000"),
    ("rounds", 0, r"rounds takes a positive integer \(got 0\)"),
    ("warmup", -1, r"warmup takes an integer from 0 \(got -1\)"),
    ("repeats", 0, r"repeats takes a positive integer \(got 0\)"),
    ("timeout", math.nan, "timeout takes a number from 0.001 to 1e"),
    ("timeout", "10", "timeout takes a number from 0.001 to 1e"),
    ("min_seconds", math.inf, "min_seconds takes a number from 0 to 86400"),
    ("chunks", "2", "chunks takes a list of micro-batch counts"),
    ("chunks", [0], "chunks takes a list of micro-batch counts"),
    ("out", 3, r"out takes a folder's path \(got int 3\)"),
    ("profiles", 5, r"profiles takes a folder's path \(got int 5\)"),
    ("data_dir", 5, r"data_dir takes a folder's path \(got int 5\)"),
    ("data_dir", "/nonexistent-pipebench-folder", "data_dir /nonexistent-pipebench-folder: no such folder"),
    ("training", "bf16", "training takes a pipebench.training.Training"),
    ("resume", "no", r"resume takes True or False \(got 'no'\)"),
    ("auto", -1, r"auto takes a positive integer \(got -1\)"),
    ("auto", 10**6, "auto takes a positive integer up to"),
])
def test_run_checks_its_options_as_the_command_does(tmp_path, option, value, message):
    """pipebench.run(steps=-1) ran the case and then failed with a StatisticsError; timeout=nan, chunks="2",
    out=3 and training="bf16" gave deep ValueErrors, TypeErrors and AttributeErrors; repeats=0 and steps=2.5
    wrote failed or unavailable rows; warmup=-1, min_seconds=inf, resume="no" and auto=-1 ran. Each is one
    UserError now, before anything is profiled or written."""
    out = tmp_path / "o"
    options = {"out": out, option: value}
    with pytest.raises(UserError, match=message):
        pipebench.run({"mlp": 8}, strategies=["single"], flavour="tiny", note=None, **options)
    assert not out.exists()


# ----------------------------------------------------------------- F5: a signal during the in-process CPU probe

def test_an_interrupt_during_the_cpu_probe_is_an_interrupt(monkeypatch):
    """Ctrl-C or SIGTERM (the CLI's KeyboardInterrupt) while the CPU processes' probe ran became
    DeviceError "the CPU processes' probe failed: " with no reason (exit 2, not 130); it is the
    KeyboardInterrupt again now, once the peer processes are ended."""
    from pipebench.hardware import probes

    started = []
    start = probes._start_peers

    def start_peers(*args):
        started.extend(start(*args))
        return started

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(probes, "_start_peers", start_peers)
    monkeypatch.setattr(probes, "_peer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probes.measure_cpu_processes(2)
    assert started and all(peer.poll() is not None for peer in started)


# ------------------------------------------------------------------- F7: API inputs that reached deep errors

@pytest.mark.parametrize("costs, message", [
    ([10**400, 1, 1], "costs takes finite numbers; one is too large for a float"),
])
def test_solve_refuses_a_number_no_float_holds(costs, message):
    """solve([10**400, 1, 1], 2) was an OverflowError of float()."""
    with pytest.raises(UserError, match=message):
        pipebench.solve(costs, 2)


def test_solve_takes_any_iterable_once():
    """A generator of costs (or memory, caps, cut prices) was read twice, the second time empty: "max() arg is
    an empty sequence". Each is read once now, and the answer is the list's."""
    costs, memory, prices = [1, 1, 1, 5, 1, 1, 1, 1], [1] * 8, [0.1] * 7
    assert pipebench.solve(iter(costs), 3) == pipebench.solve(costs, 3) == [0, 3, 4, 8]
    assert pipebench.solve(iter(costs), 3, speeds=iter([1, 2, 1]), memory=iter(memory), caps=iter([9, 9, 9]),
                           cut_prices=iter(prices)) == \
        pipebench.solve(costs, 3, speeds=[1, 2, 1], memory=memory, caps=[9, 9, 9], cut_prices=prices)
