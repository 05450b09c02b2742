"""nn.DataParallel, its home: its price in price.py and its cost model in cost.py (no torch), the Trainer
in trainer.py.
"""


def trainer_class():
    """`DataParallelTrainer`, imported only when called: its module imports torch, and the registry that holds
    this function is read where torch must not load (this package imports none)."""
    from pipebench.bench.strategies.dataparallel.trainer import DataParallelTrainer

    return DataParallelTrainer
