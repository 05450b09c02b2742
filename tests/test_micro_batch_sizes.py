"""partition/profiling/micro_batch_sizes.py: which micro-batch sizes are measured, the ones between predicted, and the close
ones measured before the choice is made. Synthetic profiles, no torch."""
from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.request import Request
from pipebench.base.errors import UserError
from pipebench.partition.profiling.micro_batch_sizes import (TIE, anchors, close_counts, complete, counts_to_ask, counts_to_profile,
                                                 interpolate, refine)

BATCH = 64


def layer(name: str, size: int, a: float, b: float, floor: float = 0.0) -> LayerProfile:
    """Figures of one layer at `size`: times max(floor, a + b * size), bytes affine in the size."""
    t = max(floor, a + b * size)
    return LayerProfile(name=name, params=1000, param_bytes=4000, forward_ms=t, backward_ms=2 * t,
                        output_bytes=16 + 128 * size, output_shape=[size, 32], output_dtype="float32",
                        saved_bytes=64 + 256 * size, backward_input_ms=t, backward_weight_ms=1.5 * t,
                        forward_cpu_ms=0.3, cast_bytes=512, shared_bytes=8 * size)


def profile(count: int, coefficients=((0.5, 0.1), (0.2, 0.3)), floor: float = 0.0) -> Profile:
    size = BATCH // count
    return Profile(model="toy", flavour="tiny", device="cpu", device_name="cpu", torch_version="x", batch=BATCH,
                   micro_batch=size, repeats=1, warmup=0, input_shape=[size, 8], input_dtype="float32",
                   layers=[layer(f"l{i}", size, a, b, floor) for i, (a, b) in enumerate(coefficients)],
                   whole_step_ms=1.0 if count == 1 else None, whole_step_peak_bytes=9 if count == 1 else None,
                   profile_id=f"id{count}")


def test_counts_to_profile_are_those_asked_or_autos_and_the_replicas_share():
    assert counts_to_profile(None, 8, 1) == [1, 2, 4, 8]
    assert counts_to_profile(None, 12, 1) == [1, 2, 4]
    assert counts_to_profile(None, 256, 1) == [1, 2, 4, 8, 16, 32, 64]
    assert counts_to_profile(None, 12, 3) == [1, 2, 3, 4]  # the replicas' share, where it splits the batch
    assert counts_to_profile(None, 8, 3) == [1, 2, 4, 8]
    assert counts_to_profile(4, 8, 2) == [4] and counts_to_profile((8, 2, 2), 8, 2) == [2, 8]
    with pytest.raises(UserError, match="batch 8 does not split into 3 equal micro-batches"):
        Request(devices=("cpu",), batch=8, micro_batches=3)  # before any count is profiled


def test_counts_to_ask_are_the_whole_batch_the_spread_and_the_pipelines():
    assert counts_to_ask([4], spread=[2]) == [1, 2, 4]
    assert counts_to_ask([None, 4], spread=[2]) is None  # a pipeline chooses: auto
    assert counts_to_ask([None], spread=[1], micro_batched=False) == [1]  # nothing micro-batches: auto asks nothing
    assert counts_to_ask([4], spread=[4], replicas=[2], batch=32) == [1, 4, 8]  # two copies of 4 micro-batches
    assert counts_to_ask([4], spread=[4], replicas=[2], batch=4) == [1, 4]  # 8 does not split 4


def test_anchors_are_the_ends_the_device_count_and_a_middle():
    assert anchors([1, 2, 4, 8, 16, 32, 64]) == [1, 8, 64]
    assert anchors([1, 2, 4, 8, 16]) == [1, 4, 16]
    assert anchors([1, 2, 4, 8, 16], 2) == [1, 2, 16]  # the device count lies between: no middle
    assert anchors([1, 2, 4, 8, 16], 32) == [1, 4, 16]  # not among the counts: ignored
    assert anchors([1, 2]) == [1, 2] and anchors([4]) == [4]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5), st.floats(0, 2)), min_size=1, max_size=6),
       st.sampled_from([2, 4, 8, 16, 32]))
def test_affine_figures_are_interpolated_exactly(coefficients, count):
    measured = [profile(1, coefficients), profile(64, coefficients)]
    got, want = interpolate(measured, count), profile(count, coefficients)
    assert got.interpolated_from == [1, 64] and got.profile_id is None
    assert got.whole_step_ms is None and got.whole_step_peak_bytes is None
    assert got.micro_batch == want.micro_batch and got.input_shape == want.input_shape
    for g, w in zip(got.layers, want.layers):
        for name in ("forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms", "forward_cpu_ms"):
            assert getattr(g, name) == pytest.approx(getattr(w, name), rel=1e-9, abs=1e-12)
        for name in ("output_bytes", "saved_bytes", "shared_bytes", "cast_bytes", "params", "param_bytes"):
            assert getattr(g, name) == getattr(w, name)
        assert g.output_shape == w.output_shape and g.backward_cpu_ms is None  # None measured: None predicted


def test_a_spread_is_the_noisier_neighbours():
    low, high = profile(1), profile(8)
    low.layers[0].forward_spread, high.layers[0].forward_spread = 0.02, 0.05
    assert interpolate([low, high], 2).layers[0].forward_spread == 0.05


def test_a_measured_size_is_returned_as_measured_and_nothing_is_extrapolated():
    measured = [profile(2), profile(16)]
    assert interpolate(measured, 2) is measured[0]
    with pytest.raises(ValueError, match="outside the measured sizes"):
        interpolate(measured, 1)
    assert [p.micro_batches for p in complete(measured, [1, 2, 4, 8, 16, 32])] == [2, 4, 8, 16]


def test_a_launch_bound_curve_is_overstated_between_its_anchors_never_understated():
    """Flat, then rising: the chord lies above, so an interpolated count looks slower, never faster."""
    measured = [profile(1, floor=3.0), profile(64, floor=3.0)]
    for count in (2, 4, 8, 16, 32):
        got, want = interpolate(measured, count), profile(count, floor=3.0)
        assert all(g.forward_ms >= w.forward_ms - 1e-12 for g, w in zip(got.layers, want.layers))


def test_close_counts_are_those_within_the_margin_of_their_group():
    groups = [[(1, 100.0), (2, 104.0), (4, 106.0), (8, None)], [(None, 50.0), (16, 52.0), (32, 60.0)]]
    assert close_counts(groups) == {1, 2, 16}
    assert close_counts(groups, margin=0.10) == {1, 2, 4, 16}
    assert close_counts([[(1, None)]]) == set()


def pipeline_rank(profiles):
    """A 4-stage pipeline's step from each profile: (m + 3) micro-batch times, so the best count lies
    between the anchors, where interpolation decides."""
    return [[(p.micro_batches, sum(l.forward_ms for l in p.layers) * (p.micro_batches + 3)) for p in profiles]]


def test_refine_measures_the_close_interpolated_counts_and_ranks_again():
    counts = [1, 2, 4, 8, 16, 32, 64]
    asked: list[list[int]] = []

    def measure(wanted):
        asked.append(wanted)
        return [profile(m, floor=3.0) for m in wanted]

    start = [profile(m, floor=3.0) for m in anchors(counts)]
    profiles = refine(start, counts, pipeline_rank, measure)
    assert [p.micro_batches for p in profiles] == counts
    flat = [m for wanted in asked for m in wanted]
    assert flat and len(flat) == len(set(flat)) and not set(flat) & {1, 8, 64}  # each measured once, anchors never
    # Every count predicted within the margin of the best is measured in the end.
    scored = pipeline_rank(profiles)[0]
    best = min(step for _, step in scored)
    for m, step in scored:
        if step <= best * (1 + TIE):
            assert not next(p for p in profiles if p.micro_batches == m).interpolated_from
    assert any(p.interpolated_from for p in profiles)  # and the far ones are not


def test_refine_drops_a_count_that_fails_and_measures_nothing_without_a_ranking():
    counts = [1, 2, 4]
    got = refine([profile(1), profile(4)], counts, lambda ps: [[(p.micro_batches, 1.0) for p in ps]],
                 lambda wanted: [])
    assert [p.micro_batches for p in got] == [1, 4]
    calls = []
    got = refine([profile(1), profile(4)], counts, None, calls.append)
    assert [p.micro_batches for p in got] == [1, 2, 4] and not calls


def test_sizes_imports_no_torch():
    code = "import sys, partition.profiling.micro_batch_sizes; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_an_interpolated_profile_says_so_in_its_file(tmp_path):
    from pipebench.partition.profiling.profile_record import load_profiles, save_profiles

    measured = [profile(1), profile(8)]
    save_profiles([measured[0], interpolate(measured, 2), measured[1]], tmp_path / "p.json")
    assert [p.interpolated_from for p in load_profiles(tmp_path / "p.json")] == [None, [8, 64], None]
