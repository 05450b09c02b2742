"""`pipebench train` on real data: the Python standard library's own sources as byte tokens (vocabulary
256, always here), and Fashion-MNIST's real images where the system ships them (Debian's
dataset-fashion-mnist; skipped elsewhere). Bad input is refused in one line before any worker starts."""
from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from pipebench.bench.cli import main

STDLIB = ("argparse.py", "textwrap.py", "json/decoder.py", "csv.py")
GPT = ["--model", "gpt", "--flavour", "tiny", "--batch", "16", "--device", "cpu", "--precision", "fp32", "--log-every", "0"]
FASHION = [Path("/usr/share/datasets/fashion-mnist"), Path("/var/cache/apt/archives")]


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    """The bytes of a few standard-library modules as uint16 token ids, nanoGPT's train.bin format."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    data = b"".join((lib / name).read_bytes() for name in STDLIB)
    path = tmp_path_factory.mktemp("text") / "stdlib.bin"
    np.frombuffer(data, dtype=np.uint8).astype(np.uint16).tofile(path)
    return path


def fashion_mnist(folder: Path) -> Path | None:
    """Fashion-MNIST (real 28x28 images, 10 classes) in torchvision's MNIST layout, from the Debian package
    if this machine has it (installed, or its .deb in apt's cache); None otherwise."""
    raw = folder / "MNIST" / "raw"
    source = FASHION[0]
    if not source.is_dir():
        debs = sorted(FASHION[1].glob("dataset-fashion-mnist_*.deb")) if FASHION[1].is_dir() else []
        if not debs or shutil.which("dpkg-deb") is None:
            return None
        (folder / "deb").mkdir(parents=True)
        subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(folder / "deb")], check=True)
        source = folder / "deb" / "usr/share/datasets/fashion-mnist"
    raw.mkdir(parents=True)
    for gz in source.glob("*-ubyte.gz"):
        (raw / gz.name[:-3]).write_bytes(gzip.decompress(gz.read_bytes()))
    return folder


def losses(csv: Path) -> list[float]:
    return [float(line.split(",")[2]) for line in csv.read_text().splitlines()[1:]]


def train(*args, capsys=None) -> int:
    return main(["train", *map(str, args)])


# ------------------------------------------------------------------------------------------ bad input

def refused(capsys, *args) -> str:
    assert train(*args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("pipebench: error: ") and "Traceback" not in "\n".join(err)
    return err[-1]


def test_bad_data_is_one_line_before_any_worker(tmp_path, capsys, text):
    assert "no such file" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{tmp_path}/none.bin")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    assert "empty" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{empty}")
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"abc")
    assert "uint16" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{odd}")
    short = tmp_path / "short.bin"
    np.arange(10, dtype=np.uint16).tofile(short)
    assert "longer than the data" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{short}")
    wide = tmp_path / "wide.bin"  # a 50,000-token vocabulary's ids for a model of 256
    (np.fromfile(text, dtype=np.uint16)[:4096] * 200).astype(np.uint16).tofile(wide)
    assert "beyond the model's 256 tokens" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{wide}")
    assert "--data takes" in refused(capsys, *GPT, "--data", "images:/x")


def test_a_dataset_that_does_not_fit_and_a_save_that_cannot_be_written(tmp_path, capsys, text):
    source = tmp_path / "data.py"
    source.write_text("import torch\n\ndef wrong():\n    return torch.utils.data.TensorDataset(torch.zeros(64, 3, 5), "
                      "torch.zeros(64, dtype=torch.long))\n\ndef nothing():\n    return 3\n")
    assert "do not fit gpt" in refused(capsys, *GPT, "--strategy", "single", "--data", f"{source}:wrong")
    assert "not a torch Dataset" in refused(capsys, *GPT, "--strategy", "single", "--data", f"{source}:nothing")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert "--save" in refused(capsys, *GPT, "--strategy", "single", "--data", f"tokens:{text}",
                               "--save", f"{blocker}/model.pth")


# ------------------------------------------------------------------------------------------ training

def test_pp_1f1b_trains_as_one_device_and_saves_the_models_own_state_dict(tmp_path, text, capsys):
    """A GPT trained through a 2-process 1F1B pipeline follows one device's loss curve, and its checkpoint
    loads into the model itself, strict, equal to the single run's."""
    for strategy in ("single", "pp-1f1b"):
        assert train(*GPT, "--strategy", strategy, "--data", f"tokens:{text}", "--steps", 8, "--lr", "0.01",
                     "--csv", tmp_path / f"{strategy}.csv", "--save", tmp_path / f"{strategy}.pth") == 0
    one, pipe = losses(tmp_path / "single.csv"), losses(tmp_path / "pp-1f1b.csv")
    assert len(one) == 8 and one[-1] < one[0]
    assert pipe == pytest.approx(one, rel=1e-4)
    from pipebench import models

    model = models.get_model("gpt", "tiny").module
    for strategy in ("single", "pp-1f1b"):
        model.load_state_dict(torch.load(tmp_path / f"{strategy}.pth"))  # strict: every name the model's own
    a, b = torch.load(tmp_path / "single.pth"), torch.load(tmp_path / "pp-1f1b.pth")
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-4
    # Another model's checkpoint is refused, naming the first key
    assert train("--model", "convnet", "--strategy", "single", "--data", f"tokens:{text}", "--batch", 8, "--device",
                 "cpu", "--resume", "--save", tmp_path / "single.pth") == 2
    assert "has no 'conv1.weight'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_resumed_run_follows_the_unstopped_one(tmp_path, text):
    """AdamW (optimizer state), 2-process 1F1B: 10 steps, then --resume to 20, equals 20 steps at once."""
    common = [*GPT, "--strategy", "pp-1f1b", "--data", f"tokens:{text}", "--optimizer", "adamw", "--lr", "0.003"]
    assert train(*common, "--steps", 20, "--csv", tmp_path / "whole.csv", "--save", tmp_path / "whole.pth") == 0
    assert train(*common, "--steps", 10, "--csv", tmp_path / "part.csv", "--save", tmp_path / "part.pth") == 0
    assert train(*common, "--steps", 20, "--resume", "--csv", tmp_path / "part.csv", "--save", tmp_path / "part.pth") == 0
    assert losses(tmp_path / "part.csv") == losses(tmp_path / "whole.csv")
    assert train(*common, "--strategy", "ddp", "--steps", 30, "--resume", "--save", tmp_path / "part.pth") == 2


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "zero1", "modelparallel", "pp-zbv"])
def test_every_strategy_follows_one_devices_loss_curve(tmp_path, text, strategy):
    """30 steps of SGD in fp32 on real text: each strategy's losses equal single's within 1e-4 relative."""
    for name in ("single", strategy):
        assert train(*GPT, "--strategy", name, "--data", f"tokens:{text}", "--steps", 30, "--lr", "0.01",
                     "--csv", tmp_path / f"{name}.csv", "--save", tmp_path / f"{name}.pth") == 0
    assert losses(tmp_path / f"{strategy}.csv") == pytest.approx(
        losses(tmp_path / "single.csv"), rel=1e-4)
    from pipebench import models

    models.get_model("gpt", "tiny").module.load_state_dict(torch.load(tmp_path / f"{strategy}.pth"))


@pytest.mark.slow
def test_the_recipes_convnet_on_real_images_through_pp_1f1b(tmp_path):
    """The recipe's ConvNet on real images (Fashion-MNIST), pp-1f1b over 2 CPU processes equal to single;
    the checkpoint loads into the recipe's own ConvNet class, which then scores as trained."""
    data = fashion_mnist(tmp_path / "fashion")
    if data is None:
        pytest.skip("no Fashion-MNIST on this machine (Debian's dataset-fashion-mnist)")
    common = ["--model", "convnet", "--data", f"mnist:{data}", "--batch", 64, "--steps", 30, "--lr", "0.01",
              "--device", "cpu", "--precision", "fp32", "--log-every", 0]
    for name in ("single", "pp-1f1b"):
        assert train(*common, "--strategy", name, "--csv", tmp_path / f"{name}.csv", "--save", tmp_path / f"{name}.pth") == 0
    assert losses(tmp_path / "pp-1f1b.csv") == pytest.approx(losses(tmp_path / "single.csv"), rel=1e-4)
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    from seed_convnet import ConvNet

    from pipebench.bench.train.data import MnistImages

    test = MnistImages(str(data), train=False)
    images = torch.stack([test[i][0] for i in range(1000)])
    scores = []
    for name in ("single", "pp-1f1b"):
        net = ConvNet()
        net.load_state_dict(torch.load(tmp_path / f"{name}.pth"))
        with torch.no_grad():
            scores.append((net(images).argmax(1) == test.labels[:1000]).float().mean().item())
    assert scores[0] > 0.3 and scores[1] == pytest.approx(scores[0], abs=0.005)


@pytest.mark.slow
def test_your_own_loop_under_torchrun(tmp_path, text):
    """docs/train.md's loop (tests/fixtures/own_loop.py) under torchrun: 8 steps of a 1F1B pipeline whose
    losses equal `pipebench train`'s own single run, and a gathered state_dict the model loads."""
    script = Path(__file__).parent / "fixtures" / "own_loop.py"
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend",
                          "c10d", "--rdzv-endpoint", "127.0.0.1:0", str(script), str(text), str(tmp_path / "own.pth")],
                         capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    own = [float(x) for x in out.stdout.split()[-8:]]
    assert train(*GPT, "--strategy", "single", "--data", f"tokens:{text}", "--steps", 8, "--lr", "0.01",
                 "--csv", tmp_path / "single.csv") == 0
    assert own == pytest.approx(losses(tmp_path / "single.csv"), rel=1e-4)
    from pipebench import models

    models.get_model("gpt", "tiny").module.load_state_dict(torch.load(tmp_path / "own.pth"))


@pytest.mark.slow
def test_a_hugging_face_gpt2_through_pp_1f1b_loads_into_its_class(tmp_path, text, monkeypatch):
    """GPT2LMHeadModel from its config (tests/fixtures/byte_gpt2.py) on the byte tokens: pp-1f1b's losses equal
    single's, and the checkpoint loads into GPT2LMHeadModel itself, strict."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = f"{Path(__file__).parent / 'fixtures' / 'byte_gpt2.py'}:gpt2"
    common = ["--model", model, "--input-shape", 32, "--input-dtype", "int64", "--data", f"tokens:{text}", "--batch", 16,
              "--steps", 8, "--lr", "0.01", "--device", "cpu", "--precision", "fp32", "--log-every", 0]
    for name in ("single", "pp-1f1b"):
        assert train(*common, "--strategy", name, "--csv", tmp_path / f"{name}.csv", "--save", tmp_path / f"{name}.pth") == 0
    assert losses(tmp_path / "pp-1f1b.csv") == pytest.approx(losses(tmp_path / "single.csv"), rel=1e-4)
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    import byte_gpt2

    byte_gpt2.gpt2().load_state_dict(torch.load(tmp_path / "pp-1f1b.pth"))


@pytest.mark.slow
def test_auto_names_advises_pick_in_one_line_before_training(tmp_path, text, capsys):
    assert train(*GPT, "--strategy", "auto", "--data", f"tokens:{text}", "--steps", 2) == 0
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("auto: "))
    assert "advise's recommendation" in line and "samples/s predicted" in line
    assert err.index(line) < err.index("train gpt with")
