import torch
torch.set_default_device("meta")
from odd import Base as Net
