"""The blog recipe's small MNIST ConvNet, kept layer for layer so its results stay comparable.

Every operation, pooling and activations included, is its own child, so the 10 layers can be cut
anywhere; log_softmax is the last layer and the loss is `nll_loss`, as in the blog recipe.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from pipebench.models.base import Built, check_counts, flatten_sequential
from pipebench.models.synthetic import SyntheticImages

DESCRIPTION = "The blog recipe's MNIST ConvNet (2 conv + 2 fc, log_softmax); can train on real MNIST"
FLAVOURS = {
    "tiny": {"classes": 10},  # it is already tiny: the same network as full
    "full": {"classes": 10},
}
DEFAULT_FLAVOUR = "full"
IMAGE_SIZE = 28


def build(config: dict) -> Built:
    check_counts("convnet", config, "classes")
    classes = config["classes"]
    layers = flatten_sequential([
        ("conv1", nn.Conv2d(1, 10, kernel_size=5)),  # B, 10, 24, 24
        ("pool", nn.MaxPool2d(2)),  # B, 10, 12, 12
        ("relu1", nn.ReLU()),
        ("conv2", nn.Conv2d(10, 20, kernel_size=3)),  # B, 20, 10, 10
        ("relu2", nn.ReLU()),
        ("flatten", nn.Flatten()),  # B, 2000
        ("fc1", nn.Linear(20 * 10 * 10, 500)),  # B, 500
        ("relu3", nn.ReLU()),
        ("fc2", nn.Linear(500, classes)),  # B, classes
        ("log_softmax", nn.LogSoftmax(dim=1)),  # B, classes
    ])
    return Built(layers, SyntheticImages(1, IMAGE_SIZE, classes), F.nll_loss, config)
