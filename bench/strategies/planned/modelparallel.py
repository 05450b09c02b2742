"""The blog recipe's hand-placed model parallelism, generalised: the Plan's stages on their devices, the whole
batch moving from stage to stage, no micro-batches. Only one device works at a time.

The stages are pipebench's split of the model at the Plan's cuts (partition/capture/graph.py), as the chain
the pp-* strategies run (stages.chain_stages), placed by `Plan.placement`; each stage first moves what
it receives to its device.
"""
from __future__ import annotations

import torch

from pipebench.bench.strategies.micro_batches import as_args, only_output
from pipebench.bench.strategies.planned.stages import chain_stages, place, shared_parameters, stage_split, sum_shared_grads
from pipebench.bench.strategies.trainers import Trainer, own_copy


class ModelParallelTrainer(Trainer):
    def __init__(self, model, devices, *, plan, **kw):
        """plan: stage s runs on devices[plan.placement[s]]; its micro-batch size is the batch each
        forward of the split graph takes."""
        if max(plan.placement) >= len(devices):
            raise ValueError(f"the plan places stages on {max(plan.placement) + 1} devices; {len(devices)} given")
        super().__init__(own_copy(model), devices, plan=plan, **kw)
        split = stage_split(self.model, plan, training=self.training)
        self.stages = chain_stages(split)
        self.shared = shared_parameters(split, self.stages, self.model.module)  # tied weights: a copy per stage, gradients summed
        for module, where, planned in zip(self.stages, plan.placement, plan.stages):
            module.recompute = planned.recompute
            device = self.devices[where]
            self.compile(place(module, device).submod)  # the stage's own graph, as the pp-* strategies compile it
            module.register_forward_pre_hook(_move_inputs_to(device), with_kwargs=True)

    def parameters(self):
        seen, params = set(), []
        for module in self.stages:
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    def forward(self, inputs):
        values = as_args(inputs)
        for stage in self.stages:  # each stage's hook moves what it receives to its device
            values = as_args(stage(*values))
        return only_output(values)

    def forward_backward(self, inputs, targets):
        outputs = self.forward(inputs)
        loss = self.model.loss_fn(outputs, targets.to(outputs.device))
        loss.backward()
        self.sum_shared()
        return loss

    def sum_shared(self) -> None:
        """The copies of a parameter tied across stages get the sum of their gradients."""
        sum_shared_grads(self.shared, set(range(len(self.stages))))


def _move_inputs_to(device: torch.device):
    def hook(module, args, kwargs):
        return (tuple(a.to(device, non_blocking=True) if isinstance(a, torch.Tensor) else a for a in args),
                {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
    return hook
