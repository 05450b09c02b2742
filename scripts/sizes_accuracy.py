"""How much `--micro-batches auto`'s interpolated sizes cost in accuracy (partition/profiling/micro_batch_sizes.py), as a benchmark.

For each model, back to back in one process: every micro-batch size measured twice (the second time is
the noise a measurement has anyway), then the sizes that auto measures taken from the first measurement
and the others interpolated between them. Printed:
- per interpolated size, the relative error of each layer's figures against the measured ones (median
  and 90th percentile over the layers, times weighted alike), beside the same statistic between the two
  measurements;
- the plan (2 stages, 1f1b) and the advice (2 devices) made from every size measured, against those made
  as auto makes them: the anchors measured, the close counts measured (refine, within micro_batch_sizes.TIE) and
  the rest interpolated. "same" when the choice is the same; else the measured step of auto's choice
  over the measured best.

    python scripts/sizes_accuracy.py [--batch 32] [--markdown]

Nothing is cached (PIPEBENCH_CACHE=off); CPU only.
"""
from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from pipebench.request import Request

MODELS = {  # small enough for a 2-core CPU, large enough that a layer takes milliseconds
    "gpt": dict(flavour="tiny", settings={"width": 256, "depth": 4, "seq_len": 64, "vocab": 1024}),
    "resnet18": dict(flavour="tiny", settings={"width": 16}),
    "hf-llama": dict(),  # _llama(): a 4-layer Llama from its config, random weights
}


def _llama():
    """A small Hugging Face decoder (RoPE, causal mask), as a user would pass it: the module and its ids."""
    import torch
    import transformers

    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=False, use_cache=False))
    return model, torch.randint(0, 1024, (2, 64))
TIMES = ("forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms")
BYTES = ("saved_bytes", "output_bytes")


def _errors(got, want, figures) -> dict[str, float]:
    """Per figure, the layers' relative errors: their median, and their mean weighted by the measured
    figure (what a stage's sum feels)."""
    out = {}
    for name in figures:
        pairs = [(getattr(g, name), getattr(w, name)) for g, w in zip(got.layers, want.layers)]
        pairs = [(a, b) for a, b in pairs if a is not None and b]
        if pairs:
            out[name] = (statistics.median(abs(a - b) / b for a, b in pairs),
                         sum(abs(a - b) for a, b in pairs) / sum(b for _, b in pairs))
    return out


def _choice(profiles, devices):
    from pipebench.bench.predict.ranking import rank_strategies
    from pipebench.partition.planning.plan_choice import make_plan

    plan = make_plan(profiles, Request(devices=devices, schedule="1f1b", link_gbps=0.0))
    advice = rank_strategies(profiles, Request(devices=devices))
    return plan, advice


def compare(name: str, batch: int) -> dict:
    import pipebench
    from pipebench.bench.predict.ranking import advice_ranking
    from pipebench.partition.profiling import micro_batch_sizes
    from pipebench.partition.planning.plan_choice import plan_ranking

    spec = MODELS[name]
    model, example = _llama() if name == "hf-llama" else (name, None)
    counts = micro_batch_sizes.counts_to_profile(None, batch, 1)
    common = dict(batch=batch, device="cpu", flavour=spec.get("flavour"), settings=spec.get("settings"),
                  micro_batches=counts)
    first = pipebench.profile(model, example, **common)
    second = pipebench.profile(model, example, **common)
    by_count = {p.micro_batches: p for p in first}
    devices = ["cpu", "cpu"]
    anchors = [by_count[m] for m in micro_batch_sizes.anchors(counts, len(devices))]
    rows = []
    for m in counts:
        if any(a.micro_batches == m for a in anchors):
            continue
        guess = micro_batch_sizes.interpolate(anchors, m)
        again = next(p for p in second if p.micro_batches == m)
        rows.append({"size": batch // m, "from": guess.interpolated_from,
                     "time": _errors(guess, by_count[m], TIMES), "noise": _errors(again, by_count[m], TIMES),
                     "bytes": _errors(guess, by_count[m], BYTES)})
    measured_plan, measured_advice = _choice(first, devices)
    choices = {}
    for what, rank in (("plan", plan_ranking(Request(devices=devices, schedule="1f1b"))), ("advise", advice_ranking(Request(devices=devices)))):
        asked: list[int] = []

        def measure(wanted, asked=asked):
            asked.extend(wanted)
            return [by_count[m] for m in wanted]

        auto = micro_batch_sizes.refine(anchors, counts, rank, measure)
        plan, advice = _choice(auto, devices)
        if what == "plan":
            best, got = measured_plan.micro_batches, plan.micro_batches
            step = {c["micro_batches"]: c.get("predicted_step_ms") for c in measured_plan.candidates}
            verdict = "same" if got == best else f"{step[got] / step[best]:.3f}x the best step"
            choices[what] = (f"m={best}", f"m={got}", verdict, len(anchors) + len(asked))
        else:
            best, got = measured_advice.recommended, advice.recommended
            fast = {p.strategy: p.predicted_step_ms for p in measured_advice.predictions}
            verdict = "same" if got == best else f"{fast[got] / fast[best]:.3f}x the best step"
            choices[what] = (best, got, verdict, len(anchors) + len(asked))
    return {"model": name, "batch": batch, "counts": len(counts), "rows": rows, "choices": choices}


def report(results: list[dict], markdown: bool) -> str:
    sep = " | " if markdown else "  "
    lines = []
    head = ["model", "size", "from", "figure", "interpolated: median", "weighted", "measured again: median",
            "weighted"]
    lines.append(sep.join(head))
    if markdown:
        lines.append("|".join("---" for _ in head))
    for r in results:
        for row in r["rows"]:
            for figure, (median, weighted) in {**row["time"], **row["bytes"]}.items():
                again = row["noise"].get(figure)
                lines.append(sep.join([r["model"], str(row["size"]), "/".join(map(str, row["from"])), figure,
                                       f"{median:.1%}", f"{weighted:.1%}",
                                       f"{again[0]:.1%}" if again else "-", f"{again[1]:.1%}" if again else "-"]))
    lines.append("")
    head = ["model", "choice", "all measured", "auto", "auto's choice", "sizes measured by auto"]
    lines.append(sep.join(head))
    if markdown:
        lines.append("|".join("---" for _ in head))
    for r in results:
        for what, (best, got, verdict, n) in r["choices"].items():
            lines.append(sep.join([r["model"], what, best, got, verdict, f"{n} of {r['counts']}"]))
    if markdown:
        lines = [f"| {line} |" if line and "|" in line else line for line in lines]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    os.environ["PIPEBENCH_CACHE"] = "off"
    results = [compare(name, args.batch) for name in args.models.split(",")]
    print(report(results, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
