"""The gloo jobs of the equality tests, run one after another in one torchrun group.

Starting a group costs seconds on two cores (torchrun, a Python and a torch import per process, the
rendezvous) where one tiny model's step costs a fraction of one. So each test marked
`@pytest.mark.together(job=make_job)` hands its job over ahead of time: before the first such test runs, the
`together` fixture (tests/conftest.py) makes every selected test's job, `make_job(**its parameters)`, and
runs those of each process count in one group. Each worker process runs the jobs in turn through the
worker's own `run` (bench/worker.py), each with a process group of its own (keys of its own in torchrun's
store) that `run` starts and destroys as it always does.

A test then calls `together(job, keep=tmp_path, timeout=...)` where it would call bench.launch.launch,
and gets the same: rank 0's result, the workers' files in `keep`, or the WorkerError of its own job. A
job the group never reached (an earlier job failed and ended the group) runs alone, as launch runs it; a
job that was never handed over is a mistake in the test, and fails it.

Run as a script under torchrun: `together.py CASES.json`, a list of [job file, output folder].
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from pipebench.bench.job import Job
from pipebench.bench.launch import (PARENT_ENV, _collect, _kill_group, _loopback_interface, child_env,
                                    exit_with_parent, free_port, launch, worker_command)

SECONDS_PER_JOB = 300
"""The longest a group may go without finishing a job (a launch's own limit in the tests)."""


def _key(job: Job) -> str:
    return json.dumps(asdict(job), sort_keys=True)


class Together:
    """Jobs run ahead of their tests; calling it is bench.launch.launch for one of them."""

    def __init__(self, jobs: list[Job], root: Path):
        self.folders: dict[str, Path] = {}
        groups: dict[tuple[int, int], list[Job]] = {}
        for job in jobs:
            if _key(job) not in self.folders:
                self.folders[_key(job)] = root / f"job{len(self.folders)}"
                groups.setdefault((job.processes, job.cpu_threads), []).append(job)
        for n, group in enumerate(groups.values()):
            _run_group(group, [self.folders[_key(job)] for job in group], root / f"group{n}")

    def __call__(self, job: Job, *, keep: Path, timeout: float = SECONDS_PER_JOB) -> dict:
        folder = self.folders.get(_key(job))
        assert folder is not None, (f"{job.model} {job.strategy}: not among the jobs run together; the test's "
                                    "together marker makes another job than the test runs")
        done = [f for f in folder.glob("*") if f.name == "result.json" or f.name.startswith("error-rank")]
        if not done:  # the group ended before this job
            return launch(job, keep=keep, timeout=timeout)
        shutil.copytree(folder, keep, dirs_exist_ok=True)
        return _collect(job, keep, 0)


def jobs_of(items) -> list[Job]:
    """The jobs of the pytest items marked `together(job=make_job)`: make_job(**the item's parameters).

    A job that cannot be made here (an optional package missing) is left to its test, which then skips
    or fails on its own."""
    jobs = []
    for item in items:
        marker = item.get_closest_marker("together")
        if marker is None:
            continue
        params = item.callspec.params if hasattr(item, "callspec") else {}
        try:
            jobs.append(marker.kwargs["job"](**params))
        except Exception:  # noqa: BLE001 - the test meets the same error itself
            continue
    return [job for job in jobs if job.processes > 1]


def _run_group(jobs: list[Job], folders: list[Path], root: Path) -> None:
    """The jobs in one torchrun group, as bench.launch starts one job's; each job's files in its folder."""
    root.mkdir(parents=True)
    cases = root / "cases.json"
    for job, folder in zip(jobs, folders):
        folder.mkdir(parents=True)
        job.save(folder / "job.json")
    cases.write_text(json.dumps([[str(folder / "job.json"), str(folder)] for folder in folders]))
    command = worker_command(jobs[0], cases, root, port=free_port(), log_dir=root / "torchelastic")
    assert command[-4:-2] == ["-m", "pipebench.bench.worker"], command
    command = [*command[:-4], str(Path(__file__).resolve()), str(cases)]
    env = child_env(None)
    env[PARENT_ENV] = str(os.getpid())
    env["OMP_NUM_THREADS"] = str(jobs[0].cpu_threads)
    env["HF_HUB_OFFLINE"] = "1"  # the Hugging Face fixtures are built from configs: nothing to download
    loopback = _loopback_interface()
    if loopback is not None:
        env.setdefault("GLOO_SOCKET_IFNAME", loopback)
    with open(root / "workers.log", "wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:  # each job gets a launch's own limit: a group stuck on one is stopped, and the rest run alone
        done, since = 0, time.monotonic()
        while proc.poll() is None and time.monotonic() - since < SECONDS_PER_JOB:
            time.sleep(0.2)
            finished = sum((folder / "result.json").exists() for folder in folders)
            if finished > done:
                done, since = finished, time.monotonic()
    finally:
        _kill_group(proc)


def main(cases_path: str) -> None:
    """One worker process: each job in turn, in a process group of its own; the first failure ends the group."""
    import torch.distributed as dist

    from pipebench.bench import worker
    from pipebench.files import write_json

    exit_with_parent()
    rank, world, local_rank = (int(os.environ[name]) for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    store, _, _ = next(dist.rendezvous("env://"))
    start_group = dist.init_process_group
    for n, (job_path, out_dir) in enumerate(json.loads(Path(cases_path).read_text())):
        own = dist.PrefixStore(f"job{n}/", store)
        dist.init_process_group = lambda backend=None, **_: start_group(backend, store=own, rank=rank, world_size=world)
        try:
            result = worker.run(Job.load(job_path), Path(out_dir), rank, world, local_rank)
            if result is not None:
                write_json(Path(out_dir) / "result.json", result)
        except BaseException as exc:  # noqa: BLE001 - as bench/worker.py: the error as a file, then leave at once
            write_json(Path(out_dir) / f"error-rank{rank}.json", worker.error_record(exc, rank))
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1])
