"""torchvision's VisionTransformer laid out as a flat list of cuttable layers.

torchvision's forward mixes the patch embedding, class token and position embedding into one
method; here they become small wrappers around torchvision's own modules and parameters so that
every child takes and returns one tensor:

    patch_embedding -> position_embedding -> encoder_layer_0..N-1 -> norm -> class_token -> head
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from typing import TYPE_CHECKING

from torch import nn

from pipebench.models.base import Built, check_counts, flatten_sequential
from pipebench.models.synthetic import SyntheticImages
from pipebench.base.errors import UserError

if TYPE_CHECKING:  # imported when built: listing the zoo needs no torchvision
    from torchvision.models.vision_transformer import VisionTransformer

DESCRIPTION = "torchvision ViT-B/16, one layer per encoder block"
FLAVOURS = {
    "tiny": {"image_size": 32, "patch_size": 8, "depth": 2, "heads": 2, "width": 32, "mlp": 64, "classes": 10},
    "full": {"image_size": 224, "patch_size": 16, "depth": 12, "heads": 12, "width": 768, "mlp": 3072, "classes": 1000},
}
DEFAULT_FLAVOUR = "full"


class PatchEmbedding(nn.Module):
    """Images to patch tokens with the (learned) class token prepended."""

    def __init__(self, vit: VisionTransformer):
        super().__init__()
        self.conv_proj = vit.conv_proj
        self.class_token = vit.class_token  # 1, 1, D

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # B, 3, S, S
        patches = self.conv_proj(images)  # B, D, S/p, S/p
        tokens = patches.flatten(2).transpose(1, 2)  # B, N, D
        class_token = self.class_token.expand(tokens.shape[0], -1, -1)  # B, 1, D
        return torch.cat([class_token, tokens], dim=1)  # B, 1+N, D


class PositionEmbedding(nn.Module):
    """Adds the learned position embedding, then the encoder's input dropout."""

    def __init__(self, vit: VisionTransformer):
        super().__init__()
        self.pos_embedding = vit.encoder.pos_embedding  # 1, 1+N, D
        self.dropout = vit.encoder.dropout

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # B, 1+N, D
        return self.dropout(tokens + self.pos_embedding)  # B, 1+N, D


class ClassToken(nn.Module):
    """Keeps only the class token, which the head classifies."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # B, 1+N, D
        return tokens[:, 0]  # B, D


def flatten_vit(vit: VisionTransformer) -> nn.Sequential:
    """The layers of a torchvision VisionTransformer in forward order; shares its parameters."""
    blocks = list(vit.encoder.layers.named_children())  # encoder_layer_i: B, 1+N, D
    return flatten_sequential(
        [("patch_embedding", PatchEmbedding(vit)), ("position_embedding", PositionEmbedding(vit))]
        + blocks
        + [("norm", vit.encoder.ln), ("class_token", ClassToken()), ("head", vit.heads)]  # B, classes
    )


def build(config: dict) -> Built:
    check_counts("vit_b_16", config, "image_size", "patch_size", "depth", "heads", "width", "mlp", "classes")
    size, patch, width, heads = (config[key] for key in ("image_size", "patch_size", "width", "heads"))
    if size % patch:  # torchvision asserts both: a traceback, not a line
        raise UserError(f"vit_b_16 image_size ({size}) must be divisible by patch_size ({patch})")
    if width % heads:
        raise UserError(f"vit_b_16 width ({width}) must be divisible by heads ({heads})")
    from torchvision.models.vision_transformer import VisionTransformer

    vit = VisionTransformer(
        image_size=config["image_size"],
        patch_size=config["patch_size"],
        num_layers=config["depth"],
        num_heads=config["heads"],
        hidden_dim=config["width"],
        mlp_dim=config["mlp"],
        num_classes=config["classes"],
    )
    return Built(flatten_vit(vit), SyntheticImages(3, config["image_size"], config["classes"]), F.cross_entropy, config)
