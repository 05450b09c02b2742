"""What the profiler measured, as plain data, and its JSON file.

No torch here: a saved profile plans on a machine without GPUs (`pipebench plan --profile FILE`).

File format (version 1), one JSON object:

    {
      "format": "pipebench-profile",
      "version": 1,
      "profiles": [                      # one entry per micro-batch size that was measured
        {
          "model": "resnet101", "flavour": "full", "config": {...},
          "device": "cuda:0", "device_name": "NVIDIA H200", "torch_version": "2.11.0+cu130",
          "batch": 256,                  # the global batch the plan is for
          "micro_batch": 32,             # samples per forward/backward measured below
          "repeats": 5, "warmup": 2,     # timings: mean of `repeats` back-to-back runs after `warmup` runs
          "input_shape": [32, 3, 224, 224], "input_dtype": "float32",
          "layers": [
            {"name": "conv1", "params": 9408, "param_bytes": 37632,
             "forward_ms": 0.21, "backward_ms": 0.43,   # one micro-batch, synchronised
             "output_bytes": 51380224,                   # what crosses a cut after this layer
             "output_shape": [32, 64, 112, 112], "output_dtype": "float32",
             "saved_bytes": 19267584},                   # activations kept for backward
            ...
          ]
        }
      ]
    }
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["ProfileError", "LayerProfile", "Profile", "save_profiles", "load_profiles"]

FORMAT = "pipebench-profile"
VERSION = 1


class ProfileError(ValueError):
    """A profile file that is missing, unreadable or malformed; the message names the field."""


@dataclass
class LayerProfile:
    name: str
    params: int
    param_bytes: int
    forward_ms: float
    backward_ms: float
    output_bytes: int
    output_shape: list[int]
    output_dtype: str
    saved_bytes: int
    backward_input_ms: float | None = None
    """The backward split as zero-bubble schedules run it: I, the input gradient (torch's
    stage_backward_input), and W, the weight gradient from what I kept (stage_backward_weight). Together
    they cost more than one backward (W walks the graph again). None in profiles made before they were
    measured, or where torch lacks the functions; the simulator then assumes a split."""
    backward_weight_ms: float | None = None

    @property
    def step_ms(self) -> float:
        """Forward plus backward of one micro-batch: the cost the solver balances."""
        return self.forward_ms + self.backward_ms


@dataclass
class Profile:
    model: str
    flavour: str
    device: str
    device_name: str
    torch_version: str
    batch: int
    micro_batch: int
    repeats: int
    warmup: int
    input_shape: list[int]
    input_dtype: str
    layers: list[LayerProfile]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def micro_batches(self) -> int:
        return self.batch // self.micro_batch

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str = "profile") -> "Profile":
        values = _check_fields(cls, data, where, skip={"layers"})
        layers = data.get("layers")
        if not isinstance(layers, list) or not layers:
            raise ProfileError(f"{where}.layers: expected a non-empty list")
        values["layers"] = [
            LayerProfile(**_check_fields(LayerProfile, layer, f"{where}.layers[{i}]"))
            for i, layer in enumerate(layers)
        ]
        profile = cls(**values)
        if profile.micro_batch < 1 or profile.batch % profile.micro_batch:
            raise ProfileError(f"{where}.micro_batch: {profile.micro_batch} does not divide batch {profile.batch}")
        return profile


def save_profiles(profiles: list[Profile], path: str | Path) -> None:
    """Write profiles (one per micro-batch size) to `path` in the format of the module docstring."""
    write_json(path, {"format": FORMAT, "version": VERSION, "profiles": [p.to_dict() for p in profiles]})


def write_json(path: str | Path, data: Any) -> None:
    """Write JSON through a temporary file, so a crash never leaves a half-written file behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def load_profiles(path: str | Path) -> list[Profile]:
    """Read a profile file, naming the first field that is missing or wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ProfileError(f"{path}: not a pipebench profile (field 'format' should be {FORMAT!r})")
    if data.get("version") != VERSION:
        raise ProfileError(f"{path}: profile version {data.get('version')!r} is not supported (expected {VERSION})")
    entries = data.get("profiles")
    if not isinstance(entries, list) or not entries:
        raise ProfileError(f"{path}: field 'profiles' should be a non-empty list")
    profiles = [Profile.from_dict(entry, f"{path}: profiles[{i}]") for i, entry in enumerate(entries)]
    first = profiles[0]
    for i, other in enumerate(profiles[1:], 1):
        if (other.model, other.batch, len(other.layers)) != (first.model, first.batch, len(first.layers)):
            raise ProfileError(f"{path}: profiles[{i}] is for another model or batch than profiles[0]")
    return profiles


_TYPES = {int: (int,), float: (int, float), str: (str,), list: (list,), dict: (dict,)}


def _check_fields(cls, data: Any, where: str, skip: set[str] = frozenset()) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected an object")
    values = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        optional = f.type.endswith("| None")  # measured in later versions: may be missing or null
        if f.name not in data or (optional and data[f.name] is None):
            if f.default_factory is not dict and not optional:  # only `config` and those may be left out
                raise ProfileError(f"{where}: missing field {f.name!r}")
            continue
        value = data[f.name]
        base = f.type.removesuffix(" | None")
        kind = {"int": int, "float": float, "str": str}.get(base) or (list if base.startswith("list") else dict)
        if isinstance(value, bool) or not isinstance(value, _TYPES[kind]):
            raise ProfileError(f"{where}.{f.name}: expected {kind.__name__}, got {value!r}")
        if kind in (int, float) and value < 0:
            raise ProfileError(f"{where}.{f.name}: must be >= 0, got {value!r}")
        values[f.name] = value
    return values
