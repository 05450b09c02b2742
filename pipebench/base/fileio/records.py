"""JSON records read back as typed, checked values: `loads` (bounded numbers and depth) and `record`, a
dataclass filled from a JSON object with every field checked against its annotation, an error naming the
file and the field in one line. Every file format here (profiles, plans, jobs, results) reads through
them (pipebench/base/fileio/files.py `read_json`); the Python API checks its arguments with `check` too.
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
import types
import typing
from typing import Any, TypeVar

from pipebench.base.errors import UserError

__all__ = ["loads", "record", "check", "depth", "short", "MAX_DEPTH", "MAX_DIGITS"]

T = TypeVar("T")

MAX_DEPTH = 100
"""JSON nested deeper than this is refused on reading: no pipebench file nests beyond a few levels, and
deeper values overflow Python's stack later (json.dumps, dataclasses.asdict) with a RecursionError."""


MAX_DIGITS = 30
"""The longest integer read from JSON: no count or byte size of ours comes near 10**30, and Python refuses
to read integers of more than 4,300 digits with a ValueError, after quadratic work."""


def loads(text: str) -> Any:
    """json.loads with bounded numbers: an integer of more than MAX_DIGITS digits, or a number beyond
    float's range (1e400, which would read as infinity), is a ValueError that says which."""
    return json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float)


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"an integer of {len(text.lstrip('-')):,} digits")
    return int(text)


def _bounded_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"the number {text[:30]} is beyond any measurement")
    return value


def depth(data: Any) -> int:
    """How deeply lists and objects nest in `data` (0 for a plain value), walked without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return deepest


def record(cls: type[T], data: Any, where: str, *, error: type[UserError] = UserError,
           may_miss: typing.Iterable[str] | None = None, unknown: str = "error", nonnegative: bool = False) -> T:
    """`cls(**data)` for a dataclass, each field checked against its annotation first.

    may_miss: fields that may be absent (default: those with a default). unknown: "error" or "ignore"
    for keys that are not fields. nonnegative: numbers must be >= 0 (measurements). Nested dataclasses
    and lists of them are checked the same way; every number must be finite; an int is not a bool."""
    if not isinstance(data, dict):
        raise error(f"{where}: expected an object, got {short(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    if unknown == "error":
        extra = sorted(set(data) - set(fields))
        if extra:
            raise error(f"{where}: unknown field {extra[0]!r}")
    if may_miss is None:
        may_miss = {n for n, f in fields.items()
                    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING}
    values = {}
    for name in fields:
        if name not in data:
            if name not in may_miss:
                raise error(f"{where}: missing field {name!r}")
            continue
        try:
            values[name] = _checked(hints[name], data[name], nonnegative, error, f"{where}.{name}")
        except _Wrong as exc:
            raise error(f"{where}.{name}: {exc}") from None
    try:
        return cls(**values)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, UserError):
            raise
        raise error(f"{where}: {exc}") from None


def check(kind: Any, value: Any, where: str, *, error: type[UserError] = UserError) -> Any:
    """`value` as the plain Python type the annotation `kind` names (numpy numbers become int or float),
    or `error` saying where and what was wrong."""
    try:
        return _checked(kind, value, False, error, where)
    except _Wrong as exc:
        raise error(f"{where}: {exc}") from None


class _Wrong(Exception):
    """A value that does not fit its annotation; `record` adds where it was."""


def _checked(kind: Any, value: Any, nonnegative: bool, error, where: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        for option in inner[:-1]:  # e.g. int | str: the first that fits
            try:
                return _checked(option, value, nonnegative, error, where)
            except _Wrong:
                pass
        return _checked(inner[-1], value, nonnegative, error, where)
    if kind is Any:
        return value
    if dataclasses.is_dataclass(kind):
        if isinstance(value, kind):  # already made (and checked by its own __post_init__)
            return value
        return record(kind, value, where, error=error, nonnegative=nonnegative)
    if kind is bool:
        if isinstance(value, bool):
            return value
    elif kind is str:
        if isinstance(value, str):
            return value
    elif kind in (int, float):
        integral = isinstance(value, numbers.Integral)
        if not isinstance(value, bool) and (integral or (kind is float and isinstance(value, numbers.Real))):
            if not math.isfinite(value):
                raise _Wrong(f"expected a finite number, got {value!r}")
            if nonnegative and value < 0:
                raise _Wrong(f"must be >= 0, got {value!r}")
            return int(value) if kind is int else float(value)
    elif origin is list or kind is list:
        if isinstance(value, list):
            item = args[0] if args else Any
            return [_checked(item, v, nonnegative, error, f"{where}[{i}]") for i, v in enumerate(value)]
    elif origin is dict or kind is dict:
        if isinstance(value, dict):
            return value
    else:  # pragma: no cover - a field type this table lacks
        raise AssertionError(f"no check for field type {kind!r}")
    name = getattr(kind, "__name__", str(kind))
    raise _Wrong(f"expected {'a list' if name == 'list' else name}, got {short(value)}")


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
