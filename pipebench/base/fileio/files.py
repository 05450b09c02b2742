"""Files pipebench writes and reads: written atomically, read back as typed, checked records.

One home for what every file format here needs (profiles, plans, jobs, results, reports):
- `writable_file` / `writable_folder`: an output path checked before any work (not a folder or a file in
  the way, a name the file system takes, a folder it can create and write in), so a bad `--json` or
  `--out` is one line at the start rather than a traceback after minutes of profiling. A file's check
  creates nothing (`creatable_folder`); its folders are made when it is written.
- `write_text` / `write_json`: through a temporary file in the same folder, fsync, then `os.replace`,
  so that a reader or a crash sees the old file or the new one, never a mix. The temporary name is
  unique per call (random, created exclusively), so two writers, processes or threads, never share one.
- `read_json`: a versioned JSON object read back into a dataclass (pipebench/base/fileio/records.py `record`: every
  field checked against its annotation, an error that names the file and the field in one line).
- Files that are not regular files: a write never replaces them. A character device (/dev/null, a
  terminal), a FIFO with a reader, or a link into /dev or /proc (/dev/stdout, /proc/self/fd/1) is
  written through, as a shell's `>` would: what the user meant. A link to a regular file has its target
  replaced, and the link stays. Sockets and block devices are refused. A read (`read_text`) opens
  nothing but a regular file (a FIFO would wait for a writer, /dev/zero never ends) and reads at most
  MAX_READ bytes.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import uuid
from pathlib import Path
from typing import Any, Callable

from pipebench.base.errors import UserError
from pipebench.base.fileio.records import MAX_DEPTH, check, depth, loads, record, short  # noqa: F401 - check, record: re-exported

__all__ = ["as_path", "shown", "check_regular", "not_regular", "writable_file", "creatable_folder", "not_another_file", "json_of_format", "starts_with", "writable_folder", "not_empty", "write_text", "write_json", "replace_file",
           "read_text", "read_bytes", "loads", "read_json", "record", "check", "same_outputs"]



def writable_folder(path: str | Path, option: str, *, in_the_way: str = "name a folder") -> Path:
    """`path` as a folder this command can write into, created now: a file in the way, a name too long or a
    place where no folder can be made (/proc) is one line before any work. `in_the_way`: the fix that line
    gives for a file in the way (a folder the user did not name, such as a run's plans beside its results,
    says what to do instead). An empty path is refused: taken as the working folder, it would write there
    without the user having named it."""
    not_empty(path, option)
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{option} {shown(path)}: a file is in the way; {in_the_way}") from None
    except OSError as exc:
        raise UserError(f"{option} {shown(path)}: cannot create the folder ({exc.strerror or exc})") from None
    if not path.is_dir():  # a link to a file
        raise UserError(f"{option} {shown(path)}: a file is in the way; {in_the_way}")
    try:  # os.access says yes to root even where nothing can be made (/proc): make something
        probe = path / f".pipebench-probe-{uuid.uuid4().hex[:12]}"
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as exc:
        raise UserError(f"{option} {shown(path)}: the folder is not writable ({exc.strerror or exc})") from None
    return path


def creatable_folder(path: str | Path, option: str) -> Path:
    """`path` as a folder this command could create and write into, without creating it: for an output
    written only after later checks pass (train --write-job, and every output file's folder: writable_file),
    so that a refusal leaves nothing behind; the folder is made when its file is written (write_atomically).
    An existing folder is checked as writable_folder does; otherwise its nearest existing parent is (a link
    that leads nowhere counts as existing: no folder can be made through it)."""
    not_empty(path, option)
    path = Path(os.path.abspath(path))
    try:
        if path.exists() or path.is_symlink():
            return writable_folder(path, option)
        parent = path.parent
        while not (parent.exists() or parent.is_symlink()):
            parent = parent.parent
    except OSError as exc:  # a name too long for the file system
        raise UserError(f"{option} {shown(path)}: cannot create the folder ({exc.strerror or exc})") from None
    if not parent.is_dir():
        what = "a file" if parent.exists() else "a link that leads nowhere"
        raise UserError(f"{option} {shown(path)}: {shown(parent)} is {what}, not a folder")
    try:
        writable_folder(parent, option)
    except UserError as exc:  # said of the folder asked for, not only of the parent that refuses it
        raise UserError(f"{option} {shown(path)}: cannot create the folder ({exc})") from None
    return path


def not_empty(path: str | Path, option: str, *, name: str = "a folder", error: type[UserError] = UserError) -> None:
    """Refuse an empty path (`option`: the option or keyword that gave it; `name`: what to name instead):
    taken as the working folder, it names a place the user did not."""
    if str(path) == "":
        raise error(f"{option}: an empty path; name {name}")


def writable_file(path: str | Path, option: str, *, regular: bool = False) -> Path:
    """`path` as a file this command can write (atomically, `write_text`): not a folder, a name the file
    system takes, in a folder that can be created and written in; checked now, before any work, and nothing
    created (creatable_folder: the folders are made when the file is written, so a refusal leaves none). Returned
    absolute, so that a model file that changes the working folder when imported moves nothing. A special
    file is written through (see the module docstring): a socket or a block device is refused. `regular`:
    every special file is refused, for a file written again and again or read back (train's --save and
    --csv), which a FIFO would hang and a device would swallow."""
    as_path(path, option)  # a str or a Path (kept as given: a Path drops the trailing / said below)
    if str(path) == "":  # --save '': abspath would make it the working folder
        raise UserError(f"{option}: an empty path; name a file")
    if str(path).endswith(("/", os.sep)):  # 'out/': a folder, which abspath would make a file's name
        raise UserError(f"{option} {str(path)[:120]}: names a folder (it ends with /); name a file")
    path = Path(os.path.abspath(path))
    kind = _special(path)
    if kind is None and not os.path.exists(path) and any(_DESCRIPTOR.fullmatch(hop) for hop in _hops(path)):
        # /dev/stdout with stdout closed, /dev/fd/9: a FileNotFoundError traceback at the write, in /proc/<pid>/fd
        raise UserError(f"{option} {shown(path)}: leads to a file descriptor that is not open; name a file")
    if kind is not None:
        if regular:
            raise UserError(f"{option} {shown(path)}: is {kind}; {option} is written more than once or read back: "
                            "name a regular file")
        if kind in ("a socket", "a block device"):
            raise UserError(f"{option} {shown(path)}: is {kind}; name a file")
        if kind == "a stream" and _kernel_file(path):
            raise UserError(f"{option} {shown(path)}: is a file of the kernel's (in /proc or /sys), not an output; "
                            "name a file")
        if kind == "a FIFO":
            _hold_fifo(path, option)
        return path
    if len(os.fsencode(path.name)) + 18 > NAME_MAX:  # with the ".", ".<12 hex>.tmp" of write_text's temporary
        raise UserError(f"{option}: the file name is {len(path.name):,} characters; at most "
                        f"{NAME_MAX - 18} fit")
    try:
        folder = path.is_dir()
    except OSError as exc:  # a path longer than the system takes
        raise UserError(f"{option} {shown(path)}: {exc.strerror or exc}") from None
    if folder or path.name in ("", ".", ".."):
        raise UserError(f"{option} {shown(path)}: is a folder; name a file")
    creatable_folder(path.parent, option)
    return path


NAME_MAX = 255
"""The longest file name, in bytes, of the file systems pipebench writes to (ext4, xfs, tmpfs, APFS)."""


def not_another_file(path: str | Path | None, option: str, ours: Callable[[str], bool], what: str) -> None:
    """Refuse an output that already holds something other than what the command writes there (`ours`
    says which: a run's results, a profile, a user's own file would be replaced without a word). An empty
    file, and a file of the command's own kind, are its to write again; a special file is written through."""
    if path is None or not os.path.isfile(path) or os.path.getsize(path) == 0:
        return
    if not ours(str(path)):
        raise UserError(f"{option} {path}: holds something other than {what}, which would be replaced; name "
                        "another file or remove it")


def json_of_format(fmt: str | None, key: str = "format") -> Callable[[str], bool]:
    """Whether a file starts as pipebench's JSON of `fmt` does (`{"format": "pipebench-plan"`; `key` another
    first key, such as an engine export's "engine", and `fmt` None for any value of it): a bounded read of
    its first bytes, not a parse of the whole."""
    value = rb'"' + re.escape(fmt.encode()) + rb'"' if fmt is not None else rb'"'
    start = re.compile(rb'\s*\{\s*"' + re.escape(key.encode()) + rb'"\s*:\s*' + value)

    def ours(path: str) -> bool:
        try:
            with open(path, "rb") as file:
                return start.match(file.read(4096)) is not None
        except OSError:
            return False

    return ours


def starts_with(start: bytes) -> Callable[[str], bool]:
    """Whether a file starts with `start` (a report.md with "# pipebench report"): not_another_file's test for
    a file that is not JSON, a bounded read as json_of_format's."""
    def ours(path: str) -> bool:
        try:
            with open(path, "rb") as file:
                return file.read(len(start)) == start
        except OSError:
            return False

    return ours


def shown(path: Path) -> str:
    """A path for a message: shortened when a user gave thousands of characters."""
    text = str(path)
    return text if len(text) <= 120 else text[:60] + "..." + text[-40:]


def _special(path: Path) -> str | None:
    """What `path` is when a write must go through it rather than replace it: "a character device", "a
    FIFO", "a socket", "a block device", or "a stream" (a link into /dev or /proc to a regular file, such as
    /proc/self/fd/1 with stdout redirected to a file); None for a regular file, a link to one elsewhere
    (its target is replaced) or nothing yet."""
    try:
        mode = os.stat(path).st_mode
    except OSError:  # nothing there (or a dangling link, whose target is created)
        return None
    if stat.S_ISREG(mode):
        return "a stream" if _through_streams(path) else None
    if stat.S_ISDIR(mode):
        return None  # writable_file says it is a folder
    return _kind_of(mode)


def _through_streams(path: Path) -> bool:
    """Whether `path`, or a link on the way to its file, lies in /proc or /dev: a process's file descriptor
    (/dev/stdout, /proc/self/fd/1), whose file may be a deleted one or a shell's redirection, never a
    file to replace."""
    return any(hop.startswith(("/proc/", "/dev/")) for hop in _hops(path))


def _hops(path: Path) -> list[str]:
    """`path` made absolute, then each link's target on the way to its file."""
    hops = [os.path.abspath(path)]
    while os.path.islink(hops[-1]) and len(hops) < 40:  # the kernel's own limit of links followed
        hops.append(os.path.normpath(os.path.join(os.path.dirname(hops[-1]), os.readlink(hops[-1]))))
    return hops


_DESCRIPTOR = re.compile(r"/proc/(self|\d+)/fd/\d+|/dev/fd/\d+|/dev/std(in|out|err)")
"""A process's open file, as a path."""


def _kernel_file(path: Path) -> bool:
    """Whether the regular file `path` leads to lies in /proc or /sys other than through a process's file
    descriptor (/proc/self/status, /proc/sys/...): what a write there does is the kernel's, never an output."""
    real = os.path.realpath(path)
    if not real.startswith(("/proc/", "/sys/")):
        return False
    return not any(_DESCRIPTOR.fullmatch(hop) for hop in _hops(path))


def _own_descriptor(path: Path) -> int | None:
    """N where `path` leads through /proc/self/fd/N, /proc/<this pid>/fd/N or /dev/fd/N (/dev/stdout is
    the first): this process's own open file, written at its own offset, after what was printed."""
    for hop in _hops(path):
        parts = hop.split("/")
        if len(parts) == 5 and parts[1] == "proc" and parts[2] in ("self", str(os.getpid())) and parts[3] == "fd" \
                or len(parts) == 4 and parts[1:3] == ["dev", "fd"]:
            if parts[-1].isdigit():
                return int(parts[-1])
    return None


def as_path(path: Any, what: str, error: type[UserError] = UserError) -> Path:
    """`path` as a Path: a str or an os.PathLike, else one `error` line (the API's `load_profiles(123)`
    would otherwise be a TypeError from os); `what` names it ("the profile file")."""
    if isinstance(path, (str, os.PathLike)) and not isinstance(path, bytes):
        return Path(path)
    raise error(f"{what}'s path must be a str or a pathlib.Path, got {short(path)} ({type(path).__name__})")


def same_outputs(inputs: dict[str, str | Path | None], outputs: dict[str, str | Path | None]) -> None:
    """Refuse an output that names (after links) an input or another output, which the later write would
    silently replace, and an output onto Python source, after links too (a helper the model file imports,
    `from layers import Block`, would be replaced by JSON): each dict maps an option to its path (None: not
    given). Two inputs may name one file (train --model F.py:Net --data F.py:data): reading it twice replaces nothing.
    Standard streams and /dev/null may be named twice: what is written through them is not replaced."""
    seen: dict[str, str] = {}
    for option, path in {**inputs, **outputs}.items():
        if path is None:
            continue
        if _special(Path(path)) is not None:
            continue
        real = os.path.realpath(path)
        if real in seen and option in outputs:  # inputs come first: the second of two inputs is no write
            raise UserError(f"{seen[real]} and {option} name the same file {shown(Path(path))}; the second would "
                            "replace the first: give two names")
        seen.setdefault(real, option)
    for option, path in outputs.items():  # the file written, after links (link.json -> helper.py), not the name
        if path is None or _special(Path(path)) is not None:
            continue
        real = Path(os.path.realpath(path))
        if real.suffix == ".py" and real.exists():
            link = f" (a link to {shown(real)})" if Path(path).is_symlink() else ""
            raise UserError(f"{option} {shown(Path(path))}{link}: is Python source, which the output would "
                            "replace; name another file")


def write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` atomically and durably (fsync of the file and of its folder); through it
    where it is a special file (the module docstring). An error of the file system (a full disk) is an
    OSError, which the command line says in one line (bench/cli main)."""
    path = as_path(path, "the file")
    kind = _special(path)
    if kind is not None:
        return _write_through(path, text, kind)
    real = Path(os.path.realpath(path))
    if real.is_dir():  # os.replace's IsADirectoryError, where the API's Plan.save or save_profiles named a folder
        raise UserError(f"{shown(path)}: is a folder; name a file")
    _write_atomically(real, text)  # a link stays a link: its target is replaced


_HELD_FIFOS: dict[Path, int] = {}
"""FIFOs named as outputs, opened for writing when checked (`_hold_fifo`) and written at the end."""


def _hold_fifo(path: Path, option: str) -> None:
    """A FIFO output is opened for writing when it is checked, without waiting: nothing reading it is one
    line now, before any work, not after it. The descriptor is held until the write (`_write_through`):
    opened and closed now, it would hand its reader an end of file."""
    if path in _HELD_FIFOS:
        return
    try:
        _HELD_FIFOS[path] = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UserError(f"{option} {shown(path)}: a FIFO that nothing reads; start its reader first") from None
        raise UserError(f"{option} {shown(path)}: cannot be written ({exc.strerror or exc}); name a file") from None


def _write_through(path: Path, text: str, kind: str) -> None:
    """Write `text` into the special file `path` as a shell's `>` would, never replacing it: a FIFO only
    if someone reads it (opened without waiting), a stream at its end (what was printed stays)."""
    if kind in ("a socket", "a block device", "a special file"):
        raise UserError(f"{shown(path)}: is {kind}; name a file")
    sys.stdout.flush()  # what was printed before comes first where the path is stdout
    sys.stderr.flush()
    data = text.encode("utf-8")
    own = _own_descriptor(path)
    if own is not None:  # stdout itself: at its offset, as print() writes, not over what it printed
        while data:
            data = data[os.write(own, data):]
        return
    flags = os.O_WRONLY | (os.O_NONBLOCK if kind == "a FIFO" else 0) | (os.O_APPEND if kind == "a stream" else 0)
    try:
        fd = _HELD_FIFOS.pop(path) if path in _HELD_FIFOS else os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UserError(f"{shown(path)}: a FIFO that nothing reads; start its reader first") from None
        raise UserError(f"{shown(path)}: cannot be written ({exc.strerror or exc}); name a file") from None
    try:
        os.set_blocking(fd, True)
        while data:
            data = data[os.write(fd, data):]
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EPIPE):  # a full disk or a closed pipe: the command line's own line
            raise
        raise UserError(f"{shown(path)}: cannot be written ({exc.strerror or exc}); name a file") from None
    finally:
        os.close(fd)


def _write_atomically(path: Path, text: str) -> None:
    def write(f):
        f.write(text.encode("utf-8"))

    write_atomically(path, write)


def write_atomically(path: Path, write) -> None:
    """write(f) into a temporary file beside `path`, opened "xb" (never another writer's file), made
    durable, then renamed over `path`: a reader sees the old file or the new, never half of one. Text
    files (write_text) and checkpoints (torch.save) both go so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    f = open(tmp, "xb")
    try:
        with f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable; not every platform can open a folder
        folder = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(folder)
    except OSError:
        pass
    finally:
        os.close(folder)


def replace_file(path: Path, text: str) -> None:
    """A new regular file of `text` put in `path`'s place atomically, whatever is there: a link is replaced
    itself, never written through, and so is a FIFO or a device. For files in a folder others may write
    (the profile cache's entries), where a link planted there would otherwise have its target overwritten;
    `write_text` follows a link, as a user's own output should."""
    _write_atomically(path, text)


def write_json(path: str | Path, data: Any) -> None:
    """`write_text` of `data` as indented JSON (NaN and infinities refused: they are not JSON)."""
    write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def read_json(path: str | Path, *, kind: str, fmt: str | None = None, versions: tuple[int, ...] = (1,),
              error: type[UserError] = UserError) -> Any:
    """Parse the JSON file at `path`; with `fmt`, it must be an object whose "format" is `fmt` and whose
    "version" is one of `versions`. `kind` ("profile", "plan"...) names the file in messages."""
    if isinstance(path, str):  # before as_path: Path("") is "."
        not_empty(path, f"the {kind} file", name="a file", error=error)
    path = as_path(path, f"the {kind} file", error)
    try:
        data = loads(read_text(path, kind=kind, error=error))
    except UserError:  # read_text's own line
        raise
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply to be a pipebench {kind} file") from None
    except ValueError as exc:  # loads' bounds
        raise error(f"{path}: {exc}; not a pipebench {kind} file") from None
    if depth(data) > MAX_DEPTH:
        raise error(f"{path}: JSON nested deeper than {MAX_DEPTH} levels; not a pipebench {kind} file")
    if fmt is not None:
        if not isinstance(data, dict) or data.get("format") != fmt:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise error(f"{path}: not a pipebench {kind} (field 'format' should be {fmt!r}, got {found!r})")
        if data.get("version") not in versions:
            raise error(f"{path}: {kind} version {data.get('version')!r} is not supported "
                        f"(expected {', '.join(map(str, versions))})")
    return data


MAX_READ = 1 << 30
"""The most bytes read from one file: the largest results file of a long sweep is a few MB."""


def read_text(path: str | Path, *, kind: str, error: type[UserError] = UserError, limit: int = MAX_READ) -> str:
    """The text of the regular file `path` (read_bytes), UTF-8, a byte-order mark dropped (a spreadsheet
    writes one)."""
    data = read_bytes(path, kind=kind, error=error, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start:,}); not a pipebench {kind} "
                    "file") from None


def read_bytes(path: str | Path, *, kind: str, error: type[UserError] = UserError, limit: int = MAX_READ) -> bytes:
    """The bytes of the regular file `path`. Nothing but a regular file is read: it is opened without
    waiting (a FIFO would wait for a writer) and checked by type before a byte is read; at most `limit`
    bytes (/dev/zero never ends). Every problem is one `error` line naming the file and the `kind` of file
    expected."""
    path = as_path(path, f"the {kind} file", error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a {kind} file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode  # before fdopen, which refuses a folder with a traceback of its own
    if not stat.S_ISREG(mode):
        os.close(fd)
        _not_regular(path, mode, kind, error)
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise error(f"{path}: larger than {limit >> 20:,} MiB; not a pipebench {kind} file")
    return data


def check_regular(path: str | Path, *, kind: str, error: type[UserError] = UserError, label: str | None = None) -> None:
    """Refuse, in read_bytes' words, a `path` that is not a regular file, for a file read otherwise (mapped,
    imported), whose own errors misname a FIFO (`--data tokens:FIFO`: "no such file"). `label` names it in the line (default: the path)."""
    label = str(path) if label is None else label
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{label}: no such file") from None
    except OSError as exc:
        raise error(f"{label}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        _not_regular(label, mode, kind, error)


def _not_regular(path: Any, mode: int, kind: str, error: type[UserError]) -> None:
    if stat.S_ISDIR(mode):
        raise error(f"{path}: is a folder, not a {kind} file")
    raise error(f"{path}: is {_kind_of(mode)}, not a {kind} file; give a regular file")


def not_regular(path: str | Path) -> str | None:
    """What `path` is when something other than a regular file is there, a link followed ("a folder", "a
    FIFO", "a character device", ...); None for a regular file or nothing (a link that leads nowhere). Asked
    of the file's type only, never by opening it: an open for reading waits on a FIFO for a writer."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return "a folder" if stat.S_ISDIR(mode) else _kind_of(mode)


def _kind_of(mode: int) -> str:
    return {stat.S_IFCHR: "a character device", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
            stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(mode), "a special file")
