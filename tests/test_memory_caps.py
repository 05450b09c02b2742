"""A GPU memory cap through `pipebench run`: every case and plan capped, cases predicted not to fit written
as "predicted-oom" rows of their own and not launched (unless --try-anyway), checkpoint auto recomputing
only where a replica would not fit otherwise, and the report listing those rows."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import row
from pipebench.bench.cases import run_options, run_suite
from pipebench.bench.report.tables import frame, markdown_table, ranking, summarise
from pipebench.bench.store.results import append, case_key
from pipebench.bench.cases.case import Case
from pipebench.bench.cases.prepare import CaseProfiles, prepare
from pipebench.bench.cases.case_rows import case_caps, make_row
from pipebench.bench.cases.machine import Machine
from pipebench.partition.profiling.profile_record import LayerProfile, Profile
from pipebench.base.training import Training
from pipebench.base.errors import UserError


MB = 10**6


GIB = 2**30


# ---------------------------------------------------------------------------------------------------- rows

def test_predicted_oom_is_done_for_resume_but_try_anyway_runs_it_again(paths):
    from pipebench.bench.store.results import start_run

    append(row(status="predicted-oom", reason="predicted to need 2 GiB", samples_per_s=None, step_ms=None), *paths)
    assert start_run(*paths, resume=True) == {case_key(row())}
    assert start_run(*paths, resume=True, rerun=["predicted-oom"]) == set()


def test_the_report_lists_predicted_oom_rows_and_groups_by_training():
    rows = [row(strategy="single", gpus="0", world_size=1, samples_per_s=60.0, step_ms=133.0),
            row(),
            row(strategy="pp-1f1b", micro_batches=2, schedule="1f1b", status="predicted-oom",
                reason="no split into 2 stages fits the memory cap", samples_per_s=None, step_ms=None,
                predicted_memory_bytes=[3 * GIB, 2 * GIB], max_memory="1;1"),
            row(strategy="single", gpus="0", world_size=1, samples_per_s=30.0, step_ms=266.0, precision="bf16",
                optimizer="adamw")]
    summary = summarise(frame(rows))
    table = markdown_table(summary)
    assert "predicted out of memory: 3 GiB > cap 1 GiB" in table
    assert "mlp tiny, bf16 adamw" in table and "mlp tiny, tf32 sgd" in table  # mixed: each names its training
    # x one GPU only against the single run of the same training; nothing divides by the missing throughput
    ddp = summary[summary["strategy"] == "ddp"].iloc[0]
    assert ddp["x_single"] == pytest.approx(100.0 / 60.0)
    assert ranking(summary) == ["Ranked: mlp tiny, tf32 sgd: ddp [0,1] 100.0/s, single [0] 60.0/s."]


# ------------------------------------------------------------------------------------------------- the cap

def test_gpu_memory_caps_every_case_and_the_plans(monkeypatch):
    gpus = Machine([0, 1], 2, "NVIDIA H200", caps=[100 * GIB, 5 * GIB])
    gpus = run_options.cap_machine(gpus, None, 10 * GIB)
    assert (gpus.gpu_memory, gpus.caps) == (10 * GIB, [9 * GIB, 5 * GIB])  # the lower of free and asked less 10%
    assert run_options.cap_machine(Machine([0, 1], 2, "x", caps=[100 * GIB] * 2), 20 * GIB, 10 * GIB).caps == [9 * GIB] * 2
    assert case_caps(Case("mlp", "tiny", 8, "ddp"), gpus) == "9;5"  # every strategy is capped for real
    assert case_caps(Case("mlp", "tiny", 8, "ddp"), Machine([0, 1], 2, "x", caps=[GIB] * 2)) == ""
    with pytest.raises(UserError, match="--gpu-memory caps GPU memory, and no CUDA GPU is visible here"):
        run_options.cap_machine(Machine(None, 2, "cpu"), None, GIB)


# --------------------------------------------------------------------------------- predicted out of memory

def profiled(saved_per_sample: int = 100) -> CaseProfiles:
    """Eight layers of 2 MB of parameters on two GPUs, at micro-batches of 64, 32, 16 and 8."""
    def one(micro):
        scale = micro / 64
        layers = [LayerProfile(f"l{i}", MB // 2, 2 * MB, 1.0 * scale, 2.0 * scale, 4000, [8, 125], "float32",
                               saved_per_sample * micro) for i in range(8)]
        return Profile("mlp", "tiny", "cuda:0", "gpu", "x", 64, micro, 1, 0, [micro, 8], "float32", layers,
                       link_gbps=100.0)
    return CaseProfiles([one(64 // m) for m in (1, 2, 4, 8)], Path("unused.profile.json"))


@pytest.mark.parametrize("strategy, message", [
    ("single", "fits the memory cap"),  # the solver's own line, naming the stage
    ("pp-1f1b", "fits the memory cap"),
    ("ddp", "predicted memory exceeds the cap on device 0"),
])
def test_a_case_over_the_cap_is_a_row_of_its_own_and_try_anyway_runs_it(strategy, message):
    machine = Machine([0, 1], 2, "NVIDIA H200", caps=[4 * MB] * 2, gpu_memory=4 * MB)
    case = Case("mlp", "tiny", 64, strategy, training=Training("bf16", "adamw"))
    skipped = prepare(case, machine, profiled(), steps=1, warmup=0)
    assert skipped.job is None and message in skipped.over_cap
    out = make_row(skipped, machine, status="predicted-oom", reason=skipped.over_cap)
    assert out.status == "predicted-oom" and max(out.predicted_memory_bytes) > 4 * MB
    assert out.max_memory and (out.precision, out.optimizer) == ("bf16", "adamw")

    tried = prepare(case, machine, profiled(), steps=1, warmup=0, try_anyway=True)
    assert tried.job is not None and tried.over_cap == skipped.over_cap  # the prediction stays beside the run
    job = tried.job
    assert (job.training, job.gpu_memory) == (Training("bf16", "adamw", "never"), 4 * MB)
    assert (tried.plan is not None) == (strategy != "ddp")  # a pipeline runs the plan cut without the cap


def test_a_case_that_fits_is_launched_with_its_training():
    machine = Machine([0, 1], 2, "NVIDIA H200", caps=[GIB] * 2)
    prepared = prepare(Case("mlp", "tiny", 64, "pp-1f1b", training=Training("fp32", "sgd", "always")), machine,
                       profiled(), steps=1, warmup=0)
    assert prepared.over_cap == "" and prepared.job.training == Training("fp32", "sgd", "always")
    assert prepared.job.gpu_memory is None


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_checkpoint_auto_makes_a_replica_recompute_only_when_it_would_not_fit_otherwise(strategy):
    heavy = profiled(saved_per_sample=10**5)  # 3.2 MB of activations per layer for a replica's 32 samples
    case = Case("mlp", "tiny", 64, strategy, training=Training("fp32", "sgd", "auto"))
    roomy_machine = Machine([0, 1], 2, "NVIDIA H200", caps=[GIB] * 2)
    roomy = prepare(case, roomy_machine, heavy, steps=1, warmup=0)
    assert roomy.job.training.checkpoint == "never" and make_row(roomy, roomy_machine, status="ok", step_ms=[10.0]).reason == ""
    tight_machine = Machine([0, 1], 2, "NVIDIA H200", caps=[roomy.prediction.peak_memory_bytes[0] - 1] * 2)
    tight = prepare(case, tight_machine, heavy, steps=1, warmup=0)
    assert tight.over_cap == "" and tight.prediction.recompute and tight.job.training.checkpoint == "always"
    row = make_row(tight, tight_machine, status="ok", step_ms=[10.0])
    assert row.checkpoint == "auto" and "recomputes every layer" in row.reason  # the case asked auto
    cannot = prepare(Case("mlp", "tiny", 64, "dataparallel", training=case.training), tight_machine, heavy,
                     steps=1, warmup=0, try_anyway=True)
    assert cannot.job.training.checkpoint == "never"  # DataParallel cannot recompute: auto runs it without


def test_run_writes_predicted_oom_rows_without_launching_and_try_anyway_launches(tmp_path, monkeypatch):
    launched = []

    def fake_run(prepared, machine, *, steps, timeout, groups=None, min_seconds=0.0):
        launched.append(prepared)
        return make_row(prepared, machine, status="oom", reason="CUDA out of memory", started_at="2026-12-01T11:00:00")

    monkeypatch.setattr(run_suite, "profile_case_model", lambda *args, **kwargs: profiled())
    monkeypatch.setattr(run_suite, "run_rounds", lambda prepared, machine, *, rounds, note=None, **kw: [
        fake_run(p, machine, **kw) for p in prepared])
    machine = Machine([0, 1], 2, "NVIDIA H200", caps=[4 * MB] * 2, gpu_memory=4 * MB)

    def run(**changes):
        options = run_options.RunOptions(models={"mlp": 64}, strategies=["single", "ddp"], micro_batches=[None],
                                       flavour="tiny", overrides={}, out=tmp_path, resume=True, steps=1, warmup=0,
                                       timeout=60, **changes)
        notes = []
        rows, _, json_path = run_suite.run_suite(options, machine, note=notes.append)
        return rows, json_path, notes

    rows, json_path, _ = run()
    assert [r.status for r in rows] == ["predicted-oom", "predicted-oom"] and not launched
    _, _, notes = run()
    assert sum("done already (--resume)" in n for n in notes) == 2 and not launched
    rows, _, notes = run(try_anyway=True)
    assert len(launched) == 2 and [r.status for r in rows] == ["oom", "oom"]
    assert all(r.predicted_memory_bytes and r.max_memory for r in rows)  # the prediction beside the measurement
    assert any("--try-anyway: predicted memory exceeds the cap" in n for n in notes)
