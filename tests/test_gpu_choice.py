"""Choosing GPUs on a shared server, through a fake NVML: free memory, utilisation, CUDA_VISIBLE_DEVICES."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipebench.bench.cli import main
from pipebench.base.errors import DeviceError
from pipebench.hardware.gpus import GpuInfo, choose_gpus, free_memory_caps, parse_gpu_choice, query_gpus

GIB = 2**30


class FakeNVML:
    """pynvml's functions over a list of GPUs: (name, uuid, total GiB, used GiB, util %, processes)."""

    def __init__(self, gpus, fail=False):
        self.gpus = gpus
        self.fail = fail
        self.open = False

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")
        self.open = True

    def nvmlShutdown(self):
        self.open = False

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetName(self, h):
        return self.gpus[h][0].encode()  # old pynvml returns bytes

    def nvmlDeviceGetUUID(self, h):
        return self.gpus[h][1]

    def nvmlDeviceGetMemoryInfo(self, h):
        _, _, total, used, _, _ = self.gpus[h]
        return SimpleNamespace(total=total * GIB, used=used * GIB, free=(total - used) * GIB)

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=self.gpus[h][4])

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [object()] * self.gpus[h][5]


SERVER = FakeNVML([
    ("H200", "GPU-aaaa", 140, 100, 90, 2),  # busy: someone's job
    ("H200", "GPU-bbbb", 140, 0, 0, 0),
    ("H200", "GPU-cccc", 140, 0, 30, 1),
    ("H200", "GPU-dddd", 140, 0, 0, 0),
])


def test_query_reads_every_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    infos = query_gpus(SERVER)
    assert [g.index for g in infos] == [0, 1, 2, 3] and infos[0].name == "H200"
    assert infos[0].memory_free == 40 * GIB and infos[0].utilisation == 90 and infos[0].processes == 2
    assert not SERVER.open  # NVML shut down again


@pytest.mark.parametrize("visible, physical", [
    ("2,0", [2, 0]),
    ("GPU-dddd,GPU-bbbb", [3, 1]),
    ("dddd", [3]),
    ("1,7,2", [1]),  # like CUDA: an entry that names no GPU hides it and all after it
    ("", []),
])
def test_cuda_visible_devices_reorders_and_hides(visible, physical):
    infos = query_gpus(SERVER, visible=visible)
    assert [g.physical for g in infos] == physical
    assert [g.index for g in infos] == list(range(len(physical)))


def test_no_driver_means_no_gpus():
    assert query_gpus(FakeNVML([], fail=True)) == []


def test_auto_picks_the_freest_with_a_stable_tie_break(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    infos = query_gpus(SERVER)
    # GPUs 1, 2, 3 have equal free memory; 1 and 3 are idle; the lower index wins the tie.
    assert [g.index for g in choose_gpus(infos, 1)] == [1]
    assert [g.index for g in choose_gpus(infos, 2)] == [1, 3]
    assert [g.index for g in choose_gpus(infos, 3)] == [1, 2, 3]
    assert [g.index for g in choose_gpus(infos, 4)] == [0, 1, 2, 3]
    ids, chosen = parse_gpu_choice("auto:2", SERVER)
    assert ids == [1, 3] and [g.physical for g in chosen] == [1, 3]


def test_auto_counts_within_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    ids, chosen = parse_gpu_choice("auto:1", SERVER)
    assert ids == [1] and chosen[0].physical == 2  # CUDA's GPU 1 here is nvidia-smi's GPU 2


@pytest.mark.parametrize("spec, message", [
    ("auto:5", "asked for 5 GPUs, only 4 visible"),
    ("auto:0", "auto:N takes N >= 1"),
    ("auto:two", "--gpus auto:N takes a number of GPUs"),
])
def test_auto_errors(monkeypatch, spec, message):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(DeviceError, match=message):
        parse_gpu_choice(spec, SERVER)


def test_auto_without_gpus():
    with pytest.raises(DeviceError, match="none is visible here"):
        parse_gpu_choice("auto:1", FakeNVML([], fail=True))


def test_free_memory_caps_leave_a_margin():
    small = GpuInfo(0, 0, "x", 16 * GIB, 4 * GIB, 12 * GIB, 0, 0)
    large = GpuInfo(1, 1, "x", 140 * GIB, 40 * GIB, 100 * GIB, 0, 0)
    assert free_memory_caps([small, large]) == [11 * GIB, 100 * GIB - int(0.05 * 140 * GIB)]


def test_cli_auto_asks_for_too_many(monkeypatch, capsys):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr("pipebench.hardware.gpus._nvml", lambda: SERVER)
    code = main(["plan", "--model", "gpt", "--flavour", "tiny", "--gpus", "auto:6"])
    err = capsys.readouterr().err
    assert code == 2 and "pipebench: error: asked for 6 GPUs, only 4 visible" in err


def test_cli_devices_lists_the_fake_server(monkeypatch, capsys):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr("pipebench.hardware.gpus._nvml", lambda: SERVER)
    assert main(["devices", "--no-links"]) == 0
    out = capsys.readouterr().out
    assert "free GiB" in out and "40.0" in out and "busy %" in out


def test_cli_devices_without_gpus(monkeypatch, capsys):
    monkeypatch.setattr("pipebench.hardware.gpus._nvml", lambda: FakeNVML([], fail=True))
    assert main(["devices"]) == 0
    assert capsys.readouterr().out.startswith("no NVIDIA GPU visible here")


def test_a_gpu_is_named_by_nvml_in_cuda_order(monkeypatch):
    """The profile cache's key names the GPU without a CUDA context: NVML's name of the CUDA ordinal."""
    from pipebench.hardware.gpus import gpu_name

    server = FakeNVML([("H100", "GPU-aaaa", 80, 0, 0, 0), ("H200", "GPU-bbbb", 140, 0, 0, 0)])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert [gpu_name(i, server) for i in range(3)] == ["H200", "H100", None]
    assert not server.open
    assert gpu_name(0, FakeNVML([], fail=True)) is None  # no driver: CUDA names it


def test_gpus_are_checked_through_nvml_without_cuda(monkeypatch):
    """--gpus 1 and --device cuda:1 are checked by NVML when it sees the GPU: no CUDA context for a cached
    answer. CUDA has the last word where NVML sees too few."""
    import torch

    from pipebench.hardware import gpus
    from pipebench.hardware.devices import check_gpus, resolve_device

    monkeypatch.setattr(gpus, "_nvml", lambda: SERVER)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: pytest.fail("asked CUDA"))
    assert check_gpus([0, 1]) == ["cuda:0", "cuda:1"] and resolve_device("cuda:1") == "cuda:1"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(DeviceError, match="GPU 2 does not exist: GPUs 0-1 visible"):
        check_gpus([2])


@pytest.mark.parametrize("command", ["train", "run"])
def test_gpus_auto_takes_the_chosen_ids_in_every_command(monkeypatch, tmp_path, command):
    """`train --gpus auto:2` and `run --gpus auto:2` take the two GPUs auto chooses, not the GPU list [2]
    (parse_gpus's AutoGpus iterates as its count): every command reads --gpus through cli/machine_choice.py
    chosen_gpus."""
    from pipebench.bench.cases import machine
    from pipebench.hardware import gpus

    taken = []
    monkeypatch.setattr(gpus, "parse_gpu_choice", lambda spec, nvml=None: ([1, 3], []))

    def detect(ids, *args, **kwargs):
        taken.append(ids)
        raise DeviceError("stop here")

    monkeypatch.setattr(machine, "detect_machine", detect)
    (tmp_path / "data.py").write_text("import torch\n\n\ndef data():\n    return torch.utils.data.TensorDataset("
                                      "torch.randn(8, 4), torch.randint(0, 4, (8,)))\n")
    argv = {"train": ["train", "--model", "mlp", "--flavour", "tiny", "--data", f"{tmp_path / 'data.py'}:data",
                      "--batch", "8", "--steps", "1"],
            "run": ["run", "--models", "mlp", "--flavour", "tiny", "--strategies", "single", "--out", str(tmp_path)]}
    assert main([*argv[command], "--gpus", "auto:2"]) == 2
    assert taken == [[1, 3]]
