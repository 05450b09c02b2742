"""Model-state harness: argv[1] is an expression building `net` (eval or train mode, BatchNorm, Dropout); argv[2] calls
pipebench on it. Prints every change of the model's mode, buffers, parameters, grads, requires_grad, hooks, device."""
import sys, copy
sys.path.insert(0, "/tmp/b10/work/m")
import torch, torch.nn as nn, pipebench, numpy as np
exec(sys.argv[1], globals())
def snap(m):
    return dict(modes={n: x.training for n, x in m.named_modules()}, sd={k: v.detach().clone() for k, v in m.state_dict().items()},
                grads={n: (None if p.grad is None else p.grad.clone()) for n, p in m.named_parameters()},
                rg={n: p.requires_grad for n, p in m.named_parameters()}, ids={n: id(p) for n, p in m.named_parameters()},
                hooks=sum(len(x._forward_hooks) + len(x._forward_pre_hooks) + len(x._backward_hooks) for x in m.modules()),
                dev={str(p.device) for p in m.parameters()}, dt={str(p.dtype) for p in m.parameters()}, cls=type(m).__name__)
b = snap(net)
try:
    exec(sys.argv[2], globals()); print("CALL OK")
except Exception as e:
    print(f"CALL RAISED [{type(e).__name__}] {str(e)[:200]}")
a = snap(net); bad = []
for k in b:
    if k == "sd":
        d = [x for x in b[k] if x not in a[k] or not torch.equal(b[k][x], a[k][x])]
        if d or set(a[k]) != set(b[k]): bad.append(f"state_dict {d[:6]} keys {sorted(set(a[k]) ^ set(b[k]))[:4]}")
    elif k == "grads":
        d = [x for x in b[k] if (b[k][x] is None) != (a[k].get(x) is None) or (b[k][x] is not None and not torch.equal(b[k][x], a[k][x]))]
        if d: bad.append(f"grads {d[:6]}")
    elif b[k] != a[k]:
        bad.append(f"{k}: {str(b[k])[:100]} -> {str(a[k])[:100]}")
print("MODEL CHANGED: " + "; ".join(bad) if bad else "MODEL SAME")
sys.exit(3 if bad else 0)
