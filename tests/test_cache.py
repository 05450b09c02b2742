"""The profile cache (partition/profiling/cache.py): a size measured once is served again, and only when
everything that changes its figures is the same; a stale or corrupt entry is measured again."""
from __future__ import annotations

import json

import pytest
import torch

import pipebench
from pipebench.partition.profiling import measure
from pipebench.partition.profiling.cache import ProfileCache

TINY = dict(batch=4, device="cpu", flavour="tiny", micro_batches=[1, 2], repeats=1)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEBENCH_CACHE", str(tmp_path / "cache"))
    return ProfileCache(tmp_path / "cache")


@pytest.fixture
def measured(monkeypatch):
    """The micro-batch sizes measured for real, in order."""
    sizes = []
    real = measure.profile_model

    def counting(model, device, micro_batch, **kwargs):
        sizes.append(micro_batch)
        return real(model, device, micro_batch, **kwargs)

    monkeypatch.setattr(measure, "profile_model", counting)
    return sizes


def test_a_second_profile_comes_from_the_cache(cache, measured, one_thread):
    first = pipebench.profile("mlp", **TINY)
    assert sorted(measured) == [2, 4]
    second = pipebench.profile("mlp", **TINY)
    assert sorted(measured) == [2, 4]  # nothing measured again
    assert [p.profile_id for p in second] == [p.profile_id for p in first]
    assert all(p.profile_id for p in first)
    assert [p.to_dict() for p in second] == [p.to_dict() for p in first]
    pipebench.profile("mlp", **{**TINY, "micro_batches": [1, 2, 4]})  # only the new size is measured
    assert sorted(measured) == [1, 2, 4]


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_what_changes_the_figures_is_measured_again(cache, measured, one_thread):
    pipebench.profile("mlp", **TINY)
    pipebench.profile("mlp", **TINY, precision="bf16")
    pipebench.profile("mlp", **TINY, settings={"depth": 2})
    pipebench.profile("mlp", **{**TINY, "batch": 8})
    assert len(measured) == 8
    pipebench.profile("mlp", **TINY, fresh=True)
    assert len(measured) == 10


def test_a_corrupt_or_stale_entry_is_measured_again(cache, measured, one_thread):
    pipebench.profile("mlp", **TINY)
    files = sorted((cache.folder / "profiles").glob("*.json"))
    assert len(files) == 2
    files[0].write_text("{not json")
    data = json.loads(files[1].read_text())
    data["key"]["torch"] = "0.0"  # a key that does not match its name
    files[1].write_text(json.dumps(data))
    pipebench.profile("mlp", **TINY)
    assert len(measured) == 4


def test_an_entry_that_is_a_link_is_replaced_not_written_through(cache, tmp_path):
    """A cache entry that is a symlink to a regular file is replaced, not written through: a link planted in a
    shared PIPEBENCH_CACHE leaves the file it points to as it is."""
    key = {"links": ["cpu", "cpu"]}
    other = tmp_path / "someone_elses.txt"
    other.write_text("theirs\n")
    entry = cache._path(key, "links")
    entry.parent.mkdir(parents=True)
    entry.symlink_to(other)
    cache.put_links(key, {"link_gbps": 2.0})
    assert other.read_text() == "theirs\n"
    assert not entry.is_symlink() and cache.get_links(key)["link_gbps"] == 2.0


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_a_module_object_is_not_cached(cache, measured, one_thread):
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    for _ in range(2):
        profiles = pipebench.profile(module, torch.randn(2, 4), batch=4, device="cpu", micro_batches=1, repeats=1)
    assert len(measured) == 2 and profiles[0].profile_id is None
    assert not (cache.folder / "profiles").exists()


def test_the_command_line_says_it_used_the_cache(cache, capsys, one_thread):
    from pipebench.bench.cli import main

    args = ["plan", "--model", "mlp", "--flavour", "tiny", "--stages", "2", "--device", "cpu", "--batch", "4",
            "--micro-batches", "2", "--repeats", "1", "--link-gbps", "0"]
    assert main(args) in (0, None)
    assert "profile cache" not in capsys.readouterr().err
    assert main(args) in (0, None)
    assert "from the profile cache" in capsys.readouterr().err
    assert main([*args, "--fresh"]) in (0, None)
    assert "from the profile cache" not in capsys.readouterr().err


def test_a_plan_names_the_profile_it_came_from(cache, one_thread):
    plan = pipebench.plan("mlp", batch=4, stages=2, device="cpu", flavour="tiny", micro_batches=2, repeats=1,
                          link_gbps=0)
    again = pipebench.Plan.from_dict(plan.to_dict())
    assert plan.profile_id and again.profile_id == plan.profile_id


def test_a_run_profiles_only_what_its_strategies_need():
    from pipebench.bench.strategies import profile_counts

    assert profile_counts([None], 2, batch=64, strategies=["single"]) == [1]
    assert profile_counts([None], 2, batch=64, strategies=["single", "ddp", "fsdp"]) == [1, 2]
    assert profile_counts([None], 2, batch=64, strategies=["single", "pp-1f1b"]) is None  # the planner picks
    assert profile_counts([4], 2, batch=64, strategies=["pp-1f1b"]) == [1, 4]
    # only sizes that split the batch: 2 would not split 7, and single and pp-1f1b --micro-batches 1 need none of it
    assert profile_counts([1], 2, batch=7, strategies=["single", "pp-1f1b"]) == [1]
    assert profile_counts([1], 2, batch=1, strategies=["single", "pp-gpipe"]) == [1]
    assert profile_counts([1], 2, batch=7, strategies=["single", "dataparallel"]) == [1]


def test_cached_sizes_keep_their_link_figures_too(cache, monkeypatch, one_thread):
    from pipebench.hardware import cpu_processes
    from pipebench.partition.planning.simulator import pipeline_costs

    timed = []
    monkeypatch.setattr(cpu_processes, "measure_cpu_processes", lambda devices: timed.append(1) or {
        "link_gbps": 2.0, "allreduce_gbps": 1.0, "link_latency_ms": 0.05, "collective_ms": 0.2, "core_contention": 1.25,
        "pipeline_step_ms": 6.0, "fsdp_layer_ms": 0.7, "ddp_ms": 0.4, "ddp_layer_ms": 0.02})
    hop, action = pipeline_costs(6.0, 2, cpu_processes.PIPELINE_MICRO_BATCHES, 0.05)
    first = pipebench.profile("mlp", **{**TINY, "devices": ["cpu", "cpu"]})
    second = pipebench.profile("mlp", **{**TINY, "devices": ["cpu", "cpu"]})
    assert len(timed) == 1  # the second answer starts no processes to time gloo again
    figures = lambda p: (p.link_gbps, p.allreduce_gbps, p.link_latency_ms, p.collective_ms, p.core_contention,  # noqa: E731
                         p.action_ms, p.fsdp_layer_ms, p.ddp_ms, p.ddp_layer_ms)
    assert [figures(p) for p in second] == [figures(p) for p in first] == [(2.0, 1.0, hop, 0.2, 1.25, action, 0.7, 0.4, 0.02)] * 2
    pipebench.profile("mlp", **{**TINY, "devices": ["cpu", "cpu"]}, fresh=True)
    assert len(timed) == 2


ADVISE = ["advise", "--batch", "4", "--stages", "2", "--device", "cpu", "--micro-batches", "2", "--repeats", "1",
          "--link-gbps", "0"]


def own_model(tmp_path):
    """--model FILE.py:Net for a file that counts its imports in net.imported."""
    path = tmp_path / "net.py"
    path.write_text("import pathlib\n"
                    "import torch\n"
                    "pathlib.Path(__file__).with_suffix('.imported').open('a').write('x')\n\n\n"
                    "class Net(torch.nn.Sequential):\n"
                    "    def __init__(self):\n"
                    "        super().__init__(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))\n")
    return ["--model", f"{path}:Net", "--input-shape", "4"], tmp_path / "net.imported"


def test_a_cached_answer_builds_no_model_and_imports_no_model_file(cache, tmp_path, monkeypatch, capsys, one_thread):
    import sys

    from pipebench import models
    from pipebench.bench.cli import main

    mine, imported = own_model(tmp_path)
    asked = [["--model", "mlp", "--flavour", "tiny"], mine]
    first = []
    for model in asked:
        assert main([*ADVISE, *model]) == 0
        first.append(capsys.readouterr().out)
    for name in [m for m in sys.modules if m.startswith("pipebench_user_")]:  # a new process, as far as imports go
        monkeypatch.delitem(sys.modules, name)
    built = []
    real = models.get_model
    monkeypatch.setattr(models, "get_model", lambda *a, **k: built.append(a[0]) or real(*a, **k))
    imports = imported.read_text()
    for model, answer in zip(asked, first):
        assert main([*ADVISE, *model]) == 0
        out, err = capsys.readouterr()
        assert out == answer and "from the profile cache" in err
    assert built == [] and imported.read_text() == imports  # no model built, the file not imported
    assert main([*ADVISE, *mine, "--fresh"]) == 0  # --fresh measures: it builds the model again
    assert built and imported.read_text() == imports + "x"


def test_a_cached_answer_imports_no_torch(cache, one_thread):
    import subprocess
    import sys

    from pipebench.bench.cli import main

    argv = [*ADVISE, "--model", "mlp", "--flavour", "tiny"]
    assert main(argv) == 0
    code = (f"import sys; from pipebench.bench.cli import main; code = main({argv!r}); "
            "sys.exit(code or 3 * ('torch' in sys.modules))")
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert answer.returncode == 0, answer.stderr
    assert "from the profile cache" in answer.stderr and "recommended:" in answer.stdout


@pytest.mark.ci  # a whole process or a second profile, 5-15 s: CI runs it after the default set
def test_the_default_flavour_named_or_not_is_one_key(cache, measured, one_thread):
    """advise and plan ask for no flavour, run names the default: one measurement serves both ways."""
    small = {**TINY, "flavour": None, "settings": {"in_features": 8, "hidden": 8, "depth": 1}}
    first = pipebench.profile("mlp", **small)
    assert len(measured) == 2
    named = pipebench.profile("mlp", **{**small, "flavour": "full"})
    again = pipebench.profile("mlp", **small)
    assert len(measured) == 2
    assert [p.profile_id for p in named] == [p.profile_id for p in again] == [p.profile_id for p in first]
    pipebench.profile("mlp", **{**small, "batch": 8, "flavour": "full"})  # named first, then not
    pipebench.profile("mlp", **{**small, "batch": 8})
    assert len(measured) == 4
