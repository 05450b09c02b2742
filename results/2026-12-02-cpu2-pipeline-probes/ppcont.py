import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
M = 8
def main(rank):
    torch.set_num_threads(1)
    from pipebench.hardware.cpu import hold_memory, unloaded_ms; hold_memory()
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29581')
    dist.init_process_group('gloo', rank=rank, world_size=2)
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    from pipebench.partition.planning.schedule import SharedCores, simulate
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1))
    x = torch.randn(8, 16, 32, 32)
    def spans(run, n):
        out = []
        for _ in range(n + 1):
            dist.barrier(); t = time.perf_counter(); run(); out.append((time.perf_counter() - t) * 1e3)
        return out[1:]
    # alone: this process's stage, forward and backward of one micro-batch, the other idle at the barrier
    xi = x.clone().requires_grad_()
    def fwd(): return net(xi)
    F = unloaded_ms(spans(lambda: fwd(), 10))
    FB = unloaded_ms(spans(lambda: net(xi).sum().backward(), 10))
    stage = PipelineStage(net, rank, 2, torch.device('cpu'))
    sched = Schedule1F1B(stage, M, loss_fn=lambda o, t: o.sum())
    batch = torch.randn(M * 8, 16, 32, 32)
    run = (lambda: sched.step(batch)) if rank == 0 else (lambda: sched.step(target=batch))
    for r in range(3):
        step = unloaded_ms(spans(run, 10))
        if rank == 0:
            B = FB - F
            def sim(c, hop=0.3, action=0.3):
                return simulate([F, F], [B, B], M, "1f1b", [hop], shared_cores=SharedCores(c, action)).step_time
            lo, hi = 1.0, 4.0
            if sim(1.0) >= step: c = 1.0
            else:
                for _ in range(40):
                    mid = (lo + hi) / 2; lo, hi = (mid, hi) if sim(mid) < step else (lo, mid)
                c = (lo + hi) / 2
            print(f"F {F:.2f} B {B:.2f} ms; pipeline step {step:.1f} ms, simulated at contention 1: {sim(1.0):.1f} -> contention {c:.2f}", flush=True)
    dist.destroy_process_group()
if __name__ == '__main__':
    for _ in range(2): mp.spawn(main, nprocs=2)
