import torch
torch.manual_seed(1234)
torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
from odd import Base as Net
