"""The fidelity benchmark's figures (bench/predict/fidelity.py): step and memory errors, Kendall's tau, regret."""
from __future__ import annotations

import pytest

from pipebench.bench.predict.fidelity import fidelity, kendall_tau, main, noise_floor, table
from pipebench.bench.store.results import Row, append


def row(strategy, measured_ms, predicted_ms, **changes) -> Row:
    values = dict(model="gpt", flavour="tiny", strategy=strategy, gpus="0,1", world_size=2, batch=64,
                  micro_batches=1, status="ok", device_name="NVIDIA H200", started_at="2026-12-01T10:00:00",
                  step_ms=measured_ms, samples_per_s=64 / measured_ms * 1e3, predicted_step_ms=predicted_ms)
    values.update(changes)
    return Row(**values)


def test_kendall_tau():
    assert kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0
    assert kendall_tau([1, 2, 3], [30, 20, 10]) == -1.0
    assert kendall_tau([1, 2, 3], [20, 10, 30]) == pytest.approx(1 / 3)
    assert kendall_tau([1], [1]) is None


def test_errors_order_and_regret():
    rows = [row("single", 100.0, 110.0, gpus="0", world_size=1),   # +10%
            row("ddp", 50.0, 60.0),                                # +20%, predicted 2nd fastest, measured fastest
            row("pp-1f1b", 80.0, 56.0, micro_batches=4,            # -30%, predicted fastest
                peak_memory_bytes=[100, 200], predicted_memory_bytes=[90, 220])]
    group, every = fidelity(rows)
    assert group.cases == 3 and group.median_step_error == pytest.approx(0.2)
    assert group.p90_step_error == pytest.approx(0.3) and group.max_memory_error == pytest.approx(0.1)
    assert group.recommended == "pp-1f1b m=4" and group.fastest == "ddp"
    assert group.regret == pytest.approx(1 - 50 / 80)  # the recommendation measured 80 ms, the best 50
    assert group.tau == pytest.approx(1 / 3)
    assert set(group.misses()) == {"median_step_error", "p90_step_error", "tau", "regret"}
    assert every.group == "all" and every.cases == 3


def test_only_ok_rows_with_a_prediction_count_and_the_rows_of_a_case_are_its_rounds():
    """A case measured in three rounds is one case: the median of its measured steps against the median
    of its predicted ones; the round spread says how far its rounds measured apart."""
    rows = [row("single", 100.0, 100.0, gpus="0", world_size=1),
            row("ddp", 50.0, 40.0, started_at="2026-12-01T09:00:00"),
            row("ddp", 60.0, 50.0, started_at="2026-12-01T11:00:00"),
            row("ddp", 40.0, 55.0, started_at="2026-12-01T12:00:00"),
            row("fsdp", 50.0, None), Row(**{**row("pp-gpipe", 1.0, 1.0).__dict__, "status": "oom",
                                            "step_ms": None, "samples_per_s": None, "reason": "oom"})]
    group, _ = fidelity(rows)
    assert group.cases == 2 and group.median_step_error == 0.0  # ddp: median 50 measured, 50 predicted
    assert group.rounds == 1 and group.round_spread == pytest.approx((60 - 40) / 50)
    assert fidelity(rows[1:4])[0].rounds == 3
    assert "40.0%" in table([group])


def test_the_command_reads_results_files(tmp_path, capsys):
    path = tmp_path / "r.json"
    for r in (row("single", 100.0, 104.0, gpus="0", world_size=1), row("ddp", 50.0, 51.0)):
        append(r, tmp_path / "r.csv", path)
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200: gpt tiny b64" in out and "targets:" in out
    assert main([str(tmp_path / "missing.json")]) == 2


def test_the_regret_is_of_what_advise_recommends_a_tie_going_to_the_simpler():
    """Predicted 3% faster is a tie that single wins, as advise says; the regret is single's. So is 20% faster
    where the rows' intervals (±10%) overlap."""
    from pipebench.bench.predict.fidelity import recommendation

    rows = [row("pp-1f1b", 10.0, 10.0), row("single", 10.0, 10.0), row("ddp", 10.0, 10.0)]
    assert rows[recommendation(rows, [103.0, 100.0, 80.0])].strategy == "single"
    assert rows[recommendation(rows, [120.0, 100.0, 80.0])].strategy == "pp-1f1b"
    noisy = [row(r.strategy, 10.0, 10.0, predicted_step_spread=0.10) for r in rows]
    assert noisy[recommendation(noisy, [120.0, 100.0, 80.0])].strategy == "single"


def test_it_says_how_many_measurements_fell_inside_their_interval():
    rows = [row("single", 10.0, 9.5, predicted_step_spread=0.10), row("ddp", 10.0, 8.0, predicted_step_spread=0.10),
            row("pp-1f1b", 10.0, 8.0)]  # a row written before rows kept their interval: not counted
    group = fidelity(rows)[0]
    assert group.in_interval == pytest.approx(0.5)
    assert "50.0%" in table([group])


def test_a_cpu_prediction_is_judged_against_the_fastest_step_and_the_mean_is_shown_too(tmp_path, capsys):
    """The fastest step is the machine without others' load, which a CPU prediction is of: ddp's mean of 60 ms
    holds steps slowed by a burst, its fastest 50 ms is what is predicted. A row without a fastest step (of a
    file older than that column) is judged by its mean."""
    cpu = dict(gpus="cpu", device_name="cpu")
    rows = [row("single", 100.0, 100.0, world_size=1, step_ms_best=100.0, **cpu),
            row("ddp", 60.0, 50.0, step_ms_best=50.0, **cpu), row("pp-1f1b", 80.0, 80.0, **cpu)]
    fastest, _ = fidelity(rows)
    assert fastest.median_step_error == 0.0 and fastest.fastest == "ddp"
    mean, _ = fidelity(rows, against="mean")
    assert mean.median_step_error == 0.0 and mean.p90_step_error == pytest.approx(10 / 60)
    path = tmp_path / "r.json"
    for r in rows:
        append(r, tmp_path / "r.csv", path)
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "judged against each case's mean step" in out and "16.7%" in out.split("mean step")[1]


def test_a_gpu_prediction_is_judged_against_the_mean_step(tmp_path, capsys):
    """A GPU profile's whole step is the median of its repeats, so a GPU row's prediction is of its mean
    step; a launch-bound model's fastest step lies far below on a busy host (bert-base on one H200: 26.5 ms
    fastest, 32.4 mean, 36.4 predicted: 12.6% off, not 37.5%)."""
    group, _ = fidelity([row("single", 32.4, 36.4, gpus="0", world_size=1, step_ms_best=26.5)])
    assert group.median_step_error == pytest.approx(4.0 / 32.4)
    path = tmp_path / "r.json"
    append(row("single", 32.4, 36.4, gpus="0", world_size=1, step_ms_best=26.5), tmp_path / "r.csv", path)
    assert main([str(path)]) == 0
    assert "judged against each case's mean step" not in capsys.readouterr().out  # the same table


def test_the_noise_floor_takes_each_round_as_the_prediction_of_the_others():
    """Three rounds of two cases: each round's measurement stands as the prediction of the median of the
    other two, by the same figures; rows measured once have no floor."""
    at = ["2026-12-01T09:00:00", "2026-12-01T10:00:00", "2026-12-01T11:00:00"]
    rows = [row("single", ms, 1.0, gpus="0", world_size=1, started_at=t) for ms, t in zip((100.0, 110.0, 90.0), at)]
    rows += [row("ddp", ms, 1.0, started_at=t) for ms, t in zip((95.0, 120.0, 80.0), at)]
    floor = noise_floor(rows)
    # single: 100 against median(110, 90) = 100 (0%), 110 against 95 (15.8%), 90 against 105 (14.3%);
    # ddp: 95 against 100 (5%), 120 against 87.5 (37.1%), 80 against 107.5 (25.6%)
    assert floor.median_step_error == pytest.approx((15 / 105 + 15 / 95) / 2)
    assert floor.p90_step_error == pytest.approx(27.5 / 107.5)
    # round 1 picks ddp (95 < 100), whose others' median is 100 against single's 100: no regret; round 2
    # picks single (110 < 120): 95 against 87.5; round 3 picks ddp: 107.5 against 105
    assert floor.regret == pytest.approx(((1 - 87.5 / 95) + (1 - 105 / 107.5)) / 3)
    assert floor.rounds == 3 and noise_floor(rows[:1] + rows[3:4]) is None


def test_interval_coverage_counts_every_rounds_step_and_is_a_target(tmp_path, capsys):
    """Coverage is over the measured steps, every round's row of a case against the interval it printed
    (a case whose median falls inside can still have rounds outside); under 80% it is a missed target."""
    rounds = [row("single", ms, 10.0, predicted_step_spread=0.05, started_at=f"2026-12-01T10:0{k}:00")
              for k, ms in enumerate([10.2, 9.8, 12.0])]  # the median (10.2) inside; one round of three out
    rounds += [row("ddp", 6.0, 5.0, predicted_step_spread=0.25)]
    group = fidelity(rounds)[0]
    assert group.in_interval == pytest.approx(1.0) and group.coverage == pytest.approx(3 / 4)
    assert "coverage" in group.misses()
    path = tmp_path / "r.json"
    for r in rounds:
        append(r, tmp_path / "r.csv", path)
    assert main([str(path)]) == 0
    assert "interval coverage: 75% of 4 measured steps inside their printed interval (target >= 80%)" in capsys.readouterr().out
