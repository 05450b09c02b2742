"""The seed's hand-placed model parallelism, generalised: the Plan's stages on their devices, the whole
batch moving from stage to stage, no micro-batches. Only one device works at a time."""
from __future__ import annotations

from pipebench.bench.strategies.common import Trainer, check_plan_fits, own_copy


class ModelParallelTrainer(Trainer):
    name = "modelparallel"

    def __init__(self, model, devices, *, bounds, **kw):
        """bounds: the Plan's stage boundaries [0, b1, ..., n]; stage s runs on devices[s]."""
        if len(bounds) != len(devices) + 1:
            raise ValueError(f"need one device per stage ({len(devices)} devices, {len(bounds) - 1} stages)")
        super().__init__(own_copy(model), devices, **kw)
        self.stages = [self.model.stage(a, b).to(d) for a, b, d in zip(bounds, bounds[1:], self.devices)]

    @classmethod
    def from_plan(cls, model, devices, plan, strategy):
        check_plan_fits(plan, model)
        return cls(model, devices, bounds=plan.bounds)

    def parameters(self):
        return [p for stage in self.stages for p in stage.parameters()]

    def forward(self, x):
        for stage, device in zip(self.stages, self.devices):
            x = stage(x.to(device, non_blocking=True))
        return x

    def forward_backward(self, inputs, targets):
        outputs = self.forward(inputs)
        loss = self.model.loss_fn(outputs, targets.to(outputs.device))
        loss.backward()
        return loss
