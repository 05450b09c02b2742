"""The call tree of one eager run: which modules a forward calls, in what order and at what depth, and so
where a stage may begin (the candidates at a granularity).

Depth counts modules that are actually called (root excluded): a ``ModuleList``/``ModuleDict`` is never
called, so it is skipped (``model.layers.2`` of a Llama is depth 2, ``transformer.h.1`` of GPT-2 is depth
2); a called ``nn.Sequential`` is a real call and counts as a level (ResNet's ``layer1`` is depth 1,
``layer1.0`` depth 2).  The frontier at depth ``d`` is the modules called at depth ``d`` plus the leaf
modules called at a smaller depth, in execution order; those called more than once cannot begin a stage
(``pipe_split`` would fire at every call).  Why eager hooks and not ``nn_module_stack``: a module's
``nn_module_stack`` entry is not emitted for modules without ops, and call counts are what decides
validity.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn

from pipebench.partition.capture.graph_errors import GraphError, InputError, error_line, user_frame

__all__ = ["MAX_CANDIDATES", "Call", "eager_calls", "frontier_of", "choose_depth"]

MAX_CANDIDATES = 64
"""The default granularity is the deepest whose candidates stay this many or fewer, so a profiler times
at most 64 small segments."""


@dataclass
class Call:
    name: str
    depth: int
    leaf: bool = True



def eager_calls(module: nn.Module, args: tuple, kwargs: dict):
    names = {}
    for n, m in module.named_modules():
        names.setdefault(id(m), n)
    calls: list[Call] = []
    stack: list[Call] = []
    handles = []

    def pre(m, _inp):
        c = Call(names[id(m)], len(stack) + 1)
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
            f"{type(module).__name__}.forward rejects the example input: {type(e).__name__}: {error_line(e)}"
            f"{user_frame(e)}; pass inputs the model accepts (shape, dtype, keyword names)"
        ) from e
    finally:
        for h in handles:
            h.remove()
    return calls, out


def frontier_of(calls: list[Call], depth: int) -> tuple[list[str], set[str]]:
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


def choose_depth(calls, granularity, min_stages):
    max_depth = max((c.depth for c in calls), default=1)
    counts = {d: len([n for n in o if n not in m]) for d in range(1, max_depth + 1) for o, m in [frontier_of(calls, d)]}
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

