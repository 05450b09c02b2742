import torch, torch.nn as nn, os, sys, time, subprocess
class Base(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.b = nn.Linear(8, 3)
    def body(self, x): return self.b(torch.relu(self.a(x)))
class ExitFwd(Base):
    def forward(self, x): sys.exit(0)
class StrFwd(Base):
    def forward(self, x): return "not a tensor"
class NoneFwd(Base):
    def forward(self, x): self.body(x); return None
class KbFwd(Base):
    def forward(self, x): raise KeyboardInterrupt
class PopenFwd(Base):
    def forward(self, x): subprocess.Popen(["sleep", "42.5"]); return self.body(x)
class CounterBuf(Base):
    def __init__(self):
        super().__init__(); self.register_buffer("calls", torch.zeros((), dtype=torch.long)); self.register_buffer("ema", torch.zeros(3))
    def forward(self, x):
        y = self.body(x)
        if self.training:
            self.calls += 1; self.ema.mul_(0.9).add_(y.detach().mean(0), alpha=0.1)
        return y
class SpecNorm(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.utils.parametrizations.spectral_norm(nn.Linear(4, 8)); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(torch.relu(self.a(x)))
class Tied(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 4); self.b = nn.Linear(4, 4); self.b.weight = self.a.weight; self.c = nn.Linear(4, 3)
    def forward(self, x): return self.c(self.b(torch.relu(self.a(x))))
class Lstm(nn.Module):
    def __init__(self):
        super().__init__(); self.r = nn.LSTM(4, 8, num_layers=2, dropout=0.3, batch_first=True); self.h = nn.Linear(8, 3)
    def forward(self, x): return self.h(self.r(x)[0][:, -1])
class BnMomNone(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.n = nn.BatchNorm1d(8, momentum=None); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.n(self.a(x)))
