import time
from pipebench.hardware.probes import measure_cpu_processes
for i in range(12):
    t = time.time()
    f = measure_cpu_processes(2)
    print(i, f"action {f['action_ms']:.3f} hop {f['link_latency_ms']:.3f} contention {f['core_contention']:.2f} fsdp {f['fsdp_layer_ms']:.2f} ({time.time()-t:.1f} s)", flush=True)
