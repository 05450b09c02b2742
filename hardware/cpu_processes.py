"""What CPU stand-ins for several devices cost each other, timed in processes as the workers run: gloo's
messages and collectives, the cores' contention, and the pipeline runtime's, FSDP2's and DDP's own costs.
"""
from __future__ import annotations

import os
import sys
import time

from pipebench.base.errors import DeviceError
from pipebench.base.snapshot import own_state

__all__ = ["measure_cpu_processes", "PIPELINE_MICRO_BATCHES"]


@own_state()  # its peers are fresh processes: this one must send what they expect (float32, no autocast)
def measure_cpu_processes(devices: int = 2, megabytes: int = 4, repeats: int = 5, messages: int = 20,
                          rounds: int = 3) -> dict[str, float]:
    """What CPU stand-ins for `devices` devices cost each other, timed as the workers run: `devices`
    processes (this one and devices - 1 it starts, `python -P -m pipebench.hardware.cpu_processes --peer DIR ...`,
    about two seconds to import torch; 10 s in all), one device's share of the threads each, in a gloo group.
    By the profile's names (partition/profiling/cache.py's LINK_FIELDS but machine_drift, which the profiling
    process measures itself, and action_ms, which the simulator's terms make of pipeline_step_ms); each of
    `messages` or `repeats` timings, at the machine's unloaded speed as the profile's times are:
    hardware/cpu.py unloaded_ms:

    - link_gbps, allreduce_gbps: a 4 MB message between the first two, an all-reduce over all (bus GB/s,
      the latency in: conservative, never a division by noise); they price cuts and DDP's buckets;
    - gather_gbps, scatter_gbps: the bus bandwidth of FSDP2's own gathers and reduce-scatters (one figure
      for both): a stack of RUNTIME_LAYERS fully_shard-ed Linear(GATHER_WIDTH, GATHER_WIDTH) layers (34 MB)
      against the same stack unsharded, less what the stack of tiny layers below costs per layer, is
      its bytes' time (two gathers and a reduce-scatter a layer). A bare all-gather and reduce-scatter of
      4 MB measure 0.09 to 0.72 GB/s from one probe to the next on a shared 2-vCPU VM, where FSDP2's own
      measure 0.37 to 0.62 (results/2026-12-02-cpu2-fsdp-probe): the bare ones would price ResNet-18's FSDP
      step 62-73% slow;
    - link_latency_ms: a message's latency: half a send/recv round trip of one number (of `messages`);
    - collective_ms: an all-reduce of one number: the loss's all-reduce or broadcast that ends every
      step of the replica strategies and the pipelines, and each bucket's fixed cost;
    - core_contention: how much slower a step is when every process computes and then synchronises than
      when one does (at least 1.0): a convolution's forward and backward (a training step's mix of
      arithmetic and memory traffic) between two barriers, alone and all at once alternating `rounds`
      times, `repeats` runs each, so that a burst of someone else's load falls on both sides;
    - pipeline_step_ms: torch.distributed.pipelining's own costs: the step of a Schedule1F1B over the
      processes, of stages too small to compute, and PIPELINE_MICRO_BATCHES micro-batches. The planner
      turns it into the cost per operation (forward or backward of one micro-batch, sends and receives
      included) and the hop it charges them (partition/planning/simulator.py pipeline_costs: the profile's
      action_ms and link_latency_ms). A one-process schedule, which sends nothing, measures 0.1 ms an
      operation where gpt tiny's two-process 1F1B spends 0.4 to 0.5 ms beyond its compute;
    - fsdp_layer_ms: FSDP2's own cost per sharded layer and step (its hooks, its gathers' and
      reduce-scatters' calls and their waits): a stack of RUNTIME_LAYERS fully_shard-ed Linear layers
      against the same stack unsharded, per layer; bench/strategies/fsdp/cost.py fsdp_step charges it
      once per block it shards;
    - ddp_ms, ddp_layer_ms: DistributedDataParallel around a stack of 2 and of 2 + RUNTIME_LAYERS Linear
      layers against the same stacks bare: what grows with the layers (its gradient hooks, the bucket
      copies) per layer, and what is left per step (its forward's own work, the bucket's all-reduce and
      its wait); bench/strategies/ddp/cost.py ddp_step charges both.

    Processes, not threads of one process (_start_peers says why)."""
    import tempfile

    from pipebench.hardware.cpu import held_memory, thread_budget, threads_per_device

    devices = max(2, devices)
    threads = threads_per_device(devices)
    sizes = [megabytes, repeats, messages, rounds]
    with tempfile.TemporaryDirectory(prefix="pipebench-cpu-") as folder:
        peers = _start_peers(folder, threads, devices, sizes)
        try:
            with thread_budget(threads), held_memory():
                figures = _peer(folder, 0, devices, *sizes)
        except BaseException as exc:
            failure = _probe_failed(exc, peers)  # the peers ended, whatever ended the probe
            if not isinstance(exc, Exception):  # Ctrl-C, SIGTERM (the CLI's KeyboardInterrupt): the caller's
                raise  # "interrupted", exit 130, not a "probe failed" DeviceError with no reason
            raise failure from None
        for peer in peers:  # read to the end, which closes the pipe (wait() alone left it open)
            peer.communicate()
    return figures


def _start_peers(folder: str, threads: int, devices: int, sizes: list[int]) -> list:
    """The devices - 1 processes of measure_cpu_processes beside this one (ranks 1 on), each `python -P -m
    pipebench.hardware.cpu_processes --peer FOLDER ...` on `threads` threads; their stderr kept for _probe_failed.

    Processes, not threads of one process: a synchronised step ends when the slowest process has been
    scheduled, computed and answered, which the cores' sharing and the machine's other load decide. On a
    2-vCPU VM under other jobs' load, gpt tiny's two DDP processes compute 1.5x slower at once than
    alone where threads measure 1.1x, and a message takes 0.1 to 1.8 ms one way from one minute to the
    next, where threads of one process measure 0.04 to 1.9 ms from run to run."""
    import subprocess

    from pipebench.base.processes import PARENT_ENV, TEMP_ENV

    # Each peer ends itself, and removes the folder, within a second of this process ending (exit_with_parent)
    env = {**os.environ, PARENT_ENV: str(os.getpid()), TEMP_ENV: folder}
    return [subprocess.Popen([sys.executable, "-P", "-m", "pipebench.hardware.cpu_processes", "--peer", folder,
                              *map(str, [threads, rank, devices, *sizes])],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            for rank in range(1, devices)]


def _probe_failed(exc: BaseException, peers: list) -> DeviceError:
    """The probe's failure in one line, once the peers are ended: what failed in this process, and the
    last line any peer wrote to its stderr."""
    for peer in peers:
        peer.kill()
    why = [line for peer in peers for line in peer.communicate()[1].decode(errors="replace").splitlines()]
    last = f" ({why[-1].strip()})" if why else ""
    return DeviceError(f"the CPU processes' probe failed: {exc}{last}")


def _peer(folder: str, rank: int, world: int, megabytes: int = 4, repeats: int = 5, messages: int = 20,
          rounds: int = 3) -> dict[str, float]:
    """One process of measure_cpu_processes, in a gloo group of `world` met in a FileStore under `folder`;
    rank 0 returns the figures. Every process takes the same measurements in the same order, each span
    started at a barrier of all (_spans_ms): the messages' costs, the cores' contention, then the
    runtimes' own costs in a process group of their own."""
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.FileStore(f"{folder}/store", world)
    group = dist.ProcessGroupGloo(dist.PrefixStore("pipebench-probe", store), rank, world, timedelta(seconds=60))
    sent = _message_costs(group, rank, megabytes, repeats, messages)
    contention = _core_contention(group, rank, repeats, rounds)
    runtimes = _runtime_costs(store, group, rank, world, messages)
    group.barrier().wait()
    return _figures(world, sent, contention, runtimes)


def _spans_ms(group, run, times: int) -> list[float]:
    """`times` timings (ms) of run(), each started at a barrier of every process, as a synchronised step
    starts; one more is taken first and left out (its first call's own costs)."""
    spans = []
    for _ in range(times + 1):
        group.barrier().wait()
        start = time.perf_counter()
        run()
        spans.append((time.perf_counter() - start) * 1e3)
    return spans[1:]


def _message_costs(group, rank: int, megabytes: int, repeats: int, messages: int) -> dict[str, float]:
    """What a message costs, each its unloaded ms (hardware/cpu.py unloaded_ms): half a round trip of one
    number between the first two processes (a hop's latency) and of `megabytes` (a cut's copy), then an
    all-reduce over all of those bytes (DDP's buckets) and of one number (what ends every step); and the
    bytes of the large message."""
    import torch

    from pipebench.hardware.cpu import unloaded_ms

    def ping(tensor) -> None:  # there and back between the first two: twice one message
        if rank < 2:
            for turn in (0, 1):
                (group.send if turn == rank else group.recv)([tensor], 1 - rank, 0).wait()

    small, large = torch.zeros(1), torch.zeros(megabytes * 10**6 // 4)
    latency = unloaded_ms(_spans_ms(group, lambda: ping(small), messages)) / 2
    copy = unloaded_ms(_spans_ms(group, lambda: ping(large), repeats)) / 2
    reduce = unloaded_ms(_spans_ms(group, lambda: group.allreduce([large]).wait(), repeats))
    collective = unloaded_ms(_spans_ms(group, lambda: group.allreduce([small]).wait(), messages))
    return {"latency": latency, "copy": copy, "reduce": reduce, "collective": collective, "bytes": large.numel() * 4}


def _core_contention(group, rank: int, repeats: int, rounds: int) -> float:
    """How much slower a step is when every process computes and then synchronises than when rank 0 alone
    does (at least 1.0): a convolution's forward and backward, then an all-reduce of one number, alone and
    all at once alternating `rounds` times, so that a burst of someone else's load falls on both sides."""
    import torch

    from pipebench.hardware.cpu import unloaded_ms

    small = torch.zeros(1)
    x = torch.randn(8, 32, 32, 32, requires_grad=True)
    weight = torch.randn(32, 32, 3, 3, requires_grad=True)

    def step(computes: bool) -> None:  # compute (or not), then wait for the others, as a step ends
        if computes:
            torch.nn.functional.conv2d(x, weight, padding=1).relu().sum().backward()
        group.allreduce([small]).wait()

    alone: list[float] = []
    together: list[float] = []
    for _ in range(rounds):
        alone += _spans_ms(group, lambda: step(rank == 0), repeats)
        together += _spans_ms(group, lambda: step(True), repeats)
    return max(1.0, unloaded_ms(together) / unloaded_ms(alone))


def _stack(n: int, width: int = 1):
    """n Linear(width, width) layers in a row."""
    import torch

    return torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(n)])


def _sharded(n: int, mesh, width: int = 1):
    """_stack's layers, each fully_shard-ed over `mesh` (FSDP2)."""
    from torch.distributed.fsdp import fully_shard

    layers = _stack(n, width)
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    return layers


def _extra_ms(group, wrapped, plain, times: int) -> float:
    """What `wrapped` adds to a forward and backward of `plain`, each a step of every process."""
    import torch

    from pipebench.hardware.cpu import unloaded_ms

    one = torch.zeros(1, plain[0].in_features)
    return (unloaded_ms(_spans_ms(group, lambda: wrapped(one).sum().backward(), times))
            - unloaded_ms(_spans_ms(group, lambda: plain(one).sum().backward(), times)))


def _runtime_costs(store, group, rank: int, world: int, messages: int) -> dict:
    """What torch's own runtimes cost beyond the work, measured in a default process group of their own
    (they take no explicit one), left before the probe's last barrier: a Schedule1F1B step over stages
    too small to compute (ms); FSDP2's cost per sharded layer, and its wide layers' gathers' ms beyond it
    with their bytes; DDP's extra ms around a stack of 2 and of 2 + RUNTIME_LAYERS layers."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    from torch.nn.parallel import DistributedDataParallel

    from pipebench.hardware.cpu import unloaded_ms

    dist.init_process_group("gloo", store=dist.PrefixStore("pipebench-runtimes", store), rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))  # FSDP2's default mesh would be CUDA's where a GPU is visible
        stage = PipelineStage(torch.nn.Linear(1, 1), rank, world, torch.device("cpu"))
        schedule = Schedule1F1B(stage, PIPELINE_MICRO_BATCHES, loss_fn=lambda out, target: out.sum())
        batch = torch.zeros(PIPELINE_MICRO_BATCHES, 1)
        ends = {0: lambda: schedule.step(batch), world - 1: lambda: schedule.step(target=batch)}
        pipeline = unloaded_ms(_spans_ms(group, ends.get(rank, schedule.step), messages))
        fsdp_layer = (_extra_ms(group, _sharded(RUNTIME_LAYERS, mesh), _stack(RUNTIME_LAYERS), messages)
                      / RUNTIME_LAYERS)
        wide = _stack(RUNTIME_LAYERS, GATHER_WIDTH)
        fsdp_bytes = (_extra_ms(group, _sharded(RUNTIME_LAYERS, mesh, GATHER_WIDTH), wide, messages // 2)
                      - fsdp_layer * RUNTIME_LAYERS)
        wide_bytes = sum(p.numel() * p.element_size() for p in wide.parameters())
        ddp = [_extra_ms(group, DistributedDataParallel(_stack(n)), _stack(n), messages)
               for n in (2, 2 + RUNTIME_LAYERS)]
    finally:
        dist.destroy_process_group()
    return {"pipeline": pipeline, "fsdp_layer": fsdp_layer, "fsdp_bytes": fsdp_bytes, "wide_bytes": wide_bytes,
            "ddp": ddp}


def _figures(world: int, sent: dict, contention: float, runtimes: dict) -> dict[str, float]:
    """The measurements by the profile's names, the pipeline's step as measured (measure_cpu_processes says each)."""
    nbytes = sent["bytes"]
    # busbw of an all-reduce over p: 2 (p - 1) / p x bytes / time
    # bus GB/s of FSDP2's collectives: each layer's bytes gathered twice and reduce-scattered once, each
    # moving (p - 1) / p of them; the bytes' time is at least 1 ms (never a division by noise)
    fsdp_gbps = 3 * (world - 1) / world * runtimes["wide_bytes"] / max(1.0, runtimes["fsdp_bytes"]) / 1e6
    ddp = runtimes["ddp"]
    ddp_layer = max(1e-3, (ddp[1] - ddp[0]) / RUNTIME_LAYERS)
    return {"link_gbps": nbytes / sent["copy"] / 1e6,
            "allreduce_gbps": 2 * (world - 1) / world * nbytes / sent["reduce"] / 1e6,
            "gather_gbps": fsdp_gbps, "scatter_gbps": fsdp_gbps,
            "link_latency_ms": sent["latency"], "collective_ms": sent["collective"],
            "core_contention": contention,
            "pipeline_step_ms": runtimes["pipeline"], "fsdp_layer_ms": max(1e-3, runtimes["fsdp_layer"]),
            "ddp_ms": max(1e-3, ddp[0] - 2 * ddp_layer), "ddp_layer_ms": ddp_layer}


RUNTIME_LAYERS = 8
"""The layers of measure_cpu_processes' FSDP2 and DDP stacks (and 2 more for DDP's second)."""


GATHER_WIDTH = 1024
"""The width of the Linear layers whose FSDP2 gathers measure_cpu_processes times: 4.2 MB each, as large as
a ResNet's or a small GPT's largest layers, whose bytes dominate their FSDP steps (gloo's bandwidth grew
with the message: through FSDP2, 0.42-0.51 GB/s with layers of 1 MB and 0.59-0.63 with 4 MB, in launches
minutes apart)."""


PIPELINE_MICRO_BATCHES = 8
"""The micro-batches of measure_cpu_processes' pipeline of stages too small to compute."""


if __name__ == "__main__":  # a peer process of measure_cpu_processes: --peer DIR THREADS RANK WORLD SIZES...
    from pipebench.base.processes import exit_with_parent

    exit_with_parent()  # before torch's import: a parent killed meanwhile is noticed too
    import signal

    # Ctrl-C reaches the whole process group: the parent is the one to stop (it ends this peer); a peer
    # that died of it first would make the parent's probe fail with gloo's "Connection reset by peer".
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    from pipebench.hardware.cpu import hold_memory

    torch.set_num_threads(int(sys.argv[3]))
    hold_memory()  # as the workers it prices do (bench/launch/worker.py)
    _peer(sys.argv[2], *map(int, sys.argv[4:]))
