"""scripts/error_split.py (an investigation, not shipped): committed rows predicted again from other profiles, with and without the CPU's
shared-cores pricing, and moved to the workers' clock."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from pipebench.bench.predict.ranking import predict
from pipebench.bench.store.results import Row
from pipebench.partition.profiling.profile_record import LayerProfile, Profile, save_profiles
from pipebench.request import Request

_SPEC = importlib.util.spec_from_file_location(
    "error_split", Path(__file__).resolve().parent.parent / "scripts" / "error_split.py")
error_split = sys.modules["error_split"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(error_split)


def _profiles(batch=8):
    def one(micro_batch):
        scale = micro_batch / batch
        layers = [LayerProfile(f"l{i}", 250, 1000, 1.0 * scale, 2.0 * scale, 4000, [micro_batch, 8], "float32", 1000)
                  for i in range(6)]
        return Profile("toy", "tiny", "cpu", "x86_64", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "int64",
                       layers, link_gbps=1.0, allreduce_gbps=0.5, link_latency_ms=0.1, core_contention=1.6,
                       action_ms=0.3, fsdp_layer_ms=0.5, whole_step_ms=10.0 if micro_batch == batch else None)
    return [one(batch // m) for m in (1, 2, 4, 8)]


def row(strategy, measured, micro_batches=1, **changes):
    return Row(**{**dict(model="toy", flavour="tiny", strategy=strategy, gpus="cpu", world_size=2, batch=8,
                         micro_batches=micro_batches, status="ok", step_ms=measured, samples_per_s=8e3 / measured,
                         predicted_step_ms=measured, started_at="2026-12-02T00:00:00"), **changes})


def test_on_the_pricing_is_advises_and_off_drops_only_the_cpus_shared_cores():
    profiles = _profiles()
    for strategy, m in (("pp-1f1b", 2), ("ddp", 1), ("fsdp", 1), ("dataparallel", 1)):
        today = predict(strategy, profiles, Request(devices=error_split.DEVICES), micro_batches=m if m > 1 else None)
        assert error_split.predict_row(row(strategy, 1.0, m), profiles, True) == pytest.approx(today.predicted_step_ms)
        if strategy != "dataparallel":  # contention, the runtime's costs, sends on the sender: all dropped
            assert error_split.predict_row(row(strategy, 1.0, m), profiles, False) < today.predicted_step_ms
    # Off, DataParallel on the CPU is single's plan, not the whole step the profile timed.
    single = predict("single", profiles, Request(devices=error_split.DEVICES)).predicted_step_ms
    assert single != pytest.approx(10.0)
    assert error_split.predict_row(row("dataparallel", 1.0), profiles, False) == pytest.approx(single)
    # And the patch does not outlive the call.
    assert predict("pp-1f1b", profiles, Request(devices=error_split.DEVICES), micro_batches=2).predicted_step_ms == pytest.approx(
        error_split.predict_row(row("pp-1f1b", 1.0, 2), profiles, True))


def test_auto_takes_the_anchors_measured_and_interpolates_the_rest():
    measured = _profiles()
    auto = error_split.interpolated(measured)
    by_count = {p.micro_batches: p for p in auto}
    assert sorted(by_count) == [1, 2, 4, 8]
    assert all(by_count[m] is next(p for p in measured if p.micro_batches == m) for m in (1, 2, 8))
    assert by_count[4].interpolated_from == [1, 4]


def test_rows_move_to_the_workers_clock_by_what_the_parents_clock_added():
    rows = [row("single", 10.0), row("ddp", 20.0), row("fsdp", 30.0)]
    timed = [{"model": "toy", "strategy": "single", "parent_ms": 9.0, "workers_ms": 6.5},
             {"model": "toy", "strategy": "ddp", "parent_ms": 14.0, "workers_ms": 13.0}]
    moved = error_split.on_workers_clock(rows, timed)
    assert [(r.strategy, r.step_ms) for r in moved] == [("single", 7.5), ("ddp", 19.0)]


def test_the_table_scores_every_step_each_round(tmp_path, capsys):
    for kind in ("old-code1", "static1", "dynamic1", "dynamic2", "auto-run1"):
        save_profiles(_profiles(), tmp_path / f"toy-{kind}.profile.json")
    rows = tmp_path / "rows.csv"
    from pipebench.bench.store.results import append

    for r in (row("single", 10.0), row("pp-1f1b", 20.0, 2, predicted_step_ms=10.0)):
        append(r, rows, tmp_path / "rows.json")
    assert error_split.main(["table", str(tmp_path), f"a={tmp_path / 'rows.json'}"]) == 0
    out = capsys.readouterr().out
    assert "committed (as run)" in out and "+ the shared-cores pricing (b)" in out
    committed = next(line for line in out.splitlines() if "committed" in line)
    assert "25%" in committed  # |10 - 10| / 10 and |10 - 20| / 20: median 25%
    interpolation = next(line for line in out.splitlines() if "interpolated" in line)
    assert interpolation.rstrip().endswith("1.00x")  # both rows ran at measured sizes: nothing moved
    assert error_split.main(["table", str(tmp_path), "no-label"]) == 2
