"""ZeRO-1 (DDP with ZeroRedundancyOptimizer), its home: its price in price.py (no torch; DDP's step plus
the broadcast of the updated shards), the Trainer in trainer.py.
"""
