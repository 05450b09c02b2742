"""Capture: a model exported with torch.export, where it can be cut, what crosses each cut, and the
graph cut into stages at a Plan's cuts (the step after the model and before the profile)."""
