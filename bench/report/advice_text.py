"""`pipebench advise`'s answer: the ranking as a table, the notes on its noise, its link and its
pipelines, and the recommendation with the command that checks it."""
from __future__ import annotations

from pipebench.bench.report.labels import is_pipeline

NOISY = 0.15
"""A step spread above this says more about the machine than about the strategies: format_advice says so."""


def format_advice(advice, profile, request, check=None) -> str:
    """The ranking of `request` (pipebench/request.py: its devices, its link) as a table, each step with its
    interval (± its spread), a line where the profile was noisy (NOISY) and one where what moves between
    runs (between_runs_spread) is wider than that, a line where no link between the devices was measured
    or given (Request.links), a line where no pipeline pays (bench/predict/pipeline_gain.py), then one line: the
    recommendation, a tie said as one, and `check(compared)`: the command that measures it."""
    devices = list(request.devices)
    single = advice.baseline()
    table = _ranking_table(advice, single)
    head = _heading(profile, devices)
    tail = _recommendation(advice, single, check)
    noisy = _noise_notes(advice, profile)
    verdict = _pipeline_verdict(advice, single)
    unpriced = _unpriced_link_note(profile, request)
    return "\n".join([head, "", table, "", *noisy, *unpriced, *verdict, tail])


def _heading(profile, devices) -> str:
    """The first line: the model, its batch and the devices it was priced on."""
    from pipebench.partition.profiling.profile_record import model_label

    named = ", ".join(dict.fromkeys(devices)) if len(set(devices)) > 1 else devices[0]
    return (f"{model_label(profile.model, profile.flavour)}, batch {profile.batch}, on {len(devices)} x "
            f"{profile.device_name or devices[0]} ({named}); predicted from the profile, nothing run")


def _ranking_table(advice, single) -> str:
    """Every prediction as a row, fastest first, and the notes they name below the table: a note's text
    is written once, by its number, so that the table stays narrow."""
    import pandas as pd

    notes: dict[str, int] = {}  # a note's text -> its number
    rows = [_ranking_row(rank, p, single, notes) for rank, p in enumerate(advice.predictions, 1)]
    table = "\n".join(line.rstrip() for line in pd.DataFrame(rows).to_string(index=False).splitlines())
    if notes:
        table += "\n\n" + "\n".join(f"[{number}] {text}" for text, number in notes.items())
    return table


def _ranking_row(rank: int, p, single, notes: dict[str, int]) -> dict[str, object]:
    """One prediction's row of the table; its reason, if any, numbered in `notes`."""
    known = p.predicted_samples_per_s is not None
    return {
        "rank": rank if known else "-",
        "strategy": p.strategy,
        "schedule": (p.schedule or "-") if is_pipeline(p.strategy) else "-",
        "micro-batches": p.micro_batches,
        "step ms": f"{p.predicted_step_ms:.2f} ±{p.step_spread:.1%}" if known else "-",
        "samples/s": f"{p.predicted_samples_per_s:.1f}" if known else "-",
        "x single": f"{p.predicted_samples_per_s / single.predicted_samples_per_s:.2f}" if known and single else "-",
        "peak memory per device": _peaks(p.peak_memory_bytes),
        "fits": "yes" if p.fits else "no",
        "note": f"[{notes.setdefault(p.reason, len(notes) + 1)}]" if p.reason else "",
    }


def _recommendation(advice, single, check) -> str:
    """The last line: the recommendation (`_recommended`) and the command that measures it (`check(compared)`)."""
    from pipebench.bench.strategies import BASELINE

    if advice.recommended is None:
        return "recommended: none fits; lower --batch, raise --max-memory, or use more devices"
    best = next(p for p in advice.predictions if p.strategy == advice.recommended)
    tied = [p for p in advice.predictions if p.strategy in advice.tied]
    # What the check measures beside single: the recommendation and what ties with it, or for single
    # the runner-up that fits.
    compared = [p for p in (best, *tied) if p.strategy != BASELINE] or [
        p for p in advice.predictions if p.strategy != BASELINE and p.fits and p.predicted_samples_per_s][:1]
    tail = "recommended: " + _recommended(advice, single)
    if compared:
        tail += "; check it with: " + (check(compared) if check else f"pipebench run --strategies {BASELINE}," +
                                       ",".join(p.strategy for p in compared))
    return tail


def _recommended(advice, single) -> str:
    """The recommendation as advise and auto say it: the strategy, its predicted samples/s and gain over
    single (a tie said as one), and what is predicted faster but ties with it; "none fits" where none does."""
    from pipebench.bench.predict.ranking import tie
    from pipebench.bench.strategies import BASELINE

    if advice.recommended is None:
        return "none fits"
    best = next(p for p in advice.predictions if p.strategy == advice.recommended)
    # A gain over single only where it is beyond a tie with it (bench/predict/ranking.py recommendation_of).
    with_single = tie(best, single) if single and best.strategy != BASELINE else ""
    gain = (f", {best.predicted_samples_per_s / single.predicted_samples_per_s:.2f}x single"
            + (f", a tie with it ({with_single})" if with_single else "")
            if single and best.strategy != BASELINE else "")
    said = f"{best.strategy} ({best.predicted_samples_per_s:.1f} samples/s predicted{gain})"
    tied = [p for p in advice.predictions if p.strategy in advice.tied]
    if tied:
        said += (f"; {', '.join(f'{p.strategy} ({advice.tied[p.strategy]})' for p in tied)} predicted "
                 f"faster, a tie: the simpler is recommended")
    return said


def auto_choice(advice, picked, model: str, doing: str, profile_path) -> str:
    """The line `run --strategies auto:K` and `train --strategy auto` say before they start: what they
    picked (`doing` it: "running", "training with"), why (advise's recommendation, as advise says it, and
    every strategy's predicted samples/s, fastest first) and the profile it was predicted from."""
    ranked = ", ".join(f"{p.strategy} {p.predicted_samples_per_s:.1f}" for p in advice.predictions
                       if p.predicted_samples_per_s)
    return (f"auto: {model}: {doing} {', '.join(picked)}; advise's recommendation: "
            f"{_recommended(advice, advice.baseline())}; predicted samples/s: {ranked} (from the profile {profile_path})")


def _noise_notes(advice, profile) -> list[str]:
    """The lines that say why the intervals are wide, each where it is wider than NOISY, then a blank
    line (none: no lines): the machine's drift or the profile's own repeats, then what moves between runs
    (the host's launches on a GPU, or machines of this kind)."""
    import math

    from pipebench.partition.profiling.profile_record import between_runs_spread, launch_share

    widest = max((p.step_spread for p in advice.predictions if p.predicted_step_ms is not None), default=0.0)
    drift = profile.machine_drift or 0.0
    between = between_runs_spread([profile])
    own = math.sqrt(max(widest ** 2 - between ** 2, 0.0))  # the profile's part: the widening taken out
    noisy = []
    if widest > NOISY and drift > NOISY and drift >= own * (1 - 1e-9):  # the machine's speed, not the repeats
        noisy = [f"this machine's speed moved ±{drift:.0%} while it was watched (another VM on its host, another "
                 "process?): a step measured later may land anywhere in that, so every prediction is at least "
                 "that wide, and a strategy predicted faster than another by less than that ties with it"]
    elif own > NOISY:
        noisy = [f"the profile is noisy: predicted steps vary by up to ±{own:.0%} with its repeats (another "
                 "process on the device?), so their intervals overlap more; on an idle device they narrow"]
    share = launch_share([profile])
    if between > NOISY and share:
        noisy.append(f"{share:.0%} of the step waits on the host's launches, not the device's work, and that part "
                     f"moves with the host's CPU between runs: every interval is at least ±{between:.0%} "
                     "(the widening that puts 80% of measured GPU steps inside their intervals); a larger batch "
                     "makes the device set the step")
    elif between > NOISY:
        noisy.append(f"on machines of this kind one case's step moves ±{between:.0%} between runs (measured over "
                     "repeated runs on such machines), so every interval is at least that wide and most "
                     "strategies tie; a tie goes to the simplest")
    return [*noisy, ""] if noisy else []


def _pipeline_verdict(advice, single) -> list[str]:
    """Why no pipeline pays, for the fastest pipeline that fits (bench/predict/pipeline_gain.py), and a blank line;
    none where one pays or none fits."""
    from pipebench.bench.predict.pipeline_gain import no_pipeline_pays

    pipelines = [p for p in advice.predictions if is_pipeline(p.strategy) and p.fits and p.predicted_samples_per_s]
    verdict = no_pipeline_pays(pipelines[0], single) if pipelines else ""
    return [verdict, ""] if verdict else []


def _unpriced_link_note(profile, request) -> list[str]:
    """A line (and a blank one) where several devices have no link measured or given (the link that
    priced them, Request.links, is 0): what crosses between them was priced as free."""
    devices = request.devices
    if len(devices) < 2 or request.links(profile)[0]:
        return []
    return [f"no link between the devices was measured ({devices[0]} stands in for all {len(devices)}): what "
            "crosses between them (activations, gradients, replicas) is priced as free, which favours the "
            "strategies that move most; give --link-gbps (e.g. 400 for NVLink, 25 for PCIe 4) to price it", ""]


def _peaks(peaks: list[int]) -> str:
    """Each device's peak, or for many devices (a device map over dozens) the largest and the count."""
    from pipebench.base.text.units import format_bytes

    if len(peaks) > 4:
        return f"{format_bytes(max(peaks))} max on {len(peaks)}"
    return " / ".join(format_bytes(b) for b in peaks) or "-"
