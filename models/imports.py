"""A user's model found by its name, `path/to/file.py:NAME` or `package.module:NAME`, and built.

A file is imported as Python runs a script: its folder goes first on sys.path, so that it imports the files
beside it (`from my_layers import Block`). Every process that builds the model (the parent, and each worker,
which imports it again from the same name) does the same. Whatever the user's code raises, on import or
on build, comes back as one UserError line.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pipebench.errors import UserError, first_line

__all__ = ["import_target", "build", "raised", "where"]


def import_target(target: str) -> tuple[dict[str, Any], str]:
    """(the namespace of the file or module `target` names, the NAME in it)."""
    where_, sep, name = target.rpartition(":")
    if not sep or not where_ or not name.isidentifier():
        raise UserError(f"--model {target!r}: write it as path/to/file.py:NAME or package.module:NAME")
    if where_.endswith(".py"):
        path = Path(where_)
        if not path.is_file():
            raise UserError(f"{target}: no such file {where_}")
        return vars(_import_file(path.resolve(), target)), name
    try:
        loaded = importlib.import_module(where_)
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise UserError(f"{target}: cannot import {where_}: {raised(exc)}") from None
    return vars(loaded), name


def _import_file(path: Path, target: str):
    """The file as a module of its own name (one per path), its folder first on sys.path as for a script."""
    module_name = f"pipebench_user_{abs(hash(str(path)))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(module_name, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's file: what it raised, in one line
        del sys.modules[module_name]
        raise UserError(f"{target}: importing {path} failed: {raised(exc)}") from None
    return loaded


def raised(exc: BaseException) -> str:
    """What a user's code raised, in one line; sys.exit() and exit() in a model file too, which would
    otherwise end pipebench with no word."""
    if isinstance(exc, SystemExit):
        return f"it calls sys.exit({exc.code!r}) or exit() when imported; a model file must only define things"
    return f"{type(exc).__name__}: {first_line(exc)}"


def where(target: str) -> str:
    return target.rpartition(":")[0]


def build(factory: Any, target: str, device) -> nn.Module:
    """The module `factory` (a class or a function of no arguments) makes, built on `device`."""
    if isinstance(factory, nn.Module):
        raise UserError(f"{target}: is a module instance; name its class or a function that returns one, so "
                        "that every worker process can build it")
    if not callable(factory):
        raise UserError(f"{target}: is a {type(factory).__name__}, not an nn.Module class or a function")
    required = [p.name for p in parameters(factory) if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        raise UserError(f"{target}: needs argument(s) {', '.join(required)}; pipebench builds it with none (write a "
                        "function without arguments that returns the module)")
    context = torch.device(device) if device is not None else contextlib.nullcontext()
    try:
        with context:
            module = factory()
    except (Exception, SystemExit) as exc:  # noqa: BLE001
        raise UserError(f"{target}: building it failed: {raised(exc)}") from None
    if not isinstance(module, nn.Module):
        raise UserError(f"{target}: returned a {type(module).__name__}, not an nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise UserError(f"{target}: has no parameters that require grad; there is nothing to train")
    return module


def parameters(function) -> list[inspect.Parameter]:
    """`function`'s parameters, a method's `self` left out; none where Python cannot say."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    params = list(signature.parameters.values())
    return params[1:] if params and params[0].name == "self" else params
