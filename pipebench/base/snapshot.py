"""What pipebench.plan and pipebench.profile leave as they found it: the caller's model and torch's state.

Profiling runs the model in training mode, forward and backward, moves it to the device measured, times an
optimizer update (at lr 0), replaces forward methods and adds hooks while capturing (torch.export,
pipeline()), seeds and draws random numbers, and sets threads and precision flags. A library call must not
change what its caller holds: a model put in eval() comes back in eval(), each submodule in its own mode
(a frozen BatchNorm in eval inside a model in train mode stays so), BatchNorm's running statistics as they
were, the caller's random stream where it was.

The model is worked on in place, then restored, rather than copied: copy.deepcopy doubles the memory of a
model that may fill the device, and not every module can be copied (hooks holding closures, tensors
another library owns). What makes a restore cheap: a parameter's tensor is kept by reference (the caller
held it already, nothing is copied), so that one moved to a GPU and back gets its very own tensor again,
on its own device and in its own dtype; its values are copied too only where the free memory allows four
times their size, and written back whatever happened: the timed update at lr 0 writes values equal to the
old ones unless a gradient was not finite (0 * nan is nan), and an update through the parameter moves its own
version counter, not the one of the `p.data` kept (a version check misses a NaN loss's update, which leaves
every weight of the caller's NaN). Buffers and gradients are small, and copied.

`as_given(module)` restores, on leaving, each module's training flag, its parameters, buffers and
submodules (the objects, not only their values), each parameter's requires_grad and gradient, the forward
methods and hooks set on the instance; and torch's global state: the CPU RNG and, where CUDA is
initialised, every GPU's RNG and the current GPU, the intra- and inter-op thread counts, the default
dtype, grad mode, autocast (CPU and CUDA: on or off, and its dtype), anomaly detection, the float32 matmul
precision and the TF32, cuDNN and deterministic-algorithm flags; and the process's environment variables and
working folder.

`own_state()` is the other half: pipebench's own measurements (the profiler's, the CPU probes') run under
pipebench's settings, not under whatever the caller or a model file's import left: gradients on, inference
mode, autocast and anomaly detection off, float32 the default dtype; whatever was set before is put back on
leaving. Otherwise a caller's `with torch.autocast("cpu", dtype=torch.bfloat16)` profiles bf16 layers under a
profile saying tf32, and a model file's torch.set_default_dtype(torch.float64) at import makes the CPU
probe's first process send float64 messages to peers expecting float32 (gloo's "Connection reset by peer").
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Iterator

__all__ = ["as_given", "own_state", "global_state", "module_state", "process_state", "working_folder"]


@contextlib.contextmanager
def as_given(module: Any = None) -> Iterator[None]:
    """Inside the block, anything may change `module` (an nn.Module, or None), torch's global state and the
    process's environment variables and working folder; on leaving, however it leaves, all are as they were
    on entering. Torch not imported yet: there is no torch state of the caller's to keep, and none is
    imported here (the environment and the folder are kept all the same: torch's first import of
    torch._dynamo, which torch.export makes, sets TORCHINDUCTOR_CACHE_DIR, and a model file's import or
    forward may set variables or change folder)."""
    with contextlib.ExitStack() as restores:  # run last-in first-out, each however the one before ended
        restores.callback(process_state())
        if "torch" in sys.modules:
            restores.callback(global_state())
            if module is not None:
                restores.callback(module_state(module))
        yield


def process_state() -> Callable[[], None]:
    """Remember the environment variables, the working folder and sys.excepthook now; return the function
    that sets them back (a folder since removed is left: there is nothing to go back to). The hook matters
    because torch's init_process_group, which the CPU link probe calls in the caller's process, installs its
    own, and every later traceback of the caller's would start `[rank0]:`."""
    environ, cwd, excepthook = dict(os.environ), working_folder(), sys.excepthook

    def restore() -> None:
        sys.excepthook = excepthook
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        for name, value in environ.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        with contextlib.suppress(OSError):
            if os.getcwd() != cwd:
                os.chdir(cwd)

    return restore


def working_folder() -> str:
    """The working folder, or UserError where it was removed (a shell left in a deleted folder): relative
    paths, a model file's among them, would name nothing, and the folder could not be gone back to."""
    try:
        return os.getcwd()
    except FileNotFoundError:
        from pipebench.base.errors import UserError

        raise UserError("the working folder no longer exists (it was removed); cd to one that does") from None


@contextlib.contextmanager
def own_state(dtype: Any = None) -> Iterator[None]:
    """Inside the block, pipebench's torch settings: gradients on, inference mode, autocast (CPU and CUDA) and
    anomaly detection off, `dtype` the default dtype (None: float32; the profiler passes the one a model
    file's import left, which its model is built and fed in, as a worker running the file keeps it). On
    leaving, however it leaves, torch's global state is as it was on entering (global_state). Blocks nest:
    the profiling inside pipebench.profile takes these settings again after a model file's import changed them.
    Also a decorator: @own_state()."""
    torch = sys.modules.get("torch")
    if torch is None:  # nothing to set: torch's own defaults are these
        yield
        return
    restore = global_state()
    try:
        with torch.inference_mode(False):
            torch.set_grad_enabled(True)
            for device in AUTOCAST_DEVICES:
                torch.set_autocast_enabled(device, False)
            torch.autograd.set_detect_anomaly(False)
            torch.set_default_dtype(torch.float32 if dtype is None else dtype)
            yield
    finally:
        restore()


AUTOCAST_DEVICES = ("cpu", "cuda")
"""The device types whose autocast state is kept and turned off: those pipebench profiles on."""


def global_state() -> Callable[[], None]:
    """Remember torch's process-wide settings now; return the function that sets them back."""
    import torch

    cuda = torch.cuda.is_initialized()
    saved = dict(
        rng=torch.get_rng_state(),
        cuda_rng=torch.cuda.get_rng_state_all() if cuda else None,
        cuda_device=torch.cuda.current_device() if cuda else None,
        threads=torch.get_num_threads(),
        interop=torch.get_num_interop_threads(),
        dtype=torch.get_default_dtype(),
        grad=torch.is_grad_enabled(),
        autocast={d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES},
        anomaly=(torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
        matmul=_matmul_precision(torch),
        flags=_flags(torch),
        deterministic=(torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled()),
    )

    def restore() -> None:
        torch.set_rng_state(saved["rng"])
        if saved["cuda_rng"] is not None:
            torch.cuda.set_rng_state_all(saved["cuda_rng"])
            torch.cuda.set_device(saved["cuda_device"])
        if torch.get_num_threads() != saved["threads"]:
            torch.set_num_threads(saved["threads"])
        if torch.get_num_interop_threads() != saved["interop"]:
            with contextlib.suppress(RuntimeError):  # torch allows it only before any parallel work
                torch.set_num_interop_threads(saved["interop"])
        torch.set_default_dtype(saved["dtype"])
        torch.set_grad_enabled(saved["grad"])
        for device, (enabled, dtype) in saved["autocast"].items():
            torch.set_autocast_enabled(device, enabled)
            torch.set_autocast_dtype(device, dtype)
        torch.autograd.set_detect_anomaly(*saved["anomaly"])
        # Only what changed is set again: torch 2.9+ refuses to read the matmul precision once its legacy
        # switches (allow_tf32) and its new ones (fp32_precision) were both set, so setting a switch to
        # the value it has would break a caller's later get_float32_matmul_precision().
        for (owner, name), value in saved["flags"].items():
            if getattr(owner, name) != value:
                setattr(owner, name, value)
        if saved["matmul"] is not None and _matmul_precision(torch) != saved["matmul"]:
            torch.set_float32_matmul_precision(saved["matmul"])
        torch.use_deterministic_algorithms(saved["deterministic"][0], warn_only=saved["deterministic"][1])

    return restore


def _matmul_precision(torch) -> str | None:
    """torch.get_float32_matmul_precision(), None where torch refuses to say (its legacy and new switches
    both set: see restore)."""
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return None


def _flags(torch) -> dict[tuple[Any, str], Any]:
    """The backends' numeric switches that profiling or a precision sets (pipebench/base/training.py): the
    legacy ones first, then torch 2.9's fp32_precision of each backend where torch has them."""
    backends = torch.backends
    names = [(backends.cuda.matmul, "allow_tf32"), (backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
             (backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"), (backends.cudnn, "allow_tf32"),
             (backends.cudnn, "benchmark"), (backends.cudnn, "deterministic"), (backends.cudnn, "enabled")]
    for owner in (backends, backends.cuda.matmul, backends.cudnn, getattr(backends.cudnn, "conv", None),
                  getattr(backends.cudnn, "rnn", None), backends.mkldnn, getattr(backends.mkldnn, "matmul", None),
                  getattr(backends.mkldnn, "conv", None), getattr(backends.mkldnn, "rnn", None)):
        names.append((owner, "fp32_precision"))
    flags = {}
    for owner, name in names:
        with contextlib.suppress(AttributeError, RuntimeError):
            if owner is not None:
                flags[(owner, name)] = getattr(owner, name)
    return flags


COPY_SHARE = 4
"""Parameter values are copied when the memory available is at least this many times their bytes."""


def module_state(module: Any, values: bool = True) -> Callable[[], None]:
    """Remember `module`'s state now (see the module docstring); return the function that restores it.
    values False: parameter values are not copied (the profiler's own restore, of a model it may have
    built itself; the caller's model is guarded by as_given)."""
    import torch

    modules = list(module.modules())
    tables = [(m, {k: dict(getattr(m, k)) for k in _TABLES if isinstance(getattr(m, k, None), dict)}) for m in modules]
    modes = [(m, m.training) for m in modules]
    methods = [(m, {k: m.__dict__[k] for k in _METHODS if k in m.__dict__}) for m in modules]
    params = {id(p): p for m in modules for p in m._parameters.values() if p is not None}.values()
    buffers = {id(b): b for m in modules for b in m._buffers.values() if b is not None}.values()
    kept = [(p, p.data, p.requires_grad,
             None if p.grad is None else p.grad.detach().clone()) for p in params]
    values = _copies([p for p, *_ in kept]) if values else [None] * len(kept)
    buffer_values = [(b, b.data, b.detach().clone()) for b in buffers]

    def restore() -> None:
        for m, saved in tables:
            for key, table in saved.items():
                now = getattr(m, key)
                if list(now) != list(table) or any(now[k] is not v for k, v in table.items()):  # by identity: a
                    # tensor's == compares values, and fails across devices (a buffer .to() replaced on cuda)
                    now.clear()
                    now.update(table)  # in place: a view such as AsTrained shares these dicts
        for m, saved in methods:
            for key in _METHODS:
                if key in saved:
                    m.__dict__[key] = saved[key]
                else:
                    m.__dict__.pop(key, None)
        with torch.no_grad():
            for (p, data, requires_grad, grad), value in zip(kept, values):
                if p.data is not data:
                    p.data = data  # its own tensor: device, dtype and values as given
                if value is not None:
                    data.copy_(value)
                p.requires_grad_(requires_grad)
                p.grad = grad
            for b, data, value in buffer_values:
                if b.data is not data:
                    b.data = data
                b.copy_(value.to(b.device))
        for m, training in modes:
            m.training = training

    return restore


_TABLES = ("_parameters", "_buffers", "_modules", "_forward_pre_hooks", "_forward_hooks", "_backward_hooks",
           "_backward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
           "_state_dict_hooks", "_load_state_dict_pre_hooks")
"""The tables of a module that capturing adds to or replaces entries of (torch.nn.Module's own)."""

_METHODS = ("forward", "__call__", "_call_impl")
"""Methods set on an instance (pipeline() and hooks replace forward); restored, or removed if absent."""


def _copies(params: list) -> list:
    """A copy of each parameter's values on the CPU, if memory allows (COPY_SHARE), else Nones."""
    size = sum(p.numel() * p.element_size() for p in params)
    try:
        import psutil

        available = psutil.virtual_memory().available
    except ImportError:  # pragma: no cover - psutil is a dependency
        available = 0
    if not size or size * COPY_SHARE > available or any(p.device.type == "meta" for p in params):
        return [None] * len(params)
    return [p.detach().to("cpu", copy=True) for p in params]
