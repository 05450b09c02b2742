"""ZeRO-1 (DDP with torch's ZeroRedundancyOptimizer): trained equal to one device on two gloo processes,
and priced as DDP with the optimizer's states divided over the replicas."""
from __future__ import annotations

import pytest
import torch

from pipebench import models
from pipebench.bench.predict.ranking import rank_strategies, predict
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.loopback import free_port
from pipebench.bench.strategies import STRATEGIES
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.partition.planning import link_costs
from pipebench.base.training import Training
from pipebench.request import Request
from test_advise import profiles
from test_distributed import SEED, check, job_for, trained_params


def sgd_job():
    return job_for("gpt", "zero1", 2)


def adamw_job():
    return Job.by_hand("gpt", "zero1", flavour="tiny", batch=8, devices=2, device_type="cpu", steps=1, warmup=0,
                       seed=SEED, save_params=True, training=Training(precision="fp32", optimizer="adamw"))


def test_two_processes_train_like_one_device(tmp_path, groups):
    """Each process steps its shard of the parameters and broadcasts it: after one step both replicas
    hold what one device computes (check compares every parameter, and the replicas with each other)."""
    check(tmp_path, sgd_job(), groups)


def test_adamw_states_sharded_over_two_processes_step_like_one_device(tmp_path, groups):
    """AdamW, whose two states per parameter are what ZeRO-1 shards: the same update as one device's."""
    model = models.get_model("gpt", "tiny", seed=SEED)
    result, params = trained_params(tmp_path, adamw_job(), groups)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker computes: the same reduction order
    try:
        trainer = SingleTrainer(model, ["cpu"], training=Training("fp32", "adamw"))
        ref_loss = trainer.step(*model.make_batch(8, seed=SEED + 1))
    finally:
        torch.set_num_threads(threads)
    ref = trainer.state_dict()
    assert result.first_loss == pytest.approx(ref_loss, rel=1e-5)
    assert params.keys() == ref.keys()
    for key in ref:
        torch.testing.assert_close(params[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")


def test_it_is_priced_as_ddp_with_the_optimizer_states_sharded():
    """Same profile, 2 devices, AdamW: ZeRO-1 holds DDP's replica less half of the two fp32 states per
    parameter, and takes DDP's step plus the all-gather of the updated parameters."""
    adamw = Training(optimizer="adamw")
    ddp, zero1 = (predict(name, profiles(), Request(devices=["cuda:0", "cuda:1"], training=adamw)) for name in ("ddp", "zero1"))
    params = 8 * 2 * 10**6  # eight layers of 2 MB
    links = link_costs.Links(copy_gbps=100.0, allreduce_gbps=100.0)
    assert zero1.peak_memory_bytes == [m - params * 2 // 2 for m in ddp.peak_memory_bytes]
    assert zero1.predicted_step_ms == pytest.approx(ddp.predicted_step_ms + link_costs.gather_ms(params, 2, links))
    assert zero1.fits and zero1.schedule is None
    with_sgd = predict("zero1", profiles(), Request(devices=["cuda:0", "cuda:1"]))  # no state: DDP's memory
    assert with_sgd.peak_memory_bytes == predict("ddp", profiles(), Request(devices=["cuda:0", "cuda:1"])).peak_memory_bytes


def test_it_fits_under_a_cap_that_ddp_does_not():
    adamw = Training(optimizer="adamw")
    ddp = predict("ddp", profiles(), Request(devices=["cuda:0", "cuda:1"], training=adamw))
    cap = ddp.peak_memory_bytes[0] - 1
    ranked = {p.strategy: p for p in rank_strategies(profiles(), Request(devices=["cuda:0", "cuda:1"], max_memory=[cap, cap], training=adamw)).predictions}
    assert not ranked["ddp"].fits and ranked["zero1"].fits
    assert STRATEGIES["zero1"].processes(4) == 4 and STRATEGIES["zero1"].splits_batch


def test_the_updated_shards_go_out_as_one_bucket_per_owner_not_one_broadcast_per_tensor(monkeypatch):
    """torch's default broadcasts every parameter tensor on its own: on gloo that measured 172 ms a step for
    resnet101 tiny against DDP's 84 (the price counts one gather); bucket views send one per owner."""
    import torch.distributed as dist

    from pipebench.bench.strategies.zero1.trainer import Zero1Trainer

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))  # the OS's: a seeded random port collides across runs
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        model = models.get_model("gpt", "tiny")
        trainer = Zero1Trainer(model, ["cpu"], strategy=STRATEGIES["zero1"], training=Training(precision="fp32"))
        broadcasts = []
        monkeypatch.setattr(dist, "broadcast", lambda tensor, *a, **k: broadcasts.append(tensor.numel()) or _Sent())
        inputs, targets = model.make_batch(8, seed=SEED)
        trainer.step(inputs, targets)
        assert len(broadcasts) == 1 and broadcasts[0] == sum(p.numel() for p in model.layers.parameters())
    finally:
        dist.destroy_process_group()


class _Sent:
    """What an asynchronous broadcast returns, for the optimizer to wait on."""

    def wait(self) -> None:
        return None
