import torch, torch.nn as nn, os, sys, time, threading
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.r(self.a(x)))
class Big(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Linear(200000, 200000)
    def forward(self, x): return self.w(x)
