"""nn.DataParallel, as the blog recipe does: one process replicates the model on every GPU each step.

The baseline many users still reach for. On the CPU, DataParallel runs the module unchanged.
"""
from __future__ import annotations

from torch import nn

from pipebench.bench.strategies.trainers import UnavailableStrategy, WholeModelTrainer, own_copy


class DataParallelTrainer(WholeModelTrainer):
    def __init__(self, model, devices, **kw):
        super().__init__(own_copy(model), devices, **kw)
        self.model.module.to(self.devices[0])
        cuda = [d.index for d in self.devices if d.type == "cuda"]
        if self.training.compile is not None and len(cuda) > 1:
            raise UnavailableStrategy("dataparallel copies the module to every GPU at each step, and a compiled "
                                      "module's copies run the original's code: compile ddp instead")
        self.compile(self.model.module)
        # Without CUDA devices the module runs unchanged, as DataParallel runs it on a machine without GPUs:
        # on one with a GPU, DataParallel given no device ids would take the GPUs and move the module there.
        self.parallel = (nn.DataParallel(self.model.module, device_ids=cuda, output_device=cuda[0]) if cuda
                         else self.model.module)

    @property
    def runner(self):
        return self.parallel
