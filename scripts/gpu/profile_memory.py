"""Where a profile's GPU memory goes, for a model that barely fits (the 8B GPT in bf16): memory allocated
after the model is built, captured and split, and after each segment is profiled, at one micro-batch size.
Run on a GPU machine from the repository root: python3 scripts/gpu/profile_memory.py [MICRO_BATCH] [DEPTH]"""
import sys

import torch

from pipebench import models
from pipebench.partition.profiling import measure
from pipebench.partition.capture.graph import capture, segments
from pipebench.base.training import Training, set_precision

size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
depth = int(sys.argv[2]) if len(sys.argv) > 2 else 40
gib = lambda: f"{torch.cuda.memory_allocated() / 2**30:.1f} GiB (peak {torch.cuda.max_memory_allocated() / 2**30:.1f})"  # noqa: E731
training = Training("bf16", "adamw")
set_precision(training)
model = models.get_model("gpt", "8b", device="cuda:0", depth=depth)
print("built", gib(), flush=True)
inputs, _ = model.make_batch(size, seed=0, device="cuda:0")
captured = capture(model.module, (inputs,), granularity=model.granularity)
print("captured", gib(), flush=True)
segs = segments(captured)
print("segments", len(segs), gib(), flush=True)
del captured, segs
torch.cuda.empty_cache()
print("freed", gib(), flush=True)
torch.cuda.reset_peak_memory_stats()
seen = []


def progress(i, n, name):
    if i % 10 == 0 or i == n - 1:
        print(f"  segment {i}/{n} {name}: {gib()}", flush=True)


profile = measure.profile_model(model, "cuda:0", size, batch=16, repeats=3, warmup=1, progress=progress,
                                 training=training)
print("profiled", gib(), "whole step", profile.whole_step_ms, flush=True)
print("cast GiB", sum(l.cast_bytes for l in profile.layers) / 2**30,
      "saved GiB", sum(l.saved_bytes for l in profile.layers) / 2**30, flush=True)
