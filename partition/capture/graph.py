"""Capture any ``nn.Module`` with torch.export, find where it can be cut, and what crosses each cut.

Candidates (what :func:`capture` returns)
-----------------------------------------
One eager run records the call tree (partition/capture/call_tree.py); the candidates at ``granularity=d`` are
its frontier at depth ``d`` minus the modules that cannot begin a stage: modules called more than once,
and modules that emit no graph node (read from the export with a ``pipe_split`` before each candidate,
partition/capture/split.py).  Ops of dropped modules, and ops the parents run between their children (a residual
add), belong to the segment of the preceding candidate.  ``candidates[0]`` is the start of the first
stage and is never a cut (ops that run before it, if any, are in segment 0); a split into S stages picks
S-1 names of ``candidates[1:]``.  Default granularity: the deepest depth whose candidate count stays
<= ``MAX_CANDIDATES`` (64); depth 1 if even that has more.  The finest split (every candidate a stage)
is actually built, and run once to record each segment's inputs (``segments``, ``run_segment``: the
profiler times them one by one).

Values that cross a cut (``Captured.cuts``)
-------------------------------------------
``split_by_tags`` does NOT pass a value through the stages between its producer and its consumer:
a value made in stage 0 and used in stage 3 becomes an extra output of ``submod_0`` and a direct
argument of ``submod_3`` in the root graph; a root input (mask, position ids) used by stage 3 is a
direct argument of ``submod_3`` too.  The trainers pass such values on from stage to stage
(bench/strategies/planned/stages.py: chain_stages).  Either way the tensor is alive across cuts 1, 2 and 3
of a linear pipeline and its bytes move past each of them, so a cut is priced at the bytes of EVERY
tensor live across it (skip connections and extra inputs included), for one micro-batch of the
example size.  A value that stage k < S-1 sends to the model's output (an aux logit) counts as live
up to the end (``to_output``): the loss needs it on the last stage, although a pipeline schedule
only returns the last stage's outputs.

Findings on other models (checked in tests/test_graph.py and tests/test_hf_decoder_split.py)
-----------------------------------------------------------------------------------
* Hugging Face decoders (tiny GPT-2, Llama, Qwen2 from configs, ``use_cache=False``, offline):
  captured and split on torch 2.11 with transformers 5.17 and torch 2.14 with transformers 5.24.
  Calling the split returns the model's own ``ModelOutput`` (``ep.module()`` rebuilds it); a stage
  returns plain tensors.  The causal mask (bool [B,1,T,T]), the integer positions and Llama's cos/sin
  are built once near the embeddings and are direct inputs of every decoder-layer stage: they are
  priced on every cut they span.  The rotary embedding runs under ``no_grad``: export records it
  as a nested graph, which ``split_by_tags`` keeps whole in its stage.
* GoogLeNet (aux_logits, train mode): the aux heads become dead-end stages whose outputs go to the
  root output; the next trunk stage reads its input straight from the stage before the aux head.
  In a schedule only the last stage's outputs reach the loss, so aux losses are lost: train with
  ``aux_logits=False`` or eval mode (Inception v3 has the same kind of aux head).
* BatchNorm buffers stay in the stage that runs their module; the stage's ``running_mean`` IS the
  user's tensor, so training the split updates the user's statistics (the write of the new value,
  which ``ep.module()`` puts at the graph's end, goes with the stage that computes it; ``capture``
  itself restores every buffer it touched).
* Parameters used by two stages (GPT-2's tied ``wte``/``lm_head``) are the one parameter in both
  (``Split.shared()``, ``Captured.shared_params``), counted in each segment's parameter bytes; the
  trainers give each stage a copy and sum their gradients (bench/strategies/planned/stages.py:
  shared_parameters).
"""
from __future__ import annotations

import contextlib
import operator
from dataclasses import dataclass, field
from typing import Callable, ContextManager

import torch
import torch.nn as nn

from pipebench.partition.capture.call_tree import choose_depth, eager_calls, frontier_of
from pipebench.partition.capture.graph_errors import CaptureError, GraphError, SplitError, TooFewCandidates
from pipebench.partition.capture.split import Split, export_marked, ops_after, preserved_buffers, split_graph

__all__ = ["GraphError", "CaptureError", "TooFewCandidates", "SplitError", "TensorInfo", "CrossingTensor", "Cut",
           "SegmentInfo", "Captured", "Segment", "capture", "segments", "run_segment"]


# ----------------------------------------------------------------------------------- data types
@dataclass
class TensorInfo:
    shape: tuple[int, ...]
    dtype: torch.dtype
    bytes: int

    @staticmethod
    def of(t: torch.Tensor) -> "TensorInfo":
        return TensorInfo(tuple(t.shape), t.dtype, t.numel() * t.element_size())


@dataclass
class CrossingTensor:
    """A tensor live across a cut: produced before it (by a segment or as a model input), used after."""

    name: str  # node name in Split.gm (a root input keeps its argument name)
    source: str  # "input" or "segment <k> (<candidate>)"
    shape: tuple[int, ...]
    dtype: torch.dtype
    bytes: int
    to_output: bool = False  # only the model's output uses it after this cut


@dataclass
class Cut:
    """Cut k (1 <= k < len(candidates)) lies between segment k-1 and segment k (= before candidates[k])."""

    index: int
    begins_at: str
    tensors: list[CrossingTensor]

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)


@dataclass
class SegmentInfo:
    index: int
    begins_at: str
    modules: list[str]  # frontier modules whose ops are in this segment, in call order
    param_count: int
    param_bytes: int
    buffer_bytes: int


@dataclass
class Segment:
    """One segment of the finest split, runnable on its own (``run_segment``)."""

    index: int
    name: str  # submodule name in Split.gm, "submod_<k>"
    begins_at: str
    module: nn.Module  # the stage's fx.GraphModule
    args: tuple
    kwargs: dict
    outputs: list[TensorInfo]
    param_count: int
    param_bytes: int
    arg_sources: list[int] = field(default_factory=list)
    """Per positional arg, the index of the segment that produces it; -1 for a root input (or a
    constant).  torch's runtime receives what another stage produced, and gives a received float
    activation ``requires_grad`` when training; a root input it passes as given."""


@dataclass
class Captured:
    module: nn.Module
    args: tuple
    kwargs: dict
    granularity: int
    candidates: list[str]
    segments: list[SegmentInfo]
    cuts: list[Cut]  # cuts[k-1] is cut k, before candidates[k]
    split: Split  # the finest split (one stage per candidate)
    depth_counts: dict[int, int] = field(default_factory=dict)  # raw candidate count per depth
    dropped: dict[str, str] = field(default_factory=dict)  # frontier module -> why it is no cut
    shared_params: list[dict[int, str]] = field(default_factory=list)  # Split.shared()
    _inputs: list[tuple[tuple, dict]] = field(default_factory=list, repr=False)
    _outputs: list[list[TensorInfo]] = field(default_factory=list, repr=False)
    _stage_names: list[str] = field(default_factory=list, repr=False)
    _arg_sources: list[list[int]] = field(default_factory=list, repr=False)
    _finish_at: Callable[[tuple, dict], "Captured"] | None = field(default=None, repr=False)

    @property
    def dynamic_batch(self) -> bool:
        """Whether the graph was captured with a dynamic batch dimension (``capture(dynamic_batch=True)``)."""
        return self._finish_at is not None

    def at(self, args, kwargs: dict | None = None) -> "Captured":
        """The same graph and split, with its segments' inputs and the tensors crossing each cut recorded
        by one run at ``args`` (another batch size): no new export. Only for a graph captured with a
        dynamic batch; a run that fails raises the model's error."""
        if self._finish_at is None:
            raise GraphError("this graph was captured at one batch size; capture it again for another")
        return self._finish_at(tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(kwargs or {}))

    def cut(self, name: str) -> Cut:
        """The cut before candidate ``name``."""
        for c in self.cuts:
            if c.begins_at == name:
                return c
        raise GraphError(f"{name!r} is not a cut of this model; cuts: {[c.begins_at for c in self.cuts]}")

    def cut_bytes(self, begin_at: list[str]) -> list[int]:
        """Bytes crossing each cut of a split that begins stages at ``begin_at``."""
        return [self.cut(n).bytes for n in begin_at]

    def check_stages(self, n_stages: int) -> None:
        if n_stages > len(self.candidates):
            raise TooFewCandidates(
                f"{type(self.module).__name__} has {len(self.candidates)} places to begin a stage at granularity "
                f"{self.granularity} but {n_stages} stages were requested; use a finer granularity or fewer stages"
            )


def _sizes(mod: nn.Module):
    pc = sum(p.numel() for p in mod.parameters())
    pb = sum(p.numel() * p.element_size() for p in mod.parameters())
    bb = sum(b.numel() * b.element_size() for b in mod.buffers())
    return pc, pb, bb


# -------------------------------------------------------------------------------------- capture
def capture(module: nn.Module, args, kwargs: dict | None = None, *, granularity: int | None = None,
            min_stages: int | None = None, run_in: Callable[[], ContextManager] | None = None,
            dynamic_batch: bool = False) -> Captured:
    """Capture ``module`` with torch.export (as pipeline() does) and find its cut candidates.

    ``granularity``: call depth of the candidates (see module docstring); None = the deepest with
    <= MAX_CANDIDATES candidates.  ``min_stages``: raise TooFewCandidates if fewer candidates
    (and, with granularity None, go deeper to find them).  ``run_in``: the context the split graph's
    one run is made in, which records each segment's inputs and each cut's tensors (the profiler's
    autocast: under bf16 a convolution's output, and what the next segment receives, is bf16). The
    graph itself is captured outside it. The module is left unchanged (forward methods and buffers
    restored).  ``dynamic_batch``: export with the first dimension of every input of the example's batch
    size dynamic (torch.export's ``Dim``), so that one graph and one split serve every batch size
    (``Captured.at``); CaptureError when torch.export refuses it (a shape the model fixes).
    """
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    kwargs = dict(kwargs or {})
    with preserved_buffers(module):
        calls, _ = eager_calls(module, args, kwargs)
    if not calls:
        raise TooFewCandidates(f"{type(module).__name__} calls no submodule: nothing to cut at")
    depth, counts = choose_depth(calls, granularity, min_stages)
    frontier, multi = frontier_of(calls, depth)
    dropped = {n: "called more than once" for n in multi}
    names = [n for n in frontier if n not in multi]

    def enough():
        if min_stages and len(names) < min_stages:
            raise TooFewCandidates(
                f"{type(module).__name__} has {len(names)} places to begin a stage at granularity {depth} "
                f"({', '.join(names[:8])}{'...' if len(names) > 8 else ''}) but {min_stages} stages were requested; "
                f"use a finer granularity or fewer stages")

    enough()
    with (run_in or contextlib.nullcontext)():
        gm, fired = export_marked(module, args, kwargs, names, _batch_dims(module, args, kwargs) if dynamic_batch else None)
    ops = ops_after(gm, fired)
    for n in names:
        if n not in ops:
            dropped[n] = "not called when torch.export runs the model"
        elif ops[n] == 0:
            dropped[n] = "produces no graph op (a stage cannot begin there)"
    names = [n for n in names if n not in dropped]
    enough()
    split = split_graph(module, gm, fired, names[1:])
    exported = _Exported(module, depth, counts, frontier, names, dropped, split, run_in)
    captured = _finish(exported, args, kwargs)
    if dynamic_batch:
        captured._finish_at = lambda a, kw: _finish(exported, a, kw, again=captured)
    return captured


def _batch_dims(module: nn.Module, args: tuple, kwargs: dict) -> dict:
    """torch.export's dynamic_shapes for the inputs, by forward's argument names: dimension 0 of each
    tensor of the first tensor's batch size is one dynamic ``batch``; other inputs (a table, a flag)
    stay as they are."""
    import inspect

    from torch.export import Dim

    first = next((a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and a.dim()), None)
    if first is None:
        raise CaptureError(f"{type(module).__name__}: no input tensor has a batch dimension")
    batch = Dim("batch", min=1)

    def spec(a):
        return {0: batch} if isinstance(a, torch.Tensor) and a.dim() and a.shape[0] == first.shape[0] else None

    signature = inspect.signature(module.forward)
    kinds = {name: p.kind for name, p in signature.parameters.items()}
    shapes = {}
    for name, value in signature.bind(*args, **kwargs).arguments.items():
        if kinds[name] is inspect.Parameter.VAR_POSITIONAL:  # forward(*inputs): one spec per input
            shapes[name] = tuple(spec(v) for v in value)
        elif kinds[name] is inspect.Parameter.VAR_KEYWORD:
            shapes[name] = {k: spec(v) for k, v in value.items()}
        else:
            shapes[name] = spec(value)
    return shapes


@dataclass(frozen=True)
class _Exported:
    """What one export and its finest split fix for every batch size they are recorded at (``_finish``):
    a graph captured with a dynamic batch keeps one and records each size on it (``Captured.at``)."""

    module: nn.Module
    """The model as given to ``capture``."""
    depth: int
    """The call depth of the candidates (the Captured's granularity)."""
    depth_counts: dict[int, int]
    """The raw candidate count per depth (call_tree.choose_depth)."""
    frontier: list[str]
    """The call tree's modules at ``depth``, in call order, cut candidates or not."""
    candidates: list[str]
    """The frontier's modules that may begin a stage, in call order."""
    dropped: dict[str, str]
    """Frontier module -> why it is no cut."""
    split: Split
    """The finest split: one stage per candidate."""
    run_in: Callable[[], ContextManager] | None
    """The context the split graph's one run is made in (capture's ``run_in``); None: none."""


def _finish(exported: _Exported, args, kwargs, again: Captured | None = None) -> Captured:
    """The Captured of the exported split at ``args``: the split run once, then every value's producer and
    last user read from the root graph, and from those the tensors that cross each cut. ``again``: the
    Captured of the same export at another size, whose ``Captured.at`` this one shares."""
    module, split, names = exported.module, exported.split, exported.candidates
    inputs, outputs = _record_stage_io(module, split, args, kwargs, exported.run_in)
    call_nodes, producer = _stage_calls(module, split)
    values = _last_uses(split, call_nodes, inputs, producer)
    S = split.num_stages
    cuts = [Cut(ci, names[ci], _crossing(ci, values, names, split, outputs)) for ci in range(1, S)]
    seg_infos = [SegmentInfo(i, names[i], modules, *_sizes(split.stage(i)))
                 for i, modules in enumerate(_modules_per_segment(exported.frontier, names))]
    return Captured(module=module, args=args, kwargs=kwargs, granularity=exported.depth, candidates=list(names),
                    segments=seg_infos, cuts=cuts, split=split, depth_counts=exported.depth_counts,
                    dropped=exported.dropped, shared_params=split.shared(),
                    _inputs=[x if x is not None else ((), {}) for x in inputs], _outputs=outputs,
                    _stage_names=[n.target for n in call_nodes],
                    _arg_sources=[[producer(a) if hasattr(a, "op") else -1 for a in node.args] for node in call_nodes],
                    _finish_at=again._finish_at if again is not None else None)


def _modules_per_segment(frontier: list[str], names: list[str]) -> list[list[str]]:
    """The frontier in call order, each module attached to the kept candidate at or before it."""
    seg_modules: list[list[str]] = [[] for _ in names]
    k = 0
    for n in frontier:
        if n in names:
            k = names.index(n)
        seg_modules[k].append(n)
    return seg_modules


def _record_stage_io(module, split: Split, args, kwargs, run_in):
    """Run the split graph once (no grad, buffers restored after), recording every stage's inputs (detached
    copies) and the shapes of its outputs."""
    inputs: list[tuple[tuple, dict] | None] = [None] * split.num_stages
    outputs: list[list[TensorInfo]] = [[] for _ in range(split.num_stages)]
    handles = []
    for i in range(split.num_stages):
        sm = split.stage(i)

        def pre(m, a, kw, i=i):
            det = lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t  # noqa: E731
            inputs[i] = (tuple(det(x) for x in a), {kk: det(v) for kk, v in kw.items()})

        def post(m, a, kw, out, i=i):
            flat = out if isinstance(out, (tuple, list)) else (out,)
            outputs[i] = [TensorInfo.of(t) for t in flat if isinstance(t, torch.Tensor)]

        handles.append(sm.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(sm.register_forward_hook(post, with_kwargs=True))
    try:
        with torch.no_grad(), preserved_buffers(module), (run_in or contextlib.nullcontext)():
            split(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return inputs, outputs


def _stage_calls(module, split: Split):
    """The root graph's call of each stage, in stage order, and ``producer(node)``: the stage that makes a
    root value (-1 for a root input)."""
    gm, S = split.gm, split.num_stages
    index_of = {id(split.stage(i)): i for i in range(S)}
    stage_of: dict[str, int] = {}
    call_nodes: list = [None] * S
    for node in gm.graph.nodes:
        if node.op == "call_module" and id(getattr(gm, node.target, None)) in index_of:
            i = index_of[id(getattr(gm, node.target))]
            stage_of[node.name] = i
            call_nodes[i] = node
    if any(n is None for n in call_nodes):
        raise SplitError(f"the split of {type(module).__name__} calls a stage more than once or never")

    def producer(node) -> int:
        while node.op == "call_function" and node.target is operator.getitem:
            node = node.args[0]
        if node.op == "placeholder":
            return -1
        return stage_of.get(node.name, -1)

    return call_nodes, producer


def _last_uses(split: Split, call_nodes: list, inputs: list, producer) -> dict[str, dict]:
    """Every root value a stage or the output uses: its producer, the last stage that uses it (the model's
    output counts as the last stage, with ``to_output``) and the tensor recorded for it."""
    S = split.num_stages
    values: dict[str, dict] = {}
    for si, node in enumerate(call_nodes):
        rec = inputs[si]
        recorded = list(rec[0]) if rec is not None else []
        for ai, a in enumerate(node.args):
            if not hasattr(a, "op"):
                continue
            t = recorded[ai] if ai < len(recorded) else None
            v = values.setdefault(a.name, {"prod": producer(a), "last": si, "t": t, "to_output": False})
            v["last"] = max(v["last"], si)
            if v["t"] is None:
                v["t"] = t
    out_node = next(n for n in split.gm.graph.nodes if n.op == "output")
    flat_out = []

    def collect(x):
        if hasattr(x, "op"):
            flat_out.append(x)
        elif isinstance(x, (tuple, list)):
            for y in x:
                collect(y)
        elif isinstance(x, dict):
            for y in x.values():
                collect(y)

    collect(out_node.args)
    for a in flat_out:
        p = producer(a)
        if p >= S - 1:
            continue
        if a.name in values:
            v = values[a.name]
            v["to_output"] = v["last"] < S - 1
            v["last"] = S - 1
        else:
            values[a.name] = {"prod": p, "last": S - 1, "t": None, "to_output": True, "node": a}
    return values


def _crossing(ci: int, values: dict[str, dict], names: list[str], split: Split, outputs) -> list[CrossingTensor]:
    """The tensors live across cut ``ci``: made before it (or a root input), used at or after it."""
    tensors = []
    for name, v in values.items():
        prod = max(v["prod"], 0)
        if prod < ci <= v["last"]:
            t = v["t"]
            if t is None and v.get("to_output"):
                t = _output_value(v["node"], split, outputs)
            if not isinstance(t, torch.Tensor):
                continue
            src = "input" if v["prod"] < 0 else f"segment {v['prod']} ({names[v['prod']]})"
            tensors.append(CrossingTensor(name, src, tuple(t.shape), t.dtype, t.numel() * t.element_size(),
                                          v.get("to_output", False)))
    return tensors


def _output_value(node, split, outputs):
    """Meta of a root-output value made by a non-last stage (shape only, zero-filled stand-in)."""
    idx = 0
    if node.op == "call_function" and node.target is operator.getitem:
        idx = node.args[1]
        node = node.args[0]
    if node.op != "call_module":
        return None
    target = getattr(split.gm, node.target, None)
    ks = [i for i in range(split.num_stages) if split.stage(i) is target]
    if not ks:
        return None
    metas = outputs[ks[0]]
    if isinstance(idx, int) and idx < len(metas):
        m = metas[idx]
        return torch.empty(m.shape, dtype=m.dtype, device="meta")
    return None


# ------------------------------------------------------------------------------------- segments
def segments(captured: Captured) -> list[Segment]:
    """The finest split's stages, each with the inputs it received when the split graph ran once."""
    out = []
    for i, info in enumerate(captured.segments):
        a, kw = captured._inputs[i]
        out.append(Segment(index=i, name=captured._stage_names[i], begins_at=info.begins_at,
                           module=captured.split.stage(i), args=a, kwargs=kw,
                           outputs=captured._outputs[i], param_count=info.param_count,
                           param_bytes=info.param_bytes, arg_sources=list(captured._arg_sources[i])))
    return out


def run_segment(segment: Segment, inputs=None, *, requires_grad: bool = False):
    """Run one segment. ``inputs``: None (the recorded ones), a tuple of args, or (args, kwargs).

    With ``requires_grad`` the floating-point inputs are fresh leaves that require grad, so a
    profiler can time ``out.backward(...)`` as the stage's backward would run in a pipeline.
    """
    if inputs is None:
        a, kw = segment.args, segment.kwargs
    elif isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[1], dict) and isinstance(inputs[0], (tuple, list)):
        a, kw = tuple(inputs[0]), inputs[1]
    else:
        a, kw = (tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), {}
    if requires_grad:
        def leaf(t):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                return t.detach().requires_grad_(True)
            return t
        a = tuple(leaf(t) for t in a)
        kw = {k: leaf(v) for k, v in kw.items()}
    return segment.module(*a, **kw)
