import torch
torch.randn = None
torch.nn.functional.relu = lambda x: x * 0
from odd import Base as Net
