# Fixtures of the fifth pass: run from anywhere; builds /tmp/b5/work.
set -x
mkdir -p /tmp/b5/work/m && cd /tmp/b5/work
export OMP_NUM_THREADS=1
P="flock /tmp/pipebench-cpu.lock timeout 300 /work/wt-battery5/.venv/bin/python -m pipebench"
PY=/work/wt-battery5/.venv/bin/python
cat > m/good.py <<'PYEOF'
import torch, torch.nn as nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 8); self.r = nn.ReLU(); self.b = nn.Linear(8, 3)
    def forward(self, x): return self.b(self.r(self.a(x)))
def data():
    g = torch.Generator().manual_seed(0)
    return torch.utils.data.TensorDataset(torch.randn(32, 4, generator=g), torch.randint(0, 3, (32,), generator=g))
PYEOF
cp m/good.py m/data.py
[ -f p.json ] || $P plan --model mlp --flavour tiny --stages 2 --batch 8 --save-profile p.json
[ -f pg.json ] || $P plan --model m/good.py:Net --input-shape 4 --stages 2 --batch 8 --save-profile pg.json
[ -f plan.json ] || $P plan --profile p.json --stages 2 --json plan.json
[ -d r0 ] || $P run --models mlp --flavour tiny --batch 8 --strategies single,ddp --steps 2 --warmup 1 --out r0
[ -f ck.pt ] || $P train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single --save ck.pt --csv trainlog.csv
[ -f ck2.pt ] || $P train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 3 --strategy single --save ck2.pt
$PY -c "import numpy as np; np.arange(2000, dtype=np.uint16).tofile('tok_ok.bin')"
ls
