"""DistributedDataParallel, its home: its price in price.py and its cost model in cost.py (no torch, for
the registry and advise), the Trainer in trainer.py. ZeRO-1's price builds on cost.py's ddp_step too, and
the hybrid's Trainer buckets its gradients as DDP does.
"""


def trainer_class():
    """`DDPTrainer`, imported only when called: its module imports torch, and the registry that holds
    this function is read where torch must not load (this package imports none)."""
    from pipebench.bench.strategies.ddp.trainer import DDPTrainer

    return DDPTrainer
