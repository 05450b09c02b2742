"""Which model is profiled, and how its batches and loss are made: one value, `ModelSpec`, checked once.

Beside the Request (what is asked of the devices), the model side of a profile: a registry name, a
`FILE.py:NAME` or `package.module:NAME` with its flavour, settings and data folder, or an nn.Module
object with the example batch its batches are made like and its loss. `pipebench.profile`, `plan` and
`advise` build one from their keywords and a run's case from its own fields; the ProfilingSession
(partition/profile_session.py) takes it whole.

Nothing here imports torch: whether `model` is an nn.Module is asked only once torch is loaded (an
object of one exists only then), so a cached profile of a named model loads none.
"""
from __future__ import annotations

import inspect
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pipebench.base.errors import UserError
from pipebench.base.fileio.files import as_path, not_empty

__all__ = ["ModelSpec", "absolute_target", "check_settings_dict", "class_source", "is_module", "is_user_model"]


def absolute_target(target: str) -> str:
    """`path/to/file.py:NAME` with its path absolute, any other target as it is: workers start elsewhere,
    and the user's own code (a --data function's os.chdir) may move the folder a relative path meant."""
    file, sep, name = target.rpartition(":")
    return f"{Path(file).resolve()}:{name}" if sep and file.endswith(".py") else target


def is_user_model(name: str) -> bool:
    """Whether a model name (`--model`, a case's, a profile's) names a model of your own, `file.py:NAME` or
    `package.module:NAME`, not the zoo's (whose names have no colon). Here beside ModelSpec, not in models/,
    which imports torch: the command line asks before any model is built."""
    return ":" in name


def class_source(cls: type) -> str:
    """Where a class is defined, as a model file's target names it: `/abs/file.py:Qualname`, or
    `module:Qualname` for a module with no file (`python -c`, a notebook). What a profile of an nn.Module
    object records (Profile.model_class) and check_profiled compares: two classes called Net are two models."""
    try:
        file = inspect.getfile(cls)
    except (TypeError, OSError):  # a module with no file
        return f"{cls.__module__}:{cls.__qualname__}"
    return f"{Path(file).resolve()}:{cls.__qualname__}"


def is_module(model: Any) -> bool:
    """Whether `model` is an nn.Module object; one exists only once torch is imported, so asking imports none."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def check_settings_dict(settings: Any, name: str = "settings") -> None:
    """Refuse settings that are not a dict keyed by setting names, in one line naming `name` (a ModelSpec's
    settings, train's overrides): a list of pairs or a dict keyed by 1 is a TypeError of get_model's **."""
    if not isinstance(settings, dict):
        raise UserError(f"{name} takes a dict such as {{'loss': 'mse'}}, got a {type(settings).__name__}")
    if names := [key for key in settings if not isinstance(key, str)]:
        raise UserError(f"{name} takes a dict such as {{'loss': 'mse'}} keyed by setting names, got the key "
                        f"{names[0]!r:.40}")


@dataclass(frozen=True)
class ModelSpec:
    """The model to profile and what makes its batches and loss (pipebench.profile documents each)."""

    model: Any
    """A registry name, FILE.py:NAME, package.module:NAME, an nn.Module object or a built LayeredModel."""
    flavour: str | None = None
    """The zoo's size flavour ("tiny", ...); None: the zoo's default."""
    settings: dict[str, Any] | None = None
    """The model's settings (--set): the zoo's overrides, or a model file's input_shape, loss, ..."""
    data_dir: str | None = None
    """A folder of real data for the models that read one (mnist); refused when made unless it is a folder."""
    example_inputs: Any = None
    """An nn.Module object's example batch, of any size: its batches are made like it."""
    loss_fn: Callable[[Any, Any], Any] | None = None
    """An nn.Module object's loss_fn(outputs, targets); None: the settings' loss."""

    def __post_init__(self) -> None:
        module = is_module(self.model)
        if self.loss_fn is not None and not module:
            raise UserError("loss_fn is for an nn.Module object; a model named by FILE.py:NAME defines loss_fn in its "
                            "file")
        if self.loss_fn is not None and not callable(self.loss_fn):
            raise UserError(f"loss_fn takes a function loss_fn(outputs, targets), got a {type(self.loss_fn).__name__}")
        if self.example_inputs is not None and not module:  # it would be ignored: the model makes its own batches
            raise UserError("example_inputs is for an nn.Module object; a zoo model or FILE.py:NAME makes its own "
                            "batches (make_batch, --input-shape)")
        if self.data_dir is not None:  # the one home of the rule: a folder (RunOptions and --data-dir ask it here)
            folder = as_path(self.data_dir, "data_dir")
            not_empty(self.data_dir, "data_dir")  # Path("") would be the working folder
            if not folder.is_dir():
                raise UserError(f"data_dir {self.data_dir}: {'not a folder' if folder.exists() else 'no such folder'}")
            object.__setattr__(self, "data_dir", str(folder))
        if self.settings is not None:
            check_settings_dict(self.settings)

    @property
    def name(self) -> str:
        """What the model is called in notes and the cache: a built model's name, else what was given."""
        return getattr(self.model, "name", self.model)

    def check_profiled(self, profile: Any, names: tuple[str, str] = ("model", "flavour"),
                       said: Callable[[str, Any], str] = lambda key, value: f"settings {key}={value}") -> None:
        """Refuse a model, flavour or setting given beside saved profiles that is not what `profile` (their
        first) records, in one line naming both: planned from them, what was asked would not be the model
        planned. What is not given (None) is the profile's own. `names`: what the caller calls the model and
        the flavour, `said(key, value)`: a setting (`pipebench plan --profile`: --model, --flavour, --set
        KEY=VALUE or --input-shape VALUE). A model file's is its absolute path, as the profile records it; an
        nn.Module object's is its class (`_is_profiled_class`)."""
        from pipebench.partition.profiling.profile_record import model_label

        option, flavour_option = names
        if is_module(self.model):
            cls = type(self.model)
            if not _is_profiled_class(cls, profile):
                raise UserError(f"{option} {cls.__module__}.{cls.__qualname__} does not match the profile's model "
                                f"{profile.model_class or profile.model}")
        elif self.model is not None:
            model = self.name
            if (absolute_target(model) if isinstance(model, str) else model) != profile.model:
                raise UserError(f"{option} {model} does not match the profile's model {profile.model}")
        label = model_label(profile.model, profile.flavour)
        if self.flavour is not None and self.flavour != profile.flavour:
            raise UserError(f"{flavour_option} {self.flavour} does not match the profile's {profile.flavour}"
                            if profile.flavour else f"{flavour_option} {self.flavour}: the profile's {label} is a "
                            "model of your own, which has no flavours")
        for key, value in (self.settings or {}).items():
            if value is None:  # None asks for the default, which the profile records resolved
                continue
            if key not in profile.config:
                known = ", ".join(map(str, profile.config)) or "none recorded"
                raise UserError(f"{said(key, value)}: the profile's {label} has no setting {key} (its settings: "
                                f"{known})")
            given, recorded = (json.loads(json.dumps(v, default=str)) for v in (value, profile.config[key]))
            if given != recorded:
                raise UserError(f"{said(key, given)} does not match the profile's {key}={recorded}")


def _is_profiled_class(cls: type, profile: Any) -> bool:
    """Whether an nn.Module object of class `cls` is the model `profile` records: an object's profile records
    where its class is defined (class_source), a model file's FILE.py:NAME or package.module:NAME names it
    (an object of that class is that model); a profile of an object made before classes were recorded holds
    only its class's name, compared as it is."""
    if profile.model_class is not None:
        return class_source(cls) == profile.model_class
    if is_user_model(profile.model):
        return profile.model in (class_source(cls), f"{cls.__module__}:{cls.__qualname__}")
    return cls.__name__ == profile.model
