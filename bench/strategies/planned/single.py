"""The whole model on one device: the baseline every speed-up is measured against."""
from __future__ import annotations

from pipebench.bench.strategies.checkpointing import checkpoint_layers
from pipebench.bench.strategies.trainers import WholeModelTrainer, own_copy


class SingleTrainer(WholeModelTrainer):
    def __init__(self, model, devices, **kw):
        """It recomputes every layer where the Plan's one stage does, or with --checkpoint always."""
        super().__init__(own_copy(model), devices[:1], **kw)
        if (self.plan is not None and self.plan.stages[0].recompute) or self.training.checkpoint == "always":
            checkpoint_layers(self.model)
        self.compile(self.model.module.to(self.devices[0]))
