"""ZeRO-1 (DDP with ZeroRedundancyOptimizer), its home: its price in price.py (no torch; DDP's step plus
the broadcast of the updated shards), the Trainer in trainer.py.
"""


def trainer_class():
    """`Zero1Trainer`, imported only when called: its module imports torch, and the registry that holds
    this function is read where torch must not load (this package imports none)."""
    from pipebench.bench.strategies.zero1.trainer import Zero1Trainer

    return Zero1Trainer
