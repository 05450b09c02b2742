"""torchrun for one machine: `python -P -m pipebench.bench.launch.torchrun_agent OUT_DIR TORCHRUN_ARGS...`.

A multi-process Job's workers are started by torch's own launcher, torch.distributed.run, run inside this
module (bench/launch/spawn.py's `worker_command`) rather than as the `torchrun` script, for three changes:
- torchrun's two stores (the rendezvous store, and the store its workers share) listen on every
  interface and take no address; here each store the endpoint puts on a loopback address listens on
  127.0.0.1 only (bench/launch/loopback.py);
- a worker killed from outside writes no record; its death, as torchrun saw it, goes to
  OUT_DIR/error-rank<r>.json, so that the row names it rather than a survivor's lost connection;
- it ends with `pipebench` (pipebench.base.processes.exit_with_parent), and its workers with it.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Sequence

from pipebench.bench.launch.loopback import is_loopback, listen_on_loopback
from pipebench.base.processes import PARENT_ENV, exit_with_parent

__all__ = ["agent", "record_deaths"]


def agent(argv: Sequence[str]) -> int:
    """torchrun's main with loopback stores; the exit status 1 when a worker failed (its death recorded)."""
    exit_with_parent()
    os.environ[PARENT_ENV] = str(os.getpid())  # our workers: should we die while they start, they know
    out_dir, torchrun_args = Path(argv[0]), list(argv[1:])
    import torch.distributed as dist
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend

    class LoopbackStore(dist.TCPStore):
        def __init__(self, host_name, port, world_size=None, is_master=False, **options):
            if not (is_master and is_loopback(host_name)):
                super().__init__(host_name, port, world_size, is_master, **options)
                return
            fd, port = listen_on_loopback(port)
            super().__init__(host_name, port, world_size, is_master, master_listen_fd=fd, **options)

    # Where torchrun makes them: dynamic_rendezvous calls dist.TCPStore, the c10d backend its own import.
    dist.TCPStore = c10d_rendezvous_backend.TCPStore = LoopbackStore
    try:
        torchrun.main(torchrun_args)
    except ChildFailedError as exc:
        record_deaths(exc.failures, out_dir)
        return 1
    return 0


def record_deaths(failures: dict, out_dir: Path) -> None:
    """Write error-rank<r>.json for each failed worker that wrote none: killed by a signal (SIGKILL from
    the out-of-memory killer or a user), or crashed in C++. `failures`: torchrun's, by rank."""
    from pipebench.base.fileio.files import write_json

    for rank, failure in failures.items():
        path = out_dir / f"error-rank{rank}.json"
        if path.exists():
            continue
        code = failure.exitcode
        killed = code < 0
        write_json(path, {
            "rank": rank, "type": "Killed" if killed else "Exited",
            "message": f"ended by {failure.signal_name()} before it could report an error" if killed
            else f"exited with status {code} without reporting an error",
            "oom": False, "unavailable": False, "peer": False, "traceback": "", "time": time.time(),
        })


if __name__ == "__main__":
    sys.exit(agent(sys.argv[1:]))
