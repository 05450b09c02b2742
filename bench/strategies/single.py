"""The whole model on one device: the baseline every speed-up is measured against."""
from __future__ import annotations

from pipebench.bench.strategies.common import Trainer, as_args, own_copy, to_device


class SingleTrainer(Trainer):
    name = "single"

    def __init__(self, model, devices, **kw):
        super().__init__(own_copy(model), devices[:1], **kw)
        self.model.module.to(self.devices[0])

    def parameters(self):
        return list(self.model.module.parameters())

    def forward_backward(self, inputs, targets):
        outputs = self.model.module(*as_args(to_device(inputs, self.devices[0])))
        loss = self.model.loss_fn(outputs, targets.to(outputs.device))
        loss.backward()
        return loss
