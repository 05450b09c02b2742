"""The model zoo: every model by name and size flavour, as a `LayeredModel` that may be cut anywhere.

    >>> model = get_model("gpt", "tiny", depth=3)   # embed + 3 blocks + norm + head = 6 layers
    >>> inputs, targets = model.make_batch(4, seed=0)
    >>> loss = model.loss_fn(model.forward(inputs), targets)

Weights depend only on (name, flavour, overrides, seed) and the device type they are built on, so
every process of a pipeline builds the same model. `device="meta"` builds without memory, which
is how parameter counts of large flavours are taken.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from pipebench.models import convnet, gpt, mlp, mnist, resnet, vit
from pipebench.models.base import Built, LayeredModel
from pipebench.models.imports import check_fits_in_memory
from pipebench.models.source import ModelSource, UserModel, check_settings, load_user_model
from pipebench.base.errors import UserError
from pipebench.model_spec import is_user_model

__all__ = ["LayeredModel", "ModelInfo", "UnknownModelError", "UserModel", "get_model", "is_user_model", "list_models", "model_names"]


class UnknownModelError(UserError):
    """No model is registered under that name."""


@dataclass(frozen=True)
class ModelInfo:
    """What `pipebench models` lists about one model."""

    name: str
    description: str
    """One line."""
    flavours: list[str]
    default_flavour: str


@dataclass(frozen=True)
class _Entry:
    info: ModelInfo
    flavours: dict[str, dict[str, Any]]
    build: Callable[[dict[str, Any]], Built]
    real_data: Callable[[str], Callable[..., tuple[torch.Tensor, torch.Tensor]]] | None = None
    """Makes `make_batch` from a `data_dir`, for models that can train on a real data set."""


def _entry(name: str, description: str, flavours: dict, default_flavour: str, build, real_data=None) -> _Entry:
    info = ModelInfo(name, description, list(flavours), default_flavour)
    return _Entry(info, flavours, build, real_data)


_REGISTRY: dict[str, _Entry] = {
    entry.info.name: entry
    for entry in [
        _entry("convnet", convnet.DESCRIPTION, convnet.FLAVOURS, convnet.DEFAULT_FLAVOUR, convnet.build, mnist.mnist_batches),
        _entry("mlp", mlp.DESCRIPTION, mlp.FLAVOURS, mlp.DEFAULT_FLAVOUR, mlp.build),
        *[
            _entry(name, resnet.description(name), resnet.FLAVOURS, resnet.DEFAULT_FLAVOUR, functools.partial(resnet.build, name))
            for name in resnet.BLOCKS
        ],
        _entry("vit_b_16", vit.DESCRIPTION, vit.FLAVOURS, vit.DEFAULT_FLAVOUR, vit.build),
        _entry("gpt", gpt.DESCRIPTION, gpt.FLAVOURS, gpt.DEFAULT_FLAVOUR, gpt.build),
    ]
}


def model_names() -> list[str]:
    return sorted(_REGISTRY)


def list_models() -> list[ModelInfo]:
    return [_REGISTRY[name].info for name in model_names()]


@contextlib.contextmanager
def _seeded_rng(seed: int, device: torch.device | None) -> Iterator[None]:
    """Seed torch's global RNG (CPU and the target GPU) for the build, restoring it afterwards."""
    cuda_devices = []
    if device is not None and device.type == "cuda":
        cuda_devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=cuda_devices):
        torch.manual_seed(seed)
        yield


def get_model(
    name: str,
    flavour: str | None = None,
    *,
    device: torch.device | str | None = None,
    seed: int = 0,
    data_dir: str | None = None,
    **overrides: Any,
) -> LayeredModel:
    """Build model `name` in `flavour` (None: its full-size default) with weights seeded by `seed`.

    `device` builds the parameters directly there ("meta" allocates nothing); `overrides` replace
    settings of the flavour (e.g. depth=3); `data_dir` makes `make_batch` serve real data (convnet:
    MNIST) instead of synthetic batches.

    A name with a colon is a model of your own, `path/to/file.py:NAME` or `package.module:NAME`
    (models/source.py); its settings are ModelSource's: input_shape, input_dtype, num_classes,
    token_range, loss, granularity. It comes back as a UserModel, which strategies train alike.
    """
    if is_user_model(name):  # path/to/file.py:NAME or package.module:NAME, settings = how to feed it
        if flavour:
            raise UserError(f"{name}: a model of your own has no flavours (got --flavour {flavour})")
        if data_dir is not None:
            raise UserError(f"{name}: --data-dir works only with the zoo's convnet; define make_batch in your file")
        check_settings(overrides, name)
        model = load_user_model(ModelSource(name, **overrides), seed=seed, device=device)
        return model
    entry = _REGISTRY.get(name)
    if entry is None:
        raise UnknownModelError(f"unknown model {name!r}; choose one of: {', '.join(model_names())}")
    flavour = entry.info.default_flavour if flavour is None else flavour
    if flavour not in entry.flavours:
        raise UserError(f"unknown flavour {flavour!r} for model {name!r}; choose one of: {', '.join(entry.flavours)}")
    config = dict(entry.flavours[flavour])
    unknown = sorted(set(overrides) - set(config))
    if unknown:
        raise UserError(
            f"unknown setting(s) {', '.join(unknown)} for model {name!r}; valid settings: {', '.join(config)}"
        )
    config.update(overrides)

    real_batches = None
    if data_dir is not None:
        if entry.real_data is None:
            with_data = [n for n in model_names() if _REGISTRY[n].real_data is not None]
            raise UserError(f"model {name!r} has no real data set; data_dir works only with: {', '.join(with_data)}")
        real_batches = entry.real_data(data_dir)

    device = torch.device(device) if device is not None else None
    on_device = device if device is not None else contextlib.nullcontext()
    check_fits_in_memory(lambda: entry.build(config), f"model {name!r} ({flavour})", device)
    with _seeded_rng(seed, device), on_device:
        built = entry.build(config)
    make_batch = real_batches if real_batches is not None else built.make_batch
    return LayeredModel(name, flavour, built.layers, make_batch, built.loss_fn, built.config)
