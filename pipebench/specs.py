"""What a user types, read into values: micro-batch counts, GPU choices, speed factors, KEY=VALUE settings.

Every function here checks its text and raises `pipebench.errors.UserError` (or a subclass) with a one-line
message naming the option and the fix; the command line prints it and exits 2. Nothing here touches a GPU:
`parse_gpus("auto:2")` only says "the 2 freest", and hardware.gpus.choose_gpus picks them.
(Byte sizes such as 20GiB are read by pipebench.units.parse_size.)
"""
from __future__ import annotations

import math
import re
from typing import Literal, NamedTuple

from pipebench.errors import UserError
from pipebench.errors import DeviceError

__all__ = ["AUTO_CHUNK_COUNTS", "AutoGpus", "parse_chunk", "parse_chunks", "micro_batch_counts", "parse_gpus",
           "parse_device", "parse_speeds", "parse_link_gbps", "parse_override", "virtual_stages"]

AUTO_CHUNK_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""The micro-batch counts `--chunks auto` considers (those that split the batch)."""


# ------------------------------------------------------------------------------------------ micro-batches

def parse_chunk(text: str) -> int | None:
    """`plan --chunks`: one positive count, or 'auto' -> None (the planner picks)."""
    if text == "auto":
        return None
    if not re.fullmatch(r"[1-9][0-9]*", text):
        raise UserError(f"--chunks takes a positive integer or auto (got {text!r})")
    return int(text)


def parse_chunks(text: str) -> list[int | None]:
    """`run --chunks`: 'auto' -> [None]; '4' -> [4]; '2,4,auto' -> [2, 4, None]."""
    counts: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part == "auto":
            counts.append(None)
        elif part.isdigit() and int(part) > 0:
            counts.append(int(part))
        else:
            raise UserError(f"--chunks takes positive integers and/or auto, comma-separated (got {text!r})")
    return counts


def micro_batch_counts(chunks: int | None, batch: int) -> list[int]:
    """The micro-batch counts to profile for `batch`: the one asked for, or (None, auto) the powers of two
    up to 64 that split the batch into equal micro-batches."""
    if chunks is None:
        return [m for m in AUTO_CHUNK_COUNTS if m <= batch and batch % m == 0]
    if batch % chunks:
        raise UserError(f"batch {batch} does not split into {chunks} equal micro-batches")
    return [chunks]


# ------------------------------------------------------------------------------------------------- GPUs

class AutoGpus(NamedTuple):
    """`--gpus auto:N`: the N freest GPUs at the time they are chosen."""

    count: int


def parse_gpus(text: str) -> list[int] | AutoGpus:
    """'0,1' -> [0, 1] (CUDA ordinals, within CUDA_VISIBLE_DEVICES); 'auto:2' -> AutoGpus(2).

    Rejects empty, negative, repeated or non-numeric ids, and auto without a positive count."""
    if text.startswith("auto"):
        _, _, n = text.partition(":")
        if not n.isdigit():
            raise DeviceError(f"--gpus auto:N takes a number of GPUs, e.g. auto:2 (got {text!r})")
        if int(n) < 1:
            raise DeviceError(f"auto:N takes N >= 1 (got {int(n)})")
        return AutoGpus(int(n))
    parts = [part.strip() for part in text.split(",") if part.strip() != ""]
    if any(part.startswith("-") and part[1:].isdigit() for part in parts):
        raise DeviceError(f"GPU ids are >= 0 (got {text!r})")
    # ASCII digits only: int() would also take '+1', '1_0' or other scripts' digits.
    if not all(re.fullmatch(r"[0-9]+", part) for part in parts):
        raise DeviceError(f"--gpus takes comma-separated GPU ids such as 0,1 (got {text!r})")
    ids = [int(part) for part in parts]
    if not ids:
        raise DeviceError(f"--gpus names no GPU (got {text!r})")
    if len(set(ids)) != len(ids):
        raise DeviceError(f"--gpus names a GPU twice (got {text!r}); use --stages to put several stages on one device")
    return ids


# ---------------------------------------------------------------------------------------------- options

def parse_device(text: str) -> str:
    """`plan --device`: cpu, cuda or cuda:N, the devices pipebench profiles on; anything else is refused
    here in one line rather than by torch, deep in profiling."""
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", text):
        raise UserError(f"--device takes cpu, cuda or cuda:N (got {text!r})")
    return text


SPEED_RANGE = 1e3
"""Speed factors lie within [1/SPEED_RANGE, SPEED_RANGE] and within SPEED_RANGE x of each other: GPUs a
thousand times apart do not share a pipeline, and factors beyond that (1e-300, inf) only break the
solver's arithmetic."""


def parse_speeds(text: str | None, n: int) -> list[float] | Literal["auto"] | None:
    """`--speeds`: None (all equal) -> None; 'auto' -> 'auto' (the caller probes the GPUs); else one
    positive factor per device, e.g. '1,0.5' for n = 2 (NaN, infinities and factors beyond SPEED_RANGE
    are refused)."""
    if text is None or text == "auto":
        return text
    try:
        speeds = [float(part) for part in text.split(",")]
    except ValueError:
        raise UserError(f"--speeds takes auto or comma-separated positive numbers (got {text!r})") from None
    if len(speeds) != n or not all(s > 0 for s in speeds):  # `not all(> 0)` also refuses NaN
        raise UserError(f"--speeds needs one positive factor per device ({n}), got {text!r}")
    low, high = 1 / SPEED_RANGE, SPEED_RANGE
    if not all(low <= s <= high for s in speeds) or max(speeds) > SPEED_RANGE * min(speeds):
        raise UserError(f"--speeds factors lie between {low:g} and {high:g} and within {high:g}x of each other "
                        f"(got {text!r})")
    return speeds


def parse_link_gbps(text: str | None) -> float | None:
    """`plan --link-gbps`: None (measure it), 0 (transfers are not priced) or a finite number of GB/s of at
    least 0.001 (a slower link would price a cut in hours, and NaN or a negative price no cut at all)."""
    if text is None:
        return None
    try:
        gbps = float(text)
    except ValueError:
        gbps = math.nan
    if not (gbps == 0 or 1e-3 <= gbps < math.inf):
        raise UserError(f"--link-gbps takes 0 (transfers not priced) or GB/s from 0.001 up (got {text!r})")
    return gbps


def parse_override(text: str) -> tuple[str, int | float | str]:
    """`--set KEY=VALUE`: ('depth', 8) from 'depth=8'; the value is an int, else a float, else the text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"--set takes KEY=VALUE (got {text!r})")
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


def virtual_stages(schedule: str, asked: int | None) -> int:
    """`--virtual-stages` for `schedule`: 1 for gpipe and 1f1b, 2 by default for the multi-stage schedules
    (exactly 2 for zbv)."""
    from pipebench.partition.schedule import get_schedule

    kind = get_schedule(schedule)
    if kind.stages_per_device == 1:
        if asked not in (None, 1):
            raise UserError(f"--virtual-stages {asked}: {schedule} runs one stage per device")
        return 1
    if asked is None:
        return kind.stages_per_device
    if kind.fixed_stages_per_device and asked != kind.stages_per_device:
        raise UserError(f"--virtual-stages {asked}: {schedule} runs exactly {kind.stages_per_device} stages per device")
    if asked < 1:
        raise UserError(f"--virtual-stages takes a positive integer (got {asked})")
    return asked
