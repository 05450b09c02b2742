"""FSDP2 (fully_shard), its home: its price in price.py and its cost model in cost.py (no torch), the
Trainer in trainer.py.
"""
