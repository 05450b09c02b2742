"""FSDP2: two gloo processes train like one device (fp32 exactly, bf16 within its rounding), the blocks it
shards, and its price (bench/strategies/fsdp/cost.py fsdp_step and fsdp_memory) in closed form."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from pipebench import models
from pipebench.bench.predict.ranking import predict
from pipebench.bench.launch.job import Job
from pipebench.bench.strategies.fsdp.trainer import blocks
from pipebench.bench.strategies.planned.single import SingleTrainer
from pipebench.bench.strategies.fsdp.cost import fsdp_memory, fsdp_step
from pipebench.partition.planning import link_costs
from pipebench.base.training import Training
from pipebench.request import Request
from test_advise import layer, profiles
from test_distributed import SEED, check, job_for, trained_params

BATCH = 8


# -------------------------------------------------------------------------------------- what is sharded

def test_a_zoo_model_is_sharded_layer_by_layer():
    model = models.get_model("gpt", "tiny", seed=SEED)
    assert blocks(model) == [m for m in model.layers.children() if any(True for _ in m.parameters())]


class Tied(nn.Module):
    """A user model: an embedding tied to the head, a ModuleList of blocks, a final norm."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Module()
        self.body.layers = nn.ModuleList([nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(3)])
        self.norm = nn.LayerNorm(4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight


def test_a_user_model_is_sharded_by_its_repeated_blocks_and_a_tied_weight_stays_with_the_root():
    class Model:  # what strategies see of a UserModel: no layer_names
        module = Tied()

    assert blocks(Model) == list(Model.module.body.layers)

    class Flat:
        module = nn.Module()
        module.a, module.b, module.c = nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2)
        module.d = module.a  # the same module twice: its parameter belongs to no single block

    assert blocks(Flat) == [Flat.module.c]


# ------------------------------------------------------------------------------ equal to one device

def gpt_job():
    return job_for("gpt", "fsdp", 2, batch=BATCH)


def test_two_processes_train_the_gpt_like_one_device(tmp_path, groups):
    check(tmp_path, gpt_job(), groups)


@pytest.mark.slow  # the GPT covers FSDP; this adds BatchNorm over each process's slice
def test_the_convnet_with_batchnorm_trains_like_one_device_taking_the_slices(tmp_path):
    check(tmp_path, job_for("convnet", "fsdp", 2, batch=BATCH))


def fsdp_job(training: Training) -> Job:
    return Job.by_hand("gpt", "fsdp", flavour="tiny", batch=BATCH, devices=2, device_type="cpu", steps=1, warmup=0,
                       seed=SEED, save_params=True, training=training)


RECOMPUTE, BF16_SGD, BF16_ADAMW = (Training("fp32", "sgd", checkpoint="always"), Training("bf16", "sgd"),
                                   Training("bf16", "adamw"))


def run_both(tmp_path, training: Training, groups=None):
    """The fsdp job on two processes and one device's SingleTrainer, one step each from the same weights:
    (first losses, start, fsdp's parameters, the reference's)."""
    model = models.get_model("gpt", "tiny", seed=SEED)
    result, params = trained_params(tmp_path, fsdp_job(training), groups)
    start = {k: v.detach().clone() for k, v in model.module.named_parameters()}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker computes
    try:
        trainer = SingleTrainer(model, ["cpu"], training=training)
        ref_loss = trainer.step(*model.make_batch(BATCH, seed=SEED + 1))
    finally:
        torch.set_num_threads(threads)
    ref = trainer.state_dict()
    assert params.keys() == ref.keys()
    assert all(params[k].dtype == torch.float32 for k in params)  # fp32 master weights, bf16 or not
    # Both cast the same fp32 weights to bf16 before each use (FSDP when gathering, autocast per
    # operation): the first losses differ only in summation order.
    assert result.first_loss == pytest.approx(ref_loss, rel=1e-3)
    return (result.first_loss, ref_loss), start, params, ref


@pytest.mark.parametrize("mode, forwards", [("never", 1), ("always", 2)])
def test_always_recomputes_each_block_in_its_backward(tmp_path, mode, forwards):
    """One process (a group of one, here): a layer inside a block runs once per step, twice when its
    block recomputes; the optimizer steps on shards, and the state keeps the original names."""
    from torch.distributed.tensor import DTensor

    from pipebench.bench.strategies.fsdp.trainer import FSDPTrainer

    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = models.get_model("gpt", "tiny", seed=SEED)
        trainer = FSDPTrainer(model, ["cpu"], training=Training("fp32", "sgd", checkpoint=mode))
        calls = []
        inner = next(m for m in trainer.model.module.get_submodule("block_0_mlp").modules() if isinstance(m, nn.Linear))
        inner.register_forward_hook(lambda *_: calls.append(1))
        trainer.step(*model.make_batch(2, seed=SEED + 1))
        assert len(calls) == forwards
        assert all(isinstance(p, DTensor) for p in trainer.parameters())
        assert list(trainer.state_dict()) == [name for name, _ in model.module.named_parameters()]
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize("name, gathered", [("resnet18", torch.float32), ("gpt", torch.bfloat16)])
def test_bf16_gathers_a_model_with_batchnorm_in_fp32_and_computes_in_bf16(tmp_path, name, gathered):
    """CUDA's batch norm refuses bf16 weights beside fp32 running statistics (ResNet-101 in bf16 on an H200;
    the CPU's accepts them): a model with BatchNorm is gathered in fp32, and autocast runs its convolutions in
    bf16; one without is gathered in bf16."""
    from pipebench.bench.strategies.fsdp.trainer import FSDPTrainer

    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = models.get_model(name, "tiny", seed=SEED)
        trainer = FSDPTrainer(model, ["cpu"], training=Training("bf16", "adamw"))
        kind = nn.Conv2d if name == "resnet18" else nn.Linear
        first = next(m for m in trainer.model.module.modules() if isinstance(m, kind))
        seen = {}
        first.register_forward_hook(lambda m, _, out: seen.update(weight=m.weight.dtype, output=out.dtype))
        loss = trainer.step(*model.make_batch(4, seed=SEED + 1))
        assert seen == {"weight": gathered, "output": torch.bfloat16} and loss == loss
    finally:
        torch.distributed.destroy_process_group()


def test_recomputing_every_block_trains_like_one_device(tmp_path, groups):
    (loss, ref_loss), _, params, ref = run_both(tmp_path, RECOMPUTE, groups)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    for key in ref:
        torch.testing.assert_close(params[key], ref[key], atol=1e-5, rtol=1e-4, msg=lambda m: f"{key}: {m}")


@pytest.mark.slow  # the fp32 test catches gradients that are not averaged, exactly
def test_bf16_sgd_moves_each_weight_as_one_device_within_bf16_rounding(tmp_path):
    """Each process's weight gradients come out of bf16 matmuls over its half of the batch, rounded to 8
    bits of mantissa (relative 2^-8 = 0.4%) before the fp32 average; one device rounds the whole batch's
    sums instead. So a tensor's update lr x gradient agrees within 5% of its norm (measured: 1.9% at
    worst). A gradient summed instead of averaged is off by 100%, one left unreduced by about as much."""
    _, start, params, ref = run_both(tmp_path, BF16_SGD)
    for key in ref:
        moved, expected = params[key] - start[key], ref[key] - start[key]
        assert (moved - expected).norm() <= 0.05 * expected.norm() + 1e-7, key


def test_bf16_adamw_moves_each_weight_as_one_device(tmp_path, groups):
    """AdamW's first step moves each weight by lr x g / (|g| + eps) = lr x sign(g) (less weight decay,
    the same in both): two runs agree within 1e-4 wherever their gradients have the same sign, and
    differ by 2 lr where bf16 rounding flips a sign of a near-zero gradient. So: every weight within
    2 lr, and at least 99% within 1e-4, which unreduced gradients (each process's own half-batch) fail.
    AdamW is blind to the gradient's scale; the bf16 SGD test checks the averaging."""
    _, _, params, ref = run_both(tmp_path, BF16_ADAMW, groups)
    lr = Training(optimizer="adamw").lr
    close = total = 0
    for key in ref:
        gap = (params[key] - ref[key]).abs()
        assert gap.max() <= 2 * lr + 1e-6, key
        close += int((gap <= 1e-4).sum())
        total += gap.numel()
    assert close >= 0.99 * total, f"{close} of {total} weights within 1e-4"


# ------------------------------------------------------------------------------------------- its price

def test_a_gather_moves_half_an_allreduce():
    links = link_costs.Links(allreduce_gbps=10.0, latency_ms=0.5)
    assert link_costs.gather_ms(10**9, 2, links) == pytest.approx(50.0 + 0.5)  # (p-1)/p x 1 GB at 10 GB/s
    assert link_costs.gather_ms(10**9, 4, links) == pytest.approx(75.0 + 0.5)
    assert link_costs.gather_ms(10**9, 1, links) == 0.0 and link_costs.gather_ms(0, 2, links) == 0.0


def test_fsdp_hides_each_gather_behind_the_previous_layers_compute():
    layers = [layer(f"l{i}", 1.0, 2.0, 10**9) for i in range(4)]  # 1 GB each
    assert fsdp_step(layers, 2, link_costs.Links()) == pytest.approx(12.0)  # the link not priced
    # Each gather or reduce-scatter takes 0.5 ms: only the first gather of each pass and the last
    # reduce-scatter are exposed (the others overlap a 1 ms forward or a 2 ms backward).
    fast = link_costs.Links(allreduce_gbps=1000.0)
    free = dict(contention=0.0)  # overlap that costs the compute nothing
    assert fsdp_step(layers, 2, fast, **free) == pytest.approx(12.0 + 3 * 0.5)
    assert fsdp_step(layers, 2, fast, scale=2.0, **free) == pytest.approx(24.0 + 3 * 0.5)
    assert fsdp_step(layers, 2, fast, bf16=True, **free) == pytest.approx(12.0 + 2 * 0.25 + 0.5)  # bf16 gathers
    assert fsdp_step(layers, 2, fast, recompute=True, **free) == pytest.approx(16.0 + 3 * 0.5)  # forwards twice
    # As DDP's all-reduce, an overlapped collective slows the compute beside it by its time (contention 1):
    # 3 prefetched gathers in each pass and the 3 reduce-scatters that another backward follows.
    assert fsdp_step(layers, 2, fast) == pytest.approx(12.0 + 3 * 0.5 + 9 * 0.5)
    # A slow link (5 ms per collective) sets the pace: 4 gathers forward, then 4 gathers and 4
    # reduce-scatters in the backward, back to back on the link (12 x 5 ms), idle only while the last
    # layer's forward runs (1 ms): the backward's first gather waits for it.
    slow = link_costs.Links(allreduce_gbps=100.0)
    assert fsdp_step(layers, 2, slow, **free) == pytest.approx(12 * 5.0 + 1.0)


def test_fsdp_holds_a_share_of_the_states_two_layers_whole_and_its_activations():
    layers = [layer(f"l{i}", 1.0, 2.0, 100 * (i + 1), saved=7) for i in range(4)]  # 1000 bytes of parameters
    assert fsdp_memory(layers, 2, 0) == 1000 * 2 / 2 + (400 + 300) + 4 * 7
    assert fsdp_memory(layers, 4, 2) == 1000 * 4 / 4 + (400 + 300) + 4 * 7
    assert fsdp_memory(layers, 4, 2, bf16=True) == 1000 * 4 / 4 + (400 + 300) / 2 + 4 * 7
    # Recomputing: each layer's input (the previous one's 4000-byte output) and one layer's activations.
    assert fsdp_memory(layers, 2, 0, recompute=True) == 1000 * 2 / 2 + (400 + 300) + 3 * 4000 + 7


def test_advise_prices_fsdp_from_the_replicas_profile():
    fsdp = predict("fsdp", profiles(), Request(devices=["cuda:0", "cuda:1"], training=Training(optimizer="adamw")))
    ddp = predict("ddp", profiles(), Request(devices=["cuda:0", "cuda:1"], training=Training(optimizer="adamw")))
    # Half the batch each (8 layers x 1.5 ms), the exposed 2 MB collectives at 100 GB/s (0.01 ms each), and
    # the 21 overlapped ones that slow the compute beside them (7 prefetches per pass, 7 reduce-scatters).
    assert fsdp.predicted_step_ms == pytest.approx(12.0 + 3 * 0.01 + 21 * 0.01)
    assert fsdp.peak_memory_bytes == [16 * 10**6 * 4 // 2 + 2 * 2 * 10**6 + 8 * 100 * 32] * 2
    assert fsdp.fits and fsdp.peak_memory_bytes[0] < ddp.peak_memory_bytes[0]
    capped = predict("fsdp", profiles(), Request(devices=["cuda:0", "cuda:1"], max_memory=[fsdp.peak_memory_bytes[0] - 1] * 2))
    assert capped.fits  # SGD keeps no state: less than AdamW's
    always = predict("fsdp", profiles(), Request(devices=["cuda:0", "cuda:1"], training=Training(checkpoint="always")))
    assert always.predicted_step_ms == pytest.approx(12.0 + 4.0 + 24 * 0.01)  # the 8 x 0.5 ms forwards again
    tight = predict("fsdp", profiles(), Request(devices=["cuda:0", "cuda:1"], max_memory=[10**6] * 2))
    assert not tight.fits and tight.reason
    assert "does not split" in predict("fsdp", profiles(), Request(devices=["cuda:0", "cuda:1", "cuda:2"])).reason
