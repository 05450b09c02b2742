"""The seed's hand-placed model parallelism, generalised: the Plan's stages on their devices, the whole
batch moving from stage to stage, no micro-batches. Only one device works at a time.

The stages are torch.distributed.pipelining's own split of the model at the Plan's cuts (the same
modules the pp-* strategies run), placed by `Plan.placement`; the split graph routes every tensor to
the stage that needs it, skip connections included, and each stage first moves its inputs to its device.
"""
from __future__ import annotations

import torch

from pipebench.bench.strategies.common import Trainer, as_args, only_output, own_copy, stage_pipe, to_device


class ModelParallelTrainer(Trainer):
    name = "modelparallel"

    def __init__(self, model, devices, *, plan, **kw):
        """plan: stage s runs on devices[plan.placement[s]]; its micro-batch size is the batch each
        forward of the split graph takes."""
        if max(plan.placement) >= len(devices):
            raise ValueError(f"the plan places stages on {max(plan.placement) + 1} devices; {len(devices)} given")
        super().__init__(own_copy(model), devices, **kw)
        self.plan = plan
        self.pipe = stage_pipe(self.model, plan)
        self.stages = [self.pipe.get_stage_module(s) for s in range(len(plan.stages))]
        for module, where in zip(self.stages, plan.placement):
            device = self.devices[where]
            module.to(device)
            module.register_forward_pre_hook(_move_inputs_to(device), with_kwargs=True)

    @classmethod
    def from_plan(cls, model, devices, plan, strategy):
        return cls(model, devices, plan=plan)

    def parameters(self):
        seen, params = set(), []
        for module in self.stages:
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    def forward(self, inputs):
        # The split graph, node by node (torch's own Pipe.forward detaches between stages: no backward).
        args = as_args(to_device(inputs, self.devices[self.plan.placement[0]]))
        return only_output(torch.fx.Interpreter(self.pipe.split_gm).run(*args))

    def forward_backward(self, inputs, targets):
        outputs = self.forward(inputs)
        loss = self.model.loss_fn(outputs, targets.to(outputs.device))
        loss.backward()
        return loss


def _move_inputs_to(device: torch.device):
    def hook(module, args, kwargs):
        return (tuple(a.to(device, non_blocking=True) if isinstance(a, torch.Tensor) else a for a in args),
                {k: v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
    return hook
