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
from pipebench.bench.launch.worker import build_trainer, set_up_devices
from pipebench.bench.launch.worker_report import exit_without_teardown, work_and_report
from pipebench.base.processes import exit_with_parent
from pipebench.bench.strategies import get_strategy
from pipebench.bench.strategies.trainers import hand_over
from pipebench.bench.train import checkpoint as ckpt
from pipebench.bench.train.train_log import log_line
from pipebench.bench.train.curves import COLUMNS
from pipebench.bench.train.data import open_dataset
from pipebench.bench.train.settings import TrainSettings
from pipebench.base.fileio.csvtext import csv_line
from pipebench.base.fileio.files import read_json

__all__ = ["train", "main", "replica_of", "reads_data"]

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
    if strategy.replicated:  # the Trainer's mesh says which copy this rank is in
        return trainer.replicas, trainer.replica
    replicas = strategy.replicas(world)
    return (replicas, rank) if replicas > 1 else (1, 0)


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


def train(job: Job, settings: TrainSettings, out_dir: Path, rank: int, world: int, local_rank: int) -> dict | None:
    """Train the Job's model with its strategy on the data of `settings` (OUT_DIR/train.json), from its
    checkpoint where it resumes; rank 0 returns the result (steps, stopped, seconds, diverged, saved_at),
    the other ranks None.

    Every process takes the same collectives in the same order: the process group's start, the stop
    vote's group, then each step's (the Trainer's own, then the vote), a checkpoint's (the weights'
    finiteness, then the checkpoint's own) and the closing barrier. Every process leaves the loop at the
    same step: the stop is voted on and a divergence is seen alike on each (_StopVote, _diverged)."""
    strategy = get_strategy(job.strategy)
    distributed = strategy.process_per_device
    set_up_devices(job, local_rank, distributed)
    if distributed:
        dist.init_process_group("nccl" if job.device_type == "cuda" else "gloo")
    save = settings.save
    resume = settings.resume and save
    trainer, optimizer = _build(job, settings, local_rank, save if resume else None)
    layout = {"strategy": job.strategy, "processes": world, "batch": job.batch, "optimizer": job.training.optimizer,
              "precision": job.training.precision, "params": ckpt.parameter_names(trainer)}
    step = _resume(optimizer, save, rank, layout) if resume else _fresh_start(job, rank)
    run = _TrainingProcess(job, settings, out_dir, rank, world, trainer, strategy, optimizer, layout, step)
    run.epochs()
    if not run.diverged:
        run.checkpoint(run.step)
    if distributed:
        dist.barrier()
        dist.destroy_process_group()
    if rank != 0:
        return None
    return run.result()


def _build(job: Job, settings: TrainSettings, local_rank: int, weights_from) -> tuple:
    """(trainer, optimizer): the model from its seed, with the checkpoint's weights where it resumes
    (`weights_from`, checked against the model first), the strategy's Trainer for it, and the Trainer's
    optimizer at the learning rate asked for. The Trainer takes its own share of the batch: a replica's
    loader gives it (ReplicaTrainer, hybrid)."""
    model = models.get_model(job.model, job.flavour, seed=job.seed, **job.overrides)
    if weights_from:
        state = ckpt.load_weights(weights_from)
        ckpt.check_weights(state, model.module, weights_from)
        model.module.load_state_dict(state)
    trainer = build_trainer(job, hand_over(model), local_rank)
    trainer.local_batch = True
    optimizer = trainer._optimizer = trainer.make_optimizer()
    if settings.lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = settings.lr
    return trainer, optimizer


def _resume(optimizer, save, rank: int, layout: dict) -> int:
    """This process's training state from the checkpoint `save` (checked to be of the same layout: the
    same strategy, processes, batch, optimizer, precision and parameters): its optimizer's state, its
    random streams; the step it had reached, returned."""
    path = ckpt.rank_state_path(save, rank)
    latest = read_json(ckpt.state_folder(save) / "latest.json", kind="checkpoint state")  # the parent checked it
    saved = ckpt.load_rank_state(path, step=latest["step"])
    ckpt.check_layout(saved["layout"], layout, path)
    getattr(optimizer, "optim", optimizer).load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng"])
    if saved.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["cuda_rng"])
    return saved["step"]


def _fresh_start(job: Job, rank: int) -> int:
    """A run from step 0, with dropout's random stream seeded, its own per process."""
    torch.manual_seed(job.seed + 2 + rank)
    return 0


class _Data:
    """This process's share of the data: the dataset, the replicas the sampler splits it over and this
    process's one, a replica's share of the batch, whole batches an epoch, and whether this process reads
    at all (reads_data: a pipeline's stages between the first and last do not)."""

    def __init__(self, job: Job, settings: TrainSettings, trainer, strategy, rank: int, world: int):
        self.job, self.loader_workers = job, settings.loader_workers
        self.dataset = open_dataset(settings.data)
        self.replicas, self.replica = replica_of(trainer, strategy, rank, world)
        self.local = job.batch // self.replicas
        self.per_epoch = len(self.dataset) // job.batch
        self.reads = reads_data(trainer, rank)

    def batches(self, epoch: int, within: int):
        """The epoch's batches from batch `within` on (a resumed epoch goes on where it stopped), or None
        where this process reads nothing."""
        if not self.reads:
            return None
        return iter(loader(self.dataset, self.local, self.replicas, self.replica, seed=self.job.seed, epoch=epoch,
                           skip_batches=within, workers=self.loader_workers, pin=self.job.device_type == "cuda"))


class _Log:
    """Rank 0's record of the steps: a line each in OUT_DIR/progress.jsonl (the parent draws the progress
    and the log lines from it) and in the CSV where one is asked for (its header written on a fresh
    start, or where it is missing), and the log line itself every `print_every` steps, for a run that
    torchrun started and no parent reads."""

    def __init__(self, settings: TrainSettings, out_dir: Path, *, writes: bool, fresh: bool):
        self.csv = Path(settings.csv) if settings.csv else None
        self.progress = out_dir / "progress.jsonl"
        self.shown = settings.print_every
        if writes and self.csv is not None and (fresh or not self.csv.exists()):
            self.csv.parent.mkdir(parents=True, exist_ok=True)
            self.csv.write_text(csv_line(COLUMNS), newline="")

    def step(self, row: dict) -> None:
        """One step's row (step, epoch, loss, samples/s, time ...), written everywhere it goes."""
        with open(self.progress, "a") as f:
            f.write(json.dumps(row) + "\n")
        if self.shown and (row["step"] % self.shown == 0 or row["step"] == row["total"]):
            print(log_line(row), flush=True)
        if self.csv is not None:
            with open(self.csv, "a", newline="") as f:
                f.write(csv_line([row["step"], row["epoch"], f"{row['loss']:.6g}", f"{row['samples_per_s']:.4g}",
                                  f"{row['time_s']:.4g}"]))


class _TrainingProcess:
    """One process's training, from the step it starts at to the one it stops at: the steps, epoch by
    epoch; the checkpoints; and how it ended (`stopped` when asked to, `diverged` saying how the loss or
    the weights left the finite numbers, `saved_at` the step of the last checkpoint)."""

    def __init__(self, job: Job, settings: TrainSettings, out_dir: Path, rank: int, world: int, trainer, strategy, optimizer,
                 layout: dict, step: int):
        self.job, self.rank, self.trainer, self.optimizer, self.layout = job, rank, trainer, optimizer, layout
        self.distributed = strategy.process_per_device
        self.step = step
        self.save = settings.save
        self.data = _Data(job, settings, trainer, strategy, rank, world)
        self.total = settings.steps if settings.steps else settings.epochs * self.data.per_epoch
        self.device = trainer.devices[0]
        self.log = _Log(settings, out_dir, writes=rank == 0, fresh=step == 0)
        self.stop_file = out_dir / "stop"
        self.every = settings.save_every or 0
        self.started = time.perf_counter()
        self.stopped = False
        self.diverged = ""
        self.saved_at = None
        self.vote = _StopVote(self.distributed)

    def epochs(self) -> None:
        """Epoch after epoch until the total of steps, a stop or a divergence; each epoch from the step the
        run is at (a resumed run starts within its epoch)."""
        while self.step < self.total and not self.stopped:
            epoch, within = divmod(self.step, self.data.per_epoch)
            self.epoch(epoch, within)
            if self.diverged:
                break

    def epoch(self, epoch: int, within: int) -> None:
        """The epoch's steps from its batch `within` on. Each step's stop vote starts before it and is read
        after it (a stop asked during a step takes effect after it); then the divergence check, the stop,
        and the checkpoint every `save_every` steps (the last is the run's own, after the loop)."""
        batches = self.data.batches(epoch, within)
        while within < self.data.per_epoch and self.step < self.total:
            self.vote.start(_signalled or self.stop_file.exists())
            loss, took = self.one_step(batches)
            within += 1
            if self.rank == 0:
                self.log.step({"step": self.step, "epoch": epoch + 1, "loss": loss,
                               "samples_per_s": self.job.batch / took, "time_s": time.perf_counter() - self.started,
                               "seen": within * self.job.batch, "per_epoch": self.data.per_epoch,
                               "total": self.total, "samples": len(self.data.dataset)})
            asked = self.vote.agreed()
            if _diverged(loss):
                self.diverged = f"the loss became {loss} at step {self.step}"
                return
            if asked:
                self.stopped = True
                return
            if self.every and self.step % self.every == 0 and self.step < self.total:
                self.checkpoint(self.step)
                if self.diverged:
                    return

    def one_step(self, batches) -> tuple:
        """(loss, seconds) of the Trainer's step (the strategy's schedule) on the next batch, moved to this
        process's device; a process that reads no data steps with none."""
        inputs = targets = None
        if batches is not None:
            inputs, targets = next(batches)
            inputs = inputs.to(self.device, non_blocking=True) if isinstance(inputs, torch.Tensor) else inputs
            targets = targets.to(self.device, non_blocking=True)
        begin = time.perf_counter()
        loss = self.trainer.step(inputs, targets)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        took = time.perf_counter() - begin
        self.step += 1
        return loss, took

    def checkpoint(self, at: int) -> None:
        """Save the checkpoint of step `at` where one is asked for, never over the last good weights: weights
        that became NaN or infinite on any process (a collective) are the run's divergence instead."""
        if not self.save:
            return
        if not _weights_finite(self.trainer, self.device, self.distributed):
            self.diverged = self.diverged or f"the weights became NaN or infinite by step {at}"
            return
        ckpt.save_checkpoint(self.save, self.trainer, distributed=self.distributed, rank=self.rank, step=at,
                             layout=self.layout, optimizer=self.optimizer)
        self.saved_at = at

    def result(self) -> dict:
        """Rank 0's result.json, and its closing line where it prints the log itself."""
        result = {"steps": self.step, "stopped": self.stopped, "total": self.total,
                  "seconds": time.perf_counter() - self.started, "diverged": self.diverged, "saved_at": self.saved_at}
        if self.log.shown:
            ended = "diverged: " + self.diverged if self.diverged else "stopped" if self.stopped else "done"
            print(f"{ended}: {self.step}/{self.total} steps in {result['seconds']:.1f} s"
                  + (f"; checkpoint {self.save} of step {self.saved_at}" if self.saved_at else ""), flush=True)
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
        settings = TrainSettings.read(out_dir / "train.json")
        return train(job, settings, out_dir, rank, world, local_rank)

    return work_and_report(argv, work)


if __name__ == "__main__":
    exit_without_teardown(main)
