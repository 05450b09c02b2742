"""What a user gives, read into checked values: counts, numbers, micro-batch counts, GPU choices, speed
factors, KEY=VALUE settings, typed on the command line or passed as Python values through the API.

One strict parser per kind of value, used by every option of every command: `parse_int` (ASCII digits
only: `int()` would also take other scripts' digits such as '١٢', and '+1' or '1_0'; '²' passes
`str.isdigit()` and then fails `int()`), `parse_number`
(finite, within bounds), `parse_micro_batches`, `parse_gpus`; byte sizes such as 20GiB are
pipebench.base.text.units.parse_size.
The API's keywords are checked by the same rules and bounds (`count_of`, `number_of`, `option_of`: an int
that is not a bool, a finite real), and a micro-batch count by one rule wherever it is given
(`micro_batches_error`: --micro-batches, a Request's micro_batches, RunOptions.micro_batches).
Every bound is named here (`LIMITS`): a count beyond it is a typo, and taking it would only fail later with
an OverflowError or an allocation of exabytes.

Every function here checks its value and raises `pipebench.base.errors.UserError` (or a subclass) with a one-line
message naming the option and the fix; the command line prints it and exits 2. Nothing here touches a GPU:
`parse_gpus("auto:2")` only says "the 2 freest", and hardware.gpus.choose_gpus picks them.
"""
from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any, Literal, NamedTuple

from pipebench.base.errors import UserError
from pipebench.base.errors import DeviceError

__all__ = ["LIMITS", "MAX_MICRO_BATCHES", "AutoGpus", "parse_int", "parse_number", "parse_option", "count_of",
           "number_of", "option_of", "ascii_float", "micro_batches_error", "parse_micro_batches", "parse_gpus",
           "parse_device", "parse_speeds", "speeds_error", "parse_link_gbps", "parse_override"]

LIMITS: dict[str, tuple[float, float]] = {
    "batch": (1, 2**24),          # 16.7M samples: far beyond any step that fits in memory
    "stages": (1, 1024),
    "cpu_processes": (1, 1024),   # run's and train's; plan's and advise's devices are --stages
    "steps": (1, 10**6),          # run's timed steps per case, and train's optimizer steps
    "epochs": (1, 10**6),         # train's passes over the data, each a step at least: --steps' bound
    "save_every": (1, 10**6),     # train's steps between checkpoints: --steps' bound
    "log_every": (0, 10**6),      # train's steps between log lines (0: none): --steps' bound
    "nodes": (1, 1024),           # machines a train job written for torchrun spans
    "warmup": (0, 10**6),
    "rounds": (1, 1000),
    "repeats": (1, 1000),
    "virtual_stages": (1, 64),
    "granularity": (1, 64),
    "num_classes": (1, 2**24),
    "token_range": (1, 2**31),
    "timeout": (1e-3, 1e7),       # seconds: 115 days
    "min_seconds": (0.0, 86400.0),  # a day of timed steps per case
    "loader_workers": (0, 64),    # DataLoader processes per worker: 5000 forks hundreds and hangs
    "lr": (1e-38, 1e38),          # positive, within float32 (to 3.4e38, beyond which it overflows): a diverging rate is a run to record
}
"""Option (argparse's dest) -> the (lowest, highest) value it takes; a float bound makes it a number."""
MAX_MICRO_BATCHES = 2**16
"""The most micro-batches `--micro-batches` takes."""
MAX_GPUS = 1024
"""`--gpus auto:N` and GPU ids stay below this."""
SETTING_RANGE = (-2**31, 2**31)
"""An integer `--set` value (depth, width...) lies within this."""
MAX_DEPTH = 512
"""`--set depth` (blocks of gpt and vit, hidden layers of mlp) takes at most this: each block is a layer or
two to build, capture and time, so a deeper model is minutes of building and profiling before any answer.
The solver takes thousands of layers in milliseconds; profiling is what grows."""

_DIGITS = re.compile(r"-?[0-9]{1,30}")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity|nan)", re.I)


def ascii_float(text: str) -> float:
    """A number written in ASCII (float() also reads other scripts' digits and '1_0'); NaN when it is not
    one. Every number a user types, an option's or an environment variable's (units.env_seconds), is read here."""
    return float(text) if _NUMBER.fullmatch(str(text).strip()) else math.nan


def parse_int(text: str, option: str, low: int, high: int) -> int:
    """`text` as an integer from `low` to `high`, in ASCII digits (an optional leading '-')."""
    text = str(text).strip()
    if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
        what = "a positive integer" if low == 1 else "an integer" if low < 0 else f"an integer from {low}"
        raise UserError(f"{option} takes {what} up to {high:,} (got {text[:40]!r})")
    return int(text)


def parse_number(text: str, option: str, low: float, high: float) -> float:
    """`text` as a finite decimal number from `low` to `high` (no NaN, no infinities, ASCII digits)."""
    text = str(text).strip()
    value = ascii_float(text)
    if not low <= value <= high:  # also NaN
        raise UserError(f"{option} takes a number from {low:g} to {high:g} (got {text[:40]!r})")
    return value


def parse_option(name: str, text: str) -> int | float:
    """The value of option `name` (a key of LIMITS, e.g. "batch" for --batch) from its text."""
    low, high = LIMITS[name]
    option = "--" + name.replace("_", "-")
    if isinstance(high, float):
        return parse_number(text, option, low, high)
    return parse_int(text, option, low, high)


# ----------------------------------------------------------------------------- values given through the API

def _count_error(value: Any, name: str, low: int = 1, high: int | None = None) -> str | None:
    """Why `value` is not an integer from `low` to `high` (count_of's rule), or None."""
    if high is None and name in LIMITS:
        high = int(LIMITS[name][1])
    what = "a positive integer" if low == 1 else f"an integer from {low}"
    if isinstance(value, bool) or not isinstance(value, Integral):
        return f"{name} takes {what} (got {type(value).__name__} {value!r:.40})"
    if value < low:
        return f"{name} takes {what} (got {value})"
    if high is not None and value > high:
        return f"{name} takes {what} up to {high:,} (got {str(value)[:40]})"
    return None


def count_of(value: Any, name: str, low: int = 1, high: int | None = None) -> int:
    """`value` as an integer of at least `low` (an int, not a bool, a float or text), else UserError; at
    most `high`, or the CLI's bound for the option of that name (LIMITS) where there is one: the API
    refuses what the command line refuses (stages=10**6 would be minutes of building a million-device plan)."""
    if (why := _count_error(value, name, low, high)) is not None:
        raise UserError(why)
    return int(value)


def number_of(value: Any, name: str, low: float = 0.0, above: bool = False) -> float:
    """`value` as a finite real number of at least `low` (more than it where `above`), else UserError."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise UserError(f"{name} takes a number (got {type(value).__name__} {value!r:.40})")
    value = float(value)
    if not math.isfinite(value) or value < low or (above and value == low):
        raise UserError(f"{name} takes a finite number {'above' if above else 'of at least'} {low:g} "
                        f"(got {value!r})")
    return value


def option_of(value: Any, name: str) -> int | float:
    """The value of option `name` (a key of LIMITS) given as a Python value rather than text (`pipebench.run`'s
    keywords): parse_option's bounds, a count by count_of, a number as a real within them (NaN and the
    infinities refused)."""
    low, high = LIMITS[name]
    if not isinstance(high, float):
        return count_of(value, name, int(low))
    if isinstance(value, bool) or not isinstance(value, Real):
        raise UserError(f"{name} takes a number from {low:g} to {high:g} (got {type(value).__name__} {value!r:.40})")
    return parse_number(repr(float(value)), name, low, high)


# ------------------------------------------------------------------------------------------ micro-batches

def micro_batches_error(count: Any) -> str | None:
    """Why `count` is not a micro-batch count, an integer (not a bool) from 1 to MAX_MICRO_BATCHES, or None:
    the one rule of --micro-batches (parse_micro_batches), a Request's micro_batches and
    RunOptions.micro_batches, each of which says it in its own terms."""
    return _count_error(count, "micro_batches", high=MAX_MICRO_BATCHES)


def parse_micro_batches(text: str, *, single: bool = False) -> list[int | None]:
    """`--micro-batches`: 'auto' -> [None]; '4' -> [4]; '2,4,auto' -> [2, 4, None], each count once; `single`
    (plan): exactly one count, or auto."""
    counts: list[int | None] = []
    for part in str(text).split(","):
        part = part.strip()
        if part != "auto" and not (re.fullmatch(r"[0-9]{1,30}", part) and micro_batches_error(int(part)) is None):
            what = "a positive integer or auto" if single else "positive integers and/or auto, comma-separated"
            raise UserError(f"--micro-batches takes {what}, counts up to {MAX_MICRO_BATCHES:,} (got {text[:40]!r})")
        counts.append(None if part == "auto" else int(part))
    counts = list(dict.fromkeys(counts))  # '--micro-batches auto,auto' is one case, not two
    if single and len(counts) != 1:
        raise UserError(f"--micro-batches takes one count or auto here (got {text[:40]!r})")
    return counts


# ------------------------------------------------------------------------------------------------- GPUs

class AutoGpus(NamedTuple):
    """`--gpus auto:N`: the N freest GPUs at the time they are chosen."""

    count: int


def parse_gpus(text: str) -> list[int] | AutoGpus:
    """'0,1' -> [0, 1] (CUDA ordinals, within CUDA_VISIBLE_DEVICES); 'auto:2' -> AutoGpus(2).

    Rejects empty, negative, repeated or non-numeric ids, and auto without a positive count."""
    if text.startswith("auto"):
        head, _, n = text.partition(":")
        if head != "auto" or not re.fullmatch(r"[0-9]{1,30}", n):
            raise DeviceError(f"--gpus auto:N takes a number of GPUs, e.g. auto:2 (got {text[:40]!r})")
        if int(n) < 1:
            raise DeviceError(f"auto:N takes N >= 1 (got {int(n)})")
        try:
            return AutoGpus(parse_int(n, "--gpus auto:N", 1, MAX_GPUS))
        except UserError as exc:
            raise DeviceError(str(exc)) from None
    parts = [part.strip() for part in text.split(",") if part.strip() != ""]
    if any(part.startswith("-") and part[1:].isdigit() for part in parts):
        raise DeviceError(f"GPU ids are >= 0 (got {text!r})")
    # ASCII digits only: int() would also take '+1', '1_0' or other scripts' digits.
    if not all(re.fullmatch(r"[0-9]{1,4}", part) for part in parts):
        raise DeviceError(f"--gpus takes comma-separated GPU ids such as 0,1 (got {text[:40]!r})")
    ids = [int(part) for part in parts]
    if not ids:
        raise DeviceError(f"--gpus names no GPU (got {text!r})")
    if len(set(ids)) != len(ids):
        raise DeviceError(f"--gpus names a GPU twice (got {text!r}); use --stages to put several stages on one device")
    return ids


# ---------------------------------------------------------------------------------------------- options

def parse_device(text: str, option: str = "--device") -> str:
    """`plan --device`, and each of a Request's devices: cpu, cuda or cuda:N, the devices pipebench
    profiles on; anything else ('tpu:0', 'cuda:-1') is refused here in one line rather than by torch,
    deep in profiling, or never (a plan from saved profiles touches no device)."""
    if not isinstance(text, str) or not re.fullmatch(r"cpu|cuda(:[0-9]+)?", text):
        raise UserError(f"{option} takes cpu, cuda or cuda:N (got {text!r:.40})")
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
    speeds = [ascii_float(part) for part in text.split(",")]
    if not all(_NUMBER.fullmatch(part.strip()) for part in text.split(",")):
        raise UserError(f"--speeds takes auto or comma-separated positive numbers (got {text[:40]!r})")
    if len(speeds) != n or not all(s > 0 for s in speeds):  # `not all(> 0)` also refuses NaN
        raise UserError(f"--speeds needs one positive factor per device ({n}), got {text!r}")
    if (why := speeds_error(speeds)) is not None:
        raise UserError(f"--speeds {why} (got {text!r})")
    return speeds


def speeds_error(speeds: list[float]) -> str | None:
    """Why positive speed factors are out of SPEED_RANGE (None where they are within it): the one rule,
    which `--speeds` and the Request (every plan's speeds, the API's too) both ask."""
    low, high = 1 / SPEED_RANGE, SPEED_RANGE
    if not all(low <= s <= high for s in speeds) or max(speeds) > SPEED_RANGE * min(speeds):
        return f"factors lie between {low:g} and {high:g} and within {high:g}x of each other"
    return None


def parse_link_gbps(text: str | None) -> float | None:
    """`plan --link-gbps`: None (measure it), 0 (transfers are not priced) or a finite number of GB/s of at
    least 0.001 (a slower link would price a cut in hours, and NaN or a negative price no cut at all)."""
    if text is None:
        return None
    gbps = ascii_float(text)
    if not (gbps == 0 or 1e-3 <= gbps < math.inf):
        raise UserError(f"--link-gbps takes 0 (transfers not priced) or GB/s from 0.001 up (got {text!r})")
    return gbps


def parse_override(text: str) -> tuple[str, int | float | str]:
    """`--set KEY=VALUE`: ('depth', 8) from 'depth=8'; the value is an int (ASCII digits, within
    SETTING_RANGE, and depth within MAX_DEPTH), else a finite float, else the text."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UserError(f"--set takes KEY=VALUE (got {text[:40]!r})")
    if _DIGITS.fullmatch(value.strip()):
        number = parse_int(value, f"--set {key}", *SETTING_RANGE)
        if key == "depth" and number > MAX_DEPTH:
            raise UserError(f"--set depth={number}: pipebench plans models of at most {MAX_DEPTH} blocks")
        return key, number
    if _NUMBER.fullmatch(value.strip()):
        return key, parse_number(value, f"--set {key}", -1e300, 1e300)  # a finite float
    return key, value
