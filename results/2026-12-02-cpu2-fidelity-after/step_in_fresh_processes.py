import time, statistics, sys, torch, torchvision
torch.set_num_threads(1)
if len(sys.argv) > 1 and sys.argv[1] == "hold":
    from pipebench.hardware.cpu import hold_memory; hold_memory()
torch.manual_seed(0)
m = torchvision.models.resnet18()
B = int(sys.argv[3]) if len(sys.argv) > 3 else 16
x = torch.randn(B, 3, 64, 64); y = torch.randint(0, 1000, (B,))
opt = torch.optim.SGD(m.parameters(), lr=0.0)
ts = []
for k in range(14):
    t = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    ts.append((time.perf_counter() - t) * 1e3)
print(sys.argv[1:], "median %.1f" % statistics.median(ts[4:]), [round(t) for t in ts[4:]])
