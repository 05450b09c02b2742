"""The profile cache: one measured micro-batch size of one model, kept in the user's cache folder.

Profiling is the slow part of every answer (minutes for a large model), and `plan`, `advise` and `run`
on the same model, batch, precision and device measure the same thing. Each profiled size is kept as
one file, named by a hash of everything that changes its figures, all of it known from what was asked,
before anything is built (request_identity): a cached answer builds no model, imports no model file and
no torch, and starts no CUDA.

- the model: a zoo name with its flavour and settings, or a file's content (FILE.py:NAME,
  package.module:NAME) with NAME and its settings, and the versions of the model libraries installed
  (transformers, timm, torchvision); a module object given from Python has no stable identity and is
  never cached;
- the device's name (NVML's for a GPU) and type, and on the CPU the threads it was timed with;
- the precision and optimizer, the torch and pipebench versions, and a hash of the code that builds
  models and measures them (partition/, models/), so a changed profiler never serves old figures;
- the global batch, the micro-batch size, the repeats, warm-up and granularity.

Beside the profiles: the link figures timed between a set of devices (links/), and what takes long to
work out from a profile again (`keep`, e.g. accelerate's cuts, device-map/).

The file holds that key beside the profile; an entry that does not parse, or whose key differs, is
stale: it is measured again, never trusted. `--fresh` (or `fresh=True`) measures again and replaces
the entries. The folder: $PIPEBENCH_CACHE, else $XDG_CACHE_HOME/pipebench, else ~/.cache/pipebench;
PIPEBENCH_CACHE=off turns the cache off (the tests do, so that each measures). With it off,
PIPEBENCH_LINK_CACHE, a folder, still keeps the link figures (`link_cache`).
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from pipebench.base.errors import UserError
from pipebench.base.fileio.files import replace_file, shown
from pipebench.partition.profiling.profile_record import Profile

__all__ = ["ProfileCache", "cache_folder", "cache_enabled", "check_cache_folders", "link_cache", "code_fingerprint", "request_identity", "device_label",
           "torch_version", "file_digest", "library_versions"]

FORMAT = "pipebench-profile-cache"
VERSION = 3
"""Raised when what a cached figure means changes (2: CPU profiles at the machine's unloaded speed; 3: a
CPU profile's whole step is the fastest of seconds of steps)."""


def cache_folder() -> Path:
    """Where cached profiles live (see the module docstring)."""
    if os.environ.get("PIPEBENCH_CACHE"):
        return Path(os.environ["PIPEBENCH_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "pipebench"


def cache_enabled() -> bool:
    return os.environ.get("PIPEBENCH_CACHE", "").lower() not in ("off", "0", "no", "false")


def check_cache_folders() -> None:
    """Refuse, before any work, a cache folder (the profile cache's, PIPEBENCH_LINK_CACHE) that cannot be
    found, is a file, or lies below one: every entry written there would fail, and the cache would be
    silently unused."""
    named = []
    if cache_enabled():
        named.append(("PIPEBENCH_CACHE", cache_folder, " (or set PIPEBENCH_CACHE=off)"))
    if os.environ.get("PIPEBENCH_LINK_CACHE"):
        named.append(("PIPEBENCH_LINK_CACHE", lambda: Path(os.environ["PIPEBENCH_LINK_CACHE"]).expanduser(), ""))
    for name, where_given, or_else in named:
        fix = f"point {name} at a folder{or_else}"
        try:
            folder = where_given()
        except RuntimeError as exc:  # a ~user that does not exist, no home folder
            raise UserError(f"{name}: the cache folder cannot be found ({exc}); {fix}") from None
        try:
            existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
        except OSError as exc:  # a name too long, a loop of links
            raise UserError(f"{name} {shown(folder)} is not a folder this system can use "
                            f"({exc.strerror or exc}); {fix}") from None
        if existing is not None and not existing.is_dir():
            where = "is" if existing == folder else f"lies below {shown(existing)}, which is"
            source = name if os.environ.get(name) else "the cache folder"
            raise UserError(f"{source} {shown(folder)} {where} a file, not a folder; {fix}")


def link_cache() -> "ProfileCache | None":
    """Where the link figures are kept while the profile cache is off: the folder $PIPEBENCH_LINK_CACHE
    (None when unset). The tests set it: each test profiles its model afresh, while the machine's own
    figures (gloo, the cores' sharing, the runtimes: seconds of processes to time) are timed once a
    session."""
    folder = os.environ.get("PIPEBENCH_LINK_CACHE")
    return ProfileCache(folder) if folder and not cache_enabled() else None


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the source of the packages that build and measure models: a profile made by other code
    is another profile."""
    root = Path(__file__).resolve().parents[2]  # the repository (or site-packages/pipebench)
    digest = hashlib.sha256()
    for folder in ("partition", "models"):
        for path in sorted((root / folder).rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def file_digest(path: str | os.PathLike | None) -> str | None:
    """A hash of the file's content; None when there is none to read (a FIFO is not waited on: files.read_bytes)."""
    from pipebench.base.fileio.files import read_bytes

    try:
        return hashlib.sha256(read_bytes(path, kind="model")).hexdigest()[:16] if path else None
    except (OSError, UserError):
        return None


class ProfileCache:
    """Cached profiles in `folder`, one file per (model identity, size, device, training) key."""

    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else cache_folder()

    @staticmethod
    def key(identity: dict[str, Any], *, micro_batch: int, **fields: Any) -> dict[str, Any]:
        """The full key of one size: the model's identity and everything else that changes its figures."""
        from pipebench.base.version import __version__

        return {"model": identity, "micro_batch": micro_batch, **fields, "pipebench": __version__,
                "code": code_fingerprint()}

    @staticmethod
    def profile_id(key: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]

    def _path(self, key: dict[str, Any], kind: str = "profiles") -> Path:
        return self.folder / kind / f"{self.profile_id(key)}.json"

    def _read(self, key: dict[str, Any], kind: str = "profiles") -> dict | None:
        """The payload kept under `key`; None when there is none, or its file is stale or corrupt."""
        path = self._path(key, kind)
        try:
            if not path.is_file() or path.stat().st_size > 64 << 20:
                return None
            data = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            return None
        if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") == VERSION):
            return None
        if json.dumps(data.get("key"), sort_keys=True, default=str) != json.dumps(key, sort_keys=True, default=str):
            return None
        return data

    def _write(self, key: dict[str, Any], kind: str = "profiles", **payload: Any) -> None:
        """Keep `payload` under `key`, atomically, in a new file (replace_file: a link planted in a shared
        cache is replaced, its target untouched); a cache that cannot be written is only not kept."""
        try:
            replace_file(self._path(key, kind), json.dumps({"format": FORMAT, "version": VERSION, "key": key,
                                                             **payload}, indent=1, allow_nan=False) + "\n")
        except OSError:
            pass

    def get(self, key: dict[str, Any]) -> Profile | None:
        """The cached profile of `key`; None when there is none, or when its file is stale or corrupt."""
        data = self._read(key)
        if data is None:
            return None
        try:
            profile = Profile.from_dict(data.get("profile"), where=str(self._path(key)))
        except (ValueError, TypeError, RecursionError):  # ProfileError is a ValueError
            return None
        profile.profile_id = self.profile_id(key)
        return profile

    def put(self, key: dict[str, Any], profile: Profile) -> None:
        """Keep `profile` under `key`; an interpolated profile is no measurement (ValueError)."""
        if profile.interpolated_from:
            raise ValueError(f"an interpolated profile (micro-batch {profile.micro_batch}) is not kept as measured")
        profile.profile_id = self.profile_id(key)
        self._write(key, profile=profile.to_dict())

    def get_links(self, key: dict[str, Any]) -> dict[str, float | None] | None:
        """The link figures timed between these devices (see `put_links`); None when not kept."""
        data = self._read(key, "links")
        links = data.get("links") if data else None
        if not isinstance(links, dict) or set(links) != set(LINK_FIELDS):
            return None
        if not all(v is None or (isinstance(v, (int, float)) and 0 < v < 1e9) for v in links.values()):
            return None
        return links

    def put_links(self, key: dict[str, Any], links: dict[str, float | None]) -> None:
        """Keep the link figures of one set of devices: timing them starts processes (gloo) or a NCCL
        group, seconds that a cached answer would otherwise spend on every call."""
        self._write(key, "links", links={k: links.get(k) for k in LINK_FIELDS})

    def default_flavour(self, zoo: str) -> str | None:
        """The flavour zoo model `zoo` builds when none is named, as learnt when it was last built
        (`learn_flavour`); None before. Knowing it takes the registry, which imports torch."""
        flavour = self.recall("flavours", {"zoo": zoo, "code": code_fingerprint()})
        return flavour if isinstance(flavour, str) else None

    def learn_flavour(self, zoo: str, flavour: str) -> None:
        """Keep the flavour `zoo` builds by default, so that a request that names none and one that names
        it (run does) are one key."""
        self.keep("flavours", {"zoo": zoo, "code": code_fingerprint()}, flavour)

    def recall(self, kind: str, key: dict[str, Any]) -> Any:
        """What `keep` kept under `kind` and `key` (JSON data; the caller checks its shape); None when
        nothing was, or its file is stale or corrupt."""
        data = self._read(key, kind)
        return data.get("value") if data else None

    def keep(self, kind: str, key: dict[str, Any], value: Any) -> None:
        """Keep `value`, JSON data derived from a profile that takes long to work out again (accelerate's
        cuts, which build the model: bench/strategies/devicemap/), under `kind` and `key`."""
        self._write(key, kind, value=value)


LINK_FIELDS = ("link_gbps", "allreduce_gbps", "link_latency_ms", "collective_ms", "core_contention", "action_ms",
               "fsdp_layer_ms", "ddp_ms", "ddp_layer_ms", "machine_drift", "gather_gbps", "scatter_gbps")


def request_identity(model: Any, *, flavour: str | None = None, settings: dict[str, Any] | None = None,
                     data_dir: str | None = None) -> dict[str, Any] | None:
    """What names a model's figures across processes and days, from what was asked alone: nothing is
    built or imported, so a cached answer never waits for the model. A zoo name with its flavour (when none
    is named, its default once learnt: ProfileCache.default_flavour) and settings (its code is in
    code_fingerprint); FILE.py:NAME or package.module:NAME by the file's content,
    NAME and settings; the model libraries installed beside either. None for an object (a module from
    Python has no stable identity) or a file that cannot be read."""
    if not isinstance(model, str):
        return None
    asked = json.loads(json.dumps({"settings": settings or {}, "data_dir": data_dir}, sort_keys=True, default=str))
    where, colon, name = model.rpartition(":")
    if not colon:
        flavour = flavour if flavour is not None else ProfileCache().default_flavour(model)
        return {"zoo": model, "flavour": flavour, **asked, "libraries": library_versions()}
    digest = file_digest(where if where.endswith(".py") else _module_file(where))
    if digest is None:
        return None
    return {"file": digest, "name": name, **asked, "libraries": library_versions()}


def _module_file(dotted: str) -> str | None:
    """Where package.module lives: found along sys.path without importing it or its packages, else (a
    package installed through its own finder, as editable installs are) by importlib, which imports the
    packages above it but not the module."""
    import importlib.util
    from importlib.machinery import PathFinder

    parts, search, spec = dotted.split("."), None, None
    for depth in range(1, len(parts) + 1):
        spec = PathFinder.find_spec(".".join(parts[:depth]), search)
        search = spec.submodule_search_locations if spec is not None else None
        if spec is None or (depth < len(parts) and search is None):
            break
    else:
        return spec.origin
    try:
        spec = importlib.util.find_spec(dotted)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec else None


def device_label(device: str) -> str:
    """The device's model, as the key names it: NVML's name for a GPU (no CUDA context is made, which
    would take seconds), CUDA's where NVML cannot tell; the processor on the CPU. device: 'cpu' or 'cuda:N'."""
    if device.startswith("cuda"):
        from pipebench.hardware.gpus import gpu_name

        index = int(device.partition(":")[2] or 0)
        named = gpu_name(index)
        if named is not None:
            return named
        import torch

        return torch.cuda.get_device_name(index)
    from pipebench.hardware.cpu import cpu_name

    return cpu_name()


@lru_cache(maxsize=1)
def torch_version() -> str:
    """torch's version as torch says it (a build suffix such as +cu130 included), read from its
    version.py without importing torch, which takes seconds; else what pip recorded."""
    import importlib.metadata
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec("torch")
        text = Path(spec.submodule_search_locations[0], "version.py").read_text()
        return re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M).group(1)
    except (AttributeError, ImportError, OSError, TypeError, IndexError):
        return importlib.metadata.version("torch")


def library_versions(names: Sequence[str] = ("transformers", "timm", "torchvision")) -> dict[str, str]:
    """Versions of the libraries installed among `names` (by default those that models come from: a
    model of theirs changes with them, and its file names only the builder). Read from their metadata:
    none is imported."""
    import importlib.metadata

    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found
