import os, sys, time, statistics
import torch, torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
def main(rank, world, port):
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    for trial in range(40):
        stage = PipelineStage(torch.nn.Linear(1, 1), rank, world, torch.device("cpu"))
        sched = Schedule1F1B(stage, 8, loss_fn=lambda o, t: o.sum())
        batch = torch.zeros(8, 1)
        run = (lambda: sched.step(batch)) if rank == 0 else (lambda: sched.step(target=batch))
        spans = []
        for _ in range(21):
            dist.barrier()
            t = time.perf_counter(); run(); spans.append((time.perf_counter() - t) * 1e3)
        spans = spans[1:]
        if rank == 0:
            o = sorted(spans)
            print(trial, f"p25 {o[4]:.2f} med {statistics.median(o):.2f} min {o[0]:.2f} max {o[-1]:.2f} first {spans[0]:.2f}", flush=True)
    dist.destroy_process_group()
if __name__ == "__main__":
    if len(sys.argv) == 1:
        import subprocess
        p = subprocess.Popen([sys.executable, __file__, "1", "29533"])
        main(0, 2, 29533); p.wait()
    else:
        main(int(sys.argv[1]), 2, int(sys.argv[2]))
