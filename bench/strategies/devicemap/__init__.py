"""accelerate's device_map="auto", its home: its price and accelerate's cuts (kept in the profile cache)
in price.py, without torch until the cuts must be read from a built model; the Trainer in trainer.py.
"""


def trainer_class():
    """`DeviceMapTrainer`, imported only when called: its module imports torch, and the registry that holds
    this function is read where torch must not load (this package imports none)."""
    from pipebench.bench.strategies.devicemap.trainer import DeviceMapTrainer

    return DeviceMapTrainer
