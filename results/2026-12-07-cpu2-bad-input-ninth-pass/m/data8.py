import torch
def data():
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(30, 4, generator=g), torch.randint(0, 3, (30,), generator=g))
def nan_data():
    x = torch.randn(32, 4); x[5] = float("nan")
    return torch.utils.data.TensorDataset(x, torch.randint(0, 3, (32,)))
def inf_data():
    x = torch.randn(32, 4) * 1e38 * 1e1
    return torch.utils.data.TensorDataset(x, torch.randint(0, 3, (32,)))
