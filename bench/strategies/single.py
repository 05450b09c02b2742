"""The whole model on one device: the baseline every speed-up is measured against.

It is the hand split with a single stage, so both share one forward and backward.
"""
from __future__ import annotations

from pipebench.bench.strategies.modelparallel import ModelParallelTrainer


class SingleTrainer(ModelParallelTrainer):
    name = "single"

    def __init__(self, model, devices, **kw):
        super().__init__(model, devices[:1], bounds=[0, len(model)], **kw)

    @classmethod
    def from_plan(cls, model, devices, plan, strategy):
        return cls(model, devices)
