"""hybrid: 2 pipeline stages x 2 replicas in 4 gloo processes train like one device."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from pipebench import models
from pipebench.bench.predict.ranking import rank_strategies, predict
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.run_job import launch
from pipebench.bench.launch.worker_report import WorkerResult
from pipebench.bench.strategies import STRATEGIES
from pipebench.bench.strategies.hybrid.trainer import _buckets
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.base.errors import UserError
from pipebench.partition.planning import link_costs
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.base.training import Training
from pipebench.request import Request

SEED, BATCH, STAGES, REPLICAS = 0, 8, 2, 2


def hybrid_params(tmp_path, job: Job) -> tuple[WorkerResult, dict[str, torch.Tensor]]:
    """Launch `job` for one step: its result and one replica's parameters, after checking that the
    replicas of every stage hold equal parameters."""
    result = launch(job, keep=tmp_path, timeout=300)
    parts = [torch.load(tmp_path / f"params-rank{rank}.pt") for rank in range(job.processes)]
    for rank in range(STAGES, job.processes):  # rank = replica * stages + stage
        copy, first = parts[rank], parts[rank % STAGES]
        assert copy.keys() == first.keys() and all(torch.equal(copy[k], first[k]) for k in copy), rank
    params = {}
    for part in parts[:STAGES]:  # replica 0's stages
        for key in params.keys() & part.keys():  # a tied weight's copies stay equal
            torch.testing.assert_close(params[key], part[key], atol=1e-6, rtol=1e-6)
        params.update(part)
    return result, params


def reference(model, training: Training):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker computes: the same reduction order
    try:
        trainer = SingleTrainer(model, ["cpu"], training=training)
        loss = trainer.step(*model.make_batch(BATCH, seed=SEED + 1))
    finally:
        torch.set_num_threads(threads)
    return loss, trainer.state_dict()


@pytest.mark.parametrize("precision, optimizer", [
    pytest.param("fp32", "sgd", marks=pytest.mark.ci),  # CI runs it after the default set
    pytest.param("bf16", "adamw", marks=pytest.mark.slow),  # tests/test_training_settings.py covers bf16 + AdamW in every runtime
])
@pytest.mark.parametrize("strategy", ["hybrid"])
def test_two_stages_by_two_replicas_train_like_one_device(tmp_path, strategy, precision, optimizer):
    model = models.get_model("gpt", "tiny", seed=SEED)
    training = Training(precision, optimizer)
    job = Job.by_hand("gpt", strategy, flavour="tiny", batch=BATCH, devices=STAGES * REPLICAS, device_type="cpu",
                      micro_batches=2, steps=1, warmup=0, seed=SEED, save_params=True, training=training)
    assert (job.replicas, job.the_plan.device_count, job.the_plan.batch) == (REPLICAS, STAGES, BATCH // REPLICAS)
    result, params = hybrid_params(tmp_path, job)
    ref_loss, ref = reference(model, training)
    start = dict(model.module.named_parameters())
    assert params.keys() == ref.keys()
    assert any(not torch.equal(ref[k], start[k].detach()) for k in ref)  # the step moved the weights
    assert result.world_size == 4 and len(result.peak_memory_bytes) == 4
    if precision == "fp32":
        assert result.first_loss == pytest.approx(ref_loss, rel=1e-5)
        for key in params:
            torch.testing.assert_close(params[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")
        return
    # bf16 rounds differently per micro-batch; AdamW's first step moves each weight by about lr * sign(grad), so
    # a weight whose gradient is near zero may step the other way (2 * lr apart). Few do, over the whole model;
    # a small tensor (a 64-wide bias) can hold one or two of them.
    assert result.first_loss == pytest.approx(ref_loss, rel=1e-2)
    lr = training.lr
    diffs = {key: (params[key] - ref[key]).abs() for key in params}
    for key, diff in diffs.items():
        assert diff.max() <= 2 * lr + 1e-6, key
    flipped = sum(int((diff > 1e-4).sum()) for diff in diffs.values())
    assert flipped <= 0.01 * sum(diff.numel() for diff in diffs.values()), flipped


def test_a_hybrid_job_is_copies_of_one_replicas_plan():
    job = Job.by_hand("gpt", "hybrid", flavour="tiny", batch=12, devices=6, device_type="cpu", micro_batches=2)
    assert (job.replicas, job.processes, job.the_plan.device_count, job.the_plan.batch) == (3, 6, 2, 4)
    with pytest.raises(UserError, match="2 or more copies"):  # one copy of a 4-device plan is pp-1f1b
        Job.by_hand("gpt", "hybrid", flavour="tiny", batch=8, devices=4, device_type="cpu", micro_batches=4,
                    stages_per_replica=4)
    with pytest.raises(UserError, match="2 or more copies"):
        Job.by_hand("gpt", "hybrid", flavour="tiny", batch=8, devices=2, device_type="cpu", micro_batches=2)
    with pytest.raises(UserError, match="batch 8 does not split evenly over 3 hybrid replicas"):
        Job.by_hand("gpt", "hybrid", flavour="tiny", batch=8, devices=6, device_type="cpu", micro_batches=2)
    job = Job.by_hand("gpt", "hybrid", flavour="tiny", batch=8, devices=4, device_type="cpu", micro_batches=2)
    with pytest.raises(UserError, match="batch 4 per replica; 2 replicas of it train 8, the job 16"):
        replace(job, batch=16)


def test_gradients_go_in_buckets_of_one_dtype():
    f32, f16 = torch.zeros(4), torch.zeros(4, dtype=torch.float16)
    assert [[t.dtype for t in b] for b in _buckets([f32, f32, f16, f32], limit=32)] == [
        [torch.float32, torch.float32], [torch.float16], [torch.float32]]
    assert [len(b) for b in _buckets([f32, f32, f32], limit=20)] == [1, 1, 1]


def _profiles(batch=64, param_bytes=2 * 10**6):
    """Eight equal layers whose time scales with the micro-batch (as tests/test_advise.py's)."""
    def profile(micro_batch):
        scale = micro_batch / batch
        layers = [LayerProfile(f"l{i}", param_bytes // 4, param_bytes, 1.0 * scale, 2.0 * scale, 4000, [8, 125],
                               "float32", 100 * micro_batch) for i in range(8)]
        return Profile("m", "x", "cuda:0", "gpu", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "float32", layers,
                       link_gbps=100.0, allreduce_gbps=10.0)
    return [profile(batch // m) for m in (1, 2, 4, 8, 16)]


def test_hybrid_is_priced_as_one_replicas_plan_plus_the_allreduce_of_its_stages():
    gpus = [f"cuda:{i}" for i in range(4)]
    hybrid = predict("hybrid", _profiles(), Request(devices=gpus), micro_batches=4)
    pp = predict("pp-1f1b", [replace(p, batch=32) for p in _profiles() if 32 % p.micro_batch == 0], Request(devices=gpus[:2]), micro_batches=4)  # one replica: half the batch on 2 stages
    stage = 4 * 2 * 10**6  # 4 of the 8 layers' parameters per stage
    assert hybrid.plan.batch == 32 and hybrid.plan.micro_batches == 4 and hybrid.plan.device_count == 2
    allreduce = link_costs.allreduce_ms(stage, 2, link_costs.Links(100.0, 10.0))
    assert hybrid.predicted_step_ms == pytest.approx(pp.predicted_step_ms + allreduce)
    assert hybrid.predicted_samples_per_s == pytest.approx(64 / hybrid.predicted_step_ms * 1e3)
    assert hybrid.peak_memory_bytes == pp.peak_memory_bytes * 2
    Job(model="gpt", strategy="hybrid", batch=64, devices=4, plan=hybrid.plan.to_dict())  # the suite's Job


def test_hybrid_needs_two_copies_of_its_stages():
    three = predict("hybrid", _profiles(), Request(devices=["cuda:0", "cuda:1", "cuda:2"]))
    assert three.plan is None and three.reason == ("needs 4 or more devices, a multiple of 2 (2 pipeline stages x 2 "
                                                   "or more replicas): 3 do not make 2 or more copies of a 2-device "
                                                   "pipeline")
    assert "hybrid" not in [p.strategy for p in rank_strategies(_profiles(), Request(devices=["cuda:0", "cuda:1"])).predictions]
    assert "hybrid" in [p.strategy for p in rank_strategies(_profiles(), Request(devices=[f"cuda:{i}" for i in range(4)])).predictions]


def test_a_run_profiles_the_micro_batches_each_replica_cuts():
    """With --micro-batches m on 4 devices, each of the hybrid's 2 replicas cuts batch / 2 into m: the profile
    needs 2m micro-batches of the whole batch, where they split it."""
    from pipebench.bench.strategies import profile_counts

    hybrid = STRATEGIES["hybrid"]
    assert hybrid.replicas(4) == 2 and hybrid.replicas(8) == 4 and hybrid.replicas(8, 4) == 2
    assert hybrid.replicas(2) == 1 and STRATEGIES["ddp"].replicas(8) == 8 and STRATEGIES["single"].replicas(8) == 1
    both = ["single", "hybrid"]
    assert profile_counts([4], 4, batch=32, strategies=both) == [1, 4, 8]
    assert profile_counts([4], 4, batch=4, strategies=both) == [1, 4]  # 8 does not split 4: not asked for
    assert profile_counts([2], 2, strategies=["pp-1f1b"]) == [1, 2] and profile_counts([None], 4, batch=32, strategies=both) is None
