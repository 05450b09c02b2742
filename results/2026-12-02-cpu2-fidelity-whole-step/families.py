"""Each strategy family's median step error over a run's cases (from cases.py's listing: the median of a
case's rounds against the median of its predictions, judged by the fastest step).
    python results/2026-12-02-cpu2-fidelity-whole-step/families.py CASES.txt"""
import re
import statistics
import sys

ONE_PROCESS = {"single", "dataparallel", "device-map", "modelparallel", "pipeline"}
families: dict[str, list[float]] = {"one process": [], "ddp, zero1": [], "fsdp": [], "pp-*": []}
for line in open(sys.argv[1]):
    strategy = line.split()[1]
    error = float(re.search(r"err\s+([+-]?\d+)%", line).group(1))
    family = ("one process" if strategy in ONE_PROCESS else "fsdp" if strategy == "fsdp"
              else "pp-*" if strategy.startswith("pp-") else "ddp, zero1")
    families[family].append(error)
for family, errors in families.items():
    print(f"{family:12} {len(errors):3} cases  median |error| {statistics.median(map(abs, errors)):3.0f}%  "
          f"median signed {statistics.median(errors):+4.0f}%")
