import torch, os
def _ds(n=32, w=4):
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(n, w, generator=g), torch.randint(0, 3, (n,), generator=g))
def good(): return _ds()
def float_targets(): return torch.utils.data.TensorDataset(torch.randn(32, 4), torch.rand(32))
def targets_oob(): return torch.utils.data.TensorDataset(torch.randn(32, 4), torch.full((32,), 7))
def exits(): os._exit(6)
def returns_loader(): return torch.utils.data.DataLoader(_ds(), batch_size=8)
def returns_list_tensors(): return [torch.randn(4) for _ in range(32)]
def int_inputs(): return torch.utils.data.TensorDataset(torch.randint(0, 3, (32, 4)), torch.randint(0, 3, (32,)))
def inf_inputs(): return torch.utils.data.TensorDataset(torch.full((32, 4), float("inf")), torch.randint(0, 3, (32,)))
def meta_inputs(): return torch.utils.data.TensorDataset(torch.randn(32, 4, device="meta"), torch.randint(0, 3, (32,), device="meta"))
class Err(torch.utils.data.Dataset):
    def __len__(self): return 32
    def __getitem__(self, i):
        if i == 5: raise IndexError("bad sample 5")
        return torch.randn(4), 0
def item_raises(): return Err()
class NegLen(torch.utils.data.Dataset):
    def __len__(self): return -1
    def __getitem__(self, i): return torch.randn(4), 0
def neg_len(): return NegLen()
class Inf(torch.utils.data.IterableDataset):
    def __iter__(self):
        while True: yield torch.randn(4), 0
def iterable_inf(): return Inf()
def with_args(n): return _ds()
def requires_grad_inputs(): return torch.utils.data.TensorDataset(torch.randn(32, 4, requires_grad=True), torch.randint(0, 3, (32,)))
def wide_targets(): return torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32, 2)))
