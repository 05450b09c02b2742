import statistics, sys
from pathlib import Path
from pipebench.bench.store.results import load
base = Path(sys.argv[1])
rows = load(sorted(base.glob("round*")))
cases = {}
for r in rows:
    if r.status == "ok" and r.predicted_step_ms:
        cases.setdefault((r.model[:20], r.strategy, r.micro_batches), []).append(r)
for k, rs in cases.items():
    b = statistics.median(r.step_ms_best for r in rs); p = statistics.median(r.predicted_step_ms for r in rs)
    print(f"{k[0]:20s} {k[1]:14s} m={k[2]} best " + " ".join(f"{r.step_ms_best:6.1f}" for r in rs) + "  mean " + " ".join(f"{r.step_ms:6.1f}" for r in rs) + "  pred " + " ".join(f"{r.predicted_step_ms:6.1f}" for r in rs) + f"  err {(p-b)/b:+.0%}")
