"""Pipeline stages replicated with DDP, its home: its price in price.py (no torch; one replica's Plan plus
each stage's gradient all-reduce), the Trainer in trainer.py, and the rule of how many devices make its
copies in copies.py.
"""


def trainer_class():
    """`HybridTrainer`, imported only when called: its module imports torch, and the registry that holds
    this function is read where torch must not load (this package imports none)."""
    from pipebench.bench.strategies.hybrid.trainer import HybridTrainer

    return HybridTrainer
