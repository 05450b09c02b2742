import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def main(rank, cut, m, secs, port):
    torch.set_num_threads(1)
    from pipebench.hardware.cpu import hold_memory; hold_memory()
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=2)
    from pipebench.models import get_model
    from pipebench.partition.capture.graph import split_model
    from pipebench.bench.strategies.common import as_args, chain_stages
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B
    mm = get_model("torchvision.models:resnet18", input_shape=(3,64,64)); mod = mm.module
    x, y = mm.make_batch(16, seed=0); args = as_args(x)
    sp = split_model(mod, args, {}, [cut]); chain = chain_stages(sp)
    me = chain[rank]
    stage = PipelineStage(me, rank, 2, torch.device('cpu'))
    sched = Schedule1F1B(stage, m, loss_fn=mm.loss_fn)
    opt = torch.optim.SGD(me.parameters(), lr=1e-3)
    def step():
        opt.zero_grad()
        if rank == 0: sched.step(*args)
        else: sched.step(target=y)
        opt.step()
    # isolated: this stage's forward+backward for one micro-batch, as its own loop
    xm = x[:16//m]
    with torch.no_grad():
        a0 = chain[0](xm)
    def iso():
        opt.zero_grad()
        for _ in range(m):
            if rank == 0:
                out = me(xm); out.backward(torch.ones_like(out))
            else:
                inp = a0.clone().requires_grad_(); mm.loss_fn(me(inp), y[:16//m]).backward()
        opt.step()
    def timed(fn, who):
        for _ in range(2): fn()
        ts=[]; dist.barrier(); t0=time.perf_counter()
        while True:
            if who in (rank, 'both'):
                t=time.perf_counter(); fn(); ts.append((time.perf_counter()-t)*1e3)
            else:
                time.sleep(0.02)
            flag = torch.tensor([1 if time.perf_counter()-t0 > secs else 0])
            dist.all_reduce(flag)
            if flag.item() == 2: break
        ts.sort(); return (round(ts[0],1), round(ts[len(ts)//2],1)) if ts else None
    for k in range(2):
        res = {}
        res['pp'] = timed(step, 'both')
        r0 = timed(iso, 0)
        r1 = timed(iso, 1)
        res['iso alone'] = r0 if rank == 0 else r1
        res['iso together'] = timed(iso, 'both')
        out = [None, None]; dist.all_gather_object(out, res)
        if rank == 0: print(f"m={m} round {k}: rank0 {out[0]}  rank1 {out[1]}", flush=True)
    dist.destroy_process_group()
if __name__ == '__main__':
    for m in map(int, sys.argv[1:]):
        mp.spawn(main, args=("layer4.0.conv1", m, 3.0, 29600 + m), nprocs=2)
