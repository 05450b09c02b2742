"""How much wider than one profile's noise a prediction's interval must be to hold between runs and
machines of one kind, measured from committed results.

- as printed: for rows that kept their prediction's interval (`predicted_step_spread`), the share of
  measured steps inside it, and the extra spread, added in quadrature, that COVER (0.8) of them needed to
  lie inside it. That is the widening partition/profiling/profile_record.py BETWEEN_RUNS holds. It holds what moves between
  runs and between machines (a profile made on one H200 predicts another's step) and the errors of the
  predictions that wrote those rows, so it is the widening they needed, not a figure of noise alone.
- between runs: every case measured more than once (rounds, runs, machines of one kind: the same model,
  settings, batch, strategy and micro-batch count), each measured fastest step against the median of
  that case's: the COVER quantile of |step / median - 1|, what the measurements alone moved. On GPUs it is
  far below the figure above (the steps repeat; the profiles move between machines), on the CPU close to it.

    python scripts/interval_widening.py            # the folders below; prints both figures per kind
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from pipebench.bench.store import results
from pipebench.bench.predict.fidelity import measured_step

COVER = 0.8
ROOT = Path(__file__).resolve().parents[1] / "results"
FOLDERS = {
    # one H200 each, two machines of one kind (12-02 and 12-03), tf32 and bf16
    "gpu": ["2026-12-02-H200-fidelity-measured", "2026-12-02-H200-fidelity-fastest", "2026-12-03-H200-first-machine"],
    # the shared 2-vCPU VM, runs hours apart
    "cpu": ["2026-12-02-cpu2-fidelity-whole-step", "2026-12-02-cpu2-fidelity-fastest", "2026-12-02-cpu2-fidelity-after",
            "2026-12-02-cpu2-resnet18-ties", "2026-12-03-cpu2-quick-suite-rounds"],
}


def extras(rows) -> list[float]:
    """Per row with a prediction and its interval: the spread to add in quadrature for it to hold."""
    out = []
    for row in rows:
        if row.status != "ok" or not row.predicted_step_ms or row.predicted_step_spread is None:
            continue
        error = abs(measured_step(row) / row.predicted_step_ms - 1)
        out.append(math.sqrt(max(error ** 2 - row.predicted_step_spread ** 2, 0.0)))
    return out


def between_runs(rows) -> list[float]:
    """Per measured row of a case measured more than once: |its fastest step / the case's median - 1|."""
    import statistics
    from collections import defaultdict

    from pipebench.bench.predict.fidelity import _case, _group

    cases = defaultdict(list)
    for row in rows:
        if row.status == "ok":
            cases[(_group(row), _case(row))].append(measured_step(row))
    return [abs(step / statistics.median(steps) - 1) for steps in cases.values() if len(steps) > 1 for step in steps]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def main() -> int:
    for kind, folders in FOLDERS.items():
        rows = results.load(sorted(csv for f in folders for csv in (ROOT / f).rglob("*.csv")
                                   if "summary" not in csv.name))
        needed = extras(rows)
        covered = sum(e == 0.0 for e in needed) / len(needed)
        moved = between_runs(rows)
        print(f"{kind}: {', '.join(folders)}")
        print(f"  between runs: {len(moved)} measured steps of cases measured more than once; {COVER:.0%} within "
              f"±{quantile(moved, COVER):.3f} of their case's median")
        print(f"  as printed: {len(needed)} rows with an interval, {covered:.0%} inside it; {COVER:.0%} would need "
              f"±{quantile(needed, COVER):.3f} more (in quadrature), the predictions' own errors included (BETWEEN_RUNS)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
