import torch, torch.nn as nn
class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(torch.relu(self.a(x)))
NotClass = 5
Text = "hello"
Instance = Base()
Lam = lambda: 5
def ret_none(): return None
def ret_tuple(): return Base(), torch.randn(2, 4)
def meta(): return Base().to("meta")
class BuffersOnly(nn.Module):
    def __init__(self):
        super().__init__(); self.register_buffer("w", torch.randn(4, 3))
    def forward(self, x): return x @ self.w
class Recurse(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 3)
    def forward(self, x): return self.forward(x)
class RetNone(Base):
    def forward(self, x): return None
class RetInt(Base):
    def forward(self, x): return 3
class NeedsArgs(Base):
    def __init__(self, width): super().__init__()
class NoSuper(nn.Module):
    def __init__(self): self.a = 1
class Frozen(Base):
    def __init__(self):
        super().__init__()
        for p in self.parameters(): p.requires_grad_(False)
class Complex(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Parameter(torch.randn(4, 3, dtype=torch.cfloat))
    def forward(self, x): return (x.to(torch.cfloat) @ self.w).real
class NanW(Base):
    def __init__(self):
        super().__init__()
        with torch.no_grad(): self.a.weight.fill_(float("nan"))
class Deep(nn.Sequential):
    def __init__(self):
        super().__init__(*[nn.Linear(4, 4) for _ in range(300)], nn.Linear(4, 3))
class AuxOut(Base):
    def forward(self, x):
        y = self.b(torch.relu(self.a(x))); return y, y.detach() * 0
class InPlaceInput(Base):
    def forward(self, x):
        x.mul_(2); return super().forward(x)
class ScalarOut(Base):
    def forward(self, x): return super().forward(x).sum()
class IntParams(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 3); self.register_buffer("steps", torch.zeros((), dtype=torch.long))
    def forward(self, x):
        self.steps += 1; return self.a(x)
class Sleepy(Base):
    def forward(self, x):
        import time; time.sleep(0.05); return super().forward(x)
