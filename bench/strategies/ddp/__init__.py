"""DistributedDataParallel, its home: its price in price.py and its cost model in cost.py (no torch, for
the registry and advise), the Trainer in trainer.py. ZeRO-1's price builds on cost.py's ddp_step too, and
the hybrid's Trainer buckets its gradients as DDP does.
"""
