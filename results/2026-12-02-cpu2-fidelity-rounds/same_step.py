"""The noise floor of a CPU fidelity run: single and dataparallel run the very same step on CPU stand-ins
(DataParallel without CUDA devices runs the module unchanged), one after the other in the same round. How
far apart they measure is how far any measurement of this machine is from another of the same work.

    .venv/bin/python results/2026-12-02-cpu2-fidelity-rounds/same_step.py [--fastest] FOLDER...   # each holds round1..; --fastest: by their fastest steps
"""
import statistics
import sys
from pathlib import Path

from pipebench.bench.store import results

FIELD = "step_ms_best" if "--fastest" in sys.argv else "step_ms"
apart = []
for folder in [a for a in sys.argv[1:] if a != "--fastest"]:
    for round_ in sorted(Path(folder).glob("round*")):
        steps: dict = {}
        for r in results.load([round_]):
            if r.status == "ok" and r.strategy in ("single", "dataparallel"):
                steps.setdefault(r.model, {})[r.strategy] = getattr(r, FIELD)
        for model, s in steps.items():
            if len(s) == 2:
                gap = abs(s["dataparallel"] - s["single"]) / s["single"]
                apart.append(gap)
                print(f"{round_}: {model[-30:]:30s} single {s['single']:7.1f} ms, dataparallel {s['dataparallel']:7.1f} ms: {gap:.1%} apart")
print(f"{len(apart)} pairs: median {statistics.median(apart):.1%} apart, 90th percentile "
      f"{sorted(apart)[round(0.9 * (len(apart) - 1))]:.1%}")
