# tenth pass: a forward of 40 ms, so that profiling lasts (signal cases)
import time, torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x):
        time.sleep(0.04)
        return self.b(self.r(self.a(x)))
