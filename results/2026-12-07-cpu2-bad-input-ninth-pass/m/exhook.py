import sys, torch, pipebench
pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)
print("excepthook after plan:", sys.excepthook, file=sys.stderr)
raise RuntimeError("the caller's own error")
