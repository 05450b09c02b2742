"""The hybrid's rule of copies (no torch): the devices that hold two or more copies of one pipeline.

Its registry entry (bench/strategies Strategy.replicas), its price, its Job and its Trainer all ask here,
so that each refuses the same device counts in the same words.
"""
from __future__ import annotations

__all__ = ["copies_error"]


def copies_error(devices: int, stages: int) -> str | None:
    """Why `devices` do not hold two or more copies of a `stages`-device pipeline, or None."""
    if devices < 2 * stages or devices % stages:
        return (f"needs {2 * stages} or more devices, a multiple of {stages} ({stages} pipeline stages x 2 or more "
                f"replicas): {devices} do not make 2 or more copies of a {stages}-device pipeline")
    return None
