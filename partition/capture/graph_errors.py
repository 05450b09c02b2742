"""Why a model cannot be captured or cut into stages, said in one line that names the user's failing line.

torch.export and torch.fx fail with pages of graph and traceback; pipebench says what failed, where in the
user's code (the deepest frame outside torch and this package), and, for a branch met in a known library
version, what to do about it. Every error here is a ``GraphError`` (a ``ValueError``); the command line
turns it into a ``UserError``."""
from __future__ import annotations

import os
import traceback

import torch
import torch.nn as nn

__all__ = ["GraphError", "CaptureError", "InputError", "TooFewCandidates", "SplitError", "error_line", "user_frame",
           "export_error"]


class GraphError(ValueError):
    """A model cannot be captured / split as asked. The message is one line."""

    def __init__(self, message: str):
        super().__init__(_one_line(message))


class CaptureError(GraphError):
    """torch.export cannot capture the forward (data-dependent control flow, unsupported op)."""


class InputError(GraphError):
    """The model's own forward rejects the example input."""


class TooFewCandidates(GraphError):
    """Fewer places to cut than the stages requested."""


class SplitError(GraphError):
    """The model cannot be split where asked."""


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_line(exc: BaseException) -> str:
    """The first line of the error that is not blank (its type when it has none): torch.export's messages
    run to pages."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


_TORCH_DIR = os.path.dirname(torch.__file__)
_PARTITION_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame(exc: BaseException) -> str:
    """`file:line `code`` of the deepest traceback frame outside torch (the user's failing line)."""
    best = None
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for fs in traceback.extract_tb(e.__traceback__):
            path = os.path.abspath(fs.filename)
            if path.startswith(_TORCH_DIR + os.sep) or path.startswith(_PARTITION_DIR + os.sep):
                continue
            if "/contextlib.py" in path or "/functools.py" in path:
                continue
            best = fs
        e = e.__cause__ or e.__context__
    if best is None:
        return ""
    code = f" `{best.line.strip()}`" if best.line else ""
    return f" (at {os.path.basename(best.filename)}:{best.lineno} in {best.name}{code})"


_KNOWN_BRANCHES = {  # a data-dependent branch met in a library's model: what to do about it
    "self.layerdrop": "transformers before 5.23 draws LayerDrop's random number in training even at layerdrop 0 "
                      "(BART, Whisper and the models built like them); use transformers 5.23 or newer",
    "skip_the_layer": "transformers before 5.23 draws LayerDrop's random number in training even at layerdrop 0 "
                      "(wav2vec2 and the models built like it); use transformers 5.23 or newer",
}


def export_error(module: nn.Module, e: BaseException) -> CaptureError:
    cause = e.__cause__ if (e.__cause__ is not None and "cannot capture your model" in str(e)) else e
    where = user_frame(cause)
    name = type(getattr(module, "wrapped", module)).__name__  # a model in models/hugging_face.py's view: its own
    known = next((fix for code, fix in _KNOWN_BRANCHES.items() if code in where), None)
    if known:  # what to do first: the line is cut at 400 characters
        return CaptureError(f"torch.export cannot capture {name}{where}: {known} ({type(cause).__name__}: "
                            f"{error_line(cause)})")
    return CaptureError(f"torch.export cannot capture {name}: {type(cause).__name__}: {error_line(cause)}{where}; "
                        "make the forward free of data-dependent Python control flow (use torch.where/torch.cond, "
                        "no .item()/bool() of tensors) or split the model by hand")
