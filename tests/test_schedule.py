"""The schedule simulator against timelines worked out by hand and against closed forms."""
from __future__ import annotations

import random

import pytest

from pipebench.partition.planning.schedule_order import device_orders, ideal_efficiency, op_order, placement
from pipebench.partition.planning.simulator import simulate


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


# Multi-stage schedules. The expected orders below are torch.distributed.pipelining's own pipeline_order
# (torch 2.14: ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble built on fake
# stages in a scratch script, Nones dropped), copied here; these tests do not import torch.

def _ops(text: str) -> list[tuple[str, int, int]]:
    """"F0.1 I2.0" -> [("F", 0, 1), ("I", 2, 0)]: kind, stage, micro-batch."""
    return [(op[0], int(op[1:].split(".")[0]), int(op.split(".")[1])) for op in text.split()]


@pytest.mark.parametrize("schedule, stages, m, devices, expected", [
    ("interleaved", 4, 4, 2, [
        "F0.0 F0.1 F2.0 F2.1 F0.2 B2.0 F0.3 B2.1 F2.2 B0.0 F2.3 B0.1 B2.2 B2.3 B0.2 B0.3",
        "F1.0 F1.1 F3.0 B3.0 F3.1 B3.1 F1.2 B1.0 F1.3 B1.1 F3.2 B3.2 F3.3 B3.3 B1.2 B1.3",
    ]),
    ("interleaved", 4, 3, 2, [  # m not a multiple of p: one round of 3
        "F0.0 F0.1 F0.2 F2.0 F2.1 F2.2 B2.0 B2.1 B2.2 B0.0 B0.1 B0.2",
        "F1.0 F1.1 F1.2 F3.0 B3.0 F3.1 B3.1 F3.2 B3.2 B1.0 B1.1 B1.2",
    ]),
    ("zb-interleaved", 4, 4, 2, [
        "F0.0 F0.1 F2.0 F2.1 I2.0 W2.0 F0.2 I2.1 W2.1 F0.3 I0.0 W0.0 F2.2 I0.1 W0.1 F2.3 I2.2 W2.2 I2.3 W2.3 "
        "I0.2 W0.2 I0.3 W0.3",
        "F1.0 F1.1 F3.0 I3.0 F3.1 I3.1 W3.0 F1.2 I1.0 W3.1 F1.3 I1.1 W1.0 F3.2 I3.2 W1.1 F3.3 I3.3 W3.2 I1.2 "
        "W3.3 I1.3 W1.2 W1.3",
    ]),
    ("zb-interleaved", 3, 3, 3, [  # one stage per device: device d defers each W by d backwards
        "F0.0 F0.1 F0.2 I0.0 W0.0 I0.1 W0.1 I0.2 W0.2",
        "F1.0 F1.1 I1.0 F1.2 I1.1 W1.0 I1.2 W1.1 W1.2",
        "F2.0 I2.0 F2.1 I2.1 F2.2 I2.2 W2.0 W2.1 W2.2",
    ]),
    ("zbv", 4, 4, 2, [
        "F0.0 F0.1 F0.2 F3.0 I3.0 W3.0 F3.1 I3.1 W3.1 F0.3 I0.0 W0.0 F3.2 I3.2 W3.2 I0.1 W0.1 F3.3 I3.3 W3.3 "
        "I0.2 W0.2 I0.3 W0.3",
        "F1.0 F2.0 F1.1 F2.1 I2.0 W2.0 F1.2 I1.0 W1.0 F2.2 I2.1 W2.1 F1.3 I1.1 W1.1 F2.3 I2.2 W2.2 I1.2 I2.3 "
        "I1.3 W1.2 W2.3 W1.3",
    ]),
    ("zbv", 4, 2, 2, [  # fewer than 2p - 1 micro-batches: torch plans 3 and drops micro-batch 2
        "F0.0 F0.1 F3.0 I3.0 W3.0 F3.1 I3.1 W3.1 I0.0 W0.0 I0.1 W0.1",
        "F1.0 F2.0 F1.1 F2.1 I2.0 W2.0 I1.0 W1.0 I2.1 W2.1 I1.1 W1.1",
    ]),
])
def test_device_orders_match_torch(schedule, stages, m, devices, expected):
    assert device_orders(schedule, stages, m, devices) == [_ops(order) for order in expected]


def test_op_order_is_device_orders_seen_from_each_stage():
    assert op_order("interleaved", 4, 4, devices=2)[2] == [
        ("F", 0), ("F", 1), ("B", 0), ("B", 1), ("F", 2), ("F", 3), ("B", 2), ("B", 3),
    ]
    per_stage = op_order("1f1b", 2, 4)
    assert device_orders("1f1b", 2, 4) == [[(k, s, i) for k, i in order] for s, order in enumerate(per_stage)]


def test_placement():
    assert placement("1f1b", 4) == [0, 1, 2, 3]
    assert placement("interleaved", 6, 2) == [0, 1, 0, 1, 0, 1]
    assert placement("zb-interleaved", 6, 3) == [0, 1, 2, 0, 1, 2]
    assert placement("zbv", 6, 3) == [0, 1, 2, 2, 1, 0]


@pytest.mark.parametrize("p, v, m", [(2, 2, 2), (2, 2, 8), (2, 3, 4), (4, 2, 4), (4, 2, 8), (4, 4, 12), (8, 2, 16)])
@pytest.mark.parametrize("f, b", [(1.0, 2.0), (1.0, 1.0), (2.0, 1.0)])
def test_interleaved_matches_closed_form(p, v, m, f, b):
    # Equal stages, no transfers, m a multiple of p: step = (v m + p - 1) (f + b) (Narayanan et al., 2021,
    # section 2.2.2: the bubble shrinks to (p - 1) / v of 1F1B's, in units of the whole device's f + b).
    timeline = simulate([f] * (p * v), [b] * (p * v), m, "interleaved", devices=p)
    assert timeline.step_time == pytest.approx((v * m + p - 1) * (f + b))
    assert 1 - timeline.bubble_fraction == pytest.approx(v * m / (v * m + p - 1))


@pytest.mark.parametrize("p, v, m", [(2, 1, 2), (2, 2, 4), (3, 1, 6), (4, 2, 4), (4, 3, 8), (8, 2, 16)])
@pytest.mark.parametrize("f, i, w", [(1.0, 1.0, 1.0), (1.0, 2.0, 1.0), (2.0, 1.0, 1.0), (1.0, 3.0, 1.0)])
def test_zb_interleaved_matches_closed_form(p, v, m, f, i, w):
    # Equal stages, no transfers, m a multiple of p, W <= I: only ZB-H1's (p - 1)(F + B - W) idles
    # (Qi et al., 2024, section 3.1, where B is our I).
    timeline = simulate([f] * (p * v), [i + w] * (p * v), m, "zb-interleaved", devices=p, weight_fraction=w / (i + w))
    assert timeline.step_time == pytest.approx(v * m * (f + i + w) + (p - 1) * (f + i - w))


@pytest.mark.parametrize("p, m", [(1, 1), (1, 4), (2, 4), (2, 7), (3, 6), (4, 8), (4, 16), (8, 16)])
def test_zbv_matches_closed_form(p, m):
    # Equal stages, no transfers, f = I = W and m >= 2p: only the ramp-up idles, device d waiting for d forwards.
    f = 1.5
    timeline = simulate([f] * (2 * p), [2 * f] * (2 * p), m, "zbv", devices=p)
    assert timeline.step_time == pytest.approx(2 * m * 3 * f + (p - 1) * f)


@pytest.mark.parametrize("p, m", [(2, 4), (2, 8), (4, 4), (4, 8), (4, 16), (8, 16)])
def test_more_stages_per_device_and_zero_bubble_beat_1f1b(p, m):
    # Equal total work: 1F1B's stages of (f, b) = (2, 4) against 2 stages per device of (1, 2).
    one = simulate([2.0] * p, [4.0] * p, m, "1f1b").bubble_fraction
    assert simulate([1.0] * (2 * p), [2.0] * (2 * p), m, "interleaved", devices=p).bubble_fraction < one
    assert simulate([1.0] * (2 * p), [2.0] * (2 * p), m, "zb-interleaved", devices=p).bubble_fraction < one
    assert simulate([1.0] * (2 * p), [2.0] * (2 * p), m, "zbv", devices=p).bubble_fraction < one
    assert simulate([2.0] * p, [4.0] * p, m, "zb-interleaved").bubble_fraction <= one


def test_multi_stage_peak_in_flight():
    # Held from F until B, or for zero bubble until W: deferred Ws keep activations longer.
    assert simulate([1] * 4, [2] * 4, 4, "interleaved", devices=2).peak_in_flight == [4, 3, 2, 1]
    assert simulate([1] * 4, [2] * 4, 4, "zb-interleaved", devices=2).peak_in_flight == [4, 4, 2, 2]
    assert simulate([1] * 4, [2] * 4, 4, "zbv", devices=2).peak_in_flight == [4, 3, 2, 1]


def test_transfers_between_stages_on_one_device_are_free():
    # One device, two stages: never idle, whatever the transfer.
    timeline = simulate([1.0, 2.0], [3.0, 4.0], 4, "interleaved", transfer=[5.0], devices=1)
    assert timeline.step_time == pytest.approx(4 * (1 + 2 + 3 + 4))
    assert timeline.bubble_fraction == pytest.approx(0.0)
    # ZB-V on 2 devices: stages 1 and 2 share device 1, so only cuts 0 and 2 cost.
    free = simulate([1.0] * 4, [2.0] * 4, 4, "zbv", transfer=[0.0, 0.0, 0.0], devices=2).step_time
    assert simulate([1.0] * 4, [2.0] * 4, 4, "zbv", transfer=[0.0, 7.0, 0.0], devices=2).step_time == free
    assert simulate([1.0] * 4, [2.0] * 4, 4, "zbv", transfer=[0.5, 0.0, 0.0], devices=2).step_time > free


def test_weight_fraction_splits_the_backward():
    timeline = simulate([1.0, 1.0], [4.0, 8.0], 2, "zbv", devices=1, weight_fraction=0.25)
    length = {(op.kind, op.stage): op.end - op.start for op in timeline.ops}
    assert length[("I", 0)] == pytest.approx(3.0) and length[("W", 0)] == pytest.approx(1.0)
    assert length[("I", 1)] == pytest.approx(6.0) and length[("W", 1)] == pytest.approx(2.0)
    assert {op.kind for op in simulate([1.0], [4.0], 2, "1f1b", weight_fraction=0.25).ops} == {"F", "B"}


def test_measured_input_and_weight_gradients_replace_the_assumed_split():
    timeline = simulate([1.0, 1.0], [4.0, 8.0], 2, "zbv", devices=1, backward_input=[2.5, 5.0],
                        backward_weight=[2.0, 4.5])
    length = {(op.kind, op.stage): op.end - op.start for op in timeline.ops}
    assert length[("I", 0)] == pytest.approx(2.5) and length[("W", 0)] == pytest.approx(2.0)
    assert length[("I", 1)] == pytest.approx(5.0) and length[("W", 1)] == pytest.approx(4.5)
    # One device runs everything: the step is the sum of the measured parts, more than F + B.
    assert timeline.step_time == pytest.approx(2 * (1 + 1 + 2.5 + 2.0 + 5.0 + 4.5))
    assert timeline.bubble_fraction == pytest.approx(0.0)  # busy time is what the ops take, not F + B
    # Measured parts equal to the assumed split give the same timeline.
    same = simulate([1.0, 2.0], [4.0, 6.0], 4, "zb-interleaved", devices=2, backward_input=[3.0, 4.5],
                    backward_weight=[1.0, 1.5])
    assumed = simulate([1.0, 2.0], [4.0, 6.0], 4, "zb-interleaved", devices=2, weight_fraction=0.25)
    assert same.step_time == pytest.approx(assumed.step_time)


@pytest.mark.parametrize("kwargs, message", [
    (dict(backward_input=[1.0, 1.0]), "give both backward_input and backward_weight"),
    (dict(backward_input=[1.0], backward_weight=[1.0]), "one input and one weight gradient time per stage"),
])
def test_bad_input_and_weight_gradients(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate([1.0, 1.0], [2.0, 2.0], 2, "zbv", devices=1, **kwargs)


CONFIGS = [  # schedule, devices, stages, micro-batches
    ("gpipe", 3, 3, 5), ("1f1b", 4, 4, 3), ("1f1b", 3, 3, 7),
    ("interleaved", 2, 4, 4), ("interleaved", 3, 6, 5), ("interleaved", 2, 6, 8), ("interleaved", 4, 8, 2),
    ("zb-interleaved", 2, 4, 4), ("zb-interleaved", 3, 3, 8), ("zb-interleaved", 3, 9, 6),
    ("zb-interleaved", 1, 3, 2), ("zbv", 1, 2, 3), ("zbv", 2, 4, 3), ("zbv", 3, 6, 8), ("zbv", 4, 8, 5),
]


@pytest.mark.parametrize("schedule, p, stages, m", CONFIGS)
@pytest.mark.parametrize("seed", range(3))
def test_every_op_once_in_order_and_after_its_inputs(schedule, p, stages, m, seed):
    rng = random.Random(seed)
    forward = [rng.uniform(0.5, 2.0) for _ in range(stages)]
    backward = [rng.uniform(1.0, 4.0) for _ in range(stages)]
    transfer = [rng.uniform(0.0, 0.5) for _ in range(stages - 1)]
    timeline = simulate(forward, backward, m, schedule, transfer, devices=p, weight_fraction=rng.uniform(0.2, 0.8))
    where = placement(schedule, stages, p)
    hop = [t if where[s] != where[s + 1] else 0.0 for s, t in enumerate(transfer)]
    kinds = ("F", "I", "W") if schedule in ("zb-interleaved", "zbv") else ("F", "B")
    back = kinds[1]

    keys = [(op.kind, op.stage, op.micro) for op in timeline.ops]
    assert sorted(keys) == sorted((k, s, i) for k in kinds for s in range(stages) for i in range(m))
    op = {(o.kind, o.stage, o.micro): o for o in timeline.ops}
    eps = 1e-9
    for s in range(stages):
        for i in range(m):
            assert op[("F", s, i)].device == where[s]
            if s > 0:
                assert op[("F", s, i)].start >= op[("F", s - 1, i)].end + hop[s - 1] - eps
            if s < stages - 1:
                assert op[(back, s, i)].start >= op[(back, s + 1, i)].end + hop[s] - eps
            assert op[(back, s, i)].start >= op[("F", s, i)].end - eps
            if back == "I":
                assert op[("W", s, i)].start >= op[("I", s, i)].end - eps
    for d, order in enumerate(device_orders(schedule, stages, m, p)):  # one at a time, in the planned order
        mine = [o for o in timeline.ops if o.device == d]
        assert [(o.kind, o.stage, o.micro) for o in mine] == order
        assert all(a.end <= b.start + eps for a, b in zip(mine, mine[1:]))


@pytest.mark.parametrize("args, kwargs, message", [
    (([1.0] * 3, [1.0] * 3, 4, "1f1b"), dict(devices=2), "1f1b runs one stage per device; got 3 stages on 2"),
    (([1.0] * 3, [1.0] * 3, 4, "gpipe"), dict(devices=4), "gpipe runs one stage per device"),
    (([1.0] * 3, [1.0] * 3, 4, "interleaved"), dict(devices=2), "stages must be a multiple of devices; got 3"),
    (([1.0] * 4, [1.0] * 4, 4, "zbv"), {}, r"two stages per device \(stages = 2 x devices\); got 4 stages on 4"),
    (([1.0] * 6, [1.0] * 6, 4, "zbv"), dict(devices=2), "got 6 stages on 2 devices"),
    (([1.0] * 4, [1.0] * 4, 5, "zb-interleaved"), dict(devices=2), "micro_batches must be a multiple of 2"),
    (([1.0] * 2, [1.0] * 2, 4, "1f1b"), dict(devices=0), "at least one stage and one device"),
    (([1.0] * 4, [1.0] * 4, 4, "zbv"), dict(devices=2, weight_fraction=1.5), "between 0 and 1"),
])
def test_bad_placement(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate(*args, **kwargs)


def test_every_schedule_is_a_record_that_names_its_torch_class():
    """Callers ask the record (its layout, stages per device, split backward), never the name: each one
    places its default stages and names a class torch.distributed.pipelining has."""
    import torch.distributed.pipelining as pipelining

    from pipebench.base.errors import UserError
    from pipebench.base.schedules import SCHEDULES, get_schedule

    for name, kind in SCHEDULES.items():
        assert get_schedule(name) is kind and hasattr(pipelining, kind.torch_class)
        where = placement(name, 2 * kind.stages_per_device, 2)
        assert sorted(where) == sorted([0, 1] * kind.stages_per_device)
        assert kind.split_backward == ("ZeroBubble" in kind.torch_class)
    with pytest.raises(UserError, match="unknown schedule 'nope'; choose one of: gpipe, 1f1b"):
        get_schedule("nope")
