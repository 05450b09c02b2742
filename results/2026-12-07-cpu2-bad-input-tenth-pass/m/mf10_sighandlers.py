# tenth pass: import signal, sys signal.signal(signal.SIGINT, lambda *a: print('MODEL SIGINT', file=sys.stderr)) signal.signal(signal.SIGTERM, lambda *a: print('MODEL SIGTERM', file=sys.stderr))
import signal, sys
signal.signal(signal.SIGINT, lambda *a: print('MODEL SIGINT', file=sys.stderr))
signal.signal(signal.SIGTERM, lambda *a: print('MODEL SIGTERM', file=sys.stderr))
import torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.r(self.a(x)))
