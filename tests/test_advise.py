"""Every strategy predicted from one profile: the cost models' closed forms, the ranking, the CLI."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pipebench.bench.predict.ranking import Advice, Prediction, rank_strategies, predict, tie, top_strategies
from pipebench.bench.cli import main
from pipebench.bench.cli.strategy_option import parse_auto
from pipebench.bench.strategies import STRATEGIES
from pipebench.base.errors import UserError
from pipebench.bench.strategies.ddp.cost import ddp_step
from pipebench.partition.planning import link_costs
from pipebench.partition.profiling.micro_batch_sizes import TIE
from pipebench.partition.profiling.profile_record import BETWEEN_RUNS, LayerProfile, Profile, save_profiles, step_spread
from pipebench.base.training import Training
from pipebench.request import Request


def layer(name, fwd, bwd, param_bytes, saved=1000):
    return LayerProfile(name, param_bytes // 4, param_bytes, fwd, bwd, 4000, [8, 125], "float32", saved)


def profile(micro_batch, batch=64, device="cuda:0", link_gbps=100.0, allreduce_gbps=None, saved_per_sample=100,
            spread=0.0):
    """Eight equal layers whose time scales with the micro-batch, 2 MB of parameters each; `spread`: each
    time's noise."""
    scale = micro_batch / batch
    layers = [replace(layer(f"l{i}", 1.0 * scale, 2.0 * scale, 2 * 10**6, saved=saved_per_sample * micro_batch),
                      forward_spread=spread, backward_spread=spread) for i in range(8)]
    return Profile("m", "x", device, "gpu", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "float32", layers,
                   link_gbps=link_gbps, allreduce_gbps=allreduce_gbps)


def profiles(**kw):
    return [profile(64 // m, **kw) for m in (1, 2, 4, 8)]


def test_allreduce_is_a_ring():
    links = link_costs.Links(allreduce_gbps=10.0, latency_ms=0.5)
    assert link_costs.allreduce_ms(10**9, 2, links) == pytest.approx(100.0 + 0.5)  # 2 (p-1)/p x 1 GB at 10 GB/s
    assert link_costs.allreduce_ms(10**9, 4, links) == pytest.approx(150.0 + 0.5)
    assert link_costs.allreduce_ms(10**9, 1, links) == 0.0


def test_ddp_hides_the_allreduce_behind_the_backward_until_the_last_bucket():
    layers = [layer(f"l{i}", 1.0, 2.0, 30 * 2**20) for i in range(4)]  # a 30 MiB layer: a bucket each
    free = ddp_step(layers, 2, link_costs.Links())
    assert free == pytest.approx(12.0)
    # Each bucket takes 1 ms on the link: all but the last hide behind the next layer's 2 ms backward.
    per_bucket = 30 * 2**20 / 1e9 / 1e-3  # GB/s giving exactly 1 ms for a bucket
    one_ms = link_costs.Links(allreduce_gbps=per_bucket)
    hidden = dict(first_bucket_bytes=30 * 2**20, bucket_bytes=30 * 2**20, contention=0.0)
    assert ddp_step(layers, 2, one_ms, **hidden) == pytest.approx(12.0 + 1.0)
    # With contention, the backward pays for the all-reduce it overlaps (3 of the 4 buckets; the last
    # one runs after it).
    assert ddp_step(layers, 2, one_ms, **{**hidden, "contention": 1.0}) == pytest.approx(12.0 + 3.0 + 1.0)
    # A slow link exposes nearly all of it: the first of 4 buckets of 5 ms starts at 6 ms (forward 4, one
    # backward 2) and the others queue behind it on the link.
    five_ms = link_costs.Links(allreduce_gbps=per_bucket / 5)
    assert ddp_step(layers, 2, five_ms, **hidden) == pytest.approx(4.0 + 2.0 + 4 * 5.0)


def test_every_strategy_is_ranked_and_the_fastest_that_fits_recommended():
    advice = rank_strategies(profiles(), Request(devices=["cuda:0", "cuda:1"]))
    names = [p.strategy for p in advice.predictions]
    assert sorted(names) == sorted(n for n in STRATEGIES if n != "hybrid")  # hybrid: from 4 devices
    rates = [p.predicted_samples_per_s for p in advice.predictions]
    assert rates == sorted(rates, reverse=True) and all(rates)
    fastest = advice.predictions[0].predicted_samples_per_s
    tied = [p.strategy for p in advice.predictions if p.predicted_samples_per_s >= fastest * (1 - TIE)]
    assert advice.recommended == min(tied, key=list(STRATEGIES).index)  # the simplest of a tie
    assert list(advice.tied) == tied[:tied.index(advice.recommended)]
    single = next(p for p in advice.predictions if p.strategy == "single")
    ddp = next(p for p in advice.predictions if p.strategy == "ddp")
    assert single.predicted_step_ms == pytest.approx(24.0)  # 8 layers x 3 ms at the whole batch
    assert 12.0 < ddp.predicted_step_ms < 12.4  # half the batch each, a 16 MB all-reduce at 100 GB/s: 0.16 ms
    data = advice.to_dict()
    assert data["recommended"] == advice.recommended
    assert {"strategy", "predicted_step_ms", "predicted_samples_per_s", "peak_memory_bytes", "fits"} <= set(data["strategies"][0])


def test_a_strategy_over_the_memory_cap_does_not_fit_and_is_not_recommended():
    replica = next(p for p in rank_strategies(profiles(), Request(devices=["cuda:0", "cuda:1"])).predictions if p.strategy == "ddp")
    cap = replica.peak_memory_bytes[0] - 1  # DDP's whole replica no longer fits; half a model does
    advice = rank_strategies(profiles(), Request(devices=["cuda:0", "cuda:1"], max_memory=[cap, cap]))
    ddp = next(p for p in advice.predictions if p.strategy == "ddp")
    assert not ddp.fits and advice.recommended != "ddp"
    recommended = next(p for p in advice.predictions if p.strategy == advice.recommended)
    assert recommended.fits and all(m <= cap for m in recommended.peak_memory_bytes)


@pytest.mark.parametrize("device", ["cpu", "cuda:0"])
def test_every_fits_respects_the_cap_on_every_device_a_strategy_uses(device):
    """The one rule (within_caps): DataParallel's gather device on one CPU process, device-map's first
    device, a pipeline's stages, the replicas: each "fits" holds every device's memory within its cap, and
    the recommendation is one that fits."""
    cpu = device == "cpu"
    measured = [profile(64 // m, device=device, link_gbps=0.0 if cpu else 100.0) for m in (1, 2, 4, 8)]
    devices = ["cpu", "cpu"] if cpu else ["cuda:0", "cuda:1"]
    uncapped = rank_strategies(measured, Request(devices=devices)).predictions
    sizes = sorted({m for p in uncapped for m in p.peak_memory_bytes})
    for cap in sizes[len(sizes) // 2:len(sizes) // 2 + 2]:  # a cap some strategies fit and some do not
        advice = rank_strategies(measured, Request(devices=devices, max_memory=[cap, cap]))
        for p in advice.predictions:
            used = p.peak_memory_bytes
            assert p.fits == (p.predicted_step_ms is not None and all(m <= cap for m in used)), p
            if p.predicted_step_ms is not None and not p.fits:
                assert "exceeds the cap" in p.reason or "fits the memory cap" in p.reason
        assert {p.fits for p in advice.predictions} == {True, False}
        pick = next(p for p in advice.predictions if p.strategy == advice.recommended)
        assert pick.fits and max(pick.peak_memory_bytes) <= cap


def test_over_cap_is_one_line_naming_the_device_furthest_over():
    from pipebench.bench.cases.prepare import over_cap_reason
    from pipebench.partition.planning.memory import over_cap

    GiB = 2**30
    assert over_cap([3 * GiB, 9 * GiB], [10 * GiB, 8 * GiB]) == ("predicted memory exceeds the cap on device 1: "
                                                                 "9.00 GiB > cap 8.00 GiB")
    assert over_cap([3 * GiB], [2 * GiB]) == "predicted memory exceeds the cap: 3.00 GiB > cap 2.00 GiB"
    assert over_cap([3 * GiB], [4 * GiB]) == "" and over_cap([3 * GiB], None) == ""
    silent = Prediction("ddp", None, None, [3 * GiB, 9 * GiB], False, 1, None, "")  # no reason of its own
    assert over_cap_reason(silent, [10 * GiB, 8 * GiB]) == over_cap([3 * GiB, 9 * GiB], [10 * GiB, 8 * GiB])


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_checkpoint_auto_recomputes_a_replica_only_where_it_would_not_fit_otherwise(strategy):
    heavy = profiles(saved_per_sample=10**5)  # 3.2 MB saved per layer at 32 samples: recomputing saves most
    devices = ["cuda:0", "cuda:1"]
    kept = predict(strategy, heavy, Request(devices=devices))
    recomputed = predict(strategy, heavy, Request(devices=devices, training=Training(checkpoint="always")))
    assert recomputed.recompute and not kept.recompute
    assert recomputed.peak_memory_bytes[0] < kept.peak_memory_bytes[0]
    assert recomputed.predicted_step_ms > kept.predicted_step_ms  # each forward runs twice

    def auto(cap):
        return predict(strategy, heavy, Request(devices=devices, max_memory=[cap] * 2, training=Training(checkpoint="auto")))
    roomy, tight, hopeless = (auto(kept.peak_memory_bytes[0]), auto(kept.peak_memory_bytes[0] - 1),
                              auto(recomputed.peak_memory_bytes[0] - 1))
    assert roomy.fits and not roomy.recompute and roomy.predicted_step_ms == kept.predicted_step_ms
    assert tight.fits and tight.recompute and tight.predicted_step_ms == recomputed.predicted_step_ms
    assert not hopeless.fits and not hopeless.recompute  # it does not fit either way: priced as it is
    assert tight.to_dict()["recompute"] is True


def test_adamw_state_is_priced_in_every_replica():
    sgd = predict("ddp", profiles(), Request(devices=["cuda:0", "cuda:1"]))
    adam = predict("ddp", profiles(), Request(devices=["cuda:0", "cuda:1"], training=Training(optimizer="adamw")))
    params = 8 * 2 * 10**6
    assert adam.peak_memory_bytes[0] - sgd.peak_memory_bytes[0] == 2 * params


def test_one_cpu_process_runs_its_stages_in_turn():
    cpu = [profile(64 // m, device="cpu", link_gbps=0.0) for m in (1, 2, 4)]
    pipeline = predict("pipeline", cpu, Request(devices=["cpu", "cpu"]))
    single = predict("single", cpu, Request(devices=["cpu", "cpu"]))
    assert pipeline.predicted_step_ms >= single.predicted_step_ms * 0.999
    assert predict("dataparallel", cpu, Request(devices=["cpu", "cpu"])).predicted_step_ms == pytest.approx(single.predicted_step_ms)


def test_replicas_need_a_profile_at_their_micro_batch():
    only_whole = [profile(64)]
    ddp = predict("ddp", only_whole, Request(devices=["cuda:0", "cuda:1"]))
    assert ddp.predicted_step_ms is None and "32 samples" in ddp.reason


@pytest.mark.parametrize("text, count", [(None, None), ("ddp,single", None), ("auto", 3), ("auto:1", 1)])
def test_parse_auto(text, count):
    assert parse_auto(text) == count


@pytest.mark.parametrize("text", ["auto:0", "auto:x", "automatic"])
def test_parse_auto_refuses_nonsense(text):
    with pytest.raises(UserError):
        parse_auto(text)


def test_top_strategies_are_single_and_the_fastest_that_fit():
    advice = rank_strategies(profiles(), Request(devices=["cuda:0", "cuda:1"]))
    top = top_strategies(advice, 2)
    assert top[0] == "single" and len(top) == 3
    assert top[1:] == [p.strategy for p in advice.predictions if p.strategy != "single"][:2]


def test_advise_cli_from_a_saved_profile(tmp_path, capsys):
    path = tmp_path / "m.profile.json"
    save_profiles(profiles(), path)
    out = tmp_path / "advice.json"
    assert main(["advise", "--profile", str(path), "--gpus", "0,1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert f"recommended: {data['recommended']}" in printed
    rates = [s["predicted_samples_per_s"] for s in data["strategies"]]
    assert rates == sorted(rates, reverse=True) and len(rates) == len(STRATEGIES) - 1  # hybrid: from 4 GPUs
    assert all(s["predicted_step_ms_low"] <= s["predicted_step_ms"] <= s["predicted_step_ms_high"]
               for s in data["strategies"]) and isinstance(data["tied"], dict)
    assert all(len(s["peak_memory_bytes"]) in (1, 2) for s in data["strategies"])


def test_advise_cli_bad_input_is_one_line(tmp_path, capsys):
    assert main(["advise", "--profile", str(tmp_path / "missing.json"), "--stages", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.json" in err[0]


def test_plan_from_a_saved_profile_prices_cuts_with_the_link_it_measured(tmp_path):
    """The profile records the link (and, on the CPU, gloo's latency); a plan made from the file later,
    without a GPU, prices its cuts with them unless --link-gbps says otherwise."""
    from pipebench.partition.planning.plan import Plan

    path = tmp_path / "m.profile.json"
    saved = profiles(link_gbps=100.0)
    for p in saved:
        p.link_latency_ms = 0.25
    save_profiles(saved, path)
    assert main(["plan", "--profile", str(path), "--gpus", "0,1", "--json", str(tmp_path / "a.json")]) == 0
    plan = Plan.load(tmp_path / "a.json")
    assert (plan.link_gbps, plan.link_latency_ms) == (100.0, 0.25)
    assert main(["plan", "--profile", str(path), "--gpus", "0,1", "--link-gbps", "50", "--json", str(tmp_path / "b.json")]) == 0
    assert Plan.load(tmp_path / "b.json").link_gbps == 50.0


@pytest.mark.ci  # a whole run or train through the command line, 10-20 s: CI runs it after the default set
def test_the_recommendation_is_checkable_as_printed(tmp_path, capsys, monkeypatch, one_thread):
    """The "check it with" command carries the model, its inputs, batch, training and strategies: run as
    printed, it measures the recommendation beside single."""
    import shlex

    from pipebench.bench.cli import main

    model = tmp_path / "mine.py"
    model.write_text("import torch\n\ndef net():\n    return torch.nn.Sequential(torch.nn.Linear(6, 16), "
                     "torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))\n")
    assert main(["advise", "--model", f"{model}:net", "--input-shape", "6", "--num-classes", "3", "--batch", "8",
                 "--stages", "2", "--device", "cpu", "--repeats", "1", "--micro-batches", "2",
                 "--optimizer", "adamw"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("recommended:"))
    command = shlex.split(line.split("check it with: ", 1)[1])
    assert command[:2] == ["pipebench", "run"] and "--optimizer" in command and "--input-shape" in command
    assert command[command.index("--min-seconds") + 1] == "3"  # CPU stand-ins: seconds of steps, past the bursts
    assert command[command.index("--device") + 1] == "cpu" and command[command.index("--cpu-processes") + 1] == "2"
    # Run as printed, twice (into a folder of its own, named for what it measures): the second run
    # measures anew beside the first, and nothing else mixes in.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / command[command.index("--out") + 1]
    assert out.parent.name == "pipebench-checks" and out.name.startswith("mine.py-net-b8-cpu-2dev")
    for _ in range(2):
        assert main([*command[1:], "--steps", "1", "--min-seconds", "0", "--warmup", "0", "--rounds", "1"]) == 0
    rows = json.loads(next(out.glob("*.json")).read_text())["rows"]
    strategies = command[command.index("--strategies") + 1].split(",")
    assert sorted(r["strategy"] for r in rows) == sorted(strategies * 2)
    assert {r["gpus"] for r in rows} == {"cpu"}  # where it was advised for, GPUs visible or not
    assert all(r["status"] == "ok" and r["optimizer"] == "adamw" for r in rows)


def test_advise_on_one_device_profiles_the_whole_batch_alone(monkeypatch, capsys, one_thread):
    import pipebench.api

    asked = []
    real = pipebench.api.profile

    def profile(model, example_inputs, request, **kwargs):
        asked.append(request.micro_batches)
        return real(model, example_inputs, request, **kwargs)

    monkeypatch.setattr(pipebench.api, "profile", profile)  # what advise_profiles measures with
    assert main(["advise", "--model", "mlp", "--flavour", "tiny", "--batch", "8", "--stages", "1", "--device", "cpu",
                 "--repeats", "1"]) == 0
    assert asked == [(1,)]
    assert "recommended: single" in capsys.readouterr().out


def test_a_tie_goes_to_the_simpler_strategy_and_the_line_says_so(monkeypatch):
    from pipebench.bench.predict import ranking as advise_module
    from pipebench.bench.report.advice_text import format_advice

    def pred(name, rate):
        return Prediction(name, 64 / rate * 1e3, rate, [1 << 30, 1 << 30], True, 1, None)

    predictions = [pred("pp-zbv", 103.0), pred("ddp", 100.0), pred("fsdp", 90.0), pred("single", 55.0)]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
    advice = rank_strategies([], Request(devices=["cuda:0", "cuda:1"]), strategies=["single", "ddp", "fsdp", "pp-zbv"])
    assert advice.recommended == "ddp" and advice.tied == {"pp-zbv": "within 5%"}
    profile = Profile("gpt", "tiny", "cuda:0", "NVIDIA H200", "x", 64, 64, 1, 0, [64, 8], "int64", [])
    line = format_advice(advice, profile, Request(devices=["cuda:0", "cuda:1"])).splitlines()[-1]
    assert line.startswith("recommended: ddp") and "pp-zbv (within 5%) predicted faster, a tie" in line
    assert line.endswith("--strategies single,ddp,pp-zbv")


def test_predictions_whose_intervals_overlap_are_a_tie_that_the_simpler_wins(monkeypatch):
    """Predicted 20% apart, beyond TIE: the faster wins while the figures are exact, and ties once the
    profile's noise makes their intervals overlap; the line says which rule tied them."""
    from pipebench.bench.predict import ranking as advise_module
    from pipebench.bench.report.advice_text import format_advice

    def advice_with(spread):
        predictions = [Prediction("pp-zbv", 64 / rate * 1e3, rate, [1], True, 1, None, step_spread=spread)
                       for rate in (120.0,)] + [Prediction("ddp", 640.0, 100.0, [1], True, 1, None, step_spread=spread)]
        monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
        return rank_strategies([], Request(devices=["cuda:0", "cuda:1"]), strategies=["ddp", "pp-zbv"])

    assert advice_with(0.0).recommended == "pp-zbv" and advice_with(0.05).recommended == "pp-zbv"
    noisy = advice_with(0.1)  # 533 ms x 1.1 = 587 > 640 x 0.9 = 576
    assert noisy.recommended == "ddp" and noisy.tied == {"pp-zbv": "intervals overlap"}
    profile = Profile("gpt", "tiny", "cuda:0", "NVIDIA H200", "x", 64, 64, 1, 0, [64, 8], "int64", [])
    text = format_advice(noisy, profile, Request(devices=["cuda:0", "cuda:1"]))
    assert "pp-zbv (intervals overlap) predicted faster, a tie" in text.splitlines()[-1]
    assert "533.33 ±10.0%" in text and "640.00 ±10.0%" in text
    assert "the profile is noisy" not in text
    assert "the profile is noisy: predicted steps vary by up to ±30%" in format_advice(advice_with(0.3), profile, Request(devices=["cuda:0"]))
    profile.machine_drift = 0.3  # CPU stand-ins on a machine whose speed moved: that, not the repeats, is said
    assert "this machine's speed moved ±30% while it was watched" in format_advice(advice_with(0.3), profile, Request(devices=["cpu"]))
    close = Prediction("fsdp", 655.0, 64 / 655.0 * 1e3, [1], True, 1, None, step_spread=0.1)
    assert tie(close, noisy.predictions[1]) == "intervals overlap and within 5%"


def test_the_machines_drift_ties_a_gap_inside_it_and_no_wider_one(monkeypatch):
    """A drift of ±19% (the 2-vCPU VM's) around steps predicted 34% apart: each interval is that wide, as a
    step measured later may land anywhere in it, but the slower lies outside the faster's, and their own
    spreads (2%) do not overlap: the faster is recommended (resnet18 on that VM: pp-zbv predicted 1.34x
    single, measured 1.23x). Predicted 9% apart under a drift of ±16%, the slower lies inside the faster's
    interval: a tie, single recommended (resnet18 again: single and the pipelines measured fastest by
    turns, minutes apart)."""
    from pipebench.bench.predict import ranking as advise_module

    predictions = [Prediction(name, step, 64 / step * 1e3, [1], True, 1, None, step_spread=0.19, own_spread=own)
                   for name, step, own in [("pp-zbv", 151.0, 0.02), ("single", 203.0, 0.02)]]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
    advice = rank_strategies([], Request(devices=["cpu", "cpu"]), strategies=["single", "pp-zbv"])
    assert advice.recommended == "pp-zbv" and not advice.tied
    assert advice.predictions[0].step_interval_ms == pytest.approx((151.0 * 0.81, 151.0 * 1.19))
    predictions[0].own_spread = predictions[1].own_spread = None  # none kept apart: the whole interval
    assert rank_strategies([], Request(devices=["cpu", "cpu"]), strategies=["single", "pp-zbv"]).recommended == "single"

    predictions[:] = [Prediction(name, step, 16 / step * 1e3, [1], True, 1, None, step_spread=0.16, own_spread=0.02)
                      for name, step in [("pp-zb", 122.3), ("single", 133.9)]]
    advice = rank_strategies([], Request(devices=["cpu", "cpu"]), strategies=["single", "pp-zb"])
    assert advice.recommended == "single" and advice.tied == {"pp-zb": "inside pp-zb's interval of ±16%"}
    predictions[1].predicted_step_ms = 122.3 * 1.17  # just outside it
    predictions[1].predicted_samples_per_s = 16 / predictions[1].predicted_step_ms * 1e3
    assert rank_strategies([], Request(devices=["cpu", "cpu"]), strategies=["single", "pp-zb"]).recommended == "pp-zb"


def test_a_profiles_own_spread_leaves_the_machines_drift_out():
    profile = Profile("gpt", "tiny", "cpu", "cpu", "x", 8, 8, 1, 0, [8, 4], "int64",
                      [LayerProfile("l0", 10, 40, 1.0, 2.0, 100, [8, 4], "float32", 100,
                                    forward_spread=0.02, backward_spread=0.02)], machine_drift=0.19)
    assert step_spread([profile]) == pytest.approx(0.19)
    assert step_spread([profile], drift=False) == pytest.approx(0.02)


def test_the_recommendation_ties_with_every_strategy_predicted_faster_than_it(monkeypatch):
    """single's interval overlaps the noisy fastest's, not ddp's between them: ddp is the simplest tie."""
    from pipebench.bench.predict import ranking as advise_module

    predictions = [Prediction(name, step, 64 / step * 1e3, [1], True, 1, None, step_spread=spread)
                   for name, step, spread in [("pp-zbv", 100.0, 0.5), ("ddp", 110.0, 0.01), ("single", 140.0, 0.01)]]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
    advice = rank_strategies([], Request(devices=["cuda:0", "cuda:1"]), strategies=["single", "ddp", "pp-zbv"])
    assert advice.recommended == "ddp" and advice.tied == {"pp-zbv": "intervals overlap"}


@settings(max_examples=40, deadline=None)
@given(spread=st.floats(0.0, 0.5), more=st.floats(0.001, 0.5))
def test_a_prediction_is_an_interval_around_its_point_that_widens_with_the_profile_noise(spread, more):
    devices = ["cuda:0", "cuda:1"]
    for strategy in ("single", "ddp", "pp-1f1b", "fsdp"):
        quiet = predict(strategy, profiles(spread=spread), Request(devices=devices))
        noisy = predict(strategy, profiles(spread=spread + more), Request(devices=devices))
        low, high = quiet.step_interval_ms
        assert low <= quiet.predicted_step_ms <= high
        assert quiet.step_spread == pytest.approx(math.hypot(spread, BETWEEN_RUNS["gpu"]))  # what moves between runs too
        assert quiet.own_spread == pytest.approx(spread)
        assert noisy.predicted_step_ms == quiet.predicted_step_ms
        assert noisy.step_interval_ms[0] < low and noisy.step_interval_ms[1] > high
        data = noisy.to_dict()
        assert (data["predicted_step_ms_low"], data["predicted_step_ms_high"]) == noisy.step_interval_ms


def test_a_plan_carries_its_interval_and_prints_it():
    from pipebench.partition.planning.plan_choice import make_plan
    from pipebench.bench.report.plan_text import format_plan

    plan = make_plan(profiles(spread=0.07), Request(devices=["cuda:0", "cuda:1"], schedule="1f1b", link_gbps=0.0))
    widened = math.hypot(0.07, BETWEEN_RUNS["gpu"])
    assert plan.step_spread == pytest.approx(widened) and widened > 0.07
    assert f"{plan.predicted_step_ms:.2f} ±{widened:.1%}" in format_plan(plan, plan)
    assert predict("pp-1f1b", profiles(spread=0.07), Request(devices=["cuda:0", "cuda:1"])).step_spread == plan.step_spread


def test_the_advice_says_when_no_link_was_measured_between_the_devices(monkeypatch):
    """One GPU standing in for two (--stages 2 --device cuda:0) measures no link: what crosses is priced
    free, and the advice says so; a measured or given link needs no such line."""
    from pipebench.bench.predict import ranking as advise_module
    from pipebench.bench.report.advice_text import format_advice

    predictions = [Prediction("ddp", 50.0, 1280.0, [1], True, 1, None), Prediction("single", 100.0, 640.0, [1], True, 1, None)]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
    advice = rank_strategies([], Request(devices=["cuda:0", "cuda:0"]), strategies=["single", "ddp"])
    profile = Profile("gpt", "tiny", "cuda:0", "NVIDIA H200", "x", 64, 64, 1, 0, [64, 8], "int64", [])
    assert "no link between the devices was measured (cuda:0 stands in for all 2)" in format_advice(
        advice, profile, Request(devices=["cuda:0", "cuda:0"]))
    assert "no link" not in format_advice(advice, profile, Request(devices=("cuda:0", "cuda:0"), link_gbps=400.0))
    profile.link_gbps = 380.0
    assert "no link" not in format_advice(advice, profile, Request(devices=["cuda:0", "cuda:1"]))
    assert "no link" not in format_advice(advice, profile, Request(devices=["cuda:0"]))


def test_the_advice_says_when_the_step_waits_on_its_host(monkeypatch):
    """A GPU whole step of 12 ms over 3 ms of device work waits on the host for 75% of it: every interval is
    at least 0.86 x 75% wide, and the advice says why in a line; a step the device sets needs none."""
    from pipebench.bench.predict import ranking as advise_module
    from pipebench.bench.report.advice_text import format_advice

    layers = [LayerProfile("l0", 10, 40, 1.0, 2.0, 100, [8, 4], "float32", 100)]
    predictions = [Prediction("single", 12.0, 640.0, [1], True, 1, None, step_spread=0.65)]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: predictions[0])
    advice = rank_strategies([], Request(devices=["cuda:0"]), strategies=["single"])
    waits = Profile("m", "x", "cuda:0", "NVIDIA H200", "x", 8, 8, 1, 0, [8, 4], "float32", layers, whole_step_ms=12.0)
    assert "75% of the step waits on the host's launches" in format_advice(advice, waits, Request(devices=["cuda:0"]))
    waits.whole_step_ms = 3.0
    assert "waits on the host" not in format_advice(advice, waits, Request(devices=["cuda:0"]))


@pytest.mark.parametrize("link", [dict(link_gbps=50.0), dict(link_latency_ms=2.0), dict(link_gbps=50.0, link_latency_ms=2.0)])
def test_advise_prices_a_pipeline_with_the_link_a_plan_prices_it_with(link):
    """advise and plan read one link (Request.links): a pipeline's predicted step is the plan's, whichever of
    the bandwidth and the latency the request names over the profile's."""
    from pipebench.partition.planning.plan_choice import make_plan

    saved = profiles(link_gbps=100.0)
    for p in saved:
        p.link_latency_ms = 0.25
    request = Request(devices=["cuda:0", "cuda:1"], schedule="1f1b", **link)
    plan = make_plan(saved, request)
    prediction = predict("pp-1f1b", saved, request, micro_batches=plan.micro_batches)
    assert prediction.predicted_step_ms == pytest.approx(plan.predicted_step_ms)
    assert (plan.link_gbps, plan.link_latency_ms) == request.links(saved[0])


def test_a_price_of_a_step_of_no_time_has_no_rate():
    """Every price builds its figure one way (Prediction.of_step): samples/s from the step and the batch,
    None where the step took no time, as a strategy with no figure has none."""
    priced = Prediction.of_step("ddp", 50.0, 64, memory=[1, 1], fits=True, recompute=True)
    assert priced.predicted_samples_per_s == pytest.approx(1280.0) and priced.recompute and priced.schedule is None
    assert Prediction.of_step("ddp", 0.0, 64, memory=[1, 1], fits=True).predicted_samples_per_s is None


def test_run_auto_and_train_auto_say_their_pick_in_one_sentence(monkeypatch, tmp_path):
    """`run --strategies auto:K` and `train --strategy auto` profile, rank and pick through one function
    (bench/predict/ranking.py pick_strategies) and tell what they picked and why in one sentence, the
    recommendation as advise says it (bench/report/advice_text.py), the ranking and the profile it came from."""
    from types import SimpleNamespace

    from pipebench.bench.cases import prepare, run_suite
    from pipebench.bench.cases.machine import Machine
    from pipebench.bench.predict import ranking as advise_module
    from pipebench.bench.train.parent import choose_strategy

    def pred(name, rate):
        return Prediction(name, 64 / rate * 1e3, rate, [1 << 30, 1 << 30], True, 1, None)

    predictions = [pred("pp-zbv", 103.0), pred("ddp", 100.0), pred("fsdp", 90.0), pred("single", 55.0)]
    monkeypatch.setattr(advise_module, "predict", lambda name, *a, **k: next(p for p in predictions if p.strategy == name))
    monkeypatch.setattr(advise_module, "usable_strategies", lambda devices: ["single", "ddp", "fsdp", "pp-zbv"])
    path = tmp_path / "mlp.profile.json"
    profiled = prepare.CaseProfiles([], path)
    monkeypatch.setattr(prepare, "profile_case_model", lambda *a, **k: profiled)
    machine = Machine([0, 1], 2, "H200")
    lines: list[str] = []
    run_options = SimpleNamespace(models={"mlp": 64}, flavour="tiny", overrides={}, training=Training(), data_dir=None,
                                  repeats=None, fresh=False, micro_batches=[None], timeout=None, auto=2)
    assert run_suite.auto_strategies(run_options, machine, tmp_path, lines.append) == ["single", "ddp", "pp-zbv"]
    train_options = SimpleNamespace(strategy="auto", model="mlp", batch=64, flavour="tiny", overrides={},
                                    training=Training())
    assert choose_strategy(train_options, machine, lines.append) == ("ddp", profiled)
    run_line, train_line = [line for line in lines if line.startswith("auto: ")]
    said = ("advise's recommendation: ddp (100.0 samples/s predicted, 1.82x single); pp-zbv (within 5%) predicted "
            "faster, a tie: the simpler is recommended; predicted samples/s: pp-zbv 103.0, ddp 100.0, fsdp 90.0, "
            f"single 55.0 (from the profile {path})")
    assert run_line == f"auto: mlp: running single, pp-zbv, ddp; {said}"
    assert train_line == f"auto: mlp: training with ddp; {said}"
