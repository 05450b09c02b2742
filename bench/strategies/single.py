"""The whole model on one device: the baseline every speed-up is measured against."""
from __future__ import annotations

from bench.strategies.common import Trainer, own_copy


class SingleTrainer(Trainer):
    name = "single"

    def __init__(self, model, devices, **kw):
        super().__init__(own_copy(model), devices[:1], **kw)
        self.model.layers.to(self.devices[0])

    def parameters(self):
        return list(self.model.layers.parameters())

    def forward_backward(self, inputs, targets):
        device = self.devices[0]
        loss = self.model.loss_fn(self.model.layers(inputs.to(device)), targets.to(device))
        loss.backward()
        return loss
