"""Capture any ``nn.Module`` with torch.export, find where it can be cut, and cut it into stages.

Front end
---------
pipebench builds its stages itself, from the exported graph, so that whatever torch.export captures can
be split (it does not depend on the IR of torch.distributed.pipelining's ``pipeline()``, which, with
transformers 5.17, cannot split a Llama).  ``_export_marked`` registers a forward pre-hook on every
module where a stage may begin that calls ``pipe_split()`` (torch.distributed.pipelining's marker op,
which export keeps), runs ``torch.export.export(module, args, kwargs)`` (non-strict) and takes
``ep.module()``: a GraphModule over the user's own parameters and buffers.  ``_split_graph`` gives every
op the stage of the last cut marker before it and cuts the graph with torch.fx's ``split_by_tags``:
stage k is ``Split.stage(k)`` (``submod_<k>``), and the root graph calls the stages in order.  These are
the stages that ``pipeline()`` with ``SplitPoint.BEGINNING`` at the same modules makes where it can
split the model (``Plan.split_spec()``).  A module that produces no graph op (``nn.Identity``, a
``Dropout`` in eval mode) cannot begin a stage: its stage would be empty.

Candidates (what :func:`capture` returns)
-----------------------------------------
One eager run with forward pre/post hooks records the *call tree*: which module is called, in
what order, at what depth of the call stack.  Depth counts modules that are actually called
(root excluded): a ``ModuleList``/``ModuleDict`` is never called, so it is skipped automatically
(``model.layers.2`` of a Llama is depth 2, ``transformer.h.1`` of GPT-2 is depth 2); a called
``nn.Sequential`` is a real call and counts as a level (ResNet's ``layer1`` is depth 1,
``layer1.0`` depth 2).  The candidates at ``granularity=d`` are the modules called at depth ``d``
plus the leaf modules called at a smaller depth, in execution order, minus those that cannot
begin a stage: modules called more than once (a shared ``relu``; ``pipe_split`` would fire at
every call), and modules that emit no graph node (see above).  Ops of dropped modules, and ops
the parents run between their children (a residual add), belong to the segment of the preceding
candidate.  ``candidates[0]`` is the start of the first stage and is never a cut (ops that run
before it, if any, are in segment 0); a split into S stages picks S-1 names of
``candidates[1:]``.  Default granularity: the deepest depth whose candidate count stays
<= ``MAX_CANDIDATES`` (64), so a profiler times at most 64 small segments; depth 1 if even that
has more.  The finest split (every candidate a stage) is actually built.

Values that cross a cut (``Captured.cuts``)
-------------------------------------------
``split_by_tags`` does NOT pass a value through the stages between its producer and its consumer:
a value made in stage 0 and used in stage 3 becomes an extra output of ``submod_0`` and a direct
argument of ``submod_3`` in the root graph; a root input (mask, position ids) used by stage 3 is a
direct argument of ``submod_3`` too.  The trainers pass such values on from stage to stage
(bench/strategies/stages.py: chain_stages).  Either way the tensor is alive across cuts 1, 2 and 3
of a linear pipeline and its bytes move past each of them, so a cut is priced at the bytes of EVERY
tensor live across it (skip connections and extra inputs included), for one micro-batch of the
example size.  A value that stage k < S-1 sends to the model's output (an aux logit) counts as live
up to the end (``to_output``): the loss needs it on the last stage, although a pipeline schedule
only returns the last stage's outputs.

Findings on other models (checked in tests/test_graph.py and tests/test_hf_models.py)
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
  trainers give each stage a copy and sum their gradients (bench/strategies/stages.py:
  shared_parameters).

Why eager hooks and not ``nn_module_stack``: the call tree (depth, call count, leaf-ness) comes
from one eager run; a module's ``nn_module_stack`` entry is not emitted for modules without ops,
and call counts are what decides validity.  Whether a module emits graph ops is read from the
export with a ``pipe_split`` before each candidate.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import traceback
from dataclasses import dataclass, field
from typing import Callable, ContextManager

import torch
import torch.nn as nn
from torch.distributed.pipelining import pipe_split

__all__ = [
    "MAX_CANDIDATES",
    "GraphError",
    "CaptureError",
    "InputError",
    "TooFewCandidates",
    "SplitError",
    "TensorInfo",
    "CrossingTensor",
    "Cut",
    "SegmentInfo",
    "Captured",
    "Segment",
    "capture",
    "Split",
    "split_model",
    "segments",
    "run_segment",
]

MAX_CANDIDATES = 64


# --------------------------------------------------------------------------------------- errors
class GraphError(ValueError):
    """A model cannot be captured / split as asked. The message is one line."""

    def __init__(self, message: str):
        super().__init__(_one_line(message))


class CaptureError(GraphError):
    """torch.export cannot capture the forward (data-dependent control flow, unsupported op)."""


class InputError(GraphError):
    """The model's own forward rejects the example input."""


class TooFewCandidates(GraphError):
    """Fewer places to cut than the stages requested."""


class SplitError(GraphError):
    """The model cannot be split where asked."""


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


_TORCH_DIR = os.path.dirname(torch.__file__)
_THIS_FILE = os.path.abspath(__file__)


def _user_frame(exc: BaseException) -> str:
    """`file:line `code`` of the deepest traceback frame outside torch (the user's failing line)."""
    best = None
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for fs in traceback.extract_tb(e.__traceback__):
            path = os.path.abspath(fs.filename)
            if path.startswith(_TORCH_DIR + os.sep) or path == _THIS_FILE:
                continue
            if "/contextlib.py" in path or "/functools.py" in path:
                continue
            best = fs
        e = e.__cause__ or e.__context__
    if best is None:
        return ""
    code = f" `{best.line.strip()}`" if best.line else ""
    return f" (at {os.path.basename(best.filename)}:{best.lineno} in {best.name}{code})"


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


# ------------------------------------------------------------------------------------ call tree
@dataclass
class _Call:
    name: str
    depth: int
    leaf: bool = True


@contextlib.contextmanager
def _quiet_export():
    """torch.export logs whole graphs at WARNING on failure; keep them out of the user's terminal."""
    names = ["torch._export", "torch.export", "torch.fx.experimental.symbolic_shapes", "torch._dynamo",
             "torch.distributed.pipelining"]
    saved = [(logging.getLogger(n), logging.getLogger(n).level) for n in names]
    for lg, _ in saved:
        lg.setLevel(logging.CRITICAL)
    try:
        # torch/export/_trace.py print()s the partial graph to stderr when export fails
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        for lg, lvl in saved:
            lg.setLevel(lvl)


@contextlib.contextmanager
def _preserved_buffers(module: nn.Module):
    """Undo BatchNorm running-stat updates (and any other buffer writes) done while capturing."""
    saved = {n: b.detach().clone() for n, b in module.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for n, b in module.named_buffers():
                if n in saved and saved[n].shape == b.shape:
                    b.copy_(saved[n])


def _eager_calls(module: nn.Module, args: tuple, kwargs: dict):
    names = {}
    for n, m in module.named_modules():
        names.setdefault(id(m), n)
    calls: list[_Call] = []
    stack: list[_Call] = []
    handles = []

    def pre(m, _inp):
        c = _Call(names[id(m)], len(stack) + 1)
        if stack:
            stack[-1].leaf = False
        stack.append(c)
        calls.append(c)

    def post(m, _inp, _out):
        if stack:
            stack.pop()

    for n, m in module.named_modules():
        if n and names[id(m)] == n:
            handles.append(m.register_forward_pre_hook(pre))
            handles.append(m.register_forward_hook(post))
    try:
        with torch.no_grad():
            out = module(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the model's own error, reported as such
        raise InputError(
            f"{type(module).__name__}.forward rejects the example input: {type(e).__name__}: {_first_line(e)}"
            f"{_user_frame(e)}; pass inputs the model accepts (shape, dtype, keyword names)"
        ) from e
    finally:
        for h in handles:
            h.remove()
    return calls, out


def _frontier(calls: list[_Call], depth: int) -> tuple[list[str], set[str]]:
    """Distinct module names at ``depth`` (plus shallower leaves) in call order, and those called twice+."""
    count: dict[str, int] = {}
    for c in calls:
        count[c.name] = count.get(c.name, 0) + 1
    order: list[str] = []
    seen = set()
    for c in calls:
        if c.depth == depth or (c.depth < depth and c.leaf):
            if c.name not in seen:
                seen.add(c.name)
                order.append(c.name)
    multi = {n for n in order if count[n] > 1}
    return order, multi


def _choose_depth(calls, granularity, min_stages):
    max_depth = max((c.depth for c in calls), default=1)
    counts = {d: len([n for n in o if n not in m]) for d in range(1, max_depth + 1) for o, m in [_frontier(calls, d)]}
    if granularity is not None:
        if granularity < 1:
            raise GraphError(f"granularity must be >= 1, got {granularity}")
        return min(granularity, max_depth), counts
    depth = 1
    for d in range(1, max_depth + 1):
        if counts[d] <= MAX_CANDIDATES:
            depth = d
    if min_stages:
        while counts[depth] < min_stages and depth < max_depth:
            depth += 1
    return depth, counts


# ------------------------------------------------------------------------------------ splitting
_CALLS = ("call_function", "call_method", "call_module")


def _is_marker(node) -> bool:
    return node.op == "call_function" and node.target is torch.ops.pippy._pipe_split.default


_KNOWN_BRANCHES = {  # a data-dependent branch met in a library's model: what to do about it
    "self.layerdrop": "transformers before 5.23 draws LayerDrop's random number in training even at layerdrop 0 "
                      "(BART, Whisper and the models built like them); use transformers 5.23 or newer",
    "skip_the_layer": "transformers before 5.23 draws LayerDrop's random number in training even at layerdrop 0 "
                      "(wav2vec2 and the models built like it); use transformers 5.23 or newer",
}


def _export_error(module: nn.Module, e: BaseException) -> CaptureError:
    cause = e.__cause__ if (e.__cause__ is not None and "cannot capture your model" in str(e)) else e
    where = _user_frame(cause)
    name = type(getattr(module, "wrapped", module)).__name__  # a model in models/hugging_face.py's view: its own
    known = next((fix for code, fix in _KNOWN_BRANCHES.items() if code in where), None)
    if known:  # what to do first: the line is cut at 400 characters
        return CaptureError(f"torch.export cannot capture {name}{where}: {known} ({type(cause).__name__}: "
                            f"{_first_line(cause)})")
    return CaptureError(f"torch.export cannot capture {name}: {type(cause).__name__}: {_first_line(cause)}{where}; "
                        "make the forward free of data-dependent Python control flow (use torch.where/torch.cond, "
                        "no .item()/bool() of tensors) or split the model by hand")


def _export_marked(module: nn.Module, args: tuple, kwargs: dict, names: list[str], dynamic_shapes=None):
    """torch.export of ``module`` with a ``pipe_split`` marker (torch.distributed.pipelining's) before each
    call of the modules ``names``, put there by forward pre-hooks, as pipeline()'s ``SplitPoint.BEGINNING``
    does; returns ``ep.module()`` (the user's own parameter and buffer objects, by their names) and the
    name of each marker in graph order."""
    fired: list[str] = []
    handles = []
    try:
        for n in names:
            handles.append(module.get_submodule(n).register_forward_pre_hook(
                lambda _m, _a, n=n: (fired.append(n), pipe_split())[0]))
        with _quiet_export(), _preserved_buffers(module):
            try:
                ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
            except Exception as e:  # noqa: BLE001
                raise _export_error(module, e) from e
    finally:
        for h in handles:
            h.remove()
    gm = ep.module(check_guards=False)
    markers = [node for node in gm.graph.nodes if _is_marker(node)]
    if len(markers) != len(fired):
        raise SplitError(f"torch.export kept {len(markers)} of the {len(fired)} stage boundaries of "
                         f"{type(module).__name__}")
    return gm, fired


def _ops_after(gm: torch.fx.GraphModule, fired: list[str]) -> dict[str, int]:
    """Per marked module, how many graph ops follow its marker before the next one."""
    counts: dict[str, int] = {}
    current = None
    k = 0
    for node in gm.graph.nodes:
        if _is_marker(node):
            current = fired[k]
            k += 1
            counts.setdefault(current, 0)
        elif node.op in _CALLS and current is not None:
            counts[current] += 1
    return counts


@dataclass
class Split:
    """A model cut into stages by pipebench, from its exported graph: ``gm``'s graph calls ``submod_0``
    ... ``submod_<S-1>`` in order, and stage k, ``gm.submod_<k>``, is an fx.GraphModule that holds the
    user's own parameters and buffers it uses (a tied weight used by two stages is the one object in
    both: ``shared()``). Calling the Split calls the model (same inputs, same outputs)."""

    gm: torch.fx.GraphModule
    num_stages: int

    def stage(self, k: int) -> torch.fx.GraphModule:
        return getattr(self.gm, f"submod_{k}")

    def __call__(self, *args, **kwargs):
        return self.gm(*args, **kwargs)

    def shared(self) -> list[dict[int, str]]:
        """Parameters that several stages use, each as {stage index: its name in that stage}."""
        uses: dict[int, dict[int, str]] = {}
        for k in range(self.num_stages):
            for name, p in self.stage(k).named_parameters(remove_duplicate=False):
                uses.setdefault(id(p), {}).setdefault(k, name)
        return [u for u in uses.values() if len(u) > 1]


def _split_graph(module: nn.Module, gm: torch.fx.GraphModule, fired: list[str], begin_at: list[str]) -> Split:
    """Cut ``gm`` (from ``_export_marked``) at the markers of ``begin_at`` with torch.fx's
    ``split_by_tags``: every op belongs to the stage of the last cut marker before it (ops before the
    first go to stage 0), except unlifting's write of a new value into a buffer (``copy_`` into a
    get_attr, at the graph's end), which goes with the stage that computes the value. A value used by a
    later stage becomes an output of its stage and an input of each stage that uses it; a parameter,
    buffer or constant is an attribute of every stage that uses it."""
    from torch.fx.passes.split_utils import split_by_tags

    begin = set(begin_at)
    stage, k, ops = 0, 0, [0]
    tag: dict = {}
    for node in list(gm.graph.nodes):
        if _is_marker(node):
            if fired[k] in begin:
                stage += 1
                ops.append(0)
            k += 1
            gm.graph.erase_node(node)
        elif node.op in _CALLS:
            tag[node] = stage
            ops[stage] += 1
    for node, k in tag.items():
        if node.target is torch.ops.aten.copy_.default and node.args[0].op == "get_attr":
            ops[k] -= 1
            tag[node] = max((tag.get(a, 0) for a in node.all_input_nodes), default=0)
            ops[tag[node]] += 1
    empty = [name for name, n in zip(["(the start)", *begin_at], ops) if n == 0]
    if stage != len(begin_at) or empty:
        raise SplitError(f"cannot begin a stage of {type(module).__name__} at {empty or begin_at}: "
                         "a module called more than once, or that produces no graph op")
    for node, k in tag.items():
        node.tag = f"submod_{k}"
    try:
        gm.recompile()
        return Split(split_by_tags(gm, [f"submod_{k}" for k in range(stage + 1)]), stage + 1)
    except Exception as e:  # noqa: BLE001 - torch.fx's own failure, told in one line
        raise SplitError(f"torch.fx cannot split {type(module).__name__} into {stage + 1} stages: "
                         f"{type(e).__name__}: {_first_line(e)}") from e


def split_model(module: nn.Module, args: tuple, kwargs: dict | None, begin_at: list[str], *,
                run_in: Callable[[], ContextManager] | None = None) -> Split:
    """``module`` cut into ``len(begin_at) + 1`` stages, stage k + 1 beginning at module ``begin_at[k]``
    (the stages ``pipeline(module, args, kwargs, {name: SplitPoint.BEGINNING ...})`` makes), built by
    pipebench from the exported graph: whatever torch.export captures splits, whatever crosses a cut
    (integer tensors, masks, RoPE tables) is passed on as it is, and the stages share the user's parameters
    and buffers. The model itself is left unchanged. ``run_in``: the context the stages will run in (a
    trainer's bf16 autocast), which the graph is captured in too: torch 2.11 replays a region a model
    runs with autocast off (Hugging Face's RoPE) with the dtypes it was captured with."""
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    kwargs = dict(kwargs or {})
    begin_at = list(begin_at)
    if len(set(begin_at)) != len(begin_at):
        raise SplitError(f"begin_at names a module twice: {begin_at}")
    for n in begin_at:
        try:
            module.get_submodule(n)
        except AttributeError as e:
            raise SplitError(f"begin_at names {n!r}, which is no submodule of {type(module).__name__}") from e
    with (run_in or contextlib.nullcontext)():
        gm, fired = _export_marked(module, args, kwargs, begin_at)
    return _split_graph(module, gm, fired, begin_at)


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
    with _preserved_buffers(module):
        calls, _ = _eager_calls(module, args, kwargs)
    if not calls:
        raise TooFewCandidates(f"{type(module).__name__} calls no submodule: nothing to cut at")
    depth, counts = _choose_depth(calls, granularity, min_stages)
    frontier, multi = _frontier(calls, depth)
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
        gm, fired = _export_marked(module, args, kwargs, names, _batch_dims(module, args, kwargs) if dynamic_batch else None)
    ops = _ops_after(gm, fired)
    for n in names:
        if n not in ops:
            dropped[n] = "not called when torch.export runs the model"
        elif ops[n] == 0:
            dropped[n] = "produces no graph op (a stage cannot begin there)"
    names = [n for n in names if n not in dropped]
    enough()
    split = _split_graph(module, gm, fired, names[1:])
    captured = _finish(module, args, kwargs, depth, counts, frontier, names, dropped, split, run_in)
    if dynamic_batch:
        captured._finish_at = lambda a, kw: _finish(module, a, kw, depth, counts, frontier, names, dropped, split,
                                                    run_in, again=captured)
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


def _finish(module, args, kwargs, depth, counts, frontier, names, dropped, split, run_in=None,
            again: Captured | None = None) -> Captured:
    gm = split.gm
    # modules per segment: frontier in call order, attached to the preceding kept candidate
    seg_modules: list[list[str]] = [[] for _ in names]
    k = 0
    for n in frontier:
        if n in names:
            k = names.index(n)
        seg_modules[k].append(n)

    # run the split graph once, recording every stage's inputs
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
        with torch.no_grad(), _preserved_buffers(module), (run_in or contextlib.nullcontext)():
            split(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()

    # which stage each root node belongs to
    S = split.num_stages
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
        import operator
        while node.op == "call_function" and node.target is operator.getitem:
            node = node.args[0]
        if node.op == "placeholder":
            return -1
        return stage_of.get(node.name, -1)

    # last use of every value (stage index; output -> S-1 with to_output)
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
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
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

    cuts = []
    for ci in range(1, S):
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
        cuts.append(Cut(ci, names[ci], tensors))

    seg_infos = []
    for i in range(S):
        pc, pb, bb = _sizes(split.stage(i))
        seg_infos.append(SegmentInfo(i, names[i], seg_modules[i], pc, pb, bb))

    return Captured(module=module, args=args, kwargs=kwargs, granularity=depth, candidates=list(names),
                    segments=seg_infos, cuts=cuts, split=split, depth_counts=counts, dropped=dropped,
                    shared_params=split.shared(),
                    _inputs=[x if x is not None else ((), {}) for x in inputs], _outputs=outputs,
                    _stage_names=[n.target for n in call_nodes],
                    _arg_sources=[[producer(a) if hasattr(a, "op") else -1 for a in node.args] for node in call_nodes],
                    _finish_at=again._finish_at if again is not None else None)


def _output_value(node, split, outputs):
    """Meta of a root-output value made by a non-last stage (shape only, zero-filled stand-in)."""
    import operator
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
