"""api_state harness: exec argv[2] (the caller's own state, optional), snapshot the caller's global state, exec argv[1], compare. One line per change; rc 3 if changed."""
import sys, os, signal, logging, warnings, threading, random
sys.path.insert(0, "/tmp/b10/work/m")
import numpy as np, torch, torch.nn as nn, pipebench
from pipebench import UserError
def snap():
    return dict(environ=dict(os.environ), cwd=os.getcwd(), path=list(sys.path),
        sig={s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE, signal.SIGUSR1)},
        prec=torch.get_float32_matmul_precision(), rng=torch.get_rng_state().clone(), nprng=str(np.random.get_state()[1][:4]) + str(np.random.get_state()[2]),
        pyrng=random.getstate(), threads=torch.get_num_threads(), interop=torch.get_num_interop_threads(), dtype=torch.get_default_dtype(), grad=torch.is_grad_enabled(),
        inference=torch.is_inference_mode_enabled(), anomaly=torch.is_anomaly_enabled(), det=torch.are_deterministic_algorithms_enabled(),
        cudnn=(torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic), flush=torch.get_default_device() if hasattr(torch,'get_default_device') else None,
        root=(logging.getLogger().level, list(logging.getLogger().handlers)), loggers=sorted(k for k in logging.Logger.manager.loggerDict),
        lvl={k: getattr(v,'level',None) for k, v in logging.Logger.manager.loggerDict.items()},
        warn=[f for f in warnings.filters if not getattr(f[2], '__module__', '').startswith('sympy')],  # torch._dynamo's import adds sympy's; known, torch's
         showwarning=warnings.showwarning, excepthook=sys.excepthook, stdout=sys.stdout, stderr=sys.stderr,
        torchattrs={k: id(getattr(torch, k)) for k in dir(torch) if not k.startswith('__')},
        nnattrs={k: id(getattr(torch.nn.functional, k)) for k in dir(torch.nn.functional) if not k.startswith('__')},
        tensor_attrs={k: id(getattr(torch.Tensor, k)) for k in dir(torch.Tensor) if not k.startswith('__')},
        modules=set(sys.modules) & {'odd', 'good', 'data', 'stat_mf'}, umask=os.umask(0o022), rlimit=__import__('resource').getrlimit(__import__('resource').RLIMIT_NOFILE),
        threads_alive=sorted(t.name for t in threading.enumerate()), recursion=sys.getrecursionlimit(), switch=sys.getswitchinterval(), flags=torch.get_printoptions() if hasattr(torch,'get_printoptions') else None)
torch.manual_seed(123); np.random.seed(5); random.seed(7)
os.umask(0o022)
if len(sys.argv) > 2: exec(sys.argv[2], globals())  # the caller's own unusual state, before the snapshot
b = snap()
try:
    exec(sys.argv[1], globals())
    print("CALL OK")
except (UserError, TypeError, ValueError) as e:
    print(f"CALL REFUSED [{type(e).__name__}] {str(e)[:200]}")
except BaseException as e:
    print(f"CALL RAISED [{type(e).__name__}] {str(e)[:200]}")
a = snap()
bad = []
for k in b:
    if k == "rng":
        if not torch.equal(b[k], a[k]): bad.append("torch RNG state")
    elif k == "environ":
        d = {x for x in set(b[k]) | set(a[k]) if b[k].get(x) != a[k].get(x)}
        if d: bad.append(f"os.environ {sorted(d)}")
    elif k in ("torchattrs", "nnattrs", "tensor_attrs", "lvl"):
        d = {x for x in set(b[k]) | set(a[k]) if b[k].get(x) != a[k].get(x)}
        if k == "lvl": d = {x for x in d if x in b[k]}
        if k == "torchattrs": d -= {"_dynamo", "_inductor", "_numpy", "manual_seed", "onnx"}  # torch's lazy imports (sixth pass: torch's)
        if d: bad.append(f"{k} {sorted(d)[:8]}")
    elif k == "loggers": pass
    elif b[k] != a[k]:
        bad.append(f"{k}: {str(b[k])[:80]} -> {str(a[k])[:80]}")
print("STATE CHANGED: " + "; ".join(bad) if bad else "STATE SAME")
sys.exit(3 if bad else 0)
