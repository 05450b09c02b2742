"""The one shape every model in the zoo takes: an ordered stack of layers that may be cut anywhere.

The partitioner and every training strategy see a model only through `LayeredModel`, so a new model
is a builder that returns one; nothing else in pipebench knows how it was made.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch
from torch import nn

from pipebench.base.errors import UserError


@dataclass
class LayeredModel:
    """A model as `nn.Sequential` whose children may be split between any two neighbours.

    `layers[i]` consumes exactly what `layers[i - 1]` returns (one tensor), so `layers[a:b]` is a
    valid pipeline stage for any 0 <= a < b <= len(layers).
    """

    name: str
    """Registry name, e.g. "resnet101"."""
    flavour: str
    """Size flavour, e.g. "tiny" or "full"."""
    layers: nn.Sequential
    """The model, as named children in execution order."""
    make_batch: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    """`make_batch(batch_size, seed=0, device="cpu") -> (inputs, targets)`; seeded, any batch size."""
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    """`loss_fn(outputs, targets) -> scalar`, averaged over the batch so micro-batches can be summed."""
    config: dict[str, Any] = field(default_factory=dict)
    """The flavour's settings after overrides (width, depth, image size...), recorded in plans."""

    granularity: int | None = 1
    """Module depth of the cut candidates (partition/capture/graph.py): 1, the designed layers above."""

    @property
    def module(self) -> nn.Module:
        """The whole model, as every strategy and the graph capture see it."""
        return self.layers

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def layer_names(self) -> list[str]:
        return [name for name, _ in self.layers.named_children()]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.layers.parameters())

    def stage(self, start: int, end: int) -> nn.Sequential:
        """Layers [start, end) as one module sharing the parameters of this model."""
        return self.layers[start:end]

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.layers(inputs)


def flatten_sequential(modules: list[tuple[str, nn.Module]]) -> nn.Sequential:
    """`nn.Sequential` from (name, module) pairs, keeping the names (dots become underscores)."""
    seq = nn.Sequential()
    for name, module in modules:
        seq.add_module(name.replace(".", "_"), module)
    return seq


def check_counts(model: str, config: dict[str, Any], *keys: str) -> None:
    """Settings that count something (depth, width, heads, classes...) are positive integers.

    `--set depth=abc`, `depth=1.5` or `depth=0` arrive here as given; without this check they fail deep
    in torch with a traceback, or build a model with no layers."""
    for key in keys:
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"{model} {key} must be a positive integer (got {value!r})")


class Built(NamedTuple):
    """What a model module's `build(config)` hands the registry, which adds name and flavour."""

    layers: nn.Sequential
    make_batch: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    config: dict[str, Any]
    """The settings actually used, with derived ones filled in (e.g. gpt's ffn)."""
