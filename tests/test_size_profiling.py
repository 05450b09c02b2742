"""Measuring a model's micro-batch sizes (measure.SizeSweep, `--micro-batches auto` through pipebench.profile on the
CPU): one depth, one capture and one speed gauge for every size, a few sizes measured and the others
interpolated and marked, and only measured ones kept in the profile cache."""
from __future__ import annotations

import pytest
import torch

import pipebench
from pipebench import models
from pipebench.partition.profiling import measure
from pipebench.partition.profiling.cache import ProfileCache
from pipebench.partition.profiling.measure import Captures, SizeSweep, profile_model, profile_sizes
from pipebench.partition.profiling.micro_batch_sizes import counts_to_profile


# ---------------------------------------------------------------------------------- what every size shares

def test_the_sweeps_depth_cuts_the_model_and_without_one_the_models_own_does(one_thread):
    model = models.get_model("gpt", "tiny")
    own = profile_model(model, "cpu", 2, repeats=1, warmup=0)
    deeper = profile_model(model, "cpu", 2, repeats=1, warmup=0, sweep=SizeSweep(granularity=2))
    assert own.granularity == model.granularity == 1
    assert deeper.granularity == 2 and len(deeper.layers) > len(own.layers)


def test_every_size_gets_one_sweep_with_the_depth_the_capture_and_a_gauge(monkeypatch, one_thread):
    sweeps = []
    real = measure.profile_model

    def spy(model, device, micro_batch, **kwargs):
        sweeps.append(kwargs["sweep"])
        return real(model, device, micro_batch, **kwargs)

    monkeypatch.setattr(measure, "profile_model", spy)
    captures = Captures()
    profiles = profile_sizes(models.get_model("mlp", "tiny"), "cpu", 4, [1, 2], repeats=1, warmup=0,
                             granularity=1, captures=captures)
    assert [p.micro_batches for p in profiles] == [1, 2]
    assert len(sweeps) == 2 and sweeps[0] is sweeps[1]
    assert sweeps[0].granularity == 1 and sweeps[0].captures is captures
    assert sweeps[0].gauge is not None  # on the CPU: every figure taken to the machine's unloaded speed
    assert captures.exports == 1  # one export for both sizes


# ------------------------------------------------------------------------------------------- --micro-batches auto

AUTO = dict(batch=16, device="cpu", flavour="tiny", repeats=1)


@pytest.fixture
def counted(monkeypatch):
    """The micro-batch sizes measured and the graphs exported, in order."""
    seen = {"sizes": [], "exports": []}
    real_profile, real_capture = measure.profile_model, measure.capture

    def profile_model(model, device, micro_batch, **kwargs):
        seen["sizes"].append(micro_batch)
        return real_profile(model, device, micro_batch, **kwargs)

    def capture(*args, **kwargs):
        seen["exports"].append(kwargs.get("dynamic_batch", False))
        return real_capture(*args, **kwargs)

    monkeypatch.setattr(measure, "profile_model", profile_model)
    monkeypatch.setattr(measure, "capture", capture)
    return seen


def test_auto_measures_fewer_sizes_on_one_capture_and_marks_the_others(counted, one_thread):
    profiles = pipebench.profile("gpt", **AUTO)
    counts = counts_to_profile(None, 16, 1)  # 1, 2, 4, 8, 16
    assert [p.micro_batches for p in profiles] == counts
    assert sorted(counted["sizes"]) == [1, 4, 16]  # the smallest, the middle and the whole batch
    assert counted["exports"] == [True]  # one export with a dynamic batch serves every size
    guessed = {p.micro_batch: p.interpolated_from for p in profiles if p.interpolated_from}
    assert guessed == {2: [1, 4], 8: [4, 16]}
    assert all(p.profile_id is None and p.whole_step_ms is None for p in profiles if p.interpolated_from)


def test_the_close_interpolated_counts_are_measured_when_a_plan_ranks_them(counted, one_thread):
    """Ranking that calls every count the best: each interpolated one is measured, once."""
    profiles = pipebench.profile("gpt", **AUTO, rank=lambda ps: [[(p.micro_batches, 1.0) for p in ps]])
    assert sorted(counted["sizes"]) == [1, 2, 4, 8, 16] and len(counted["exports"]) == 1
    assert not any(p.interpolated_from for p in profiles)


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_the_cache_keeps_only_measured_sizes(tmp_path, monkeypatch, counted, one_thread):
    monkeypatch.setenv("PIPEBENCH_CACHE", str(tmp_path))
    first = pipebench.profile("mlp", **AUTO)
    assert len(list((tmp_path / "profiles").glob("*.json"))) == len(counted["sizes"]) == 3
    again = pipebench.profile("mlp", **AUTO)
    assert len(counted["sizes"]) == 3  # nothing measured again, the same sizes interpolated again
    assert [p.interpolated_from for p in again] == [p.interpolated_from for p in first]
    with pytest.raises(ValueError, match="interpolated"):
        ProfileCache(tmp_path).put({"k": 1}, next(p for p in first if p.interpolated_from))


class _BranchOnBatch(torch.nn.Module):
    """A forward that tests its batch size: torch.export refuses to make that dimension dynamic."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        x = self.first(x)
        return self.second(x if x.shape[0] > 2 else x * 2)


def test_a_model_that_fixes_its_batch_is_captured_once_per_size_with_a_note(counted, one_thread):
    notes = []
    profiles = pipebench.profile(_BranchOnBatch(), torch.randn(2, 8), batch=4, device="cpu", repeats=1,
                                 micro_batches=[1, 2], settings={"loss": "mse"}, note=notes.append)
    assert [p.micro_batch for p in profiles] == [4, 2]
    assert counted["exports"] == [True, False, False]  # the dynamic export refused, then one per size
    assert sum("one capture per micro-batch size" in n for n in notes) == 1


def test_one_dynamic_capture_records_each_size_as_its_own_capture_would():
    from pipebench import models
    from pipebench.partition.capture.graph import capture
    from pipebench.partition.capture.graph_errors import GraphError

    model = models.get_model("gpt", "tiny")
    module = model.module.train()

    def args(n):
        return (model.make_batch(n, seed=0, device="cpu")[0],)

    dynamic = capture(module, args(2), dynamic_batch=True)
    for n in (1, 3, 8):
        got, alone = dynamic.at(args(n)), capture(module, args(n))
        assert [c.bytes for c in got.cuts] == [c.bytes for c in alone.cuts]
        assert got.candidates == alone.candidates and got.split is dynamic.split  # the same stages
    with pytest.raises(GraphError, match="captured at one batch size"):
        capture(module, args(2)).at(args(4))


def test_auto_measures_the_replicas_share_on_three_devices(counted, one_thread, monkeypatch):
    """Batch 12 on 3 devices: DDP's and DataParallel's replicas run 4 samples each, a count (3) among no power
    of two, measured beside auto's sizes, so that `run --cpu-processes 3` predicts DDP too."""
    import pipebench.partition.profile_session

    monkeypatch.setattr(pipebench.partition.profile_session, "_links", lambda *args, **kwargs: {})  # no CPU processes' probe here
    profiles = pipebench.profile("mlp", batch=12, device="cpu", devices=["cpu"] * 3, flavour="tiny", repeats=1,
                                 rank=lambda ps: [])
    assert 3 in [p.micro_batches for p in profiles] and 4 in counted["sizes"]
    assert not next(p for p in profiles if p.micro_batches == 3).interpolated_from
