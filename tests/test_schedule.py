"""The schedule simulator against timelines worked out by hand and against closed forms."""
from __future__ import annotations

import pytest

from partition.schedule import ideal_efficiency, op_order, simulate


def test_gpipe_order():
    assert op_order("gpipe", 2, 3) == [
        [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)],
        [("F", 0), ("F", 1), ("F", 2), ("B", 0), ("B", 1), ("B", 2)],
    ]


def test_1f1b_order():
    assert op_order("1f1b", 2, 4) == [
        [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)],
        [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)],
    ]


def test_1f1b_with_fewer_micro_batches_than_stages():
    orders = op_order("1f1b", 4, 2)
    assert orders[0] == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert orders[3] == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", [(1, 1), (2, 1), (2, 4), (2, 8), (3, 5), (4, 8), (8, 16)])
def test_equal_stages_match_closed_form(schedule, p, m):
    # Equal stages, no transfers: step = (m + p - 1) * (f + b), busy share = m / (m + p - 1).
    f, b = 1.0, 2.0
    timeline = simulate([f] * p, [b] * p, m, schedule)
    assert timeline.step_time == pytest.approx((m + p - 1) * (f + b))
    assert 1 - timeline.bubble_fraction == pytest.approx(ideal_efficiency(p, m))


def test_peak_in_flight():
    assert simulate([1] * 4, [2] * 4, 8, "gpipe").peak_in_flight == [8, 8, 8, 8]
    assert simulate([1] * 4, [2] * 4, 8, "1f1b").peak_in_flight == [4, 3, 2, 1]
    assert simulate([1] * 4, [2] * 4, 2, "1f1b").peak_in_flight == [2, 2, 2, 1]


def test_slowest_stage_sets_the_pace():
    # Large m: step ~ m x slowest stage's (f + b).
    timeline = simulate([1.0, 3.0], [2.0, 6.0], 100, "1f1b")
    assert timeline.step_time == pytest.approx(100 * 9.0 + 3.0, rel=0.01)


def test_transfers_delay_but_do_not_occupy():
    # 1 stage -> 2 stages with a transfer of t each way: one micro-batch takes f0 + t + f1 + b1 + t + b0.
    timeline = simulate([1.0, 1.0], [2.0, 2.0], 1, "gpipe", transfer=[0.5])
    assert timeline.step_time == pytest.approx(1 + 0.5 + 1 + 2 + 0.5 + 2)


def test_timeline_respects_dependencies():
    timeline = simulate([1.0, 2.0, 0.5], [1.5, 3.0, 1.0], 4, "1f1b", transfer=[0.1, 0.2])
    end = {(op.kind, op.stage, op.micro): op.end for op in timeline.ops}
    start = {(op.kind, op.stage, op.micro): op.start for op in timeline.ops}
    for i in range(4):
        assert start[("F", 1, i)] >= end[("F", 0, i)] + 0.1
        assert start[("B", 2, i)] >= end[("F", 2, i)]
        assert start[("B", 0, i)] >= end[("B", 1, i)] + 0.1
    for s in range(3):  # a stage runs one thing at a time
        mine = sorted((op.start, op.end) for op in timeline.ops if op.stage == s)
        assert all(e0 <= s1 + 1e-12 for (_, e0), (s1, _) in zip(mine, mine[1:]))


@pytest.mark.parametrize("args, message", [
    (([1.0], [1.0, 2.0], 2), "one backward time per stage"),
    (([1.0, 1.0], [1.0, 2.0], 2, "1f1b", [1.0, 2.0]), "one transfer time per cut"),
    (([1.0], [1.0], 2, "zigzag"), "unknown schedule 'zigzag'"),
    (([1.0], [1.0], 0), "at least one stage and one micro-batch"),
])
def test_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        simulate(*args)
