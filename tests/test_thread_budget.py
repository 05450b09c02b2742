"""CPU processes stand in for devices: every one of them, and the profile that predicts them, gets one
device's share of the cores (a profile timed with every core, or with torch's default
under load, predicted steps 10-24x off)."""
from __future__ import annotations

import os

import torch

import pipebench
from pipebench.hardware import cpu
from pipebench.partition.profiling import measure


def test_threads_per_device_share_the_cores(monkeypatch):
    monkeypatch.setattr(cpu, "cores", lambda: 8)
    assert [cpu.threads_per_device(d) for d in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]


def test_a_thread_budget_is_restored():
    before = torch.get_num_threads()
    with cpu.thread_budget(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_the_profile_is_timed_with_one_devices_share_of_the_cores(monkeypatch):
    seen = []
    real = measure.profile_sizes

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(cpu, "cores", lambda: 4)
    monkeypatch.setattr(measure, "profile_sizes", spy)
    torch.set_num_threads(3)
    try:
        pipebench.profile("mlp", batch=4, device="cpu", devices=["cpu"] * 4, flavour="tiny", micro_batches=1,
                          link_gbps=0.0)
        pipebench.profile("mlp", batch=4, device="cpu", devices=["cpu"] * 2, flavour="tiny", micro_batches=1,
                          link_gbps=0.0)
        assert torch.get_num_threads() == 3  # given back
    finally:
        torch.set_num_threads(1)
    assert seen == [1, 2]


def test_every_cpu_worker_gets_the_same_budget_whatever_its_strategy():
    from pipebench.bench.cases.case import Case
    from pipebench.bench.cases.prepare import prepare
    from pipebench.bench.cases.machine import Machine

    machine = Machine(None, 2, "cpu")
    budgets = {prepare(Case("mlp", "tiny", 8, strategy, 1, ()), machine, None, steps=1, warmup=0).job.cpu_threads
               for strategy in ("ddp", "dataparallel")}
    assert budgets == {cpu.threads_per_device(2)}


BLOCK = 64 * 2**20
"""Larger than glibc's largest mmap threshold (32 MiB): by default such a block is mapped when allocated
and unmapped when freed, every time, and faulted in again at its next allocation."""


def given_back_when_freed() -> int:
    """Bytes of a 64 MiB tensor (a step's activation) that the process gives back to the kernel when it
    frees it, to fault them in again at the next step."""
    page = os.sysconf("SC_PAGE_SIZE")

    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    block = torch.empty(BLOCK // 4)
    block.fill_(1.0)
    before = resident()
    del block
    return before - resident()


def test_held_memory_keeps_what_is_freed_and_gives_it_back_after():
    with cpu.held_memory():
        held = given_back_when_freed()
    assert held < BLOCK // 8
    assert given_back_when_freed() > BLOCK // 2  # glibc's own behaviour again


def test_the_profile_is_timed_holding_its_memory_as_the_workers_do(monkeypatch):
    seen = []
    real = measure.profile_sizes

    def spy(*args, **kwargs):
        seen.append(given_back_when_freed())
        return real(*args, **kwargs)

    monkeypatch.setattr(measure, "profile_sizes", spy)
    pipebench.profile("mlp", batch=4, device="cpu", devices=["cpu"] * 2, flavour="tiny", micro_batches=1,
                      link_gbps=0.0)
    assert seen and seen[0] < BLOCK // 8


def test_a_cpu_worker_holds_its_memory(tmp_path):
    from pipebench.bench.launch import worker
    from pipebench.bench.launch.job import Job

    job = Job.by_hand("mlp", "single", flavour="tiny", batch=4, devices=1, device_type="cpu", steps=1, warmup=0)
    threads = torch.get_num_threads()
    try:
        worker.run(job, tmp_path, 0, 1, 0)
        assert given_back_when_freed() < BLOCK // 8
    finally:
        cpu.hold_memory(False)
        torch.set_num_threads(threads)
