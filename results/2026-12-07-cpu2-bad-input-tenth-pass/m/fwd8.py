import torch, torch.nn as nn, os, sys, time, threading
class Base(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.b = nn.Linear(8, 3)
    def body(self, x): return self.b(torch.relu(self.a(x)))
class InfFwd(Base):
    def forward(self, x): return self.body(x) * float("inf")
class NanLater(Base):
    n = 0
    def forward(self, x):
        NanLater.n += 1
        y = self.body(x)
        return y * float("nan") if NanLater.n > 6 else y
class ForkFwd(Base):
    def forward(self, x):
        if os.fork() == 0: time.sleep(30); os._exit(0)
        return self.body(x)
class ThreadFwd(Base):
    def forward(self, x):
        threading.Thread(target=lambda: time.sleep(10**6)).start(); return self.body(x)
class ChdirFwd(Base):
    def forward(self, x): os.chdir("/tmp"); return self.body(x)
class SleepFwd(Base):
    def forward(self, x): time.sleep(5); return self.body(x)
class BigFwd(Base):
    def forward(self, x): return self.body(x) + torch.empty(1 << 40, dtype=torch.uint8).sum() * 0
class Bn(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.n = nn.BatchNorm1d(8); self.b = nn.Linear(8, 3); self.d = nn.Dropout(0.5)
    def forward(self, x): return self.b(self.d(self.n(self.a(x))))
