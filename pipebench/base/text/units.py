"""Byte sizes, counts and seconds, read and written in one place.

`parse_size` reads what a user types (--max-memory 20GiB), `env_seconds` a time limit set in the
environment ($PIPEBENCH_IMPORT_SECONDS); `format_bytes`, `format_gib` and `format_count` write sizes for
tables and messages. Nothing here imports torch or pandas.
"""
from __future__ import annotations

import os
import re

from pipebench.base.errors import UserError
from pipebench.base.text.parse import ascii_float

__all__ = ["KIB", "MIB", "GIB", "parse_size", "env_seconds", "format_bytes", "format_gib", "format_count"]

KIB, MIB, GIB = 2**10, 2**20, 2**30

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": KIB, "mib": MIB, "gib": GIB, "tib": 2**40}


MAX_SIZE = 2**60
"""The largest size read (1 EiB): beyond it a size is a typo, and 1e999 is infinity, which no count of
bytes is."""


def parse_size(text: str, option: str | None = None) -> int:
    """'20GiB' -> 21474836480; '512MB' -> 512000000; a bare number is bytes; case and spaces do not matter.
    ASCII digits only, and at most MAX_SIZE. `option` (--max-memory) begins the message of a refusal."""
    said = f"{option}: " if option else ""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", text, re.ASCII)
    if not match or match.group(2).lower() not in _UNITS:
        raise UserError(f"{said}cannot read memory size {text[:40]!r}; write it like 20GiB, 512MB or 1e9")
    size = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not size <= MAX_SIZE:  # also infinity
        raise UserError(f"{said}memory size {text[:40]!r} is too large (at most {MAX_SIZE // 2**60} EiB)")
    return int(size)


def env_seconds(name: str, default: float, most: float) -> float:
    """$`name` as seconds, or `default` where it is not set (UserError unless a number above 0, below `most`,
    in ASCII digits as the options are: float() would also read '\u0662' or '1_0')."""
    text = os.environ.get(name)
    if text is None:
        return default
    seconds = ascii_float(text)
    if not 0 < seconds < most:
        raise UserError(f"{name}={text!r} should be a number of seconds above 0 and below {most:g}")
    return seconds


def format_bytes(value: float) -> str:
    """1.50 GiB, 12.00 MiB, 512 B: for messages and tables."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def format_gib(value: float) -> str:
    """Bytes as GiB with no unit, for columns headed "GiB": one decimal where that shows the size
    (42949672960 -> '40.0'), three significant digits below 0.1 GiB, so that a tiny model's memory reads
    '0.0568', not '0.0'."""
    gib = value / GIB
    return f"{gib:.3g}" if 0 < abs(gib) < 0.1 else f"{gib:.1f}"


def format_count(n: int) -> str:
    """Parameter counts: 1.23B, 45.60M, 7.00K, or the number itself below a thousand."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)
