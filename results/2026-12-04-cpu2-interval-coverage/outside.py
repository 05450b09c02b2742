"""Every measured row against its printed interval: predicted step x (1 ± predicted_step_spread) against the
row's fastest step (bench/predict/fidelity.py's coverage, row by row), the rows outside it, and the signed step
errors (predicted / measured - 1) by strategy family.

    python results/2026-12-04-cpu2-interval-coverage/outside.py results/2026-12-04-cpu2-interval-coverage/round*
"""
import math
import statistics
import sys
from pathlib import Path

from pipebench.bench.store import results
from pipebench.bench.predict.fidelity import measured_step
from pipebench.partition.profiling.profile_record import BETWEEN_RUNS

rows = [r for r in results.load([Path(p) for p in sys.argv[1:]])
        if r.status == "ok" and r.predicted_step_ms and r.predicted_step_spread is not None]
errors = []
for r in sorted(rows, key=lambda r: r.started_at):
    step, predicted, spread = measured_step(r), r.predicted_step_ms, r.predicted_step_spread
    errors.append(abs(predicted / step - 1))
    if abs(step - predicted) > predicted * spread:
        print(f"outside: {r.started_at[:16]} {r.model} {r.strategy} m={r.micro_batches}: predicted {predicted:.2f} ms "
              f"±{spread:.1%}, fastest step {step:.2f} ms ({predicted / step - 1:+.1%})")
inside = sum(abs(measured_step(r) - r.predicted_step_ms) <= r.predicted_step_ms * r.predicted_step_spread for r in rows)
ordered = sorted(errors)
print(f"{inside} of {len(rows)} rows inside their interval ({inside / len(rows):.1%}); per-row |step error| median "
      f"{statistics.median(errors):.1%}, p90 {ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]:.1%}; "
      f"interval half-widths {min(r.predicted_step_spread for r in rows):.1%} to {max(r.predicted_step_spread for r in rows):.1%}")
unwidened = sum(abs(measured_step(r) - r.predicted_step_ms)
                <= r.predicted_step_ms * math.sqrt(max(r.predicted_step_spread ** 2 - BETWEEN_RUNS["cpu"] ** 2, 0.0))
                for r in rows)
print(f"without BETWEEN_RUNS (the profile's own spread and drift alone): {unwidened} of {len(rows)} inside "
      f"({unwidened / len(rows):.1%})")
# The widening, in quadrature, that 80% of these rows needed beyond their own interval (BETWEEN_RUNS taken
# out), as scripts/interval_widening.py measures BETWEEN_RUNS from older folders.
needed = sorted(math.sqrt(max((measured_step(r) / r.predicted_step_ms - 1) ** 2
                              - (r.predicted_step_spread ** 2 - BETWEEN_RUNS["cpu"] ** 2), 0.0)) for r in rows)
print(f"80% of these rows needed ±{needed[math.ceil(0.8 * len(needed)) - 1]:.1%} beyond their own interval "
      f"(BETWEEN_RUNS['cpu'] is ±{BETWEEN_RUNS['cpu']:.1%})")
