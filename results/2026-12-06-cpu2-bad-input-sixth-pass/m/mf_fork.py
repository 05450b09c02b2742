import torch, torch.nn as nn
import os
if os.fork() == 0:
    import time; time.sleep(30); os._exit(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.r(self.a(x)))
