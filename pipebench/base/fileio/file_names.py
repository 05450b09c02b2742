"""Text as part of a file name: the results files', the plots' and the plans' names are made of a model's,
a machine's and a strategy's names, which may hold any character."""
from __future__ import annotations

import re

__all__ = ["slug"]


def slug(text: str, keep: str = "._+", strip: str = "-") -> str:
    """`text` as part of a file name, the same on every file system and shell: ASCII letters and digits and
    the characters of `keep` kept, every run of any other character one '-', then `strip`'s characters
    taken off both ends. 'convnet.py:ConvNet' -> 'convnet.py-ConvNet'; '2xNVIDIA H200' -> '2xNVIDIA-H200'.
    May be empty: the caller says what that means."""
    return re.sub(f"[^A-Za-z0-9{re.escape(keep)}]+", "-", text).strip(strip)
