"""Pipeline stages replicated with DDP, its home: its price in price.py (no torch; one replica's Plan plus
each stage's gradient all-reduce), the Trainer in trainer.py, and the rule of how many devices make its
copies in copies.py.
"""
