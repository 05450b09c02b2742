"""A plain fully connected network: the simplest model whose cost is all matrix multiplies.

Each hidden layer is one child `hidden_i` = Linear + ReLU (a ReLU alone is not worth a pipeline
cut), followed by the output Linear `out`; so there are depth + 1 layers. Inputs are already
flat vectors (B, in_features); the loss is cross-entropy on the logits.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from pipebench.models.base import Built, check_counts, flatten_sequential
from pipebench.models.synthetic import SyntheticFeatures

DESCRIPTION = "Plain MLP on flat vectors: depth x (Linear + ReLU) then a Linear classifier"
FLAVOURS = {
    "tiny": {"in_features": 64, "hidden": 64, "depth": 3, "classes": 10},
    "full": {"in_features": 784, "hidden": 4096, "depth": 8, "classes": 10},
}
DEFAULT_FLAVOUR = "full"


def build(config: dict) -> Built:
    check_counts("mlp", config, "in_features", "hidden", "depth", "classes")
    in_features, hidden, depth, classes = (config[key] for key in ("in_features", "hidden", "depth", "classes"))
    widths = [in_features] + [hidden] * depth
    blocks = [
        (f"hidden_{i}", nn.Sequential(nn.Linear(widths[i], widths[i + 1]), nn.ReLU()))  # B, hidden
        for i in range(depth)
    ]
    layers = flatten_sequential(blocks + [("out", nn.Linear(hidden, classes))])  # B, classes
    return Built(layers, SyntheticFeatures(in_features, classes), F.cross_entropy, config)
