"""What the CPU stand-ins for devices cost: processes sharing one machine's cores (the simulator's
simulator.SharedCores, the replicas' link_costs.Links.contention, the probes that measure them), and one process
running the whole module (nn.DataParallel on the CPU)."""
from __future__ import annotations

import random

import pytest

from pipebench.bench.predict.ranking import predict
from pipebench.bench.strategies.ddp.cost import ddp_step
from pipebench.bench.strategies.fsdp.cost import fsdp_blocks, fsdp_step
from pipebench.partition.planning import link_costs
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.base.schedules import SCHEDULES
from pipebench.partition.planning.simulator import SharedCores, simulate
from pipebench.request import Request


def test_with_no_contention_and_no_transfers_the_timeline_is_the_plain_simulators():
    rng = random.Random(0)
    for schedule in SCHEDULES:
        kind = SCHEDULES[schedule]
        for _ in range(20):
            p = rng.choice([2, 3])
            stages = p * kind.stages_per_device
            m = rng.choice([1, 2, 4]) if kind.layout != "loop" else rng.choice([p, 2 * p])
            f = [rng.uniform(0.1, 3.0) for _ in range(stages)]
            b = [rng.uniform(0.1, 5.0) for _ in range(stages)]
            plain = simulate(f, b, m, schedule, devices=p)
            shared = simulate(f, b, m, schedule, devices=p, shared_cores=SharedCores())
            assert shared.step_time == pytest.approx(plain.step_time)
            assert shared.peak_in_flight == plain.peak_in_flight


def test_stages_computing_at_once_share_the_cores():
    # GPipe, 2 stages, 2 micro-batches, every operation 1 ms alone; each runs 2x slower while both compute.
    # d0: F0 [0,1] alone; d0's F1 and d1's F0 at once [1,3]; d1: F1 [3,4], B0 [4,5] alone; d1's B1 and
    # d0's B0 at once [5,7]; d0: B1 [7,8]. Unshared, the same step takes 6.
    assert simulate([1.0, 1.0], [1.0, 1.0], 2, "gpipe").step_time == pytest.approx(6.0)
    timeline = simulate([1.0, 1.0], [1.0, 1.0], 2, "gpipe", shared_cores=SharedCores(2.0))
    assert timeline.step_time == pytest.approx(8.0)
    spans = {(op.kind, op.stage, op.micro): (op.start, op.end) for op in timeline.ops}
    assert spans[("F", 0, 1)] == pytest.approx((1.0, 3.0)) and spans[("F", 1, 0)] == pytest.approx((1.0, 3.0))
    assert spans[("B", 0, 0)] == pytest.approx((5.0, 7.0))


def test_a_send_is_the_senders_work_not_a_free_delay():
    # GPipe, 2 stages, 2 micro-batches, transfers of 0.5 ms. On GPUs a transfer only delays the receiver
    # (step 7); on shared cores the sender copies the bytes itself: d0's forwards take 1.5 each, d1's
    # backwards of stage 1 too, and stage 0 waits for them (step 8).
    assert simulate([1.0, 1.0], [1.0, 1.0], 2, "gpipe", [0.5]).step_time == pytest.approx(7.0)
    assert simulate([1.0, 1.0], [1.0, 1.0], 2, "gpipe", [0.5], shared_cores=SharedCores()).step_time == pytest.approx(8.0)


def test_every_operation_pays_the_runtimes_cost():
    # One stage, 3 micro-batches of 1 + 2 ms: 6 operations, 0.5 ms each besides.
    assert simulate([1.0], [2.0], 3, "1f1b", shared_cores=SharedCores(1.0, 0.5)).step_time == pytest.approx(12.0)


def test_the_slowdown_grows_with_the_devices_busy():
    cores = SharedCores(3.0)
    assert cores.rate(1, 4) == 1.0
    assert cores.rate(4, 4) == pytest.approx(1 / 3)
    assert cores.rate(2, 3) == pytest.approx(1 / 2)
    with pytest.raises(ValueError):
        SharedCores(0.5)
    with pytest.raises(ValueError):
        simulate([1.0], [1.0], 1, "gpipe", launch={"F": [0.1], "B": [0.1]}, shared_cores=SharedCores())


def _layer(name, fwd, bwd, param_bytes):
    return LayerProfile(name, param_bytes // 4, param_bytes, fwd, bwd, 4000, [8, 125], "float32", 1000)


def test_replicas_computing_at_once_pay_the_contention():
    layers = [_layer(f"l{i}", 1.0, 2.0, 10**6) for i in range(4)]
    assert ddp_step(layers, 2, link_costs.Links(contention=1.5)) == pytest.approx(1.5 * ddp_step(layers, 2, link_costs.Links()))
    assert fsdp_step(layers, 2, link_costs.Links(contention=1.5)) == pytest.approx(1.5 * fsdp_step(layers, 2, link_costs.Links()))


def test_fsdp_pays_its_runtime_on_every_layer_with_parameters():
    layers = [_layer(f"l{i}", 1.0, 2.0, 10**6 if i % 2 else 0) for i in range(4)]  # 2 of 4 with parameters
    assert fsdp_step(layers, 2, link_costs.Links(fsdp_layer_ms=0.5)) == pytest.approx(12.0 + 2 * 0.5)


def _profiles(device, contention=None, action_ms=None):
    def one(micro_batch, batch=16):
        scale = micro_batch / batch
        layers = [_layer(f"l{i}", 1.0 * scale, 2.0 * scale, 10**6) for i in range(8)]
        return Profile("m", "x", device, "cpu", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "float32", layers,
                       link_gbps=1.0, allreduce_gbps=0.5, link_latency_ms=0.1, core_contention=contention,
                       action_ms=action_ms)
    return [one(16 // m) for m in (1, 2, 4)]


@pytest.mark.parametrize("strategy", ["pp-1f1b", "pp-zb", "ddp", "fsdp"])
def test_cpu_stand_ins_are_priced_with_what_the_profile_measured_of_the_cores(strategy):
    devices = ["cpu", "cpu"]
    alone = predict(strategy, _profiles("cpu"), Request(devices=devices), micro_batches=2).predicted_step_ms
    shared = predict(strategy, _profiles("cpu", 1.6, 0.2), Request(devices=devices), micro_batches=2).predicted_step_ms
    assert shared > alone
    single = [predict("single", _profiles("cpu", c, a), Request(devices=devices)).predicted_step_ms for c, a in ((None, None), (1.6, 0.2))]
    assert single[0] == single[1]  # one process alone: nothing shared


def test_one_process_driving_cpu_stand_ins_shares_nothing():
    # The hand split and nn.DataParallel run in one process: its stages take turns, nothing computes at once.
    devices = ["cpu", "cpu"]
    for strategy in ("modelparallel", "dataparallel"):
        assert (predict(strategy, _profiles("cpu"), Request(devices=devices)).predicted_step_ms
                == predict(strategy, _profiles("cpu", 1.6, 0.2), Request(devices=devices)).predicted_step_ms)


def test_the_plan_keeps_what_its_simulator_charged():
    from pipebench.partition.planning.plan import Plan

    plan = predict("pp-1f1b", _profiles("cpu", 1.6, 0.2), Request(devices=["cpu", "cpu"]), micro_batches=4).plan
    assert (plan.cores_shared, plan.contention, plan.action_ms) == (True, 1.6, 0.2)
    again = Plan.from_dict(plan.to_dict())
    assert again.simulate().step_time == pytest.approx(plan.predicted_step_ms)


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_the_probe_measures_the_processes_and_their_runtimes():
    from pipebench.hardware.cpu_processes import measure_cpu_processes
    from pipebench.partition.profiling.cache import LINK_FIELDS

    figures = measure_cpu_processes(2, megabytes=1, repeats=1, messages=2, rounds=1)
    # machine_drift is the profiling process's own; action_ms the simulator's terms of the pipeline's step
    assert set(figures) == set(LINK_FIELDS) - {"machine_drift", "action_ms"} | {"pipeline_step_ms"}
    assert figures["core_contention"] >= 1.0 and all(v > 0 for v in figures.values())


def test_the_probes_peer_fails_in_one_line(monkeypatch):
    from pipebench.base.errors import DeviceError
    from pipebench.hardware import cpu_processes as probes

    monkeypatch.setattr(probes, "_peer", lambda *args, **kwargs: 1 / 0)
    with pytest.raises(DeviceError, match="the CPU processes' probe failed"):
        probes.measure_cpu_processes(2)


def test_the_probe_closes_its_peers_pipes(monkeypatch):
    """The probe closes its peers' stderr pipes once it has its figures: no "ResourceWarning: unclosed file"
    at exit, which is a traceback where warnings are errors. Peers that write a line each and end stand in for
    the real ones."""
    import gc
    import subprocess
    import sys
    import warnings

    from pipebench.hardware import cpu_processes as probes

    def start_peers(folder, threads, devices, sizes):
        return [subprocess.Popen([sys.executable, "-c", "import sys; sys.stderr.write('peer\\n')"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(devices - 1)]

    monkeypatch.setattr(probes, "_start_peers", start_peers)
    monkeypatch.setattr(probes, "_peer", lambda *args, **kwargs: {"link_gbps": 1.0})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert probes.measure_cpu_processes(3) == {"link_gbps": 1.0}
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)], [str(w.message) for w in seen]


def test_dataparallel_on_the_cpu_is_the_whole_step_the_profile_timed():
    # One process runs the module as it is on the whole batch: the profile timed exactly that, even where
    # it is far from the layers' sum (beyond the calibration's bounds).
    profiles = _profiles("cpu")
    profiles[0].whole_step_ms = 7.0  # the layers sum to 24 ms at the whole batch
    assert predict("dataparallel", profiles, Request(devices=["cpu", "cpu"])).predicted_step_ms == pytest.approx(7.0)


def test_plan_and_advise_price_a_cpu_pipeline_alike():
    import pipebench
    from pipebench.partition.planning.plan import shared_cores

    profiles = _profiles("cpu", 1.6, 0.2)
    assert shared_cores(profiles[0], ["cpu", "cpu"]) == SharedCores(1.6, 0.2)
    assert shared_cores(profiles[0], ["cpu"]) is None
    assert shared_cores(profiles[0], ["cuda:0", "cuda:1"]) is None
    planned = pipebench.plan(profiles=profiles, stages=2, device="cpu", micro_batches=2, schedule="1f1b")
    advised = predict("pp-1f1b", profiles, Request(devices=["cpu", "cpu"]), micro_batches=2)
    assert planned.predicted_step_ms == pytest.approx(advised.predicted_step_ms)
    assert planned.cores_shared


def test_every_cpu_pipeline_step_ends_with_the_losss_broadcast():
    # The last stage broadcasts the loss after the schedule: one collective every process waits for.
    for schedule in SCHEDULES:
        p = 2
        stages = p * SCHEDULES[schedule].stages_per_device
        f, b = [1.0] * stages, [2.0] * stages
        plain = simulate(f, b, 2, schedule, devices=p, shared_cores=SharedCores(1.3, 0.1))
        ended = simulate(f, b, 2, schedule, devices=p, shared_cores=SharedCores(1.3, 0.1, step_end_ms=0.7))
        assert ended.step_time == pytest.approx(plain.step_time + 0.7)
    with pytest.raises(ValueError):
        SharedCores(1.0, 0.0, -1.0)


def test_replica_steps_on_cpu_stand_ins_pay_ddps_runtime_and_the_losss_all_reduce():
    # 4 layers, 3 with parameters: DDP's runtime is 0.5 a step and 0.1 a layer with parameters; the
    # loss's all-reduce at the end is one collective of 0.3; FSDP pays that collective too.
    layers = [_layer(f"l{i}", 1.0, 2.0, 10**6 if i else 0) for i in range(4)]
    bare = link_costs.Links(copy_gbps=1.0, allreduce_gbps=1.0, latency_ms=0.05)
    priced = link_costs.Links(copy_gbps=1.0, allreduce_gbps=1.0, latency_ms=0.05, collective_ms=0.3, ddp_ms=0.5,
                              ddp_layer_ms=0.1)
    assert ddp_step(layers, 2, priced) - ddp_step(layers, 2, bare) == pytest.approx(
        0.5 + 3 * 0.1 + 0.3 + (0.3 - 0.05) * 2)  # and DDP's 2 buckets' all-reduces at the collective's fixed cost
    assert ddp_step(layers, 1, priced) == pytest.approx(ddp_step(layers, 1, bare) + 0.5 + 0.3)
    assert fsdp_step(layers, 2, link_costs.Links(collective_ms=0.3)) == pytest.approx(
        fsdp_step(layers, 2, link_costs.Links()) + 0.3)


def test_a_collectives_fixed_cost_is_the_collectives_not_a_messages():
    links = link_costs.Links(allreduce_gbps=1.0, latency_ms=0.05, collective_ms=0.3)
    assert link_costs.allreduce_ms(10**6, 2, links) == pytest.approx(1.0 + 0.3)
    assert link_costs.gather_ms(10**6, 2, links) == pytest.approx(0.5 + 0.3)
    assert link_costs.allreduce_ms(10**6, 2, link_costs.Links(allreduce_gbps=1.0, latency_ms=0.05)) == pytest.approx(1.05)


def test_advise_prices_the_profiles_process_figures():
    def with_figures(profiles, **figures):
        for p in profiles:
            for name, value in figures.items():
                setattr(p, name, value)
        return profiles

    devices = ["cpu", "cpu"]
    for strategy in ("ddp", "zero1", "fsdp", "pp-1f1b", "pp-zbv"):
        bare = predict(strategy, _profiles("cpu", 1.6, 0.2), Request(devices=devices), micro_batches=2).predicted_step_ms
        priced = predict(strategy, with_figures(_profiles("cpu", 1.6, 0.2), collective_ms=0.3, ddp_ms=0.5,
                                                ddp_layer_ms=0.1), Request(devices=devices), micro_batches=2).predicted_step_ms
        assert priced > bare + 0.29, strategy
    plan = predict("pp-1f1b", with_figures(_profiles("cpu", 1.6, 0.2), collective_ms=0.3), Request(devices=devices), micro_batches=2).plan
    assert plan.step_end_ms == 0.3


def test_the_pipeline_runtimes_costs_come_out_in_the_simulators_terms():
    # A two-process 1F1B of stages that compute nothing, measured at the step the simulator prices with
    # 0.3 ms an operation and 0.1 ms a hop: the probe's figures are those. Measured shorter than its hops
    # alone price it at the message latency, a hop costs what makes them price it.
    from pipebench.partition.planning.simulator import pipeline_costs

    def step(hop, action):
        zeros = [0.0, 0.0]
        return simulate(zeros, zeros, 8, "1f1b", [hop], shared_cores=SharedCores(1.0, action)).step_time

    assert step(0.1, 0.3) > 2 * 8 * 0.3
    assert pipeline_costs(step(0.1, 0.3), 2, 8, 0.1) == pytest.approx((0.1, 0.3), rel=1e-6)
    hop, action = pipeline_costs(step(0.5, 1e-3), 2, 8, 2.0)
    assert (hop, action) == (pytest.approx(0.5, rel=1e-6), 1e-3)


def test_fsdps_runtime_is_paid_per_block_it_shards_not_per_profiled_layer():
    # A Hugging Face GPT-2 profiled finer than FSDP shards it: two blocks (transformer.h.0 and .1) and
    # the root (the embeddings, the head), whatever the layers inside them.
    names = ["transformer.wte", "transformer.drop", "transformer.h.0.ln_1", "transformer.h.0.attn.c_attn",
             "transformer.h.0.mlp.c_fc", "transformer.h.1.ln_1", "transformer.h.1.attn.c_attn", "lm_head"]
    layers = [_layer(name, 1.0, 2.0, 0 if name.endswith("drop") else 10**6) for name in names]
    assert fsdp_blocks(layers, 4) == [True, False, True, False, False, True, False, False]
    assert fsdp_blocks(layers, 1) == [n != "transformer.drop" for n in names]  # the zoo's layers are its blocks
    links = link_costs.Links(fsdp_layer_ms=0.5)
    bare = fsdp_step(layers, 2, link_costs.Links())
    assert fsdp_step(layers, 2, links, blocks=fsdp_blocks(layers, 4)) == pytest.approx(bare + 3 * 0.5)
    assert fsdp_step(layers, 2, links) == pytest.approx(bare + 7 * 0.5)


def test_fsdp_gathers_a_block_in_one_collective_whose_calls_its_runtime_already_priced():
    """FSDP2 gathers a block's parameters in one collective, not one per layer: a collective's fixed cost
    (collective_ms) is paid per block on GPUs, and on CPU stand-ins not again, as the measured runtime
    (fsdp_layer_ms) times FSDP2's calls with their waits. Priced per layer, ResNet-18's FSDP step on the CPU
    comes to 628 ms where it measures 269-330: 44 profiled layers, 132 collectives at 1.6 ms each."""
    names = [f"layer{b}.{i}.conv" for b in (1, 2) for i in (0, 1, 2)]  # 2 blocks of 3 layers at granularity 3
    layers = [_layer(name, 1.0, 2.0, 10**6) for name in names]
    blocks = [True, False, False, True, False, False]
    compute = 6 * (1.0 + 2.0)
    gpu = link_costs.Links(allreduce_gbps=1e6, collective_ms=0.5)  # bytes free: only the calls cost
    # nothing overlaps (DDP_CONTENTION 1): each block's two gathers and reduce-scatter cost 0.5 each, then
    # the loss's collective
    assert fsdp_step(layers, 2, gpu, blocks=blocks) == pytest.approx(compute + 2 * 3 * 0.5 + 0.5)
    assert fsdp_step(layers, 2, gpu) == pytest.approx(compute + 6 * 3 * 0.5 + 0.5)  # a block a layer
    cpu = link_costs.Links(allreduce_gbps=1e6, collective_ms=0.5, fsdp_layer_ms=4.0)
    assert fsdp_step(layers, 2, cpu, blocks=blocks) == pytest.approx(compute + 2 * 4.0 + 0.5)
    # the bytes: a block's 3 MB, (p - 1) / p of them at 1 GB/s, 1.5 ms a collective
    wire = link_costs.Links(allreduce_gbps=1.0, fsdp_layer_ms=4.0)
    assert fsdp_step(layers, 2, wire, blocks=blocks) == pytest.approx(compute + 2 * 4.0 + 2 * 3 * 1.5)


def test_fsdps_gathers_and_reduce_scatters_move_at_their_own_bandwidths():
    """gloo's all-gather and reduce-scatter run slower than its all-reduce: where the probe measured them,
    FSDP's collectives are priced at theirs, and a slower reduce-scatter lengthens the step by the backward's
    last one at least; unmeasured (GPUs), they are the all-reduce's."""
    layers = [_layer(f"l{i}", 0.1, 0.2, 10**7) for i in range(4)]  # 10 MB a layer: the link decides
    base = link_costs.Links(allreduce_gbps=1.0)
    same = link_costs.Links(allreduce_gbps=1.0, gather_gbps=1.0, scatter_gbps=1.0)
    assert fsdp_step(layers, 2, same) == pytest.approx(fsdp_step(layers, 2, base))
    assert link_costs.gather_ms(10**7, 2, link_costs.Links(allreduce_gbps=1.0, gather_gbps=0.5)) == pytest.approx(10.0)
    assert link_costs.gather_ms(10**7, 2, link_costs.Links(allreduce_gbps=1.0, scatter_gbps=0.25), scatter=True) == pytest.approx(20.0)
    slow_gather = fsdp_step(layers, 2, link_costs.Links(allreduce_gbps=1.0, gather_gbps=0.5))
    slow_scatter = fsdp_step(layers, 2, link_costs.Links(allreduce_gbps=1.0, scatter_gbps=0.25))
    assert slow_gather > fsdp_step(layers, 2, base) + 2 * 5.0  # each pass's first gather waits 5 ms more
    assert slow_scatter >= fsdp_step(layers, 2, base) + 15.0
    profiles = _profiles("cpu", 1.0, 0.0)
    for p in profiles:
        p.gather_gbps, p.scatter_gbps = 0.1, 0.1
    assert (predict("fsdp", profiles, Request(devices=["cpu", "cpu"])).predicted_step_ms
            > predict("fsdp", _profiles("cpu", 1.0, 0.0), Request(devices=["cpu", "cpu"])).predicted_step_ms)


def test_an_interrupt_during_the_cpu_probe_is_an_interrupt(monkeypatch):
    """Ctrl-C or SIGTERM (the CLI's KeyboardInterrupt) while the CPU processes' probe runs is the
    KeyboardInterrupt again once the peer processes are ended (exit 130), not DeviceError "the CPU processes'
    probe failed: " with no reason (exit 2)."""
    from pipebench.hardware import cpu_processes as probes

    started = []
    start = probes._start_peers

    def start_peers(*args):
        started.extend(start(*args))
        return started

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(probes, "_start_peers", start_peers)
    monkeypatch.setattr(probes, "_peer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        probes.measure_cpu_processes(2)
    assert started and all(peer.poll() is not None for peer in started)
