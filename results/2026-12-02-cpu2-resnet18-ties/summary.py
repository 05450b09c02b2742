"""Each round: what advise recommended, each case's fastest and mean step, and the regret by both.
    python results/2026-12-02-cpu2-resnet18-ties/summary.py results/2026-12-02-cpu2-resnet18-ties/round*"""
import re, sys
from pipebench.bench.store import results
from pipebench.bench.report.tables import measured_tie
for folder in sys.argv[1:]:
    advised = open(f"{folder}/advise.txt").read()
    pick = re.search(r"recommended: (\S+)", advised).group(1)
    rows = [r for r in results.load(folder) if r.status == "ok"]
    cases = {(r.strategy, r.micro_batches): r for r in rows}
    chosen = [r for r in rows if r.strategy == pick and (r.predicted_step_ms or 0) > 0]
    rec = min(chosen, key=lambda r: r.predicted_step_ms)  # the count advise predicted (its plan's)
    best = min(rows, key=lambda r: r.step_ms_best); mean = min(rows, key=lambda r: r.step_ms)
    print(f"{folder}: recommended {pick} (m={rec.micro_batches}); fastest step {best.strategy} m={best.micro_batches} "
          f"{best.step_ms_best:.1f}, fastest mean {mean.strategy} m={mean.micro_batches} {mean.step_ms:.1f} ± {mean.step_ms_std:.1f}")
    as_dict = lambda r: {"step_ms": r.step_ms, "step_ms_std": r.step_ms_std}
    tie = rec is mean or measured_tie(as_dict(mean), as_dict(rec))
    print(f"   recommended: fastest step {rec.step_ms_best:.1f} (regret {1 - best.step_ms_best / rec.step_ms_best:.1%}), "
          f"mean {rec.step_ms:.1f} ± {rec.step_ms_std:.1f} (regret {1 - mean.step_ms / rec.step_ms:.1%}); "
          f"{'measured fastest' if rec is mean else 'a measured tie with the fastest' if tie else 'slower beyond the noise'}")
    for r in sorted(rows, key=lambda r: r.step_ms):
        print(f"     {r.strategy:15s} m={r.micro_batches}  predicted {r.predicted_step_ms:6.1f}  fastest {r.step_ms_best:6.1f} "
              f"({(r.predicted_step_ms - r.step_ms_best) / r.step_ms_best:+.0%})  mean {r.step_ms:6.1f} ± {r.step_ms_std:4.1f}")
