set -x
cd /tmp/b4/work
export OMP_NUM_THREADS=1
P="flock /tmp/pipebench-cpu.lock timeout 300 /work/wt-battery4/.venv/bin/python -m pipebench"
PY=/work/wt-battery4/.venv/bin/python
[ -f p.json ] || $P plan --model mlp --flavour tiny --stages 2 --batch 8 --save-profile p.json
[ -f plan.json ] || $P plan --profile p.json --stages 2 --json plan.json
[ -d r0 ] || $P run --models mlp --flavour tiny --batch 8 --strategies single,ddp --steps 2 --warmup 1 --out r0
[ -f ck.pt ] || $P train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single --save ck.pt --csv trainlog.csv
$PY - <<'PYEOF'
import numpy as np, struct, os
np.arange(2000, dtype=np.uint16).tofile("tok_ok.bin")
(np.arange(2000) % 60000).astype(np.uint16).tofile("tok_bigid.bin")   # ids beyond a tiny gpt's vocab
def idx(path, arr, magic):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic)); [f.write(struct.pack(">I", d)) for d in arr.shape]; f.write(arr.tobytes())
def mnist(root, n=64, labels=None, img=None, timg=None, tlab=None):
    raw = os.path.join(root, "MNIST", "raw"); os.makedirs(raw, exist_ok=True)
    im = np.random.RandomState(0).randint(0, 255, (n, 28, 28)).astype(np.uint8)
    lb = (np.arange(n) % 10).astype(np.uint8) if labels is None else labels
    idx(f"{raw}/train-images-idx3-ubyte", im if img is None else img, 0x803)
    idx(f"{raw}/train-labels-idx1-ubyte", lb, 0x801)
    idx(f"{raw}/t10k-images-idx3-ubyte", im[:16] if timg is None else timg, 0x803)
    idx(f"{raw}/t10k-labels-idx1-ubyte", lb[:16] if tlab is None else tlab, 0x801)
mnist("mn_ok")
mnist("mn_label_mismatch", labels=(np.arange(50) % 10).astype(np.uint8))
mnist("mn_label_11", labels=(np.arange(64) % 12).astype(np.uint8))
mnist("mn_shape_14", img=np.zeros((64, 14, 14), np.uint8))
mnist("mn_trunc"); 
p = "mn_trunc/MNIST/raw/train-images-idx3-ubyte"; d = open(p, "rb").read(); open(p, "wb").write(d[:len(d)//2])
mnist("mn_header_huge")
p = "mn_header_huge/MNIST/raw/train-images-idx3-ubyte"; d = bytearray(open(p, "rb").read()); d[4:8] = struct.pack(">I", 2**31 - 1); open(p, "wb").write(bytes(d))
mnist("mn_magic_bad")
p = "mn_magic_bad/MNIST/raw/train-labels-idx1-ubyte"; d = bytearray(open(p, "rb").read()); d[0:4] = struct.pack(">I", 0x0D03); open(p, "wb").write(bytes(d))
mnist("mn_fewer_than_batch", n=4)
mnist("mn_test_only_bad", tlab=(np.arange(16) % 10 + 200).astype(np.uint8))
PYEOF
mkdir -p mn_fifo/MNIST && cp -r mn_ok/MNIST/raw mn_fifo/MNIST/ && rm mn_fifo/MNIST/raw/train-labels-idx1-ubyte && mkfifo mn_fifo/MNIST/raw/train-labels-idx1-ubyte
mkdir -p mn_zero/MNIST && cp -r mn_ok/MNIST/raw mn_zero/MNIST/ && ln -sf /dev/zero mn_zero/MNIST/raw/train-images-idx3-ubyte
ls
