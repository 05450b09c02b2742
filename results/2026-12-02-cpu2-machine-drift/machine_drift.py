"""Is a CPU stand-in's speed the process's or the machine's? Six copies of gpt tiny (batch 8, one thread, SGD)
built in one process, each timed for 40 steps in turn, round after round, for about a minute.

If the copies differed (where their memory landed), a copy would keep its speed from round to round. If the
machine's speed moves (the host's other load), every copy moves together from one round to the next.

    .venv/bin/python results/2026-12-02-cpu2-machine-drift/machine_drift.py
"""
import statistics
import time

import torch

from pipebench import models

torch.set_num_threads(1)
copies = []
for _ in range(6):
    m = models.get_model("gpt", "tiny", seed=0)
    x, y = m.make_batch(8, seed=1)
    copies.append((m, x, y, torch.optim.SGD(m.module.parameters(), lr=0.0)))


def step(m, x, y, opt):
    opt.zero_grad(set_to_none=True)
    m.loss_fn(m.module(x), y).backward()
    opt.step()


for c in copies:
    for _ in range(3):
        step(*c)
start = time.time()
rounds = []
while time.time() - start < 60:
    medians = []
    for c in copies:
        times = []
        for _ in range(40):
            t = time.perf_counter()
            step(*c)
            times.append((time.perf_counter() - t) * 1e3)
        medians.append(statistics.median(times))
    rounds.append(medians)
    print(f"{time.time() - start:5.1f} s: " + " ".join(f"{v:5.2f}" for v in medians) + " ms", flush=True)
within = statistics.median((max(r) - min(r)) / statistics.median(r) for r in rounds)
means = [statistics.median(r) for r in rounds]
print(f"copies apart within a round (median): {within:.1%}; rounds' medians {min(means):.2f}-{max(means):.2f} ms "
      f"({max(means) / min(means):.2f}x)")
