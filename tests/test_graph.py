"""partition/capture/graph.py, split.py, call_tree.py and graph_errors.py: capture any nn.Module with torch.export,
find where it can be cut, price each cut, split it into stages, and run each fine segment on its own."""
from __future__ import annotations

import os
from pathlib import Path
import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from pipebench.partition.capture.graph import capture, run_segment, segments
from pipebench.partition.capture.graph_errors import CaptureError, GraphError, InputError, SplitError, TooFewCandidates
from pipebench.partition.capture.split import split_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")


pytestmark = pytest.mark.usefixtures("one_thread")


def _load_seed_convnet():
    """The seed's ConvNet exactly as written (tests/fixtures/seed_convnet.py)."""
    import importlib.util

    path = Path(__file__).parent / "fixtures" / "seed_convnet.py"
    spec = importlib.util.spec_from_file_location("seed_convnet_for_graph_tests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ConvNet


ConvNet = _load_seed_convnet()


def _chain(split, *args):
    """Each stage on what the one before returns (these splits pass nothing past a stage)."""
    out = args
    for i in range(split.num_stages):
        out = split.stage(i)(*out)
        out = out if isinstance(out, tuple) else (out,)
    return out[0] if len(out) == 1 else out


def test_convnet_candidates_split_and_segments():
    m = ConvNet().eval()
    x = torch.randn(4, 1, 28, 28)
    c = capture(m, (x,))
    assert c.candidates == ["conv1", "conv2", "fc1", "fc2"]
    assert c.granularity == 1 and len(c.segments) == 4 and len(c.cuts) == 3
    assert [s.param_count for s in c.segments] == [260, 1820, 1000500, 5010]
    assert c.segments[2].param_bytes == 1000500 * 4
    # cut before fc1 carries the flattened conv2 activation: 4 x 2000 float32
    assert c.cut("fc1").bytes == 4 * 2000 * 4
    ref = m(x)
    split = split_model(m, (x,), None, ["fc1"])
    assert split.num_stages == 2
    assert torch.allclose(_chain(split, x), ref, atol=1e-6)
    assert not m.fc1._forward_pre_hooks and "forward" not in m.fc1.__dict__  # the model is left as it was
    # every fine segment runs alone on its recorded inputs; chained they equal the model
    segs = segments(c)
    assert [s.begins_at for s in segs] == c.candidates
    assert segs[1].args[0].shape == (4, 10, 12, 12)
    y = x
    for s in segs:
        y = run_segment(s, (y,))
    assert torch.allclose(y, ref, atol=1e-6)
    out = run_segment(segs[2], requires_grad=True)
    out.sum().backward()
    assert m.fc1.weight.grad is not None
    c.check_stages(4)
    with pytest.raises(TooFewCandidates):
        c.check_stages(5)
    with pytest.raises(TooFewCandidates):
        capture(m, (x,), min_stages=5)
    with pytest.raises(SplitError, match="no submodule"):
        split_model(m, (x,), None, ["nope"])


class Skip(nn.Module):
    """x -> a -> b -> c -> d with skips: c(b) + x, d(...) * mask * a_out."""

    def __init__(self, n=8):
        super().__init__()
        self.a, self.b, self.c, self.d = (nn.Linear(n, n) for _ in range(4))

    def forward(self, x, mask):
        a = self.a(x)
        b = self.b(a)
        c = self.c(b) + x  # the add runs in c's segment: x lives across cuts b and c
        return self.d(c) * mask * a  # a and mask live across cuts b, c, d (used after d)


def test_skip_connection_cut_price_and_routing():
    m = Skip().eval()
    x, mask = torch.randn(3, 8), torch.ones(3, 8)
    c = capture(m, (x, mask))
    assert c.candidates == ["a", "b", "c", "d"]
    t = 3 * 8 * 4  # one (3, 8) float32 tensor
    # hand count: before b: a_out, x, mask; before c: b_out, a_out, x, mask; before d: c_out, a_out, mask
    assert c.cut("b").bytes == 3 * t
    assert c.cut("c").bytes == 4 * t
    assert c.cut("d").bytes == 3 * t
    srcs = {ct.source for ct in c.cut("d").tensors}
    assert {"input", "segment 0 (a)", "segment 2 (c)"} == srcs
    # the split does not pass a_out through stages 1 and 2: it is a direct argument of stage 3
    nodes = {n.target: n for n in c.split.gm.graph.nodes if n.op == "call_module"}
    s0, s1, s3 = "submod_0", "submod_1", "submod_3"

    def roots(n):
        while n.op == "call_function":
            n = n.args[0]
        return n

    assert any(roots(a) is nodes[s0] for a in nodes[s3].args)
    assert all(roots(a).op == "placeholder" or roots(a) is nodes[s0] for a in nodes[s1].args)
    assert torch.allclose(c.split(x, mask), m(x, mask), atol=1e-6)


def test_resnet18_depth2_split_in_two():
    torchvision = pytest.importorskip("torchvision")
    m = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    c = capture(m, (x,), granularity=2)
    assert c.candidates == ["conv1", "bn1", "relu", "maxpool", "layer1.0", "layer1.1", "layer2.0", "layer2.1",
                            "layer3.0", "layer3.1", "layer4.0", "layer4.1", "avgpool", "fc"]
    # inside a BasicBlock the downsample's input (the block input) crosses with the main path
    assert c.cut("layer2.0").bytes == 2 * 64 * 8 * 8 * 4
    split = split_model(m, (x,), None, ["layer3.0"])
    with torch.no_grad():
        assert torch.allclose(_chain(split, x), m(x), atol=1e-5)
    # default granularity: deepest call depth with <= 64 candidates (BasicBlock internals)
    fine = capture(m, (x,))
    assert fine.granularity >= 3 and len(fine.candidates) <= 64
    assert "layer1.0.relu" in fine.dropped  # called twice in BasicBlock.forward: never a cut


class SharedAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.act, self.skip, self.b = nn.Linear(4, 4), nn.ReLU(), nn.Identity(), nn.Linear(4, 2)

    def forward(self, x):
        return self.b(self.skip(self.act(self.act(self.a(x)))))


def test_modules_called_twice_or_without_ops_are_no_cuts():
    m = SharedAct().eval()
    x = torch.randn(2, 4)
    c = capture(m, (x,))
    assert c.candidates == ["a", "b"]
    assert c.dropped["act"] == "called more than once"
    assert "no graph op" in c.dropped["skip"]  # a stage beginning there would be empty
    assert c.segments[0].modules == ["a", "act", "skip"]
    with pytest.raises(SplitError, match="called more than once"):
        split_model(m, (x,), None, ["act"])  # its boundary is crossed twice
    assert torch.allclose(c.split(x), m(x))


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x)
        if y.sum() > 0:
            return self.b(y)
        return y


def test_data_dependent_control_flow_is_a_one_line_capture_error():
    with pytest.raises(CaptureError) as e:
        capture(DataDependent(), (torch.randn(2, 4),))
    msg = str(e.value)
    assert "\n" not in msg and isinstance(e.value, GraphError) and isinstance(e.value, ValueError)
    assert "torch.export cannot capture DataDependent" in msg
    assert "if y.sum() > 0" in msg and "data-dependent" in msg


def test_rejected_input_names_the_models_error():
    with pytest.raises(InputError) as e:
        capture(ConvNet(), (torch.randn(2, 1, 32, 32),))
    msg = str(e.value)
    assert "\n" not in msg and "ConvNet.forward rejects the example input" in msg
    assert "mat1 and mat2 shapes cannot be multiplied" in msg


def test_batchnorm_buffers_move_with_their_stage_and_capture_leaves_them():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3)).train()
    x = torch.randn(2, 3, 8, 8)
    before = m[1].running_mean.clone()
    c = capture(m, (x,))
    assert c.candidates == ["0", "1", "2", "3"]
    assert torch.equal(m[1].running_mean, before)  # capture undid its own BN updates
    stage = c.split.stage(1)
    assert dict(stage.named_buffers())["1.running_mean"] is m[1].running_mean
    assert c.segments[1].buffer_bytes == 4 * 4 * 2 + 8
    run_segment(segments(c)[1])  # training-mode BN in the stage updates the user's statistics
    assert not torch.equal(m[1].running_mean, before)


def test_googlenet_aux_outputs_in_train_mode():
    torchvision = pytest.importorskip("torchvision")
    m = torchvision.models.googlenet(num_classes=10, aux_logits=True, init_weights=False).train()
    x = torch.randn(2, 3, 64, 64)
    c = capture(m, (x,), granularity=1)
    assert "aux1" in c.candidates and "aux2" in c.candidates
    out = c.split(x)
    assert isinstance(out, tuple) and len(out) == 3  # GoogLeNetOutputs(logits, aux2, aux1)
    # aux logits leave the middle stages for the model output: live to the end of the pipeline
    last = c.cuts[-1]
    assert sum(t.to_output for t in last.tensors) == 2
    # the aux head is a dead-end stage: the next stage reads the trunk straight from the stage before
    i = c.candidates.index("inception4b")
    assert any(t.source == f"segment {i - 2} (inception4a)" for t in c.cuts[i - 1].tensors)


def _tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64, use_cache=False,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def test_gpt2_tiny_captures_and_splits_with_tied_embeddings_shared():
    m = _tiny_gpt2()
    ids = torch.randint(0, 128, (2, 16))
    c = capture(m, (ids,), granularity=2)
    assert c.candidates == ["transformer.wte", "transformer.wpe", "transformer.drop", "transformer.h.0",
                            "transformer.h.1", "transformer.ln_f", "lm_head"]
    # the causal mask (bool, made after wpe) lives across every cut up to the last block
    assert any(t.dtype == torch.bool for t in c.cut("transformer.h.1").tensors)
    with torch.no_grad():
        ref = m(ids).logits
    split = split_model(m, (ids,), None, ["transformer.h.1"])
    assert split.num_stages == 2
    with torch.no_grad():
        assert torch.allclose(split(ids).logits, ref, atol=1e-5)  # the model's own output type
    # tied wte / lm_head: the one parameter, the user's, in both stages
    (uses,) = split.shared()
    assert sorted(uses) == [0, 1]
    w0, w1 = (split.stage(k).get_parameter(uses[k]) for k in (0, 1))
    assert w0 is w1 is m.transformer.wte.weight
    assert m.lm_head.weight is m.transformer.wte.weight  # the user's model is still tied


def test_llama_tiny_captures_layers_at_depth_2():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=2,
                                   num_key_value_heads=2, vocab_size=128, use_cache=False, max_position_embeddings=64,
                                   bos_token_id=0, eos_token_id=0)
    m = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 128, (2, 16))
    c = capture(m, (ids,), granularity=2)
    assert c.candidates == ["model.embed_tokens", "model.rotary_emb", "model.layers.0", "model.layers.1",
                            "model.norm", "lm_head"]
    # cos/sin from rotary_emb and the mask cross the cut between the two decoder layers
    assert len(c.cut("model.layers.1").tensors) >= 3
    with torch.no_grad():
        assert torch.allclose(c.split(ids).logits, m(ids).logits, atol=1e-5)


# ------------------------------------------------------------------------ torchvision catalogue
def _catalogue_model(name):
    import torchvision.models as tvm

    size = 64
    if name.startswith("vit_"):
        from torchvision.models.vision_transformer import VisionTransformer

        patch, layers, heads, dim, mlp = dict(
            vit_b_16=(16, 12, 12, 768, 3072), vit_b_32=(32, 12, 12, 768, 3072), vit_l_16=(16, 24, 16, 1024, 4096),
            vit_l_32=(32, 24, 16, 1024, 4096), vit_h_14=(14, 32, 16, 1280, 5120))[name]
        size = 64 if patch != 14 else 56
        return VisionTransformer(image_size=size, patch_size=patch, num_layers=layers, num_heads=heads,
                                 hidden_dim=dim, mlp_dim=mlp), size
    if name == "inception_v3":
        size = 80
    if name.startswith("maxvit"):
        size = 224  # fixed by its stem/partition sizes
    return tvm.get_model(name), size


def _slow_selected(config):
    return "slow" in (config.getoption("-m") or "") or os.environ.get("PIPEBENCH_SLOW") == "1"


@pytest.mark.slow
def test_torchvision_catalogue(request):
    """Capture every torchvision classification model and split it in two (run: pytest -m slow)."""
    if not _slow_selected(request.config):
        pytest.skip("catalogue of all torchvision models: run with -m slow or PIPEBENCH_SLOW=1")
    import torchvision.models as tvm

    rows = []
    for name in tvm.list_models(module=tvm):
        t0 = time.time()
        try:
            m, size = _catalogue_model(name)
            m.eval()
            x = torch.randn(1, 3, size, size)
            c = capture(m, (x,))
            mid = c.candidates[len(c.candidates) // 2]
            split = split_model(m, (x,), None, [mid])
            with torch.no_grad():
                out, ref = split(x), m(x)
            status = "ok" if torch.allclose(out, ref, atol=1e-4, rtol=1e-3) else "output differs"
            rows.append((name, len(c.candidates), c.granularity, status, time.time() - t0))
        except Exception as e:  # noqa: BLE001 - recorded, the table is the result
            rows.append((name, 0, 0, f"{type(e).__name__}: {' '.join(str(e).split())[:120]}", time.time() - t0))
        del m
    print(f"\n{'model':28s} {'cands':>5s} {'depth':>5s} {'s':>6s}  status")
    for name, n, d, status, s in rows:
        print(f"{name:28s} {n:5d} {d:5d} {s:6.1f}  {status}")
    ok = {r[0] for r in rows if r[3] == "ok"}
    for must in ["resnet18", "densenet121", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny",
                 "regnet_y_400mf", "vit_b_16", "swin_t", "googlenet"]:
        assert must in ok, [r for r in rows if r[0] == must]


def test_the_split_is_the_one_pipeline_makes_from_the_same_split_spec():
    """Plan.split_spec() stays right for people who call pipeline() themselves: where torch's pipeline()
    can split a model, its stages hold the same parameters as pipebench's and compute the same output."""
    torchvision = pytest.importorskip("torchvision")
    from torch.distributed.pipelining import SplitPoint, pipeline

    m = torchvision.models.resnet18(num_classes=10).eval()
    x = torch.randn(2, 3, 32, 32)
    cuts = ["layer2.0", "layer4.0"]
    ours = split_model(m, (x,), None, cuts)
    torchs = pipeline(m, mb_args=(x,), split_spec={n: SplitPoint.BEGINNING for n in cuts})
    assert ours.num_stages == torchs.num_stages == 3
    for k in range(3):
        mine = {id(p) for p in ours.stage(k).parameters()}
        theirs = {n for n, _ in torchs.get_stage_module(k).named_parameters()}
        assert mine == {id(m.get_parameter(n)) for n in theirs}
    with torch.no_grad():
        assert torch.allclose(ours(x), torchs(x)[0], atol=1e-5)
