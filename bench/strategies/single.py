"""The whole model on one device: the baseline every speed-up is measured against."""
from __future__ import annotations

from pipebench.bench.strategies.common import WholeModelTrainer, checkpoint_layers, own_copy
from pipebench.training import Training


class SingleTrainer(WholeModelTrainer):
    name = "single"

    def __init__(self, model, devices, *, recompute: bool = False, **kw):
        """recompute: checkpoint every layer (the Plan's one stage recomputes, or --checkpoint always)."""
        super().__init__(own_copy(model), devices[:1], **kw)
        if recompute or self.training.checkpoint == "always":
            checkpoint_layers(self.model)
        self.model.module.to(self.devices[0])

    @classmethod
    def from_plan(cls, model, devices, plan, strategy, training=Training()):
        return cls(model, devices, recompute=bool(plan and plan.stages[0].recompute), training=training)
