"""pipebench.plan and pipebench.profile leave the caller's model and torch's global state as they found them
(pipebench/base/snapshot.py): every submodule's mode, parameters (objects and values), buffers, requires_grad,
gradients, device, forward methods; the RNG, threads, default dtype, grad mode, autocast, anomaly detection and
matmul precision; and pipebench's own measurements run under its own torch settings (snapshot.own_state)."""
from __future__ import annotations

import pytest
import torch

import pipebench


def model_state(module: torch.nn.Module) -> dict:
    """Everything of `module` a caller can see, by name."""
    return {
        "training": {n: m.training for n, m in module.named_modules()},
        "forward": {n: m.__dict__.get("forward") for n, m in module.named_modules()},
        "hooks": {n: (len(m._forward_pre_hooks), len(m._forward_hooks)) for n, m in module.named_modules()},
        "parameter objects": {n: id(p) for n, p in module.named_parameters()},
        "storages": {n: p.untyped_storage().data_ptr() for n, p in module.named_parameters()},
        "parameters": {n: p.detach().clone() for n, p in module.named_parameters()},
        "requires_grad": {n: p.requires_grad for n, p in module.named_parameters()},
        "grads": {n: None if p.grad is None else p.grad.clone() for n, p in module.named_parameters()},
        "devices": {n: (p.device, p.dtype) for n, p in module.named_parameters()},
        "buffers": {n: b.detach().clone() for n, b in module.named_buffers()},
    }


def global_state() -> dict:
    return {"rng": torch.get_rng_state(), "threads": torch.get_num_threads(),
            "interop": torch.get_num_interop_threads(), "dtype": torch.get_default_dtype(),
            "grad": torch.is_grad_enabled(), "matmul": torch.get_float32_matmul_precision(),
            "cudnn.benchmark": torch.backends.cudnn.benchmark, "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32}


def changed(before: dict, after: dict) -> list[str]:
    """The fields (field.name for the tables) that differ."""
    def same(a, b):
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype \
                and torch.equal(a, b)
        return a == b
    found = []
    for key, value in before.items():
        if isinstance(value, dict):
            found += [f"{key}.{n}" for n in value.keys() | after[key].keys()
                      if n not in value or n not in after[key] or not same(value[n], after[key][n])]
        elif not same(value, after[key]):
            found.append(key)
    return sorted(found)


@pytest.fixture
def odd_global_state():
    """A caller's torch set up unlike pipebench's work: one thread, float64 by default, gradients off,
    medium matmul precision, cuDNN autotuning on, a seeded stream; put back after the test."""
    saved = global_state()
    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("medium")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1234)
    yield
    torch.set_rng_state(saved["rng"])
    torch.set_num_threads(saved["threads"])
    torch.set_float32_matmul_precision(saved["matmul"])
    torch.backends.cudnn.benchmark = saved["cudnn.benchmark"]


def gpt2():
    """GPT-2 from a small config, in eval() as a user holds it for inference, one block frozen."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    model.transformer.h[0].requires_grad_(False)
    return model, torch.randint(0, 64, (2, 16))


def resnet18():
    """torchvision's ResNet-18 with BatchNorm: in eval() but for one stage left training, a BatchNorm
    frozen, a gradient held, and a forward replaced on the instance (as a user's hook library does)."""
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=4).eval()
    model.layer2.train()
    model.bn1.requires_grad_(False)
    model.fc.weight.grad = torch.ones_like(model.fc.weight)
    model.avgpool.forward = model.avgpool.forward  # an instance attribute, which must stay
    return model, torch.randn(2, 3, 32, 32)


@pytest.mark.parametrize("make, call", [(gpt2, "plan"), (resnet18, "profile")])
def test_the_model_and_the_global_state_come_back_as_given(odd_global_state, make, call):
    model, example = make()
    torch.set_default_dtype(torch.float64)  # after the model is built: its weights stay float32
    try:
        before, state, reference = model_state(model), global_state(), None
        if call == "plan":
            with torch.no_grad():
                reference = model(example).logits
                state = global_state()
                plan = pipebench.plan(model, example, batch=4, stages=2, micro_batches=2, repeats=1)
            assert plan.micro_batches == 2
        else:
            profiles = pipebench.profile(model, example, batch=4, micro_batches=1, repeats=1)
            assert profiles[0].layers
        with torch.no_grad() if call == "plan" else torch.enable_grad():
            assert changed(state, global_state()) == []
        assert changed(before, model_state(model)) == []
        if reference is not None:  # and so it answers as before
            with torch.no_grad():
                assert torch.equal(model(example).logits, reference)
    finally:
        torch.set_default_dtype(torch.float32)


def test_a_buffer_replaced_by_another_tensor_is_put_back():
    """Profiling on cuda replaces a CPU model's buffers (Module.to makes new tensors); the restore compared the
    tables with ==, a tensor's elementwise comparison: RuntimeError on the H200 (cuda:0 against cpu), and
    'ambiguous' for any buffer of more than one value. Tables are compared by identity."""
    import torch
    from torch import nn

    from pipebench.base.snapshot import module_state

    norm = nn.BatchNorm1d(4)
    mean = norm.running_mean
    restore = module_state(norm)
    norm._buffers["running_mean"] = torch.ones(4, dtype=torch.float64)
    restore()
    assert norm.running_mean is mean and torch.equal(mean, torch.zeros(4))


def test_a_nan_written_through_the_parameter_is_undone():
    """The timed update at lr 0 of a NaN loss writes 0 * nan = nan through the parameter, which moves the
    parameter's version counter, not the one of the `p.data` kept: the values are written back whatever
    happened, and every weight of the caller's comes back."""
    from torch import nn

    from pipebench.base.snapshot import module_state

    layer = nn.Linear(4, 3)
    before = [p.detach().clone() for p in layer.parameters()]
    restore = module_state(layer)
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(float("nan"))
    restore()
    assert all(torch.equal(a, b) for a, b in zip(before, layer.parameters()))


def test_own_state_sets_pipebench_settings_and_puts_the_callers_back():
    """pipebench's measurements run under its own settings, not the caller's torch.autocast, no_grad, anomaly
    detection and default dtype, and the global snapshot puts those back, autocast and anomaly detection too.
    """
    from pipebench.base.snapshot import own_state

    with torch.autocast("cpu", dtype=torch.float16), torch.no_grad(), torch.autograd.detect_anomaly(check_nan=False):
        torch.set_default_dtype(torch.float64)
        try:
            with own_state():
                assert torch.is_grad_enabled() and not torch.is_autocast_enabled("cpu")
                assert not torch.is_anomaly_enabled() and torch.get_default_dtype() == torch.float32
                torch.set_autocast_enabled("cpu", True)
                torch.set_autocast_dtype("cpu", torch.bfloat16)
                torch.autograd.set_detect_anomaly(True)
            assert not torch.is_grad_enabled() and torch.get_default_dtype() == torch.float64
            assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.float16
            assert torch.is_anomaly_enabled() and not torch.is_anomaly_check_nan_enabled()
        finally:
            torch.set_default_dtype(torch.float32)


@pytest.mark.ci  # a whole run, train or probe in processes, 5-50 s: CI runs it after the default set (docs/testing.md)
def test_the_cpu_probes_run_under_pipebench_settings():
    """Under a caller's (or a model file's) float64 default, rank 0 of the CPU processes' probe sends float32
    as its fresh peers expect (float64 fails: "Connection reset by peer"), and with gradients off the drift
    probe's backward runs."""
    from pipebench.hardware.cpu_processes import measure_cpu_processes
    from pipebench.hardware.drift import measure_machine_drift

    torch.set_default_dtype(torch.float64)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            assert measure_machine_drift(1, seconds=0.05) > 0
            figures = measure_cpu_processes(2, megabytes=1, repeats=1, messages=2, rounds=1)
            assert figures["link_gbps"] > 0
            assert torch.is_autocast_enabled("cpu") and not torch.is_grad_enabled()
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)


def test_a_callers_autocast_does_not_reach_the_profile():
    """Under the caller's torch.autocast("cpu", dtype=torch.bfloat16) a profile that says tf32 profiles the
    layers in tf32, not bfloat16."""
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        profiles = pipebench.profile(model, torch.randn(2, 4), batch=8, micro_batches=1, repeats=1, cache=False)
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert {layer.output_dtype for layer in profiles[0].layers} == {"float32"}


IMPORT_STATE = """
import torch
from torch import nn
{line}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 3)

    def forward(self, x):
        return self.b(self.a(x.to(self.a.weight.dtype)).relu())
"""
"""A model file that sets torch's global state at import; its model takes float32 inputs whatever its dtype."""


def test_a_model_file_that_turns_gradients_off_at_import_plans(capsys, tmp_path):
    """torch.set_grad_enabled(False) in a model file's import reached the profiler: a RuntimeError traceback,
    "element 0 of tensors does not require grad"."""
    from pipebench.bench.cli import main

    path = tmp_path / "nograd.py"
    path.write_text(IMPORT_STATE.format(line="torch.set_grad_enabled(False)"))
    assert main(["plan", "--model", f"{path}:Net", "--stages", "2", "--batch", "8", "--input-shape", "4"]) == 0, \
        capsys.readouterr().err


@pytest.mark.parametrize("line, left", [
    ("torch.autograd.set_detect_anomaly(True)", lambda torch: torch.is_anomaly_enabled()),
    ("torch.set_grad_enabled(False)", lambda torch: not torch.is_grad_enabled()),
    ("torch.set_default_dtype(torch.float64)", lambda torch: torch.get_default_dtype() != torch.float32),
])
def test_a_model_files_torch_state_stays_in_pipebench(tmp_path, line, left):
    """A file calling torch.autograd.set_detect_anomaly(True) at import leaves anomaly detection off in the
    caller's process after pipebench.plan: the global snapshot covers it."""
    path = tmp_path / "state.py"
    path.write_text(IMPORT_STATE.format(line=line))
    plan = pipebench.plan(f"{path}:Net", batch=8, stages=2, repeats=1, settings={"input_shape": [4]})
    assert plan.balance and not left(torch)


def test_a_float64_model_file_is_profiled_in_float64(tmp_path):
    """The model a file builds in float64 is profiled as it is built (as `pipebench run` runs it), and the
    caller's default dtype stays float32."""
    path = tmp_path / "f64.py"
    path.write_text(IMPORT_STATE.format(line="torch.set_default_dtype(torch.float64)"))
    profiles = pipebench.profile(f"{path}:Net", batch=8, micro_batches=1, repeats=1, settings={"input_shape": [4]})
    assert {layer.output_dtype for layer in profiles[0].layers} == {"float64"}
    assert torch.get_default_dtype() == torch.float32


def test_the_callers_environment_and_folder_come_back_as_given(tmp_path, monkeypatch):
    """The caller's os.environ and working folder come back after pipebench.plan as torch's state does:
    without the TORCHINDUCTOR_CACHE_DIR that torch's first import of torch._dynamo (torch.export's) sets, and
    without a model file's variable or change of folder at import."""
    import os

    path = tmp_path / "process.py"
    path.write_text(IMPORT_STATE.format(line="import os; os.environ['PIPEBENCH_TEST_SET'] = '1'; "
                                              "os.environ.pop('PIPEBENCH_TEST_GONE'); os.chdir('/')"))
    monkeypatch.setenv("PIPEBENCH_TEST_GONE", "kept")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    environ = dict(os.environ)
    plan = pipebench.plan(f"{path}:Net", batch=8, stages=2, repeats=1, settings={"input_shape": [4]})
    assert plan.balance and dict(os.environ) == environ and os.getcwd() == str(tmp_path)


def test_the_callers_excepthook_comes_back_as_given(tmp_path):
    """torch's init_process_group installs its own sys.excepthook, and the CPU link probe calls it in the
    caller's process: every later traceback of the caller's started `[rank0]:`. A model
    file that sets one stands in for it here."""
    import sys

    path = tmp_path / "hook.py"
    path.write_text(IMPORT_STATE.format(line="import sys; sys.excepthook = lambda *exc: None"))
    hook = sys.excepthook
    pipebench.plan(f"{path}:Net", batch=8, stages=2, repeats=1, settings={"input_shape": [4]})
    assert sys.excepthook is hook
