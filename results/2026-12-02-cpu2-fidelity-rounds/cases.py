"""Each case of a fidelity run's rounds: its measured and predicted steps, round by round, and the error of
their medians (what bench/predict/fidelity.py judges it by).

    .venv/bin/python results/2026-12-02-cpu2-fidelity-rounds/cases.py FOLDER   # FOLDER holds round1..round3
"""
import statistics
import sys
from pathlib import Path

from pipebench.bench.store import results
from pipebench.bench.predict.fidelity import _case, _group

rows = results.load(sorted(Path(sys.argv[1]).glob("round*")))
cases: dict = {}
for r in sorted(rows, key=lambda r: r.started_at):
    if r.status == "ok" and r.predicted_step_ms and r.step_ms:
        cases.setdefault((_group(r)[8:28], _case(r)), []).append(r)
for (group, case), rs in cases.items():
    measured, predicted = [r.step_ms for r in rs], [r.predicted_step_ms for r in rs]
    error = (statistics.median(predicted) - statistics.median(measured)) / statistics.median(measured)
    print(f"{group:20s} {case:18s} measured {' '.join(f'{m:6.1f}' for m in measured):21s} "
          f"predicted {' '.join(f'{p:6.1f}' for p in predicted):21s} error {error:+.0%}")
