"""A user's model found by its name, `path/to/file.py:NAME` or `package.module:NAME`, and built.

A file is imported as Python runs a script: its folder goes first on sys.path, so that it imports the files
beside it (`from my_layers import Block`). Every process that builds the model (the parent, and each worker,
which imports it again from the same name) does the same. Whatever the user's code raises, on import or
on build, comes back as one UserError line.

A model file runs arbitrary code when imported, and three things it may do would otherwise end or hang
pipebench with no word; the import is guarded in this process (`_guarded`):
- it never returns (an infinite loop, a download that hangs): a time limit, IMPORT_SECONDS
  (pipebench/base/time_limit.py) or $PIPEBENCH_IMPORT_SECONDS, names the file and what was waited for. A SIGALRM timer raises in the
  importing (main) thread, again each second until the file lets it out; a file that stops the timer
  (signal.alarm(0)), replaces its handler or swallows what it raises is ended by a watchdog thread
  GRACE_SECONDS later: the same line, and the process exits 2 at once (pipebench/base/time_limit.py
  `deadline`, the mechanism of every time limit);
- it calls os._exit(N), which no `except` sees: from the first import on, os._exit is pipebench's
  (`_exit`), so the call becomes one line with its code, in the importing thread and in any thread the
  file started (at import, or minutes later into a run: the line, and exit 2 at once);
- it starts a thread that never ends: Python waits for every non-daemon thread before it exits, so the
  command line, and a child that imported the file, leave without them once their work is done
  (pipebench/base/processes.py leave);
- it changes what pipebench goes on to rely on in this process (`_process_kept`): the default device
  (torch.set_default_device("meta") makes every tensor pipebench makes a meta one), sys.stdout/stderr
  (None: a traceback at the first flush) and the umask (0o777 writes the plan's JSON mode 000, and leaves
  pipebench.plan's caller with it) are put back; a torch or torch.nn.functional function replaced
  (torch.randn = None) is put back and the file refused in one line, since the model may count on its
  patch; an exit handler it registers (atexit.register(lambda: os._exit(7)) would exit 7 after the
  answer) runs at exit under the guard, so that what it raises or an os._exit in it is one line on stderr and
  the exit status stays pipebench's own.
Importing the file in a child process first would catch the first two as well, but it costs a second
interpreter and torch's import (1.5 s here, 3 s with transformers) on every command and in every worker,
imports every file twice, and still leaves the thread to the process that builds the model. Off the main
thread (pipebench.plan called from a thread of the caller's) no timer can be set, so no exception can stop
the import: at the limit the watchdog ends the process with the line and exit status 2, as it does on the
main thread for a file that will not be stopped (the alternative is a hang for ever).
The model's builder (the NAME class or function) and a --data file's import and function run under
`call_user`: os._exit and sys.exit there, and an exception of any class (a BaseException of the file's
own), are one line as well. The builder has no time limit (a large model takes minutes to build); the
--data file's import and function have the import's (bench/train/data.py: a data set that never answers
would hang `train` with no word).
"""
from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import inspect
import os
import signal
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from pipebench.base import interrupts
from pipebench.base.errors import UserError, first_line, printable
from pipebench.base.time_limit import REAL_EXIT, deadline, end_process, import_seconds
from pipebench.base.text.units import format_bytes

__all__ = ["import_target", "build", "raised", "forward_guarded", "where", "check_fits_in_memory", "check_module_fits"]


def import_target(target: str) -> tuple[dict[str, Any], str]:
    """(the namespace of the file or module `target` names, the NAME in it)."""
    where_, sep, name = target.rpartition(":")
    if not sep or not where_ or not name.isidentifier():
        raise UserError(f"--model {target!r}: write it as path/to/file.py:NAME or package.module:NAME")
    if where_.endswith(".py"):
        path = Path(where_)
        try:
            found = path.is_file()
        except OSError as exc:  # a name longer than the file system takes (ENAMETOOLONG): not "no such file"
            raise UserError(f"{target}: cannot read {where_}: {exc.strerror or exc}") from None
        if not found:
            raise UserError(f"{target}: no such file {where_}")
        return vars(_import_file(path.resolve(), target)), name
    try:
        with _guarded(target, where_):
            loaded = importlib.import_module(where_)
    except UserError:  # _guarded's own line
        raise
    except BaseException as exc:  # noqa: BLE001 - a class of its own that is no Exception, GeneratorExit
        if is_signal(exc):  # Ctrl-C stays "interrupted"
            raise
        raise UserError(f"{target}: cannot import {where_}: {raised(exc)}") from None
    return vars(loaded), name


def _import_file(path: Path, target: str):
    """The file as a module of its own name (one per path), its folder first on sys.path as for a script."""
    module_name = f"pipebench_user_{abs(hash(str(path)))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(module_name, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = loaded
    try:
        with _guarded(target, str(path)):
            spec.loader.exec_module(loaded)
    except UserError:  # _guarded's own line
        del sys.modules[module_name]
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's file: what it raised (of any class), in one line
        if is_signal(exc):  # Ctrl-C stays "interrupted"
            raise
        del sys.modules[module_name]
        raise UserError(f"{target}: importing {path} failed: {raised(exc)}") from None
    return loaded


class _Stopped(BaseException):
    """Raised into a model file's import (a BaseException: its own `except Exception` lets it through)."""


_going: list[tuple[str, threading.Thread, set, list]] = []
"""The model file imports going on: (its name, the importing thread, the threads alive before, the codes it
passed to os._exit)."""
_model_threads: "weakref.WeakKeyDictionary[threading.Thread, str]" = weakref.WeakKeyDictionary()
"""The threads a model file started when imported, by the model's name."""


def _exit(code=0):
    """os._exit once a model file is imported: in the importing thread, an exception (_guarded's line); in a
    thread the file started, at import or after it (a daemon that ends the process minutes into a run),
    the one line and exit status 2; everywhere else, os._exit itself."""
    me = threading.current_thread()
    for target, importer, before, exits in _going:
        if me is importer:
            exits.append(code)
            raise _Stopped
        if me not in before:
            end_process(f"{target}: a thread it starts when imported calls os._exit({code!r}); a model file "
                        "must only define things")
    if me in _model_threads:
        end_process(f"{_model_threads[me]}: a thread it starts when imported calls os._exit({code!r}); a model "
                    "file must only define things")
    REAL_EXIT(code)


@contextlib.contextmanager
def _guarded(target: str, what: str, doing: str = "importing", when: str = "when imported",
             rule: str = "a model file must only define things", limit: bool = True):
    """Run a model file's import under a time limit (time_limit.deadline; none where `limit` is False),
    with os._exit turned into one line; see the module docstring. Off the main thread no timer can be set
    (Python runs signal handlers there only): the watchdog alone keeps the limit, and ends the process with
    the line at it (without it such an import has no limit: pipebench.plan from a thread of the caller's
    would hang for ever). The timer, and the handlers of SIGALRM, SIGINT and SIGTERM (a file that ignores Ctrl-C would
    make the command one that no Ctrl-C ends), are put back as they were on leaving; os._exit stays
    pipebench's (`_exit`, also where the file replaced it), for the threads the file started."""
    seconds = import_seconds()
    me = threading.current_thread()
    exits: list[int] = []
    late = too_late(target, f"{doing + ' ' if doing else ''}{what}", seconds)
    timed = limit and me is threading.main_thread()
    if timed:  # SIGALRM's is deadline's to put back
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    going = None
    try:  # around the deadline, not only the block: a short limit fires in the guard's own setting up too
        with deadline(seconds, lambda: late, _Stopped) if limit else contextlib.nullcontext():
            going = (target, me, set(threading.enumerate()), exits)  # the watchdog among those before
            _going.append(going)
            os._exit = _exit
            with _process_kept(target, f"{doing + ' ' if doing else ''}{what}"):
                yield
    except _Stopped:
        if exits:
            raise UserError(f"{target}: it calls os._exit({exits[0]!r}) {when}; {rule}") from None
        raise UserError(late) from None
    finally:
        os._exit = _exit
        if going is not None:
            with contextlib.suppress(ValueError):  # stopped before it was appended
                _going.remove(going)
            for thread in set(threading.enumerate()) - going[2]:
                _model_threads[thread] = target
        if timed:
            for sig, handler in previous.items():
                if handler is not None:  # None: set outside Python, left alone
                    signal.signal(sig, handler)


REAL_REGISTER = atexit.register
"""atexit.register itself, which `_process_kept` replaces while the user's code runs."""

WATCHED = ("torch", "torch.nn.functional")
"""The modules whose public functions pipebench calls and a model file must leave as they are."""

TORCH_SETS = frozenset({"torch.Storage"})
"""Names in WATCHED that torch itself reassigns: torch.set_default_dtype points torch.Storage at the storage
class of the new dtype, and a float64 model file is one pipebench profiles in float64 (snapshot.py)."""


@contextlib.contextmanager
def _process_kept(target: str, doing: str):
    """Leave this process as pipebench relies on it, whatever the user's code in the block does (see the
    module docstring): the default device, sys.stdout/stderr and the umask put back on leaving; a public function of
    WATCHED replaced or removed put back, and then one UserError line (torch's own wrapper of the same
    function is no replacement: importing torch._dynamo wraps torch.manual_seed); each exit handler
    registered meanwhile registered as `_at_exit` of it instead (atexit.unregister of the handler then
    finds nothing: pipebench's process ends soon after, and the handler is harmless under the guard)."""
    watched = [sys.modules[name] for name in WATCHED]
    functions = [(module, _functions(module)) for module in watched]
    streams = sys.stdout, sys.stderr
    umask = os.umask(0o022)
    os.umask(umask)  # os.umask only sets it: read by setting it back
    device = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
    register = atexit.register

    def guarded_register(func, *args, **kwargs):
        REAL_REGISTER(_at_exit, target, func, args, kwargs)
        return func  # as atexit.register does, a decorator too

    atexit.register = guarded_register
    try:
        yield
    finally:
        atexit.register = register
        sys.stdout, sys.stderr = streams
        os.umask(umask)
        if getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None) is not device:
            torch.set_default_device(None if device is None else device.device)
        replaced = []
        for module, before in functions:
            now = vars(module)
            for name, function in before.items():
                if f"{module.__name__}.{name}" in TORCH_SETS:
                    continue
                if now.get(name) is not function and not _torch_wrapper(now.get(name), function):
                    setattr(module, name, function)
                    replaced.append(f"{module.__name__}.{name}")
    if replaced:
        raise UserError(f"{target}: {doing} replaced {', '.join(replaced)}, which pipebench calls; a model file "
                        "must leave torch's functions as they are")


def _functions(module) -> dict[str, Any]:
    """The public functions (and classes) of `module`, by name; its own namespace only, so that none of
    torch's lazily imported submodules is imported by looking."""
    return {name: value for name, value in vars(module).items() if not name.startswith("_") and callable(value)}


def _torch_wrapper(new: Any, old: Any) -> bool:
    """Whether `new` is torch's own wrapper of `old` (torch._dynamo's of torch.manual_seed)."""
    return getattr(new, "__wrapped__", None) is old and str(getattr(new, "__module__", "")).split(".")[0] == "torch"


def _at_exit(target: str, func: Callable, args: tuple, kwargs: dict) -> None:
    """Run at exit an exit handler that `target` registered, under the guard: an os._exit(N) or sys.exit in it
    and whatever it raises are one line on stderr, and the exit status is the command's."""
    try:
        call_user(lambda: func(*args, **kwargs), target, "its exit handler", "in an exit handler",
                  rule="a model file must only define things")
    except UserError as exc:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(f"pipebench: {printable(str(exc))}", file=sys.stderr)


@contextlib.contextmanager
def forward_guarded(target: str):
    """The model's first forward (models/source.py run_forward) guarded as its import is (`_guarded`): one
    that never returns is stopped at the import's time limit, and sys.exit() or os._exit(N) in it is one
    UserError line; each would hang or end pipebench with no word (in a run's parent, at its check of the
    model). So is a BaseException that is no Exception (a class of the file's own, GeneratorExit), which
    would be a traceback; an Exception is the caller's to say (the model rejects the input)."""
    rule = "a model must not end the process"
    try:
        with _guarded(target, "its forward", doing="running", when="in its forward", rule=rule):
            yield
    except SystemExit as exc:
        raise UserError(f"{target}: it calls sys.exit({exc.code!r}) or exit() in its forward; {rule}") from None
    except Exception:  # the caller's (run_forward: the model rejects the input)
        raise
    except BaseException as exc:  # noqa: BLE001 - a class of the file's own that is no Exception, GeneratorExit
        if is_signal(exc):  # Ctrl-C
            raise
        raise UserError(f"{target}: its forward raised {raised(exc)}") from None


def raised(exc: BaseException, when: str = "when imported", rule: str = "a model file must only define things") -> str:
    """What a user's code raised, in one line; sys.exit() and exit() in a model file too, which would
    otherwise end pipebench with no word (`when`: where it ran, "when built")."""
    if isinstance(exc, SystemExit):
        return f"it calls sys.exit({exc.code!r}) or exit() {when}; {rule}"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt of its own (no Ctrl-C or SIGTERM arrived)"
    return f"{type(exc).__name__}: {first_line(exc)}"


def is_signal(exc: BaseException) -> bool:
    """Whether `exc` is the KeyboardInterrupt of Ctrl-C or SIGTERM, to go through as "interrupted", exit
    130; one that the user's code raises itself, with no signal sent, is its failure (pipebench/base/interrupts.py)."""
    return isinstance(exc, KeyboardInterrupt) and interrupts.arrived()


def too_late(target: str, what: str, seconds: float) -> str:
    """The one line for the user's code that outlived the import's limit (PIPEBENCH_IMPORT_SECONDS): a model
    file's import or first forward, a --data file's import, function or samples."""
    return (f"{target}: {what} did not finish within {seconds:g} s (an endless loop, or something it waits "
            "for); set PIPEBENCH_IMPORT_SECONDS to wait longer")


BUILD_RULE = "a model must not end the process"


def call_user(call: Callable[[], Any], target: str, what: str, when: str, rule: str = BUILD_RULE,
              limit: bool = False) -> Any:
    """`call()`, the user's own code (a model's builder, a --data file's import and its function), with
    everything it may do to end pipebench turned into one UserError line, `target: what failed: ...`: an
    exception of any class (one of the file's own that is no Exception, GeneratorExit), sys.exit() and
    os._exit(N) (_guarded). Without its time limit unless `limit` (building a large model takes minutes);
    with it, one that never returns is `target: what did not finish within ...`. Only Ctrl-C and SIGTERM
    (a signal's KeyboardInterrupt: is_signal) go through, to be "interrupted", exit 130."""
    try:
        with _guarded(target, what, doing="", when=when, rule=rule, limit=limit):
            return call()
    except UserError:  # _guarded's os._exit line
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code: what it raised, in one line
        if is_signal(exc):  # Ctrl-C
            raise
        raise UserError(f"{target}: {what} failed: {raised(exc, when, rule)}") from None


def where(target: str) -> str:
    return target.rpartition(":")[0]


def build(factory: Any, target: str, device) -> nn.Module:
    """The module `factory` (a class or a function of no arguments) makes, built on `device`."""
    if isinstance(factory, nn.Module):
        raise UserError(f"{target}: is a module instance; name its class or a function that returns one, so "
                        "that every worker process can build it")
    if not callable(factory):
        raise UserError(f"{target}: is a {type(factory).__name__}, not an nn.Module class or a function")
    required = [p.name for p in parameters(factory) if p.default is inspect.Parameter.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if required:
        raise UserError(f"{target}: needs argument(s) {', '.join(required)}; pipebench builds it with none (write a "
                        "function without arguments that returns the module)")
    context = torch.device(device) if device is not None else contextlib.nullcontext()

    def built():  # check_fits_in_memory's meta build, too, is the user's code: sys.exit there would end pipebench
        check_fits_in_memory(factory, target, device)
        with context:
            return factory()

    module = call_user(built, target, "building it", "when built")
    if not isinstance(module, nn.Module):
        raise UserError(f"{target}: returned a {type(module).__name__}, not an nn.Module")
    if not any(p.requires_grad for p in module.parameters()):
        raise UserError(f"{target}: has no parameters that require grad; there is nothing to train")
    return module


def parameters(function) -> list[inspect.Parameter]:
    """`function`'s parameters, a method's `self` left out; none where Python cannot say."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    params = list(signature.parameters.values())
    return params[1:] if params and params[0].name == "self" else params


def check_fits_in_memory(make: Callable[[], Any], what: str, device) -> None:
    """Refuse, before it is built, a model whose parameters and buffers alone take more than the memory
    free now (psutil's available), where it is built in that memory (`device` the CPU, or None): built
    there, it would be killed by the kernel, or swap the machine to a halt, long before any answer. Its
    size is read from a build on the meta device, which allocates nothing (a factory that cannot be built
    there is not judged). `make()` returns the module (or a registry model's Built, whose layers count)."""
    if device is not None and torch.device(device).type != "cpu":
        return
    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            made = make()
    except _Stopped:  # os._exit under call_user: its line
        raise
    except BaseException as exc:  # noqa: BLE001 - not buildable on meta (or sys.exit there): the real build says it
        if is_signal(exc):  # Ctrl-C
            raise
        return
    module = getattr(made, "layers", made)
    if isinstance(module, nn.Module):
        check_module_fits(module, what)


def check_module_fits(module: nn.Module, what: str) -> None:
    """check_fits_in_memory for a module built already, on the meta device: what it would take built in memory."""
    size = sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))
    from pipebench.hardware.free_memory import free_bytes

    free = free_bytes("cpu")
    if size > free:
        raise UserError(f"{what}: its parameters and buffers take {format_bytes(size)}, more than the "
                        f"{format_bytes(free)} of memory free here; it is not built (a smaller flavour or "
                        "settings, or a GPU with room for it)")
