"""Single predicted again from each row's own saved profile by today's code, against the row's fastest step.

    python results/2026-12-02-H200-fidelity-fastest/repredict_single.py results/2026-12-02-H200-fidelity-fastest/tf32
"""
import sys
from pathlib import Path

from pipebench.bench.predict.ranking import predict
from pipebench.bench.store.results import load
from pipebench.partition.profiling.profile_record import load_profiles

folder = Path(sys.argv[1])
profiles = {p.name: load_profiles(p) for p in folder.glob("*-profiles/*.profile.json")}
print("| model | fastest ms | predicted when run | error | predicted now | error |\n|---|---|---|---|---|---|")
for row in load(sorted(folder.glob("*.json"))):
    name = next(n for n in profiles if row.model.split(":")[-1].split(".")[0] in n
                or row.model.split(":")[-1] in n)
    now = predict("single", profiles[name], ["cuda:0"]).predicted_step_ms
    print(f"| {row.model} | {row.step_ms_best:.1f} | {row.predicted_step_ms:.1f} "
          f"| {(row.predicted_step_ms / row.step_ms_best - 1) * 100:+.1f}% | {now:.1f} "
          f"| {(now / row.step_ms_best - 1) * 100:+.1f}% |")
