import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def main(rank, name, flav, batch, cut, secs):
    torch.set_num_threads(1)
    from pipebench.hardware.cpu import hold_memory; hold_memory()
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29541')
    dist.init_process_group('gloo', rank=rank, world_size=2)
    from pipebench.models import get_model
    from pipebench.partition.capture.graph import split_model
    from pipebench.bench.strategies.common import as_args, chain_stages
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
    m = get_model(name, flav); mod = m.module
    x, y = m.make_batch(batch, seed=0); args = as_args(x)
    sp = split_model(mod, args, {}, [cut]); chain = chain_stages(sp)
    stage = PipelineStage(chain[rank], rank, 2, torch.device('cpu'))
    sched = ScheduleGPipe(stage, 1, loss_fn=m.loss_fn)
    opt = torch.optim.SGD(chain[rank].parameters(), lr=1e-3)
    def step():
        opt.zero_grad()
        if rank == 0: sched.step(*args)
        else: sched.step(target=y)
        opt.step()
    for _ in range(3): step()
    ts=[]; dist.barrier(); t0=time.perf_counter()
    while True:
        t=time.perf_counter(); step(); ts.append((time.perf_counter()-t)*1e3)
        flag = torch.tensor([1 if time.perf_counter()-t0 > secs and len(ts)>=10 else 0])
        dist.all_reduce(flag)
        if flag.item() == 2: break
    ts.sort()
    if rank == 0: print('pp-gpipe m=1 best/median', round(ts[0],2), round(ts[len(ts)//2],2), flush=True)
    dist.destroy_process_group()
if __name__ == '__main__':
    name, flav, batch, cut = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    for k in range(3):
        mp.spawn(main, args=(name, flav, batch, cut, 3.0), nprocs=2)
