"""One process of `pipebench train`: `python -P -m pipebench.bench.train.loop JOB.json OUT_DIR`.

Started as bench.launch.worker is (bench/launch/spawn.py: alone, or by torchrun one per device), it builds the same model
and the same Trainer from the Job's Plan, then trains on the data of OUT_DIR/train.json instead of one
repeated batch:

- a DataLoader per replica with torch's DistributedSampler (each sample once per epoch across the
  replicas, the remainder that makes no whole batch left out); a pipeline's first and last stages read
  the same order, the first feeding the inputs, the last the targets; stages between read nothing;
- each step: the Trainer's own `step` (the strategy's schedule), the loss, samples/s;
- rank 0 appends each step to OUT_DIR/progress.jsonl (the parent draws the progress and the log lines
  from it) and to the CSV;
- a checkpoint every `save_every` steps, at the end, and when asked to stop (SIGINT or SIGTERM to any
  process, or the file OUT_DIR/stop that the parent writes on Ctrl-C): every process agrees during the
  step (_StopVote), writes, and leaves.

Started by torchrun on several machines (`pipebench train --write-job`, docs/several-machines.md), no
parent reads the progress file: train.json's `print_every` has rank 0 print the log lines itself.
"""
from __future__ import annotations

import itertools
import json
import math
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from pipebench import models
from pipebench.bench.launch.job import Job
from pipebench.bench.launch.worker import exit_without_teardown, work_and_report
from pipebench.processes import exit_with_parent
from pipebench.bench.strategies import get_strategy
from pipebench.bench.strategies.trainers import hand_over
from pipebench.bench.train import checkpoint as ckpt
from pipebench.bench.train import log_line
from pipebench.bench.train.curves import COLUMNS
from pipebench.bench.train.data import DataSpec, open_dataset
from pipebench.csvtext import csv_line
from pipebench.files import read_json

__all__ = ["TrainRun", "train", "main", "replica_of", "reads_data"]

_signalled = False


def _on_signal(signum, frame):
    global _signalled
    _signalled = True


class _Skip(torch.utils.data.Sampler):
    """A sampler's order from its `skip`-th index on: a resumed epoch starts where the stopped one was."""

    def __init__(self, sampler, skip: int):
        self.sampler, self.skip = sampler, skip

    def __iter__(self):
        return itertools.islice(iter(self.sampler), self.skip, None)

    def __len__(self):
        return max(0, len(self.sampler) - self.skip)


def replica_of(trainer, strategy, rank: int, world: int) -> tuple[int, int]:
    """(replicas, this process's replica) for the sampler: one per process where the batch is split
    (DDP, ZeRO-1, FSDP), one per pipeline where pipelines are replicated (hybrid: its stages read
    their replica's share alike), else one for the whole job."""
    if strategy.replicated:
        return trainer.replicas, trainer.replica
    return (world, rank) if strategy.splits_batch else (1, 0)


def reads_data(trainer, rank: int) -> bool:
    """Whether this process loads batches: a pipeline's first and last stage (by its rank in the
    pipeline's group: hybrid's replicas each have theirs), every other process."""
    if hasattr(trainer, "first_rank"):
        return trainer.rank in (trainer.first_rank, trainer.last_rank)
    return True


def loader(dataset, batch: int, replicas: int, replica: int, *, seed: int, epoch: int, skip_batches: int,
           workers: int, pin: bool):
    """The epoch's DataLoader for this replica: a seeded DistributedSampler (shuffled anew each epoch),
    whole batches only, from batch `skip_batches` on."""
    from torch.utils.data import DataLoader, DistributedSampler

    sampler = DistributedSampler(dataset, num_replicas=replicas, rank=replica, shuffle=True, seed=seed, drop_last=True)
    sampler.set_epoch(epoch)
    extra = {"prefetch_factor": 4, "persistent_workers": False} if workers else {}
    collate = _as_batch if getattr(dataset, "batched_items", False) else None  # ours fetch whole batches
    return DataLoader(dataset, batch_size=batch, sampler=_Skip(sampler, skip_batches * batch), drop_last=True,
                      num_workers=workers, pin_memory=pin, generator=torch.Generator().manual_seed(seed + epoch),
                      collate_fn=collate, **extra)


def _as_batch(batch):
    """The collate of a Dataset whose `__getitems__` returns the batch itself (bench/train/data.py's)."""
    return batch


def train(job: Job, settings: dict, out_dir: Path, rank: int, world: int, local_rank: int) -> dict | None:
    strategy = get_strategy(job.strategy)
    distributed = strategy.process_per_device
    if job.device_type == "cpu":  # one device's share of the cores, keeping the memory it frees, as run's worker
        from pipebench.hardware.cpu import hold_memory

        torch.set_num_threads(job.cpu_threads)
        hold_memory()  # glibc would hand a step's large buffers back and fault them in again the next step
    else:
        torch.cuda.set_device(local_rank if distributed else 0)
        from pipebench.training import set_precision

        set_precision(job.training)
    if distributed:
        dist.init_process_group("nccl" if job.device_type == "cuda" else "gloo")
    from pipebench.bench.launch.worker import build_trainer

    model = models.get_model(job.model, job.flavour, seed=job.seed, **job.overrides)
    save = settings.get("save")
    resume = settings.get("resume") and save
    if resume:
        state = ckpt.load_weights(save)
        ckpt.check_weights(state, model.module, save)
        model.module.load_state_dict(state)
    trainer = build_trainer(job, hand_over(model), local_rank)
    trainer.local_batch = True  # a replica's loader gives it its own share (ReplicaTrainer, hybrid)
    optimizer = trainer._optimizer = trainer.make_optimizer()
    if settings.get("lr") is not None:
        for group in optimizer.param_groups:
            group["lr"] = settings["lr"]
    layout = {"strategy": job.strategy, "processes": world, "batch": job.batch, "params": ckpt.parameter_names(trainer)}
    step = 0
    if resume:
        saved = torch.load(ckpt.rank_state_path(save, rank), map_location="cpu", weights_only=False)
        ckpt.check_layout(saved["layout"], layout, ckpt.rank_state_path(save, rank))
        getattr(optimizer, "optim", optimizer).load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"])
        if saved.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(saved["cuda_rng"])
        step = saved["step"]
    else:
        torch.manual_seed(job.seed + 2 + rank)  # dropout's stream, its own per process

    spec = DataSpec(**settings["data"])
    dataset = open_dataset(spec)
    replicas, replica = replica_of(trainer, strategy, rank, world)
    local = job.batch // replicas
    per_epoch = len(dataset) // job.batch
    total = settings["steps"] if settings.get("steps") else settings["epochs"] * per_epoch
    device = trainer.devices[0]
    reads = reads_data(trainer, rank)
    csv = Path(settings["csv"]) if settings.get("csv") else None
    progress = out_dir / "progress.jsonl"
    if rank == 0 and csv is not None and (step == 0 or not csv.exists()):
        csv.parent.mkdir(parents=True, exist_ok=True)
        csv.write_text(csv_line(COLUMNS), newline="")
    stop_file = out_dir / "stop"
    every = settings.get("save_every") or 0
    shown = settings.get("print_every") or 0
    started = time.perf_counter()
    stopped = False
    diverged = ""
    saved_at = None

    def checkpoint(at: int) -> None:
        nonlocal diverged
        if not save:
            return
        nonlocal saved_at
        if not _weights_finite(trainer, device, distributed):  # never saved over the last good weights
            diverged = diverged or f"the weights became NaN or infinite by step {at}"
            return
        ckpt.save_checkpoint(save, trainer, distributed=distributed, rank=rank, step=at, layout=layout,
                             optimizer=optimizer)
        saved_at = at

    vote = _StopVote(distributed)
    while step < total and not stopped:
        epoch, within = divmod(step, per_epoch)
        batches = iter(loader(dataset, local, replicas, replica, seed=job.seed, epoch=epoch, skip_batches=within,
                              workers=settings.get("workers", 0), pin=job.device_type == "cuda")) if reads else None
        while within < per_epoch and step < total:
            vote.start(_signalled or stop_file.exists())
            inputs = targets = None
            if batches is not None:
                inputs, targets = next(batches)
                inputs = inputs.to(device, non_blocking=True) if isinstance(inputs, torch.Tensor) else inputs
                targets = targets.to(device, non_blocking=True)
            begin = time.perf_counter()
            loss = trainer.step(inputs, targets)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            took = time.perf_counter() - begin
            step += 1
            within += 1
            if rank == 0:
                row = {"step": step, "epoch": epoch + 1, "loss": loss, "samples_per_s": job.batch / took,
                       "time_s": time.perf_counter() - started, "seen": within * job.batch, "per_epoch": per_epoch,
                       "total": total, "samples": len(dataset)}
                with open(progress, "a") as f:
                    f.write(json.dumps(row) + "\n")
                if shown and (step % shown == 0 or step == total):  # started by torchrun: nobody reads progress
                    print(log_line(row), flush=True)
                if csv is not None:
                    with open(csv, "a", newline="") as f:
                        f.write(csv_line([step, epoch + 1, f"{loss:.6g}", f"{row['samples_per_s']:.4g}",
                                          f"{row['time_s']:.4g}"]))
            asked = vote.agreed()
            if _diverged(loss):
                diverged = f"the loss became {loss} at step {step}"
                break
            if asked:
                stopped = True
                break
            if every and step % every == 0 and step < total:
                checkpoint(step)
                if diverged:
                    break
        if diverged:
            break
    if not diverged:
        checkpoint(step)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return None
    result = {"steps": step, "stopped": stopped, "total": total, "seconds": time.perf_counter() - started,
              "diverged": diverged, "saved_at": saved_at}
    if shown:
        ended = "diverged: " + diverged if diverged else "stopped" if stopped else "done"
        print(f"{ended}: {step}/{total} steps in {result['seconds']:.1f} s"
              + (f"; checkpoint {save} of step {saved_at}" if saved_at else ""), flush=True)
    return result


class _StopVote:
    """Whether any process was asked to stop (a signal, the parent's stop file), agreed by every process:
    each step's vote is an all-reduce on a gloo group of its own, started before the step and read after
    it, so that it overlaps the step rather than holding every process at a barrier (and, on GPUs, costs
    no device sync). A stop asked during step k takes effect after it."""

    def __init__(self, distributed: bool):
        self.group = dist.new_group(backend="gloo") if distributed else None
        self.flag = torch.zeros(1)
        self.work = None

    def start(self, asked: bool) -> None:
        self.flag = torch.tensor([1.0 if asked else 0.0])
        if self.group is not None:
            self.work = dist.all_reduce(self.flag, op=dist.ReduceOp.MAX, group=self.group, async_op=True)

    def agreed(self) -> bool:
        if self.work is not None:
            self.work.wait()
            self.work = None
        return bool(self.flag.item())


def _diverged(loss) -> bool:
    """Whether the step's loss is NaN or infinite. Every Trainer returns the whole batch's loss on every
    process (a pipeline broadcasts it from its last stage, replicas all-reduce it), so every process
    decides alike without a collective of its own, and none waits in one the others left."""
    return loss is not None and not math.isfinite(float(loss))


def _weights_finite(trainer, device, distributed: bool) -> bool:
    """Whether every process's parameters are finite (a collective), checked before a checkpoint; an
    FSDP shard by its own part."""
    finite = all(bool(torch.isfinite(p.to_local() if hasattr(p, "to_local") else p).all())
                 for p in trainer.parameters())
    if distributed:
        flag = torch.tensor([0.0 if finite else 1.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        finite = not flag.item()
    return finite


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    exit_with_parent()
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    def work(job, out_dir, rank, world, local_rank):
        return train(job, read_json(out_dir / "train.json", kind="train settings"), out_dir, rank, world, local_rank)

    return work_and_report(argv, work)


if __name__ == "__main__":
    exit_without_teardown(main)
