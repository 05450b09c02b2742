"""What a worker process hands back and how it ends: rank 0's result.json (a benchmark case's is a
`WorkerResult`), or a failing process's error record (error-rank<r>.json: one line naming the root
cause, whether it was out of memory or only a lost peer, the traceback), then an exit without the
interpreter's teardown.

The benchmark's worker (bench/launch/worker.py) and `pipebench train`'s (bench/train/loop.py) both live
this way (`work_and_report`); the parent reads the files back (bench/launch/spawn.py collect_result), and
a benchmark case's result as its record (`WorkerResult.from_record`).
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from pipebench.bench.launch.job import Job
from pipebench.bench.launch.spawn import WorkerError
from pipebench.base.errors import EXIT_USAGE, UserError, printable
from pipebench.base.fileio.files import write_json
from pipebench.base.fileio.records import record

__all__ = ["WorkerResult", "work_and_report", "fail_and_exit", "error_record", "exit_without_teardown"]


@dataclass(frozen=True)
class WorkerResult:
    """Rank 0's result of a benchmark case (bench/launch/worker.py), as result.json holds it: written by
    the worker (`to_record`), read back by the parent (`from_record`), the same fields both ways. A step
    here is the slowest process's: every process times the same steps and the job's step ends with the
    last of them. `pipebench train`'s worker hands back a record of its own (bench/train/loop.py)."""

    strategy: str
    world_size: int
    """The job's processes."""
    devices: list[str]
    """The devices the case ran on, as torch names them ("cuda:0"; one per process where each has one)."""
    device_name: str
    torch_version: str
    first_loss: float | None
    """The first step's loss; None where it was not a finite number (`diverged` says so)."""
    diverged: str
    """How the loss left the finite numbers, the first time it did: "" while it did not."""
    step_ms: list[float]
    """Each timed step, the traced one included (the parent leaves it out: bench/cases/rounds.py)."""
    step_ms_mean: float | None
    step_ms_std: float | None
    samples_per_s: float | None
    """The steps' figures (pipebench/base/step_stats.py StepStats): None without them."""
    peak_memory_bytes: list[int]
    """Each device's peak allocated bytes over the timed steps (0 on a CPU)."""
    warmup_ms: list[float]
    compile_s: float | None
    """What compiling cost (worker.compile_seconds); None uncompiled."""
    graph_breaks: int | None
    """torch.compile's graph breaks; None uncompiled."""
    timeline: list[dict[str, Any]]
    """The traced step's operations, each process's (bench/launch/trace.py), by start."""

    @classmethod
    def from_record(cls, data: Any, where: str = "result.json") -> "WorkerResult":
        """The result a worker wrote (its JSON read back), every field checked against its type; a
        field missing, unknown or of another type is a WorkerError naming it, which fails the case."""
        try:
            return record(cls, data, where)
        except UserError as exc:
            raise WorkerError(f"the worker's result is not one: {exc}") from None

    def to_record(self) -> dict[str, Any]:
        """The result as result.json holds it."""
        return asdict(self)

COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch")
"""Where torch.compile's own errors come from: a failure raised there is the compiler's, said as such."""

PEER_ERRORS = ("connection reset by peer", "connection closed by peer", "broken pipe", "connection refused",
               "remote process exited", "ncclremoteerror", "socket closed")
"""What a process sees when another one of the job died first: a consequence, not the cause."""


def work_and_report(argv: list[str], work) -> int:
    """A worker's life under torchrun: load the Job (argv: job file, out folder), call work(job, out_dir,
    rank, world, local_rank), write what it returns as result.json; any failure reaches the parent as a
    file (`fail_and_exit`). A UserError (a job.json or train.json edited wrong, a data file gone) is also
    one `pipebench: error:` line on stderr and exit status 2, as the command line says bad input: a job
    that --write-job wrote has no parent to read the file. `pipebench train`'s worker (bench/train/loop.py)
    lives the same way."""
    job_path, out_dir = Path(argv[0]), Path(argv[1])
    rank = int(os.environ.get("RANK", 0))
    try:
        job = Job.load(job_path)
        result = work(job, out_dir, rank, int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0)))
        if result is not None:
            write_json(out_dir / "result.json", result)
        return 0
    except UserError as exc:  # bad input (a written job's file edited by hand): said also where no parent reads
        _say(f"pipebench: error: {printable(str(exc))}")
        fail_and_exit(exc, rank, out_dir, EXIT_USAGE)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the parent as a file
        fail_and_exit(exc, rank, out_dir)


def _say(line: str) -> None:
    """`line` on stderr, as the command line says bad input: one line, for whoever started this worker
    (torchrun from a job --write-job wrote, whose user sees no parent's message); a parent's log takes it."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: the error file still says it
        pass


def exit_without_teardown(main) -> None:
    """Run main and leave without the interpreter's teardown: the result is written, and the destructors
    of the process group's threads and DDP's reducer at exit are what can still fail then (CI saw a finished
    DDP worker die of SIGABRT after its result; a peer that finished first then waits on a dead socket)."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def fail_and_exit(exc: BaseException, rank: int, out_dir: Path, status: int = 1) -> None:
    """Write the error for the parent and leave at once with `status` (EXIT_USAGE for bad input): peers
    blocked in a collective are ended by torchrun, not waited for."""
    write_json(out_dir / f"error-rank{rank}.json", error_record(exc, rank))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def error_record(exc: BaseException, rank: int) -> dict:
    """What the parent learns of a failure: one line, whether it was out of memory, whether it only
    lost a peer that failed first (bench.launch.spawn.first_error names the cause before such a consequence), the traceback.
    The line names the root cause: torch.distributed.pipelining wraps a stage's error in "Failed to run
    stage backward:" plus the tensors' shapes, so an out-of-memory would otherwise read as a failure."""
    chain = _causes(exc)
    root = chain[-1]
    outer, inner = _first_line(exc), _first_line(root)
    message = inner if root is exc else f"{inner} (in: {outer.rstrip(':')})"
    if any(type(e).__module__.startswith(COMPILER_MODULES) for e in chain):
        message = f"torch.compile failed: {inner}"
    return {
        "rank": rank,
        "type": type(root).__name__,
        "message": message,
        "oom": any(isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e).lower() for e in chain),
        "unavailable": type(exc).__name__ == "UnavailableStrategy",
        "peer": any(text in str(exc).lower() for text in PEER_ERRORS),
        "traceback": traceback.format_exc(),
        "time": time.time(),
    }


def _causes(exc: BaseException) -> list[BaseException]:
    """exc, then what raised it (__cause__, else __context__), down to the first error. An error raised
    `from None` is its own root, as its traceback says: it replaced what it was raised during (a
    UserError's one line for an OSError's)."""
    chain = [exc]
    while (nxt := _cause(chain[-1])) is not None and nxt not in chain:
        chain.append(nxt)
    return chain


def _cause(exc: BaseException) -> BaseException | None:
    return exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


def _first_line(exc: BaseException) -> str:
    message = str(exc).strip()
    return message.splitlines()[0] if message else type(exc).__name__
