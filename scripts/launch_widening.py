"""Fits partition/profiling/profile_record.py HOST_BETWEEN_RUNS: how far the host's part of a GPU step moves between runs.

    python scripts/launch_widening.py FIT_RUN [FIT_RUN ...] --held-out RUN [RUN ...]

Each RUN is a results folder of `run --strategies single` on a GPU that kept its profiles as profiles.tgz
(scripts/gpu/fidelity_broad_h200.sh). For each row: the single step predicted again from its profile with
today's calibration, the profile's own spread with BETWEEN_RUNS, and its launch share (partition/profiling/profile_record.py
`launch_share`). The fit is the least factor H that puts 80% of the fit runs' measured steps inside
hypot(own, H x share); the held-out runs are then scored with it. Measured: run3 fits H = 0.86, and 5 of 6
held-out steps (run4) fall inside (results/2026-12-04-H200-broad-fidelity)."""
from __future__ import annotations

import json
import math
import sys
import tarfile
import tempfile
from pathlib import Path

from pipebench.partition.planning.plan_choice import make_plan
from pipebench.partition.profiling.profile_record import BETWEEN_RUNS, launch_share, load_profiles, step_spread
from pipebench.request import Request

COVER = 0.8


def cases(run: Path) -> list[tuple[str, float, float, float]]:
    """(model, |error| of today's prediction, own spread with BETWEEN_RUNS, launch share) per ok row."""
    rows = {r["model"].rsplit(":", 1)[-1]: r for results in run.glob("*.json") if not results.name.startswith(".")
            for r in json.loads(results.read_text())["rows"] if r["status"] == "ok"}
    out = []
    with tempfile.TemporaryDirectory() as folder, tarfile.open(run / "profiles.tgz") as archive:
        archive.extractall(folder, filter="data")
        for path in sorted(Path(folder).rglob("*.profile.json")):
            profiles = load_profiles(path)
            row = rows[profiles[0].model.rsplit(":", 1)[-1]]
            request = Request(devices=[profiles[0].device], micro_batches=1, training=profiles[0].training)
            predicted = make_plan(profiles, request).predicted_step_ms
            own = math.hypot(step_spread(profiles), BETWEEN_RUNS["gpu"])
            out.append((row["model"], abs(predicted / row["step_ms"] - 1), own, launch_share(profiles)))
    return out


def inside(rows, factor: float) -> int:
    return sum(error <= math.hypot(own, factor * share) for _, error, own, share in rows)


def main(argv: list[str]) -> None:
    split = argv.index("--held-out") if "--held-out" in argv else len(argv)
    fit = [c for run in argv[:split] for c in cases(Path(run))]
    held = [c for run in argv[split + 1:] for c in cases(Path(run))]
    for model, error, own, share in fit + held:
        print(f"{model}: error {error:.1%}, own {own:.1%}, launch share {share:.2f}")
    factor = next(h / 100 for h in range(0, 301) if inside(fit, h / 100) >= COVER * len(fit))
    print(f"fit on {len(fit)} steps: H = {factor:.2f} puts {inside(fit, factor)} inside")
    if held:
        print(f"held out: {inside(held, factor)} of {len(held)} inside with H = {factor:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
