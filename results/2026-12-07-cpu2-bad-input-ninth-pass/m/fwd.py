import torch, torch.nn as nn, os, sys, time
class Base(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.b = nn.Linear(8, 3)
    def body(self, x): return self.b(torch.relu(self.a(x)))
class ExitFwd(Base):
    def forward(self, x): os._exit(5)
class SysExitFwd(Base):
    def forward(self, x): raise SystemExit(4)
class KbFwd(Base):
    def forward(self, x): raise KeyboardInterrupt
class SleepFwd(Base):
    def forward(self, x): time.sleep(400); return self.body(x)
class ChdirFwd(Base):
    def forward(self, x): os.chdir("/"); return self.body(x)
class EnvFwd(Base):
    def forward(self, x): os.environ["PB6_FWD"] = "1"; return self.body(x)
class SeedFwd(Base):
    def forward(self, x): torch.manual_seed(0); return self.body(x)
class PrecFwd(Base):
    def forward(self, x): torch.set_float32_matmul_precision("medium"); return self.body(x)
class GradOffFwd(Base):
    def forward(self, x): torch.set_grad_enabled(False); return self.body(x)
class Stochastic(Base):
    def forward(self, x): return self.body(x) * torch.rand(1)
class NanFwd(Base):
    def forward(self, x): return self.body(x) * float("nan")
class ShapeVaries(Base):
    n = 0
    def forward(self, x):
        ShapeVaries.n += 1; return self.body(x)[: max(1, x.shape[0] - ShapeVaries.n % 2)]
class MemoryErr(Base):
    def forward(self, x): raise MemoryError("fake oom")
class RecErr(Base):
    def forward(self, x): raise RecursionError("deep")
class DtypeFwd(Base):
    def forward(self, x): torch.set_default_dtype(torch.float64); return self.body(x)
class PrintFwd(Base):
    def forward(self, x): print("FWD"*1000); return self.body(x)
class ThreadsFwd(Base):
    def forward(self, x): torch.set_num_threads(1); return self.body(x)
class WarnFwd(Base):
    def forward(self, x):
        import warnings; warnings.warn("w" * 100); return self.body(x)
class GenOut(Base):
    def forward(self, x): return (y for y in [self.body(x)])
class DictOut(Base):
    def forward(self, x): return {"logits": self.body(x)}
class BigOut(Base):
    def forward(self, x): return self.body(x).repeat(1, 1000)
