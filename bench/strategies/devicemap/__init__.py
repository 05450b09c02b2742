"""accelerate's device_map="auto", its home: its price and accelerate's cuts (kept in the profile cache)
in price.py, without torch until the cuts must be read from a built model; the Trainer in trainer.py.
"""
