"""A GPT-style decoder-only language model, written out so each piece is one cuttable layer.

    embed (tokens + positions) -> block_i_attn, block_i_mlp for each block (pre-LayerNorm residual
    halves; `split=1` keeps each block as one layer) -> norm -> head

The head is a separate Linear, not tied to the token embedding, so the first and last stages can
live on different GPUs without sharing a parameter. Weights follow GPT-2: normal(0, 0.02), zero
biases.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipebench.models.base import Built, check_counts, flatten_sequential
from pipebench.models.synthetic import SyntheticTokens
from pipebench.base.errors import UserError

DESCRIPTION = "GPT-style decoder (pre-LN, causal SDPA attention, GELU MLP, untied head), attention and MLP cuttable"
FLAVOURS = {
    "tiny": {"vocab": 256, "width": 64, "depth": 2, "heads": 2, "ffn": None, "seq_len": 32, "split": 2},
    "125m": {"vocab": 50304, "width": 768, "depth": 12, "heads": 12, "ffn": None, "seq_len": 1024, "split": 2},
    "800m": {"vocab": 8192, "width": 2048, "depth": 16, "heads": 16, "ffn": 8192, "seq_len": 512, "split": 2},
    "8b": {"vocab": 32000, "width": 4096, "depth": 40, "heads": 32, "ffn": None, "seq_len": 1024, "split": 2},
}
"""`ffn: None` means 4 * width; the built model's config records the number. `split`: cuttable layers per
block: 2 makes the attention half and the MLP half separate layers (the same model, the same weights;
finer cut points let the planner balance stages, especially with several stages per GPU); 1 keeps a
block whole."""
DEFAULT_FLAVOUR = "800m"


class Embedding(nn.Module):
    """Token embedding plus learned absolute position embedding."""

    def __init__(self, vocab: int, width: int, seq_len: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # B, T
        positions = torch.arange(tokens.shape[1], device=tokens.device)  # T
        return self.tokens(tokens) + self.positions(positions)  # B, T, C


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, T, C
        batch, time, channels = x.shape
        qkv = self.qkv(x).view(batch, time, 3, self.heads, channels // self.heads)  # B, T, 3, H, C/H
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each B, H, T, C/H
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # B, H, T, C/H
        return self.proj(y.transpose(1, 2).reshape(batch, time, channels))  # B, T, C


class Residual(nn.Module):
    """x + body(norm(x)): one half of a pre-LayerNorm block, cuttable on its own."""

    def __init__(self, norm: nn.Module, body: nn.Module):
        super().__init__()
        self.norm = norm
        self.body = body

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, T, C
        return x + self.body(self.norm(x))  # B, T, C


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width: int, heads: int, ffn: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, ffn), nn.GELU(), nn.Linear(ffn, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B, T, C
        x = x + self.attn(self.ln_1(x))  # B, T, C
        return x + self.mlp(self.ln_2(x))  # B, T, C


def init_gpt2_(module: nn.Module) -> None:
    """GPT-2 initialisation: Linear and Embedding weights normal(0, 0.02), biases zero, LayerNorm one and
    zero. It sets every parameter, so the model is built without PyTorch's default initialisation (on
    "meta", then allocated): an 8B model's CPU build takes twice as long with it."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        module.reset_parameters()


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every position: logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def build(config: dict) -> Built:
    optional = ["ffn"] if config["ffn"] is not None else []  # None: 4 * width
    check_counts("gpt", config, "vocab", "width", "depth", "heads", "seq_len", *optional)
    config = {**config, "ffn": config["ffn"] or 4 * config["width"]}
    vocab, width, depth, heads, ffn, seq_len, split = (
        config[key] for key in ("vocab", "width", "depth", "heads", "ffn", "seq_len", "split")
    )
    if width % heads:
        raise UserError(f"gpt width ({width}) must be divisible by heads ({heads})")
    if split not in (1, 2):
        raise UserError(f"gpt split is 1 (whole blocks) or 2 (attention and MLP halves), not {split!r}")
    device = torch.get_default_device()  # where get_model builds; the modules are made on meta, then there
    with torch.device("meta"):
        layers = _layers(vocab, width, depth, heads, ffn, seq_len, split)
    layers = layers.to_empty(device=device)
    layers.apply(init_gpt2_)
    return Built(layers, SyntheticTokens(vocab, seq_len), next_token_loss, config)


def _layers(vocab: int, width: int, depth: int, heads: int, ffn: int, seq_len: int, split: int) -> nn.Sequential:
    blocks = []
    for i in range(depth):
        block = Block(width, heads, ffn)
        if split == 1:
            blocks.append((f"block_{i}", block))
        else:  # the same modules, created in the same order: the same weights as whole blocks
            blocks += [(f"block_{i}_attn", Residual(block.ln_1, block.attn)),
                       (f"block_{i}_mlp", Residual(block.ln_2, block.mlp))]
    return flatten_sequential(
        [("embed", Embedding(vocab, width, seq_len))]  # B, T, C
        + blocks  # B, T, C
        + [("norm", nn.LayerNorm(width)), ("head", nn.Linear(width, vocab, bias=False))]  # B, T, V
    )
