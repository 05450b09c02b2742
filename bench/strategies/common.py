"""What every strategy shares: precision, the optimizer step, micro-batch splitting, and peak memory per
device."""
from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

from pipebench.errors import UserError
from pipebench.training import Training, autocast, compile_module, make_optimizer


class UnavailableStrategy(NotImplementedError):
    """The strategy cannot run here (a schedule the installed torch lacks, no GPU); the reason says why."""


class Trainer:
    """One optimizer step on a global batch; subclasses place the model and run forward/backward.

    Every Trainer is built the same way, `Trainer(model, devices, plan=, strategy=, training=)`: this
    process's share of `plan` (None for strategies without one), running `strategy` (its registry entry)
    the way `training` says. Every cut, placement, micro-batch count and recomputed stage comes from the
    Plan, none is decided here. `devices`: the devices this process drives (one for a process per
    device)."""

    def __init__(self, model, devices: Sequence[str | torch.device], *, plan=None, strategy=None,
                 training: Training = Training()):
        self.model = model
        self.devices = [torch.device(d) for d in devices]
        self.plan = plan
        self.strategy = strategy
        self.training = training
        self.first_loss: float | None = None
        self._optimizer: torch.optim.Optimizer | None = None

    def compile(self, module: nn.Module) -> nn.Module:
        """Compile `module` in place as the Training says (eager: nothing); each strategy compiles what it
        runs: the model, its replica, each shard unit or each stage."""
        return compile_module(module, self.training)

    def make_optimizer(self) -> torch.optim.Optimizer:
        """The optimizer over this process's parameters, as the Training says."""
        return make_optimizer(self.parameters(), self.training)

    def parameters(self) -> list[nn.Parameter]:
        raise NotImplementedError

    def forward_backward(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Accumulate the gradients of the batch-mean loss; return that loss (a tensor on any device)."""
        raise NotImplementedError

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float:
        """Zero gradients, forward and backward over the whole batch, one optimizer step; returns the
        loss. The forward and backward run under the precision's autocast: torch's pipeline schedules
        run both inside one call, so every strategy does the same (autocast leaves backward ops in the
        dtypes their forward chose)."""
        if self._optimizer is None:  # made on first use, once a subclass has placed its parameters
            self._optimizer = self.make_optimizer()
        self._optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.forward_backward(inputs, targets)
        self._optimizer.step()
        value = float(loss.detach())
        if self.first_loss is None:
            self.first_loss = value
        return value

    def autocast(self):
        """The precision's autocast context (bf16), or none."""
        return autocast(self.training, self.devices[0].type)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Parameters by their name in the original model, on the CPU (to compare strategies). A stage's
        replica of a parameter shared by several stages has the original's name too."""
        names = {id(p): n.replace(f"{CHECKPOINT_WRAPPER}.", "") for n, p in self.model.module.named_parameters()}
        replicas = {id(p): n for group in getattr(self, "shared", []) for _, n, p in group}
        names.update(replicas)
        # A stage may still hold the tied original, unused, beside its trained copy: the copy wins.
        ordered = sorted(self.parameters(), key=lambda p: id(p) in replicas)
        return {names[id(p)]: p.detach().cpu() for p in ordered if id(p) in names}

    def peak_memory(self) -> list[int]:
        """Peak bytes allocated on each device since the trainer was made or `reset_peak_memory` (the
        worker resets after the warm-up steps: the steady state's peak, not cuDNN's autotuning, which
        tries algorithms with large workspaces in the first steps and falls back where they do not fit).
        0 for the CPU."""
        return [torch.cuda.max_memory_allocated(d) if d.type == "cuda" else 0 for d in self.devices]

    def reset_peak_memory(self) -> None:
        for d in self.devices:
            if d.type == "cuda":
                torch.cuda.reset_peak_memory_stats(d)


class WholeModelTrainer(Trainer):
    """A strategy that calls the whole model in one piece (single, DataParallel, device-map): `runner`
    (the module itself, or a wrapper around it) takes the batch on the first device; the loss is taken
    where the output lands."""

    @property
    def runner(self):
        return self.model.module

    def parameters(self):
        return list(self.model.module.parameters())

    def forward_backward(self, inputs, targets):
        outputs = self.runner(*as_args(to_device(inputs, self.devices[0])))
        loss = self.model.loss_fn(outputs, targets.to(outputs.device))
        del outputs  # what the loss saved is enough: kept, a language model's logits outlive the backward
        loss.backward()
        return loss


class ReplicaTrainer(WholeModelTrainer):
    """One process per device, each running the whole model (DDP's replica, FSDP's shards) on its equal
    slice of the global batch. Every process makes the same batch from the same seed and takes its own
    slice, so the averaged gradient is the whole batch's, as on one device; the loss returned is the
    mean of the slices' mean losses (the batch mean). Subclasses set rank and world."""

    rank: int
    world: int
    local_batch = False
    """True: `step` is given this replica's own share of the batch (`pipebench train`'s DistributedSampler),
    not the global batch to slice."""

    def forward_backward(self, inputs, targets):
        if not self.local_batch:
            inputs, targets = split(inputs, self.world)[self.rank], split(targets, self.world)[self.rank]
        loss = super().forward_backward(inputs, targets)
        total = loss.detach().float().clone()
        torch.distributed.all_reduce(total)
        return total / self.world


def check_plan_fits(plan, model) -> None:
    """The Plan must cut the model it runs: a cut at a submodule the model lacks (a plan made for another
    version of the model) is refused in one line."""
    names = dict(model.module.named_modules())
    for stage in plan.stages[1:]:
        if stage.layers[0] not in names:
            raise UserError(f"the plan cuts at {stage.layers[0]!r}, which {model.name} does not have; "
                            "plan again for this version of the model")


def stage_split(model, plan, training=None):
    """The whole module cut at the Plan's cuts by pipebench (partition/graph.py: split_model, from one
    torch.export of one micro-batch of the Plan's size): stage k is `split.stage(k)`, sharing its
    parameters with `model.module`. training: under bf16 the graph is captured in autocast, on the
    device the model is on, as the stages will run in it (partition/graph.py: split_model's run_in)."""
    from pipebench.partition.graph import split_model

    check_plan_fits(plan, model)
    inputs, _ = model.make_batch(plan.micro_batch_size, seed=0)
    where = next(model.module.parameters()).device.type
    return split_model(model.module, as_args(inputs), {}, [stage.layers[0] for stage in plan.stages[1:]],
                       run_in=(lambda: autocast(training, where)) if training is not None else None)


def as_args(inputs) -> tuple:
    """A model's inputs as forward's positional arguments (one tensor, or a tuple of them)."""
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def to_device(inputs, device):
    """Tensors (or a tuple of them) on `device`."""
    if isinstance(inputs, (tuple, list)):
        return tuple(t.to(device, non_blocking=True) for t in inputs)
    return inputs.to(device, non_blocking=True)


def only_output(outputs):
    """What the loss takes: a Pipe returns its single output as a one-element tuple."""
    if isinstance(outputs, (tuple, list)):
        if len(outputs) != 1:
            raise UserError(f"the model returns {len(outputs)} outputs; pipebench trains a model that returns one tensor")
        return outputs[0]
    return outputs


def own_copy(model):
    """A deep copy, so strategies never share (and never move) the caller's parameters; or the model
    itself, once, when its owner handed it over (`hand_over`): a worker's 8B model is not copied."""
    if getattr(model, "handed_over", False):
        model.handed_over = False
        return model
    return copy.deepcopy(model)


def hand_over(model):
    """Let the next trainer take `model` itself rather than a copy (the worker builds it for that alone)."""
    model.handed_over = True
    return model


def split(inputs, chunks: int) -> list:
    """Equal micro-batches along dimension 0 (of each tensor of a tuple); an uneven split is an error,
    not a silent remainder."""
    if isinstance(inputs, (tuple, list)):
        parts = [split(t, chunks) for t in inputs]
        return [tuple(p[i] for p in parts) for i in range(chunks)]
    if chunks < 1 or inputs.shape[0] % chunks:
        raise ValueError(f"batch {inputs.shape[0]} does not split into {chunks} equal micro-batches")
    return list(inputs.chunk(chunks))


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
    partition/graph.py); here each stage passes on the values later stages need."""
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


def _as_floats(value):
    """A tensor as a stage sends it. torch 2.11's PipelineStage makes every tensor it receives require a
    gradient, which only floating-point tensors can: an integer or bool tensor (positions, a mask) crosses
    as floats that hold it exactly (64- and 32-bit integers bit for bit, narrower ones by value), and the
    receiving stage turns it back (`_from_floats`)."""
    if not isinstance(value, torch.Tensor) or value.is_floating_point() or value.is_complex():
        return value
    if value.element_size() in (4, 8):
        return value.contiguous().view(torch.float32 if value.element_size() == 4 else torch.float64)
    return value.to(torch.float32)


def _from_floats(value, dtype: torch.dtype | None):
    """A received tensor in the dtype it was made in (see `_as_floats`)."""
    if not isinstance(value, torch.Tensor) or dtype is None or value.dtype == dtype:
        return value
    value = value.detach()
    return value.view(dtype) if value.element_size() == torch.empty((), dtype=dtype).element_size() else value.to(dtype)


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
        coded = [t for t, dtype in zip(received, self._dtypes) if _is_coded(t, dtype)]
        received = [_from_floats(t, dtype) for t, dtype in zip(received, self._dtypes)]
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
            out = [env[name].clone() if self.copy_outputs and _needs_copy(env[name]) else _as_floats(_contiguous(env[name]))
                   for name in self._returns]  # sends need contiguous tensors (an expanded mask is not)
        if coded:
            i = next((i for i, t in enumerate(out) if _needs_copy(t)), None)
            if i is not None:
                out[i] = _ZeroGradients.apply(out[i], *coded)
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


class _ZeroGradients(torch.autograd.Function):
    """The identity on a stage's output whose backward also gives each received integer tensor (as floats,
    `_as_floats`) a gradient of zeros: torch 2.11's stages send a gradient back for every tensor they
    received, and refuse a missing one."""

    @staticmethod
    def forward(ctx, output, *received):
        ctx.like = [(t.shape, t.dtype, t.device) for t in received]
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad, *_):
        return (grad, *(torch.zeros(shape, dtype=dtype, device=device) for shape, dtype, device in ctx.like))


def _is_coded(value, dtype) -> bool:
    return (isinstance(value, torch.Tensor) and value.requires_grad and dtype is not None
            and not (dtype.is_floating_point or dtype.is_complex))


CHECKPOINT_WRAPPER = "_checkpoint_wrapped_module"
"""What torch's checkpoint_wrapper inserts in the names of the parameters it wraps."""


def checkpoint(function, *args, **kwargs):
    """torch.utils.checkpoint.checkpoint, imported when first needed."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    return torch_checkpoint(function, *args, **kwargs)


def checkpoint_layers(model) -> None:
    """Activation checkpointing layer by layer, in place: each of the model's layers (the zoo's, or a
    model of your own's top-level children) keeps only its input and runs again in the backward. How the
    replica strategies (single, ddp) recompute: they have no stages to choose from."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (CheckpointImpl,
                                                                             apply_activation_checkpointing,
                                                                             checkpoint_wrapper)

    layers = {id(child) for child in model.module.children()}
    apply_activation_checkpointing(
        model.module, check_fn=lambda m: id(m) in layers,
        checkpoint_wrapper_fn=lambda m: checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT))


def _contiguous(value):
    return value.contiguous() if isinstance(value, torch.Tensor) else value


def _needs_copy(value) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point() and value.requires_grad
