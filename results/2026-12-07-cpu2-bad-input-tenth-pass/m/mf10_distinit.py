# tenth pass: import torch.distributed as dist dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29517', rank=0, world_size=1)
import torch.distributed as dist
dist.init_process_group('gloo', init_method='tcp://127.0.0.1:29517', rank=0, world_size=1)
import torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.r(self.a(x)))
