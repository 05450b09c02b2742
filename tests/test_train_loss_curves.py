"""`pipebench train` on real data follows one device's loss curve: the Python standard library's own sources
as byte tokens (vocabulary 256, always here) and scikit-learn's real handwritten digits written as MNIST files
(skipped without scikit-learn), through every strategy, resumed or interrupted, and in a loop of the user's;
each checkpoint loads into the model's own class."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import DIGITS, GPT, digits, losses, train
from pipebench.bench.cli import main
from pipebench.bench.strategies import STRATEGIES


# ------------------------------------------------------------------------------- a pipeline and one device

@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
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
    # `pipebench report` given the folder draws both logs' loss curves beside their throughput
    capsys.readouterr()
    assert main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "pp-1f1b.csv: 8 steps (1 epoch), loss " in out and "single.csv: 8 steps" in out
    png = tmp_path / "report" / "train.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    height, width = imread(png).shape[:2]
    assert width > 1000 and height > 400


def test_report_refuses_a_broken_train_log_in_one_line(tmp_path, capsys):
    log = tmp_path / "train.csv"
    log.write_text("step,epoch,loss,samples_per_s,time_s\r\n1,1,2.3,100,0.1\r\n2,1,oops,100,0.2\r\n")
    assert main(["report", str(log)]) == 2
    assert "train.csv: line 3: loss 'oops' is not a number" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ every strategy

EVERY = ["single", "ddp", "fsdp", "zero1", "modelparallel", "pp-1f1b", "pp-zbv"]


LLAMA = ["--model", f"{Path(__file__).parent / 'fixtures' / 'byte_llama.py'}:llama", "--input-shape", "32",
         "--input-dtype", "int64", "--batch", "16", "--device", "cpu", "--log-every", "0"]


@pytest.fixture(scope="module")
def curves(tmp_path_factory, text):
    """30 steps of SGD (lr 0.01) by (model, precision, strategy): the CSV's losses and the checkpoint. gpt (tiny)
    and llama (tests/fixtures/byte_llama.py) read the byte tokens, convnet the real digits; single's run once
    per model and precision, shared by the strategies compared with it."""
    folder, done = tmp_path_factory.mktemp("curves"), {}
    options = {"gpt": [a for a in GPT if a not in ("--precision", "fp32")] + ["--data", f"tokens:{text}"],
               "llama": LLAMA + ["--data", f"tokens:{text}"],
               "convnet": [a for a in DIGITS if a not in ("--precision", "fp32")]}

    def curve(model: str, precision: str, strategy: str) -> tuple[list[float], Path]:
        key = (model, precision, strategy)
        if key not in done:
            if model == "convnet" and not (folder / "digits").is_dir():
                digits(folder / "digits")
            data = ["--data", f"mnist:{folder / 'digits'}"] if model == "convnet" else []
            name = "-".join(key)
            assert train(*options[model], *data, "--precision", precision, "--strategy", strategy, "--steps", 30,
                         "--lr", "0.01", "--csv", folder / f"{name}.csv", "--save", folder / f"{name}.pth") == 0
            done[key] = (losses(folder / f"{name}.csv"), folder / f"{name}.pth")
        return done[key]

    return curve


def largest_difference(curve: list[float], reference: list[float]) -> float:
    assert len(curve) == len(reference) == 30
    return max(abs(a - b) / abs(b) for a, b in zip(curve, reference))


def own_class(model: str) -> torch.nn.Module:
    """The model's own class, as its user builds it: the recipe's ConvNet, LlamaForCausalLM, the zoo's GPT."""
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    if model == "convnet":
        from seed_convnet import ConvNet

        return ConvNet()
    if model == "llama":
        import byte_llama

        return byte_llama.llama()
    from pipebench import models

    return models.get_model("gpt", "tiny").module


@pytest.mark.slow
@pytest.mark.parametrize("model, precision, tolerance", [
    ("convnet", "fp32", 1e-4), ("llama", "fp32", 1e-4),  # gpt fp32: test_every_strategy_follows_one_devices_loss_curve
    ("convnet", "bf16", 1e-2), ("gpt", "bf16", 1e-2), ("llama", "bf16", 1e-2)])
@pytest.mark.parametrize("strategy", EVERY[1:])
def test_each_strategy_follows_one_devices_loss_curve(curves, model, precision, tolerance, strategy, monkeypatch):
    """The recipe's ConvNet on the real digits, a GPT-2 and LlamaForCausalLM from their configs on real text,
    30 SGD steps: each strategy's losses equal single's step by step, within 1e-4 relative in fp32 and 1% in
    bf16 (autocast over fp32 master weights; FSDP's bf16 parameters), and its checkpoint (fp32 weights) loads
    into the model's own class, strict."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    one, _ = curves(model, precision, "single")
    assert one[-1] < one[0]
    other, saved = curves(model, precision, strategy)
    assert largest_difference(other, one) <= tolerance
    own_class(model).load_state_dict(torch.load(saved))


@pytest.mark.slow
@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s not in ("single", "pp-1f1b")])
def test_every_strategy_follows_one_devices_loss_curve(tmp_path, text, strategy):
    """Every strategy `pipebench run` knows (pp-1f1b: the default run's test above), 30 steps of SGD in fp32
    on real text: its losses equal single's within 1e-4 relative, and its checkpoint, the model's own
    state_dict, holds single's weights. hybrid: 2 replicas of a 2-stage pipeline, 4 processes."""
    stages = ["--cpu-processes", 4] if STRATEGIES[strategy].replicated else []
    for name in ("single", strategy):
        assert train(*GPT, *(stages if name == strategy else []), "--strategy", name, "--data", f"tokens:{text}",
                     "--steps", 30, "--lr", "0.01", "--csv", tmp_path / f"{name}.csv",
                     "--save", tmp_path / f"{name}.pth") == 0
    assert losses(tmp_path / f"{strategy}.csv") == pytest.approx(
        losses(tmp_path / "single.csv"), rel=1e-4)
    from pipebench import models

    mine, one = torch.load(tmp_path / f"{strategy}.pth"), torch.load(tmp_path / "single.pth")
    models.get_model("gpt", "tiny").module.load_state_dict(mine)
    assert max((mine[k] - one[k]).abs().max().item() for k in one) < 1e-4


@pytest.mark.slow
def test_auto_names_advises_pick_in_one_line_before_training(tmp_path, text, capsys):
    assert train(*GPT, "--strategy", "auto", "--data", f"tokens:{text}", "--steps", 2) == 0
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if line.startswith("auto: "))
    assert "advise's recommendation" in line and "samples/s predicted" in line
    assert err.index(line) < err.index("train gpt with")


# --------------------------------------------------------------------------------- resumed and interrupted

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
def test_ctrl_c_saves_where_every_process_stopped_and_resume_goes_on(tmp_path, text):
    """Ctrl-C (SIGINT to `pipebench train`) mid-run over a 2-process 1F1B pipeline: the processes agree to
    stop after one step, write the checkpoint of that step and the command exits 130; --resume then ends
    the run with the losses of one never stopped."""
    import signal
    import time

    common = [sys.executable, "-m", "pipebench", "train", *map(str, GPT), "--strategy", "pp-1f1b", "--data",
              f"tokens:{text}", "--optimizer", "adamw", "--lr", "0.003"]
    part = ["--save", str(tmp_path / "part.pth"), "--csv", str(tmp_path / "part.csv")]
    proc = subprocess.Popen([*common, "--steps", "5000", *part], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None and (
            not (tmp_path / "part.csv").exists() or len(losses(tmp_path / "part.csv")) < 20):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=300)[0]
    assert proc.returncode == 130, out[-2000:]
    done = len(losses(tmp_path / "part.csv"))
    assert 20 <= done < 5000 and f"stopped: {done}/5000 steps" in out
    assert subprocess.run([*common, "--steps", str(done + 10), "--resume", *part], timeout=300).returncode == 0
    assert subprocess.run([*common, "--steps", str(done + 10), "--csv", str(tmp_path / "whole.csv")],
                          timeout=300).returncode == 0
    assert losses(tmp_path / "part.csv") == losses(tmp_path / "whole.csv")


# ----------------------------------------- the recipe's digits, a loop of the user's, a Hugging Face model

def accuracy(net: torch.nn.Module, test) -> tuple[int, torch.Tensor]:
    """How many held-out images `net` classifies right, and its predictions."""
    images = torch.stack([test[i][0] for i in range(len(test))])
    net.eval()
    with torch.no_grad():
        predicted = net(images).argmax(1)
    return int((predicted == test.labels).sum()), predicted


def recipes_convnet():
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    from seed_convnet import ConvNet

    return ConvNet


def test_the_digits_in_mnists_layout(tmp_path):
    """scripts/digits_mnist.py writes scikit-learn's real digits as MNIST IDX files that torchvision's reader
    (what --data mnist: reads) takes: 28x28 in 0-255, the last 20% held out, every class in it."""
    data = digits(tmp_path / "digits")
    from pipebench.bench.train.data import MnistImages

    train_split, test_split = MnistImages(str(data)), MnistImages(str(data), train=False)
    assert (len(train_split), len(test_split)) == (1438, 359)
    assert tuple(train_split.images.shape[1:]) == (28, 28) and train_split.images.max() == 255
    assert test_split.labels.bincount().tolist() == [35, 36, 34, 37, 37, 37, 37, 36, 33, 37]


@pytest.mark.slow
def test_the_recipes_run_on_the_real_digits_through_pp_1f1b(tmp_path):
    """The recipe: its ConvNet, 20 epochs on the real digits, pp-1f1b over 2 CPU processes, reaches single's
    held-out accuracy within half a point; the saved file loads into the recipe's own ConvNet class, strict,
    which then predicts what pipebench's convnet with the same weights predicts."""
    data = digits(tmp_path / "digits")
    from pipebench import models
    from pipebench.bench.train.data import MnistImages

    for name in ("single", "pp-1f1b"):
        assert train(*DIGITS, "--strategy", name, "--data", f"mnist:{data}", "--epochs", 20,
                     "--csv", tmp_path / f"{name}.csv", "--save", tmp_path / f"{name}.pth") == 0
    assert len(losses(tmp_path / "pp-1f1b.csv")) == 20 * (1438 // 64)
    test = MnistImages(str(data), train=False)
    right = {}
    for name in ("single", "pp-1f1b"):
        state = torch.load(tmp_path / f"{name}.pth")
        net = recipes_convnet()()
        net.load_state_dict(state)
        right[name], predicted = accuracy(net, test)
        zoo = models.get_model("convnet").module
        zoo.load_state_dict(state)
        assert torch.equal(accuracy(zoo, test)[1], predicted)  # the recipe's class scores as it was trained
    assert right["single"] > 0.8 * len(test)  # ten classes: chance is 10%
    assert abs(right["pp-1f1b"] - right["single"]) / len(test) <= 0.005


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
