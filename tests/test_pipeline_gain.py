"""When no pipeline pays: the one line plan and advise print (bench/predict/pipeline_gain.py), and a tie with single said as one."""
from __future__ import annotations

from dataclasses import replace

from pipebench.bench.predict.ranking import Prediction, rank_strategies, predict
from pipebench.bench.predict.pipeline_gain import no_pipeline_pays, plan_verdict
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.request import Request

DEVICES = ("cuda:0", "cuda:1")


def profiles(times, batch=64, link_gbps=100.0):
    """Layers of forward times `times` (backward twice that) at the whole batch, scaling with the micro-batch."""
    def one(micro_batch):
        scale = micro_batch / batch
        layers = [LayerProfile(f"l{i}", 1000, 4000, t * scale, 2 * t * scale, 4000, [micro_batch, 8], "float32",
                               1000 * micro_batch) for i, t in enumerate(times)]
        return Profile("m", "x", "cuda:0", "gpu", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "float32", layers,
                       link_gbps=link_gbps)
    return [one(batch // m) for m in (1, 2, 4, 8)]


def test_a_balanced_pipeline_that_pays_prints_no_line():
    pr = profiles([1.0] * 8)
    request = Request(devices=DEVICES, schedule="1f1b")
    plan = make_plan(pr, request)
    assert plan.predicted_step_ms < predict("single", pr, request).predicted_step_ms / 1.3
    assert plan_verdict(plan, pr, request) == ""


def test_a_split_that_leaves_a_device_nearly_nothing_says_no_pipeline_pays_and_why():
    """One layer holds nearly all the work: the best cut leaves the other device a sliver (resnet101 tiny on 2
    CPU stages: flatten .. fc alone), which is single with a hop."""
    pr = profiles([100.0, 0.1])
    request = Request(devices=DEVICES, schedule="1f1b")
    line = plan_verdict(make_plan(pr, request), pr, request)
    assert line.startswith("no pipeline pays here: this plan is predicted")
    assert "a stage that cannot be balanced: device 1 (l1) does 0.1% of the work" in line


def test_a_pipeline_predicted_faster_inside_the_interval_is_a_tie_and_no_pay():
    pr = profiles([1.0] * 8)
    request = Request(devices=DEVICES, schedule="1f1b")
    plan = make_plan(pr, request)
    single = predict("single", pr, request)
    close = Prediction("pp-1f1b", single.predicted_step_ms * 0.9, 1.0, [1, 1], True, plan.micro_batches, "1f1b",
                       plan=plan, step_spread=0.3, own_spread=0.3)
    line = no_pipeline_pays(close, single)
    assert line.startswith("no pipeline pays here: the best, pp-1f1b, is predicted 1.11x single, a tie (")
    assert no_pipeline_pays(replace(close, step_spread=0.01, own_spread=0.01, predicted_step_ms=single.predicted_step_ms * 0.5),
                            single) == ""
    assert no_pipeline_pays(close, replace(single, fits=False)) == ""  # single does not fit: the pipeline is what does


def test_a_strategy_tied_with_single_is_not_recommended_over_it(monkeypatch):
    """A tie is not transitive: pp-1f1b ties with pp-zb (the fastest) and with single; pp-zb clears single.
    pp-zb is recommended, not pp-1f1b with a gain over single that is noise (the 2-vCPU VM's mlp, ±37%)."""
    from pipebench.bench.predict import ranking as advise_module
    from pipebench.bench.report.advice_text import format_advice

    predictions = [Prediction(name, step, 64 / step * 1e3, [1], True, 1, None, step_spread=0.367, own_spread=0.02)
                   for name, step in [("pp-zb", 383.0), ("pp-1f1b", 500.0), ("single", 542.0)]]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
    advice = rank_strategies([], Request(devices=["cpu", "cpu"]), strategies=["single", "pp-1f1b", "pp-zb"])
    assert advice.recommended == "pp-zb" and not advice.tied
    predictions[0] = replace(predictions[0], predicted_step_ms=450.0, predicted_samples_per_s=64 / 450.0 * 1e3)
    advice = rank_strategies([], Request(devices=["cpu", "cpu"]), strategies=["single", "pp-1f1b", "pp-zb"])
    assert advice.recommended == "single" and set(advice.tied) == {"pp-zb", "pp-1f1b"}
    profile = Profile("mlp", "", "cpu", "x86_64", "x", 64, 64, 1, 0, [64, 8], "float32", [])
    text = format_advice(advice, profile, Request(devices=["cpu", "cpu"]))
    tail = text.splitlines()[-1]
    assert tail.startswith("recommended: single (") and "predicted faster, a tie: the simpler is recommended" in tail
    assert "x single" not in tail  # no speed-up claimed
    assert "one case's step moves ±36% between runs" in text
