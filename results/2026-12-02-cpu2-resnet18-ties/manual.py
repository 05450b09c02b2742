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
    b = 16 // m
    with torch.no_grad(): shape = chain[0](x[:b]).shape
    ops = []
    def rec(kind, mb, fn):
        s = time.perf_counter(); r = fn(); ops.append((kind, mb, s, time.perf_counter())); return r
    def manual():
        ops.clear()
        opt.zero_grad()
        if rank == 0:
            outs = []
            # 1F1B for stage 0 of 2: F0 F1 ... then B's
            for i in range(m):
                o = rec('F', i, lambda: me(x[i*b:(i+1)*b])); outs.append(o)
                sends.append(dist.isend(o.detach(), 1))
            for i in range(m):
                g = torch.empty(shape); rec('wait', i, lambda: dist.recv(g, 1))
                rec('B', i, lambda: outs[i].backward(g))
        else:
            for i in range(m):
                a = torch.empty(shape); rec('wait', i, lambda: dist.recv(a, 0)); a.requires_grad_()
                out = rec('F', i, lambda: mm.loss_fn(me(a), y[i*b:(i+1)*b]) / m)
                rec('B', i, lambda: out.backward())
                sends.append(dist.isend(a.grad, 0))
        for w in sends: w.wait()
        sends.clear()
        opt.step()
    sends = []
    def pp():
        opt.zero_grad()
        if rank == 0: sched.step(*args)
        else: sched.step(target=y)
        opt.step()
    def timed(fn):
        for _ in range(2): fn()
        ts=[]; dist.barrier(); t0=time.perf_counter(); best=None
        while True:
            t=time.perf_counter(); fn(); d=(time.perf_counter()-t)*1e3; ts.append(d)
            if best is None or d < best[0]: best = (d, [(k, i, round((s-t)*1e3,1), round((e-s)*1e3,1)) for k,i,s,e in ops])
            flag = torch.tensor([1 if time.perf_counter()-t0 > secs else 0])
            dist.all_reduce(flag)
            if flag.item() == 2: break
        ts.sort(); return round(ts[0],1), round(ts[len(ts)//2],1), best[1]
    for k in range(3):
        a = timed(manual); p = timed(pp)
        out = [None, None]; dist.all_gather_object(out, (a, p))
        if rank == 0:
            print(f"m={m} round {k}: manual best/med r0 {out[0][0][:2]} r1 {out[1][0][:2]}; torch 1F1B r0 {out[0][1][:2]} r1 {out[1][1][:2]}", flush=True)
            if k == 2:
                print("   r0 ops of its fastest manual step:", out[0][0][2]); print("   r1:", out[1][0][2])
    dist.destroy_process_group()
if __name__ == '__main__':
    for m in map(int, sys.argv[1:]):
        mp.spawn(main, args=("layer4.0.conv1", m, 3.0, 29610 + m), nprocs=2)
