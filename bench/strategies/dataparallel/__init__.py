"""nn.DataParallel, its home: its price in price.py and its cost model in cost.py (no torch), the Trainer
in trainer.py.
"""
