"""Plans in the engines' own terms: each export holds exactly the Plan's layers, a cut inside an engine's unit
moves and is priced again, and each engine loads its export (skipped where it is not installed)."""
from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import pipebench
from pipebench.base.errors import UserError
from pipebench.partition.planning.engines import block, export
from pipebench.partition.planning.plan import plan_with_bounds
from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.request import Request

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import hf_models  # noqa: E402

ZOO_GPT = ["embed", "block_0_attn", "block_0_mlp", "block_1_attn", "block_1_mlp", "norm", "head"]
"""The zoo's gpt, flavour tiny: its layers as the capture names them."""


def profile_of(names, ms, model="gpt", micro_batch=4, batch=8, params=None):
    def layer(name, cost, count):
        return LayerProfile(name, count, 4 * count, cost / 3, 2 * cost / 3, 1000, [micro_batch, 10], "float32", 4000)
    params = params or [100] * len(names)
    return Profile(model, "tiny", "cpu", "cpu", "x", batch, micro_batch, 1, 0, [micro_batch, 8], "int64",
                   [layer(n, c, p) for n, c, p in zip(names, ms, params)])


def zoo_gpt_plan(bounds=(0, 4, 7)):
    """The zoo gpt cut inside its second block (between its attention and its MLP), priced."""
    profile = profile_of(ZOO_GPT, [0.5, 1.0, 2.0, 1.0, 2.0, 0.2, 3.0])
    return plan_with_bounds([profile], Request(devices=["cpu", "cpu"], schedule="1f1b", micro_batches=2), list(bounds)), profile


def holds_the_plan(exported, plan):
    """The export's stages hold exactly the plan's layers, in order, and cut where its bounds say."""
    flat = [name for stage in plan.stages for name in stage.layers]
    assert [name for stage in exported["stages"] for name in stage] == flat
    assert [len(stage) for stage in exported["stages"]] == [b - a for a, b in
                                                             zip(exported["bounds"], exported["bounds"][1:])]


def test_blocks_are_named_by_their_first_number():
    assert block("model.layers.3.mlp.up_proj") == "model.layers.3"
    assert block("layers.12") == "layers.12"
    assert block("block_3_attn") == "block_3"
    assert block("layer1_0") == "layer1_0"
    assert [block(n) for n in ("embed", "lm_head", "model.embed_tokens", "head")] == [None] * 4


def test_megatron_moves_a_cut_inside_a_block_and_prices_it():
    plan, profile = zoo_gpt_plan()
    out = plan.export("megatron", [profile])
    holds_the_plan(out, plan)
    assert out["moved"] and out["bounds"] in ([0, 3, 7], [0, 5, 7])
    request = Request(devices=["cpu", "cpu"], schedule="1f1b", micro_batches=2)
    steps = {cut: plan_with_bounds([profile], request, [0, cut, 7]).predicted_step_ms for cut in (3, 5)}
    assert out["predicted_step_ms"] == pytest.approx(min(steps.values()))
    assert out["bounds"][1] == min(steps, key=steps.get)
    assert out["pipeline_model_parallel_layout"] == {3: "Et|tL", 5: "Ett|L"}[out["bounds"][1]]
    assert "moved" in out["note"]


def test_a_moved_cut_without_profiles_goes_to_the_nearest_and_says_it_is_not_priced():
    plan, _ = zoo_gpt_plan((0, 2, 7))  # inside block 0: block 0 starts at 1, block 1 at 3
    out = export(plan, "megatron")
    assert out["bounds"] in ([0, 1, 7], [0, 3, 7]) and out["predicted_step_ms"] is None
    assert "not priced" in out["note"]


def test_megatron_layout_and_first_last_counts():
    names = ["embed", *(f"layers.{i}" for i in range(8)), "norm", "head"]
    plan = plan_with_bounds([profile_of(names, [1.0] * len(names))], Request(devices=["cpu"] * 4, schedule="1f1b", micro_batches=2), [0, 2, 5, 8, 11])
    out = plan.export("megatron")
    assert not out["moved"]
    assert out["pipeline_model_parallel_layout"] == "Et|t*3|t*3|tL"
    assert out["first_last_args"][-4:] == ["--decoder-first-pipeline-num-layers", "1",
                                           "--decoder-last-pipeline-num-layers", "1"]
    holds_the_plan(out, plan)


def test_torchtitan_fqns_and_toml():
    plan, profile = zoo_gpt_plan()
    out = plan.export("torchtitan", [profile])
    assert not out["moved"]  # the zoo's halves are top-level modules: torchtitan keeps or drops each
    assert out["module_fqns_per_model_part"] == [ZOO_GPT[:4], ZOO_GPT[4:]]
    assert out["parallelism"]["pipeline_parallel_schedule"] == "1F1B"
    assert out["parallelism"]["pipeline_parallel_microbatch_size"] == plan.micro_batch_size
    assert tomllib.loads(out["toml"]) == {"training": {"local_batch_size": 8}, "parallelism": out["parallelism"]}


def test_deepspeed_parts_and_device_map():
    plan, profile = zoo_gpt_plan()
    out = plan.export("deepspeed", [profile])
    assert out["parts"] == [0, 4, 7] and out["layers"] == ZOO_GPT
    assert out["config"] == {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}
    on_gpus = plan_with_bounds([profile], Request(devices=["cuda:0", "cuda:1"], schedule="gpipe", micro_batches=2), [0, 4, 7])
    device_map = on_gpus.export("device-map")["device_map"]
    assert device_map == {name: 0 if i < 4 else 1 for i, name in enumerate(ZOO_GPT)}


def test_what_an_engine_cannot_express_is_one_line():
    names = ["model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm", "lm_head"]
    hf = plan_with_bounds([profile_of(names, [1.0] * 5, model="llama")], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=2), [0, 2, 5])
    with pytest.raises(UserError, match="torchtitan .* deeper .*model.layers.0"):
        hf.export("torchtitan")
    interleaved = make_plan([profile_of(ZOO_GPT, [1.0] * 7)], Request(devices=["cpu"] * 2, schedule="interleaved", virtual_stages=2, micro_batches=2))
    with pytest.raises(UserError, match="one stage per rank"):
        interleaved.export("deepspeed")
    convnet = plan_with_bounds([profile_of(["conv", "pool", "fc"], [1.0] * 3, model="convnet")], Request(devices=["cpu"] * 2, schedule="gpipe", micro_batches=2), [0, 1, 3])
    with pytest.raises(UserError, match="no numbered blocks"):
        convnet.export("megatron")
    five = plan_with_bounds([profile_of(ZOO_GPT, [1.0] * 7)], Request(devices=["cpu"] * 5, schedule="gpipe", micro_batches=2), [0, 1, 2, 4, 6, 7])
    with pytest.raises(UserError, match=r"megatron can cut gpt in 3 place\(s\) only"):  # E|t|t|L at most
        five.export("megatron")
    with pytest.raises(UserError, match="unknown engine"):
        five.export("titan")


def test_the_command_writes_the_export_and_says_what_moved(tmp_path, capsys):
    from pipebench.bench.cli import main
    from pipebench.partition.profiling.profile_record import save_profiles

    _, profile = zoo_gpt_plan()
    save_profiles([profile], tmp_path / "profile.json")
    target = tmp_path / "megatron.json"
    argv = ["plan", "--profile", str(tmp_path / "profile.json"), "--stages", "2", "--micro-batches", "2"]
    assert main([*argv, "--export", "megatron", str(target)]) == 0
    plan_line = capsys.readouterr().out.strip().splitlines()[-1]
    written = json.loads(target.read_text())
    assert written["engine"] == "megatron" and written["pipeline_model_parallel_layout"] in ("Et|tL", "Ett|L")
    assert plan_line.startswith("megatron ") and str(target) in plan_line
    assert main([*argv, "--export", "titan", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pipebench: error: unknown engine 'titan'; choose one of: torchtitan, deepspeed, megatron, device-map"]


# ---------------------------------------------------------------------------------- real models


@pytest.fixture(scope="module")
def zoo_gpt():
    """The zoo gpt tiny, planned on two CPU stages from a real profile (one micro-batch count)."""
    profiles = pipebench.profile("gpt", batch=8, flavour="tiny", device="cpu", devices=["cpu", "cpu"],
                                 micro_batches=2, repeats=1)
    return pipebench.plan(profiles=profiles, stages=2, device="cpu", micro_batches=2), profiles


@pytest.fixture(scope="module")
def hf_llama():
    model = hf_models.llama().eval()
    tokens = torch.randint(0, hf_models.VOCAB, (8, 16))
    profiles = pipebench.profile(model, (tokens,), batch=8, device="cpu", devices=["cpu", "cpu"],
                                 micro_batches=2, repeats=1)
    return model, tokens, pipebench.plan(profiles=profiles, stages=2, device="cpu", micro_batches=2), profiles


def test_zoo_gpt_exports_hold_its_layers(zoo_gpt):
    plan, profiles = zoo_gpt
    for engine in ("torchtitan", "deepspeed", "megatron", "device-map"):
        holds_the_plan(plan.export(engine, profiles), plan)


def test_accelerate_dispatches_the_device_map(hf_llama):
    from accelerate import dispatch_model

    model, tokens, plan, profiles = hf_llama
    out = plan.export("device-map", profiles)
    holds_the_plan(out, plan)
    assert list(out["device_map"]) == [name for stage in plan.stages for name in stage.layers]
    expected = model(tokens).logits
    dispatched = dispatch_model(model, out["device_map"], force_hooks=True)  # checks every weight is mapped
    assert dispatched.hf_device_map == out["device_map"]
    assert torch.equal(dispatched(tokens).logits, expected)


def test_hf_llama_in_megatron_and_deepspeed_terms(hf_llama):
    _, _, plan, profiles = hf_llama
    megatron = plan.export("megatron", profiles)
    holds_the_plan(megatron, plan)
    assert megatron["layers_per_stage"] in ([1, 1], [2, 0], [0, 2])
    assert sum(megatron["pipeline_model_parallel_layout"].count(c) for c in "EL") == 2
    deepspeed = plan.export("deepspeed", profiles)
    holds_the_plan(deepspeed, plan)
    assert [u for u in deepspeed["layers"] if block(u)] == ["model.layers.0", "model.layers.1"]  # whole blocks
    with pytest.raises(UserError, match="torchtitan"):
        plan.export("torchtitan", profiles)


def test_megatron_parses_the_layout(zoo_gpt):
    layout_module = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout",
                                        reason="megatron-core is not installed (pip install pipebench[engines])")
    from megatron.core.transformer.enums import LayerType

    plan, _ = zoo_gpt_plan()
    out = plan.export("megatron")
    layout = layout_module.PipelineParallelLayerLayout(out["pipeline_model_parallel_layout"], 2)
    layout.validate_layer_layout(num_layers=2, mtp_num_layers=None)
    for rank, stage in enumerate(out["stages"]):
        ids = layout.get_layer_id_list(LayerType.decoder, vp_stage=0, pp_rank=rank)
        assert ids == sorted({int(block(name).split("_")[1]) for name in stage if block(name)})
    assert LayerType.embedding in layout.layout[0][0] and LayerType.loss in layout.layout[1][0]


def test_torchtitan_builds_its_stages_from_the_fqns():
    pytest.importorskip("torchtitan", reason="torchtitan is not installed (pip install pipebench[engines])")
    from torchtitan.distributed.pipeline_parallel import _split_module
    from torchtitan.models.llama3 import llama3_configs

    model = llama3_configs["debugmodel"](attn_backend="flex").build()
    halves = [f"layers.{i}.{part}" for i in range(len(model.layers)) for part in ("attention", "feed_forward")]
    names = ["tok_embeddings", *halves, "norm", "lm_head"]
    profile = profile_of(names, [0.5, *[1.0, 2.0] * len(model.layers), 0.2, 3.0], model="llama3")
    plan = make_plan([profile], Request(devices=["cpu", "cpu"], micro_batches=2))
    inside = plan_with_bounds([profile], Request(devices=["cpu", "cpu"], micro_batches=2, schedule="1f1b"), [0, 6, len(names)])
    for p in (plan, inside):
        out = p.export("torchtitan", [profile])
        holds_the_plan(out, p)
        for fqns, layers in zip(out["module_fqns_per_model_part"], out["stages"]):
            chunk = _split_module(model, fqns)
            kept = {name.split(".")[0] if not name.startswith("layers.") else ".".join(name.split(".")[:2])
                    for name, _ in chunk.named_parameters()}
            assert kept == {".".join(n.split(".")[:2]) if n.startswith("layers.") else n for n in layers}
    assert out["moved"] and out["bounds"][1] in (5, 7)  # layers.2.feed_forward starts at 6: inside layers.2


def _deepspeed_stage(rank, parts, port, folder):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import deepspeed
    from deepspeed.runtime.pipe.module import PipelineModule

    from pipebench.models import get_model

    class Planned(PipelineModule):
        """A PipelineModule cut at the exported parts: DeepSpeed's own stage building from there on."""

        def _partition_layers(self, method):
            self.parts = list(parts)
            self._set_bounds(start=self.parts[self.stage_id], stop=self.parts[self.stage_id + 1])

    deepspeed.init_distributed(dist_backend="gloo")
    model = get_model("gpt", "tiny", device="cpu")
    names = {id(module): name for name, module in model.layers.named_children()}
    pipe = Planned(layers=list(model.layers), num_stages=2)
    Path(folder, f"{rank}.json").write_text(json.dumps([names[id(f)] for f in pipe.forward_funcs]))


def test_deepspeed_builds_its_stages_from_the_parts(tmp_path):
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (pip install pipebench[engines])")
    import torch.multiprocessing as mp

    from pipebench.bench.launch.loopback import free_port

    plan, profile = zoo_gpt_plan()
    out = plan.export("deepspeed", [profile])
    mp.spawn(_deepspeed_stage, args=(out["parts"], free_port(), str(tmp_path)), nprocs=2)
    built = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    assert built == out["stages"] == [stage.layers for stage in plan.stages]
