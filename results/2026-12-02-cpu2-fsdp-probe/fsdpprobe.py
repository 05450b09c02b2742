import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def main(rank, W):
    torch.set_num_threads(1)
    from pipebench.hardware.cpu import hold_memory, unloaded_ms; hold_memory()
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29551')
    dist.init_process_group('gloo', rank=rank, world_size=2)
    from torch.distributed.fsdp import fully_shard
    def spans(run, times):
        out=[]
        for _ in range(times+1):
            dist.barrier(); t=time.perf_counter(); run(); out.append((time.perf_counter()-t)*1e3)
        return out[1:]
    N=8
    def stack(w): return torch.nn.Sequential(*[torch.nn.Linear(w, w) for _ in range(N)])
    def extra(w, times=20):
        sh = stack(w)
        for l in sh: fully_shard(l)
        pl = stack(w); one = torch.zeros(1, w)
        return unloaded_ms(spans(lambda: sh(one).sum().backward(), times)) - unloaded_ms(spans(lambda: pl(one).sum().backward(), times))
    large = torch.zeros(10**6); shard = torch.zeros(large.numel()//2); whole=torch.zeros(large.numel())
    g = unloaded_ms(spans(lambda: dist.all_gather_into_tensor(whole, shard), 5))
    s = unloaded_ms(spans(lambda: dist.reduce_scatter_tensor(shard, whole), 5))
    def extra_k(k, times=20):
        mk = lambda: torch.nn.Sequential(*[torch.nn.Sequential(*[torch.nn.Linear(1,1) for _ in range(k)]) for _ in range(N)])
        sh = mk()
        for l in sh: fully_shard(l)
        pl = mk(); one = torch.zeros(1, 1)
        return unloaded_ms(spans(lambda: sh(one).sum().backward(), times)) - unloaded_ms(spans(lambda: pl(one).sum().backward(), times))
    for _ in range(2):
        e1, e6 = extra_k(1), extra_k(6)
        if rank == 0: print(f'raw per block 1 linear {e1/N:.2f} ms, 6 linears {e6/N:.2f} ms -> per tensor {(e6-e1)/N/10:.3f} ms', flush=True)
    for _ in range(1):
        tiny = extra(1); big = extra(W)
        nbytes = N * (W*W+W) * 4
        eff = 3 * 0.5 * nbytes / (big - tiny) / 1e6
        if rank == 0: print(f'raw4MB gather {0.5*4e6/g/1e6:.2f} scatter {0.5*4e6/s/1e6:.2f} GB/s | fsdp tiny/layer {tiny/N:.2f} ms, big extra {big:.1f} ms for {nbytes/1e6:.1f} MB -> eff {eff:.2f} GB/s', flush=True)
    dist.destroy_process_group()
if __name__ == '__main__':
    for W in map(int, sys.argv[1:]):
        mp.spawn(main, args=(W,), nprocs=2)
