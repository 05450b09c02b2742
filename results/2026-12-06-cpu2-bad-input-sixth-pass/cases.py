"""The sixth pass's inputs (cut short by the timebox). $P = pipebench under flock+timeout, run from /tmp/b6/work."""
import shlex
from driver import case
LOCK = "OMP_NUM_THREADS=1 flock /tmp/pipebench-cpu.lock timeout 120"
PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8"
OP = "$P plan --input-shape 4 --stages 2 --batch 8 --model"
def st(name, code, expect="ok"):
    # rc 0 = caller's state unchanged; rc 3 = STATE CHANGED line
    case(f"api_state_{name}", f"{LOCK} $PY m/apistate.py {shlex.quote(code)}", expect, timeout=150)
for f in ["mf_prec", "mf_seed", "mf_threads", "mf_dtype64", "mf_nograd", "mf_sigint", "mf_log", "mf_warn", "mf_env",
          "mf_umask", "mf_excepthook", "mf_recurs", "mf_tensoradd", "mf_relu", "mf_deterministic", "mf_anomaly", "mf_sysmod"]:
    st(f"plan_file_{f}", f"pipebench.plan('m/{f}.py:Net', torch.randn(8, 4), stages=2, batch=8)", "ok")
for c in ["ChdirFwd", "EnvFwd", "SeedFwd", "PrecFwd", "GradOffFwd", "DtypeFwd", "ThreadsFwd", "WarnFwd"]:
    st(f"plan_fwd_{c}", f"import fwd; pipebench.plan(fwd.{c}(), torch.randn(8, 4), stages=2, batch=8)", "ok")
st("plan_zoo_mlp", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)")
st("advise_zoo_mlp", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8)")
st("profile_zoo_mlp", "pipebench.profile('mlp', flavour='tiny', batch=8)")
st("run_zoo_mlp", "pipebench.run(['mlp'], strategies=['single'], out='rst', steps=1, warmup=0, rounds=1, note=None)")
st("plan_bad_stages", "pipebench.plan('mlp', flavour='tiny', stages=-1, batch=8)")
for f in ["mf_prec", "mf_env", "mf_umask", "mf_sigint", "mf_tensoradd", "mf_relu", "mf_fork", "mf_signal_alarm", "mf_stderr_close", "mf_rlimit", "mf_inference"]:
    case(f"mf_cli_plan_{f}", f"{OP} m/{f}.py:Net", "any")
for c in ["ExitFwd", "SysExitFwd", "KbFwd", "NanFwd", "MemoryErr", "RecErr", "GenOut", "DictOut", "Stochastic"]:
    case(f"fwd_cli_plan_{c}", f"{OP} m/fwd.py:{c}", "any")
