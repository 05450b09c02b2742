"""Bad input, third round's records (issue 42): advise under --checkpoint always, Plan files, results
rows and --resume folders that say what no measurement or run could, and counts beyond any machine.

Each case was accepted, a traceback, a hang or a late failure before; now it is one line and exit 2 (or
a record error), or the right answer."""
from __future__ import annotations

import json

import pytest

from pipebench.bench.cli import main
from test_bad_input import nothing_runs, profile_file, refused  # noqa: F401 - nothing_runs: no profiling, no runs


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
