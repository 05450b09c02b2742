# tenth pass: print('hello from the model file at import')
print('hello from the model file at import')
import torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.r(self.a(x)))
