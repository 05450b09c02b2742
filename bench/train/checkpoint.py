"""The checkpoint `pipebench train` writes: the user's model, whole, and beside it what resuming needs.

    PATH                      one state_dict with the model's own names (parameters and buffers), so that
                              `Model().load_state_dict(torch.load(PATH))` works whatever strategy trained
                              it: a pipeline's stages are gathered from their processes, FSDP's shards by
                              torch.distributed.checkpoint's full state dict.
    PATH.train/rank<r>.pt     each process's optimizer state, step and RNG, and the layout it belongs to
                              (strategy, process count, this process's parameter names in order).
    PATH.train/latest.json    written last: the step, and PATH's size and time as written, so that a
                              checkpoint torn by a kill between its files is refused, not half-resumed.

Every file is written atomically (a temporary file in the same folder, fsync, rename).
"""
from __future__ import annotations

import importlib
from pathlib import Path
from stat import S_ISREG

import torch
import torch.distributed as dist

from pipebench.base.errors import UserError, first_line
from pipebench.base.fileio.files import read_json, write_atomically, write_json

__all__ = ["model_state", "save_checkpoint", "load_weights", "check_weights", "rank_state_path", "check_layout",
           "parameter_names", "state_folder", "read_latest", "load_rank_state", "check_steps_left"]

WRAPPER = "_checkpoint_wrapped_module."


def state_folder(path: str | Path) -> Path:
    return Path(f"{path}.train")


def rank_state_path(path: str | Path, rank: int) -> Path:
    return state_folder(path) / f"rank{rank}.pt"


def parameter_names(trainer) -> list[str]:
    """This process's parameters (the optimizer's, in its order) by their names in the user's model."""
    names = {id(p): n.replace(WRAPPER, "") for n, p in trainer.model.module.named_parameters()}
    names.update({id(p): n for group in getattr(trainer, "shared", []) for _, n, p in group})
    return [names.get(id(p), f"?{i}") for i, p in enumerate(trainer.parameters())]


def model_state(trainer, distributed: bool) -> dict[str, torch.Tensor] | None:
    """The whole model's state_dict, on the CPU, on rank 0 (None elsewhere). A collective: every process
    calls it. FSDP: torch.distributed.checkpoint's full state dict; a torch pipeline: each process's own
    stages' parameters and buffers, gathered; the others hold the whole model in rank 0."""
    module = trainer.model.module
    rank = dist.get_rank() if distributed else 0
    if type(trainer).__name__ == "FSDPTrainer":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return _clean(state) if rank == 0 else None
    whole = _clean(module.state_dict()) if rank == 0 else None
    if hasattr(trainer, "pipeline_stages"):  # this process's stages only: gather each owner's entries
        mine = trainer.state_dict()
        buffers = {id(b): n for n, b in module.named_buffers()}
        for stage in trainer.modules:
            for b in stage.buffers():
                if id(b) in buffers:
                    mine[buffers[id(b)].replace(WRAPPER, "")] = b.detach().cpu()
        parts = [None] * dist.get_world_size() if rank == 0 else None
        dist.gather_object(mine, parts, dst=0)
        if rank == 0:
            for part in parts:
                whole.update({k: v for k, v in part.items() if k in whole})
        return whole
    if whole is not None:
        whole.update({k: v for k, v in trainer.state_dict().items() if k in whole})  # tied copies' trained values
    return whole


def _clean(state) -> dict[str, torch.Tensor]:
    return {k.replace(WRAPPER, ""): v.detach().cpu().clone() for k, v in state.items()}


def _atomic_save(obj, path: Path) -> None:
    write_atomically(path, lambda f: torch.save(obj, f))


def save_checkpoint(path: str | Path, trainer, *, distributed: bool, rank: int, step: int, layout: dict,
                    optimizer) -> None:
    """Write the checkpoint at `step` (every process calls it): its own state file, then rank 0 the model
    and, once every process has written, latest.json."""
    path = Path(path)
    whole = model_state(trainer, distributed)
    inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer: this process's shard's optimizer
    state = {"step": step, "layout": layout, "optimizer": inner.state_dict(), "rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None}
    _atomic_save(state, rank_state_path(path, rank))
    if rank == 0:
        _atomic_save(whole, path)
    if distributed:
        dist.barrier()
    if rank == 0:
        stat = path.stat()
        write_json(state_folder(path) / "latest.json", {"step": step, "size": stat.st_size,
                                                        "mtime_ns": stat.st_mtime_ns, "layout": layout})


def read_latest(path: str | Path) -> dict:
    """The resumable checkpoint's record, with every process's training state checked (load_rank_state);
    UserError when there is none, it was torn or any file is not what `train` wrote."""
    path = Path(path)
    latest = state_folder(path) / "latest.json"
    if not path.is_file():
        raise UserError(f"--resume: no checkpoint at {path}")
    if not latest.is_file():
        raise UserError(f"--resume: {path} has no training state beside it ({latest} is missing): only "
                        "weights, which --resume cannot continue from")
    record = read_json(latest, kind="checkpoint state")
    layout = record.get("layout") if isinstance(record, dict) else None
    if not isinstance(layout, dict):  # "x": one line, not an AttributeError from .get below
        raise UserError(f"{latest}: field 'layout' should be an object, got {layout!r:.40}; not a pipebench "
                        "checkpoint state file")
    step, processes = record.get("step"), layout.get("processes")
    for name, value in (("step", step), ("layout.processes", processes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "step" else 1):
            raise UserError(f"{latest}: field {name!r} should be a whole number of at least "
                            f"{0 if name == 'step' else 1}, got {value!r:.40}; not a pipebench checkpoint state file")
    stat = path.stat()
    if (stat.st_size, stat.st_mtime_ns) != (record.get("size"), record.get("mtime_ns")):
        raise UserError(f"--resume: {path} was written after its training state at step {step}, by something "
                        "else or a kill between the two, so they do not belong together; train again from the start")
    for rank in range(min(processes, 4096)):  # each worker reads its own: checked here, before any starts
        load_rank_state(rank_state_path(path, rank), step=step, mapped=True)
    return record


def check_steps_left(path, step: int, total: int, length: str) -> None:
    """A resumed run has steps left to train: a checkpoint at or past the run's `total` (`length` says how the
    command gave it) would otherwise say "done: 800/4 steps in 0.0 s", exit 0."""
    if step >= total:
        raise UserError(f"--resume: {path} is at step {step:,}, and {length} ends there or before: nothing is left "
                        "to train; give a larger --steps or --epochs")


DAMAGED = "the training state is damaged: train again from the start"


def load_rank_state(path: Path, *, step: int, mapped: bool = False) -> dict:
    """One process's training state, as save_checkpoint wrote it, checked to hold what a worker resumes from
    (`step`: latest.json's). Read as data (torch.load's weights_only: tensors, numbers, strings, dicts and
    lists), so that a crafted pickle is refused, not run. The parent reads every process's before any worker
    starts, `mapped` (the tensors left in the file, not read); each worker reads its own again."""
    _check_rank_state(path)
    if torch.distributed.is_available():  # FSDP's state holds DTensors, data once this import registers them
        importlib.import_module("torch.distributed.tensor")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=mapped)
    except Exception as exc:  # noqa: BLE001 - a foreign pickle, another zip, a truncated file: what torch says
        raise UserError(f"--resume: {path}: cannot read the training state: {type(exc).__name__}: "
                        f"{first_line(exc, 160)}; {DAMAGED}") from None
    if not isinstance(state, dict):
        raise UserError(f"--resume: {path}: the training state is a {type(state).__name__}, not a dict; {DAMAGED}")
    saved = state.get("step")
    if type(saved) is not int or saved != step:  # else 10**9 says "done: 1000000000/4 steps", exit 0
        raise UserError(f"--resume: {path}: field 'step' should be {step}, latest.json's step, got {saved!r:.40}; "
                        f"{DAMAGED}")
    for name in ("layout", "optimizer"):
        if not isinstance(state.get(name), dict):
            raise UserError(f"--resume: {path}: field {name!r} should be a dict, got {state.get(name)!r:.40}; {DAMAGED}")
    params = state["layout"].get("params", [])
    if not isinstance(params, list) or not all(isinstance(n, str) for n in params):
        raise UserError(f"--resume: {path}: field 'layout.params' should be a list of parameter names; {DAMAGED}")
    own = torch.get_rng_state()
    if not _random_state(state.get("rng"), own.numel()):
        raise UserError(f"--resume: {path}: field 'rng' should be torch's random state (a uint8 tensor of "
                        f"{own.numel()} bytes); {DAMAGED}")
    cuda = state.get("cuda_rng")
    if cuda is not None and not (isinstance(cuda, list) and all(_random_state(t) for t in cuda)):
        raise UserError(f"--resume: {path}: field 'cuda_rng' should be a list of CUDA random states (uint8 tensors); "
                        f"{DAMAGED}")
    return state


def _random_state(value, size: int | None = None) -> bool:
    return (isinstance(value, torch.Tensor) and value.dtype == torch.uint8 and value.dim() == 1
            and (size is None or value.numel() == size))


def _check_rank_state(path: Path) -> None:
    """One process's training state is a file torch.save wrote (a zip archive), checked before torch.load: a
    folder, a device or garbage in its place would otherwise be a worker's IsADirectoryError or
    UnpicklingError (exit 1), after the model is built."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise UserError(f"--resume: {path} is missing; the training state is incomplete: train again from the "
                        "start") from None
    if not S_ISREG(mode):
        raise UserError(f"--resume: {path} is not a regular file; {DAMAGED}")
    with open(path, "rb") as f:
        if f.read(4) != b"PK\x03\x04":
            raise UserError(f"--resume: {path} is not a training state torch.save wrote; {DAMAGED}")


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise UserError(f"cannot read the checkpoint {path}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}") from None
    if not isinstance(state, dict):
        raise UserError(f"{path} holds a {type(state).__name__}, not a state_dict")
    return state


def check_weights(state: dict, module: torch.nn.Module, path) -> None:
    """The checkpoint holds this model's state: the first key it lacks, has in excess or holds in another
    shape is named."""
    own = {k.replace(WRAPPER, ""): v for k, v in module.state_dict().items()}
    for key, value in own.items():
        if key not in state:
            raise UserError(f"{path} is a checkpoint of another model: it has no {key!r}")
        if tuple(state[key].shape) != tuple(value.shape):
            raise UserError(f"{path} is a checkpoint of another model: {key!r} is {tuple(state[key].shape)} "
                            f"there, {tuple(value.shape)} here")
    extra = [k for k in state if k not in own]
    if extra:
        raise UserError(f"{path} is a checkpoint of another model: it has {extra[0]!r}, which this one has not")


RESUMED_AS = {"strategy": "--strategy", "batch": "--batch", "optimizer": "--optimizer", "precision": "--precision",
              "processes": None}
"""The layout's settings a resumed run must share with its checkpoint, and the option that sets each."""
ADDED_TO_LAYOUT = ("optimizer", "precision")
"""The settings an older pipebench's layout lacks: such a checkpoint is not checked for them."""


def check_resumed_settings(saved: dict, now: dict, path) -> None:
    """The checkpoint's layout (latest.json's, or a process's state's) is of this run's settings: the first
    of RESUMED_AS that differs named, with the option that resumes it. The parent checks what it knows
    before the profile, and auto's pick after it, before any worker starts (bench/train/parent.py
    run_training): in a worker, another --batch or --optimizer is "rank 1: UserError" or "KeyError:
    'betas'", exit 1, and another --precision trains on without a word, a run that no longer follows the
    one it continues."""
    for key, option in RESUMED_AS.items():
        if key not in now or (key in ADDED_TO_LAYOUT and key not in saved):
            continue
        if saved.get(key) != now[key]:
            how = f"resume with {option} {saved.get(key)}" if option else f"resume with the same {key}"
            raise UserError(f"{path}: the training state is of {key} {saved.get(key)}, this run's is {now[key]}; {how}")


def check_layout(saved: dict, now: dict, path) -> None:
    """The training state is of this run's layout: the first difference named."""
    check_resumed_settings(saved, now, path)
    for a, b in zip(saved.get("params", []), now.get("params", [])):
        if a != b:
            raise UserError(f"{path}: another layout: this process's parameters begin to differ at {a!r} (saved) "
                            f"and {b!r} (now)")
    if len(saved.get("params", [])) != len(now.get("params", [])):
        raise UserError(f"{path}: another layout: {len(saved['params'])} parameters saved in this process's "
                        f"share, {len(now['params'])} now")
