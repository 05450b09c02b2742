import torch
from torch.utils.data import Dataset, TensorDataset
X = torch.randn(32, 4); Y = torch.randint(0, 3, (32,))
def gen(): return ((X[i], Y[i]) for i in range(32))
def tuple_pairs(): return tuple((X[i], Y[i]) for i in range(32))
def dict_ds(): return {i: (X[i], Y[i]) for i in range(32)}
def nested_input():
    class D(Dataset):
        def __len__(self): return 32
        def __getitem__(self, i): return (X[i],), Y[i]
    return D()
def triple(): return TensorDataset(X, Y, Y)
def neg_targets(): return TensorDataset(X, Y - 5)
def nan_inputs(): return TensorDataset(X * float("nan"), Y)
def half_inputs(): return TensorDataset(X.half(), Y)
def wrong_width(): return TensorDataset(torch.randn(32, 5), Y)
def len_zero(): return TensorDataset(X[:0], Y[:0])
def len_7(): return TensorDataset(X[:7], Y[:7])
def noncontig(): return TensorDataset(torch.randn(4, 32).t(), Y)
def prints():
    print("DATA SAYS HI"); return TensorDataset(X, Y)
def sysexit(): raise SystemExit(0)
def kbint(): raise KeyboardInterrupt
def tensor_itself(): return X
def bool_true(): return True
