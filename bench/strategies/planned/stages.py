"""A model cut into the Plan's stages, as the pipeline and model-parallel trainers run it: the split
(partition/capture/split.py) checked against the model, each stage placed on its device, parameters that several
stages share copied and their gradients summed, and the stages chained so that each takes exactly what
the one before returns."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from pipebench.bench.strategies.checkpointing import checkpoint
from pipebench.bench.strategies.planned.float_coding import ZeroGradients, as_floats, from_floats, is_coded
from pipebench.bench.strategies.micro_batches import as_args
from pipebench.base.errors import UserError
from pipebench.base.training import autocast

__all__ = ["check_plan_fits", "stage_split", "place", "shared_parameters", "sum_shared_grads", "chain_stages"]


def check_plan_fits(plan, model) -> None:
    """The Plan must cut the model it runs: a cut at a submodule the model lacks (a plan made for another
    version of the model) is refused in one line."""
    names = dict(model.module.named_modules())
    for stage in plan.stages[1:]:
        if stage.layers[0] not in names:
            raise UserError(f"the plan cuts at {stage.layers[0]!r}, which {model.name} does not have; "
                            "plan again for this version of the model")


def stage_split(model, plan, training=None):
    """The whole module cut at the Plan's cuts by pipebench (partition/capture/graph.py: split_model, from one
    torch.export of one micro-batch of the Plan's size): stage k is `split.stage(k)`, sharing its
    parameters with `model.module`. training: under bf16 the graph is captured in autocast, on the
    device the model is on, as the stages will run in it (partition/capture/graph.py: split_model's run_in)."""
    from pipebench.partition.capture.split import split_model

    check_plan_fits(plan, model)
    inputs, _ = model.make_batch(plan.micro_batch_size, seed=0)
    where = next(model.module.parameters()).device.type
    return split_model(model.module, as_args(inputs), {}, [stage.layers[0] for stage in plan.stages[1:]],
                       run_in=(lambda: autocast(training, where)) if training is not None else None)


def place(stage: nn.Module, device: torch.device) -> nn.Module:
    """Move a stage of the split to `device`, its exported graph included: torch.export records the
    device of tensors the forward creates (a torch.arange of positions) as a literal, and keeps tensor
    constants as plain attributes, which `.to()` leaves where they were."""
    stage.to(device)
    device = torch.device(device)
    for module in stage.modules():  # GraphModules, and export's InterpreterModules (they run .graph)
        if not isinstance(getattr(module, "graph", None), torch.fx.Graph):
            continue
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and value.device != device:
                setattr(module, name, value.to(device))
        changed = False
        for node in module.graph.nodes:
            where = node.kwargs.get("device")
            if isinstance(where, torch.device) and where != device:
                node.kwargs = {**node.kwargs, "device": device}
                changed = True
        if changed:
            for compiled in (module, getattr(module, "graph_module", None)):
                if isinstance(compiled, torch.fx.GraphModule):
                    compiled.recompile()
    return stage


def shared_parameters(split, stages: Sequence[nn.Module], module: nn.Module) -> list[list[tuple[int, str, nn.Parameter]]]:
    """Give each stage its own copy of a parameter that several stages use (a tied embedding), so that
    stages can sit on different devices and processes. One list per such parameter: (stage index, name in
    the model, the stage's copy); the first stage keeps the original. Their gradients must be summed across
    the copies before each step (`sum_shared_grads`), as autograd sums the uses of one parameter; then the
    copies stay equal. The name is the one `module.named_parameters()` gives the parameter (a tied weight
    has several; the first counts)."""
    canonical = {id(p): n for n, p in module.named_parameters()}
    groups = []
    for uses in split.shared():
        group = []
        for k, name in sorted(uses.items()):
            owner_name, _, leaf = name.rpartition(".")
            owner = stages[k].submod.get_submodule(owner_name)
            original = getattr(owner, leaf)
            copy_ = original if not group else nn.Parameter(original.detach().clone(),
                                                            requires_grad=original.requires_grad)
            setattr(owner, leaf, copy_)
            group.append((k, canonical[id(original)], copy_))
        groups.append(group)
    return groups


def sum_shared_grads(groups, local: set[int], all_reduce=None) -> None:
    """Give every copy of a shared parameter the sum of all copies' gradients: over this process's
    stages (`local`), then over the processes with `all_reduce` (in place, SUM) when given. Every
    process calls it with the same groups in the same order. The copies may sit on several devices of
    this process: each gets the sum on its own device."""
    for group in groups:
        mine = [param for k, _, param in group if k in local]
        reference = group[0][2]
        total = torch.zeros_like(reference if not mine else mine[0])
        for param in mine:
            if param.grad is not None:
                total += param.grad.to(total.device)
        if all_reduce is not None:
            all_reduce(total)
        for param in mine:
            param.grad = total.to(param.device, copy=True)


def chain_stages(split) -> list[nn.Module]:
    """The split as a chain: stage k takes exactly what stage k - 1 returns and returns what stage k + 1
    takes, so that plain PipelineStages (which every schedule supports) and one-process trainers can run
    it. The split hands a value straight to every stage that uses it (a residual, a mask, Llama's cos/sin:
    partition/capture/split.py); here each stage passes on the values later stages need."""
    import operator

    graph = split.gm.graph
    calls = {node.target: node for node in graph.nodes if node.op == "call_module"}
    order = [calls[f"submod_{k}"] for k in range(split.num_stages)]
    index = {node: k for k, node in enumerate(order)}
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    output = next(node for node in graph.nodes if node.op == "output")

    def producer(value) -> int:
        if value.op == "placeholder":
            return -1
        if value.op == "call_function" and value.target is operator.getitem:
            return index[value.args[0]]
        return index[value]

    last_use: dict = {}
    for k, node in enumerate(order):
        for value in node.all_input_nodes:
            last_use[value] = max(last_use.get(value, -1), k)
    for value in output.all_input_nodes:
        last_use[value] = len(order)
    values = sorted(last_use, key=lambda v: list(graph.nodes).index(v))
    stages, takes = [], placeholders
    for k, node in enumerate(order):
        if k == len(order) - 1:
            returns = None  # the model's output
        else:
            returns = [v for v in values if producer(v) <= k < last_use[v]]
        makes = [u for u in node.users if u.op == "call_function" and u.target is operator.getitem]
        stages.append(_ChainStage(split.stage(k), takes, [_dtype(split, v) for v in takes], node, makes, returns,
                                  output))
        takes = returns
    return stages


def _dtype(split, value) -> torch.dtype | None:
    """The dtype of a value of the split's root graph, from the exported graph's metadata (None: no tensor)."""
    import operator

    index = None
    if value.op == "call_function" and value.target is operator.getitem:
        value, index = value.args
    if value.op == "call_module":
        out = next(n for n in getattr(split.gm, value.target).graph.nodes if n.op == "output").args[0]
        value = out[index] if index is not None else out
    meta = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
    return meta.dtype if isinstance(meta, torch.Tensor) else None


class _ChainStage(nn.Module):
    """One stage of `chain_stages`: runs its submodule on the values it needs among those it received,
    and returns the values the next stages need."""

    copy_outputs = False
    """Return copies of the float outputs that need a gradient: torch's zero-bubble schedules detach a
    stage's outputs in place (stage_backward_input), which breaks a view, a value passed on unchanged,
    or one the stage's own backward still needs."""
    recompute = False
    """Activation checkpointing (the Plan's StagePlan.recompute): keep only what the stage received and
    run its forward again during the backward (torch.utils.checkpoint, non-reentrant)."""

    def __init__(self, submod, takes, dtypes, node, makes, returns, output):
        super().__init__()
        self.submod = submod
        self._takes = [v.name for v in takes]
        self._dtypes = dtypes
        self._args = [a.name if isinstance(a, torch.fx.Node) else a for a in node.args]
        self._kwargs = {k: (a.name if isinstance(a, torch.fx.Node) else a) for k, a in node.kwargs.items()}
        self._name = node.name
        self._makes = {u.name: u.args[1] for u in makes}
        self._returns = None if returns is None else [v.name for v in returns]
        self._output = output.args[0]

    def forward(self, *received):
        # A received activation is a leaf that needs a gradient; the stage may change it in place (a
        # ReLU(inplace=True) first), which autograd allows on a copy only. Its gradient goes back contiguous.
        received = [_CopyWithContiguousGrad.apply(t) if isinstance(t, torch.Tensor) and t.is_leaf and t.requires_grad
                    else t for t in received]
        coded = [t for t, dtype in zip(received, self._dtypes) if is_coded(t, dtype)]
        received = [from_floats(t, dtype) for t, dtype in zip(received, self._dtypes)]
        env = dict(zip(self._takes, received))
        look = lambda a: env[a] if isinstance(a, str) and a in env else a  # noqa: E731
        args, kwargs = [look(a) for a in self._args], {k: look(a) for k, a in self._kwargs.items()}
        if self.recompute and torch.is_grad_enabled():
            result = checkpoint(self.submod, *args, use_reentrant=False, **kwargs)
        else:
            result = self.submod(*args, **kwargs)
        env[self._name] = result
        for name, i in self._makes.items():
            env[name] = result[i]
        if self._returns is None:  # the model's output; a single one as itself, not a 1-tuple
            out = list(torch.fx.graph.map_arg(self._output, lambda n: env[n.name]))
        else:
            out = [env[name].clone() if self.copy_outputs and _needs_copy(env[name]) else as_floats(_contiguous(env[name]))
                   for name in self._returns]  # sends need contiguous tensors (an expanded mask is not)
        if coded:
            i = next((i for i, t in enumerate(out) if _needs_copy(t)), None)
            if i is not None:
                out[i] = ZeroGradients.apply(out[i], *coded)
        return out[0] if len(out) == 1 else tuple(out)


class _CopyWithContiguousGrad(torch.autograd.Function):
    """A copy of a received activation whose gradient goes back contiguous. The stage before receives that
    gradient into a buffer of its strides (torch 2.14 infers them from this stage's backward), and gloo
    sends and receives contiguous tensors only: the gradient of an attention's key that a stage transposes
    (Whisper's cross-attention) is not."""

    @staticmethod
    def forward(ctx, received):
        return received.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()


def _contiguous(value):
    return value.contiguous() if isinstance(value, torch.Tensor) else value


def _needs_copy(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.requires_grad
