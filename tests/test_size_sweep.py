"""What every micro-batch size of one model shares (measure.SizeSweep): the depth the cuts are made at (the
model's own unless given), one capture for every size, and on the CPU one speed gauge."""
from __future__ import annotations

from pipebench import models
from pipebench.partition.profiling import measure
from pipebench.partition.profiling.measure import Captures, SizeSweep, profile_model, profile_sizes


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
