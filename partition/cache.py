"""The profile cache: one measured micro-batch size of one model, kept in the user's cache folder.

Profiling is the slow part of every answer (minutes for a large model), and `plan`, `advise` and `run`
on the same model, batch, precision and device measure the same thing. Each profiled size is kept as
one file, named by a hash of everything that changes its figures:

- the model: a zoo name with its flavour and settings, or a file's content (FILE.py:NAME,
  package.module:NAME) with its settings; a module object given from Python has no stable identity and
  is never cached;
- the device's name and type, and on the CPU the threads it was timed with;
- the precision and optimizer, the torch and pipebench versions, and a hash of the code that builds
  models and measures them (partition/, models/), so a changed profiler never serves old figures;
- the global batch, the micro-batch size, the repeats, warm-up and granularity.

The file holds that key beside the profile; an entry that does not parse, or whose key differs, is
stale: it is measured again, never trusted. `--fresh` (or `fresh=True`) measures again and replaces
the entries. The folder: $PIPEBENCH_CACHE, else $XDG_CACHE_HOME/pipebench, else ~/.cache/pipebench;
PIPEBENCH_CACHE=off turns the cache off (the tests do, so that each measures).
"""
from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipebench.files import write_json
from pipebench.partition.profile import Profile

__all__ = ["ProfileCache", "cache_folder", "cache_enabled", "code_fingerprint", "model_identity"]

FORMAT = "pipebench-profile-cache"
VERSION = 1


def cache_folder() -> Path:
    """Where cached profiles live (see the module docstring)."""
    if os.environ.get("PIPEBENCH_CACHE"):
        return Path(os.environ["PIPEBENCH_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "pipebench"


def cache_enabled() -> bool:
    return os.environ.get("PIPEBENCH_CACHE", "").lower() not in ("off", "0", "no", "false")


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the source of the packages that build and measure models: a profile made by other code
    is another profile."""
    root = Path(__file__).resolve().parent.parent  # the repository (or site-packages/pipebench)
    digest = hashlib.sha256()
    for folder in ("partition", "models"):
        for path in sorted((root / folder).glob("*.py")):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _file_digest(path: str | os.PathLike | None) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] if path else None
    except OSError:
        return None


class ProfileCache:
    """Cached profiles in `folder`, one file per (model identity, size, device, training) key."""

    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else cache_folder()

    @staticmethod
    def key(identity: dict[str, Any], *, micro_batch: int, **fields: Any) -> dict[str, Any]:
        """The full key of one size: the model's identity and everything else that changes its figures."""
        from pipebench.version import __version__

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
        """Keep `payload` under `key`, atomically; a cache that cannot be written is only not kept."""
        try:
            write_json(self._path(key, kind), {"format": FORMAT, "version": VERSION, "key": key, **payload})
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
        """Keep `profile` under `key`."""
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


LINK_FIELDS = ("link_gbps", "allreduce_gbps", "link_latency_ms")


def model_identity(model: Any) -> dict[str, Any] | None:
    """What names a model's figures across processes and days, or None when nothing stable does (a
    module object from Python). model: a LayeredModel (the zoo) or a UserModel (models/source.py)."""
    source = getattr(model, "source", None)
    config = json.loads(json.dumps(getattr(model, "config", {}) or {}, sort_keys=True, default=str))
    if source is None:  # the zoo: its code is in code_fingerprint
        return {"zoo": model.name, "flavour": model.flavour, "config": config}
    target = str(getattr(source, "target", ""))
    if target.startswith("python:") or ":" not in target:
        return None
    where, _, name = target.rpartition(":")
    if where.endswith(".py"):
        digest = _file_digest(where)
    else:
        import importlib.util

        try:
            spec = importlib.util.find_spec(where)
        except (ImportError, ValueError):
            spec = None
        digest = _file_digest(spec.origin if spec else None)
    if digest is None:
        return None
    return {"file": digest, "name": name, "config": config, "libraries": _library_versions()}


def _library_versions() -> dict[str, str]:
    """Versions of the model libraries loaded (transformers, timm, torchvision): a model of theirs
    changes with them, and its file names only the builder."""
    import sys

    return {name: str(getattr(sys.modules[name], "__version__", "?"))
            for name in ("transformers", "timm", "torchvision") if name in sys.modules}
