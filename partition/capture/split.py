"""torch.export with a stage marker before chosen modules, and the exported graph cut into stages there.

pipebench builds its stages itself, from the exported graph, so that whatever torch.export captures can
be split (it does not depend on the IR of torch.distributed.pipelining's ``pipeline()``, which, with
transformers 5.17, cannot split a Llama).  ``export_marked`` registers a forward pre-hook on every
module where a stage may begin that calls ``pipe_split()`` (torch.distributed.pipelining's marker op,
which export keeps), runs ``torch.export.export(module, args, kwargs)`` (non-strict) and takes
``ep.module()``: a GraphModule over the user's own parameters and buffers.  ``split_graph`` gives every
op the stage of the last cut marker before it and cuts the graph with torch.fx's ``split_by_tags``:
stage k is ``Split.stage(k)`` (``submod_<k>``), and the root graph calls the stages in order.  These are
the stages that ``pipeline()`` with ``SplitPoint.BEGINNING`` at the same modules makes where it can
split the model (``Plan.split_spec()``).  A module that produces no graph op (``nn.Identity``, a
``Dropout`` in eval mode) cannot begin a stage: its stage would be empty.  partition/capture/graph.py captures
with the same two steps and finds the candidates and what crosses each cut; the trainers call
``split_model`` at a Plan's cuts.
"""
from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass
from typing import Callable, ContextManager

import torch
import torch.nn as nn
from torch.distributed.pipelining import pipe_split

from pipebench.partition.capture.graph_errors import SplitError, error_line, export_error

__all__ = ["Split", "split_model", "export_marked", "split_graph", "ops_after", "preserved_buffers"]


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
def preserved_buffers(module: nn.Module):
    """Undo BatchNorm running-stat updates (and any other buffer writes) done while capturing."""
    saved = {n: b.detach().clone() for n, b in module.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for n, b in module.named_buffers():
                if n in saved and saved[n].shape == b.shape:
                    b.copy_(saved[n])


_CALLS = ("call_function", "call_method", "call_module")


def _is_marker(node) -> bool:
    return node.op == "call_function" and node.target is torch.ops.pippy._pipe_split.default



def export_marked(module: nn.Module, args: tuple, kwargs: dict, names: list[str], dynamic_shapes=None):
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
        with _quiet_export(), preserved_buffers(module):
            try:
                ep = torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes)
            except Exception as e:  # noqa: BLE001
                raise export_error(module, e) from e
    finally:
        for h in handles:
            h.remove()
    gm = ep.module(check_guards=False)
    markers = [node for node in gm.graph.nodes if _is_marker(node)]
    if len(markers) != len(fired):
        raise SplitError(f"torch.export kept {len(markers)} of the {len(fired)} stage boundaries of "
                         f"{type(module).__name__}")
    return gm, fired


def ops_after(gm: torch.fx.GraphModule, fired: list[str]) -> dict[str, int]:
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


def split_graph(module: nn.Module, gm: torch.fx.GraphModule, fired: list[str], begin_at: list[str]) -> Split:
    """Cut ``gm`` (from ``export_marked``) at the markers of ``begin_at`` with torch.fx's
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
                         f"{type(e).__name__}: {error_line(e)}") from e


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
        gm, fired = export_marked(module, args, kwargs, begin_at)
    return split_graph(module, gm, fired, begin_at)
