"""Training strategies: each trains a registry model one optimizer step at a time on the same batch.

Single-process strategies live here; they all return a `Trainer` (see `common.py`) so that the suite
times them the same way. Every strategy starts from the same weights (the model is built once on the
CPU from its seed and copied), uses the same loss and the same SGD step, and records the loss of its
first step so that a reader sees they compute the same thing.
"""
from bench.strategies.common import Trainer, UnavailableStrategy
from bench.strategies.dataparallel import DataParallelTrainer
from bench.strategies.modelparallel import ModelParallelTrainer
from bench.strategies.pipeline import PipelineTrainer
from bench.strategies.single import SingleTrainer

SINGLE_PROCESS = {
    "single": SingleTrainer,
    "dataparallel": DataParallelTrainer,
    "modelparallel": ModelParallelTrainer,
    "pipeline": PipelineTrainer,
}

__all__ = ["SINGLE_PROCESS", "Trainer", "UnavailableStrategy", "SingleTrainer", "DataParallelTrainer",
           "ModelParallelTrainer", "PipelineTrainer"]
