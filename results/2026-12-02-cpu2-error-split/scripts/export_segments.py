"""Per segment, one export per size against one dynamic-batch export, timed alternately in one loop
(the profiler's own _profile_segment), so that the machine's load falls on both alike."""
import os, sys, statistics
os.environ["PIPEBENCH_CACHE"] = "off"
import torch
from pipebench.models import get_model
from pipebench.partition.capture.graph import capture, segments
from pipebench.partition.profiling.measure import _Clock, _profile_segment, _inputs

torch.set_num_threads(1)
size = int(sys.argv[2]) if len(sys.argv) > 2 else 8
model = get_model(sys.argv[1], "tiny", device="cpu")
module = model.module.train()
args = _inputs(model, size, torch.device("cpu"))
static = segments(capture(module, args, granularity=model.granularity))
dynamic = segments(capture(module, _inputs(model, 2 if size == 1 else size, torch.device("cpu")),
                           granularity=model.granularity, dynamic_batch=True).at(args))
assert [s.begins_at for s in static] == [s.begins_at for s in dynamic]
clock = _Clock(torch.device("cpu"))
params = {p.untyped_storage().data_ptr() for m in (module, *(s.module for s in static + dynamic)) for p in m.parameters()}
ratios, sums = [], {"static": 0.0, "dynamic": 0.0}
for s, d in zip(static, dynamic):
    times = {"static": [], "dynamic": []}
    for k in range(6):
        for kind, seg in (("static", s), ("dynamic", d)) if k % 2 else (("dynamic", d), ("static", s)):
            f = _profile_segment(seg, clock, 3, 1, params)
            times[kind].append(f["forward_ms"] + f["backward_ms"])
    a, b = statistics.median(times["static"]), statistics.median(times["dynamic"])
    sums["static"] += a
    sums["dynamic"] += b
    ratios.append(b / a)
    print(f"{s.begins_at:24} static {a:7.3f} dynamic {b:7.3f} ms  {b / a:.3f}x", flush=True)
print(f"{sys.argv[1]} size {size}: segments' sum static {sums['static']:.2f} dynamic {sums['dynamic']:.2f} ms "
      f"({sums['dynamic'] / sums['static']:.3f}x); median segment {statistics.median(ratios):.3f}x")
