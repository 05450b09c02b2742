"""torchvision ResNets laid out as a flat list of cuttable layers.

The stem (conv1, bn1, relu, maxpool), every residual block of layer1..layer4 (named `layer3_17`)
and the head (avgpool, flatten, fc) each become one child, so ResNet-101 has 4 + 33 + 3 = 40
layers. A residual block is the finest cut: its skip connection needs two tensors inside it.

Full flavours are torchvision's own `resnetNN(weights=None)`. The tiny flavours keep the real block
counts (so the layer count and the partitioning problem stay the same) but use `width` channels
instead of 64 in the stem, still built from torchvision's BasicBlock/Bottleneck, so they run in
milliseconds on a CPU.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch.nn.functional as F
from torch import nn

from pipebench.models.base import Built, check_counts, flatten_sequential
from pipebench.models.synthetic import SyntheticImages

if TYPE_CHECKING:
    from torchvision.models.resnet import BasicBlock, Bottleneck

BLOCKS: dict[str, tuple[str, list[int]]] = {
    "resnet18": ("BasicBlock", [2, 2, 2, 2]),
    "resnet50": ("Bottleneck", [3, 4, 6, 3]),
    "resnet101": ("Bottleneck", [3, 4, 23, 3]),
    "resnet152": ("Bottleneck", [3, 8, 36, 3]),
}
"""Each model's block (a torchvision.models.resnet class, by name: torchvision is imported when a model is
built, not when the zoo is listed, which saves every process seconds) and its stages' block counts."""
FLAVOURS = {
    # tiny images are 64, not 32: at 32 layer4 sees 1x1 maps and BatchNorm cannot train a batch of 1
    "tiny": {"width": 8, "image_size": 64, "classes": 10},
    "full": {"width": 64, "image_size": 224, "classes": 1000},
}
DEFAULT_FLAVOUR = "full"
TORCHVISION_WIDTH = 64


def description(name: str) -> str:
    block, counts = BLOCKS[name]
    return f"torchvision {name} ({block} x {counts}), one layer per residual block"


class NarrowResNet(nn.Module):
    """torchvision's ResNet layout with `width` stem channels instead of 64 (stages: w, 2w, 4w, 8w).

    Attribute names match torchvision's `ResNet` so `flatten_resnet` serves both; initialisation
    follows torchvision's too (Kaiming-normal convs, unit BatchNorm).
    """

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], counts: list[int], width: int, classes: int):
        from torchvision.models.resnet import conv1x1

        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        channels = width
        for stage, count in enumerate(counts):
            planes = width * 2**stage
            stride = 1 if stage == 0 else 2
            out_channels = planes * block.expansion
            downsample = None
            if stride != 1 or channels != out_channels:
                downsample = nn.Sequential(conv1x1(channels, out_channels, stride), nn.BatchNorm2d(out_channels))
            blocks = [block(channels, planes, stride, downsample)]
            blocks += [block(out_channels, planes) for _ in range(count - 1)]
            setattr(self, f"layer{stage + 1}", nn.Sequential(*blocks))
            channels = out_channels
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(channels, classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)


def flatten_resnet(net: nn.Module) -> nn.Sequential:
    """The layers of a torchvision-style ResNet in forward order; shares the net's parameters."""
    stem = [(name, getattr(net, name)) for name in ("conv1", "bn1", "relu", "maxpool")]  # B, w, S/4, S/4
    blocks = [
        (f"layer{stage}_{i}", block)
        for stage in range(1, 5)
        for i, block in enumerate(getattr(net, f"layer{stage}"))
    ]  # B, 8w * expansion, S/32, S/32
    head = [("avgpool", net.avgpool), ("flatten", nn.Flatten()), ("fc", net.fc)]  # B, classes
    return flatten_sequential(stem + blocks + head)


def build(name: str, config: dict) -> Built:
    import torchvision.models
    from torchvision.models import resnet

    block, counts = BLOCKS[name]
    check_counts(name, config, "width", "image_size", "classes")
    width, classes = config["width"], config["classes"]
    if width == TORCHVISION_WIDTH:
        net = getattr(torchvision.models, name)(weights=None, num_classes=classes)
    else:
        net = NarrowResNet(getattr(resnet, block), counts, width, classes)
    return Built(flatten_resnet(net), SyntheticImages(3, config["image_size"], classes), F.cross_entropy, config)
