import math, torch
from torch.utils.data import Dataset, TensorDataset, IterableDataset
g = lambda: torch.Generator().manual_seed(0)
class _Base(Dataset):
    def __init__(self, n=32): self.n = n
    def __len__(self): return self.n
    def __getitem__(self, i): return torch.randn(4), int(i % 3)
class Raises(_Base):
    def __getitem__(self, i): raise ValueError("my dataset is broken")
class RaisesLate(_Base):
    def __getitem__(self, i):
        if i >= 8: raise KeyError("item %d" % i)
        return torch.randn(4), int(i % 3)
class WrongShape(_Base):
    def __getitem__(self, i): return torch.randn(5), int(i % 3)
class LenRaises(_Base):
    def __len__(self): raise RuntimeError("no length")
class NotTuple(_Base):
    def __getitem__(self, i): return torch.randn(4)
class Iter(IterableDataset):
    def __iter__(self):
        for i in range(32): yield torch.randn(4), i % 3
def raises(): return Raises()
def raises_late(): return RaisesLate()
def wrong_shape(): return WrongShape()
def empty(): return TensorDataset(torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))
def nan(): return TensorDataset(torch.full((32, 4), math.nan), torch.zeros(32, dtype=torch.long))
def inf_target(): return TensorDataset(torch.randn(32, 4), torch.full((32,), 7, dtype=torch.long))
def float_target(): return TensorDataset(torch.randn(32, 4), torch.rand(32))
def none(): return None
def boom(): raise OSError("cannot open my data")
def len_raises(): return LenRaises()
def not_tuple(): return NotTuple()
def iterable(): return Iter()
def small(): return TensorDataset(torch.randn(3, 4), torch.zeros(3, dtype=torch.long))
def a_list(): return [(torch.randn(4), i % 3) for i in range(32)]
def an_int(): return 7
notfunc = 5
def needs_arg(x): return x
class Slow(_Base):
    def __getitem__(self, i):
        import time; time.sleep(0.03); return torch.randn(4), int(i % 3)
def slow(): return Slow(32)
