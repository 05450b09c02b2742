"""pipebench's own PipelineParallelTrainer in two bare processes, its step timed in parts; PLAN from
`pipebench plan ... --json PLAN`.   python parts.py PLAN pp-zb"""
import os, sys, time, json, torch, torch.distributed as dist, torch.multiprocessing as mp
def main(rank, planfile, strategy, secs, port):
    torch.set_num_threads(1)
    from pipebench.hardware.cpu import hold_memory; hold_memory()
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=2)
    from pipebench.models import get_model
    from pipebench.partition.planning.plan import Plan
    from pipebench.bench.strategies import get_strategy
    from pipebench.base.training import Training
    plan = Plan.from_dict(json.load(open(planfile)))
    s = get_strategy(strategy)
    model = get_model("torchvision.models:resnet18", input_shape=(3,64,64))
    x, y = model.make_batch(16, seed=1)
    tr = s.trainer_class()(model, [torch.device('cpu')], plan=plan, strategy=s, training=Training())
    tr.step(x, y); tr.step(x, y)
    opt = tr._optimizer
    parts = {k: [] for k in ("zero", "schedule", "tail", "opt", "step")}
    def tick(): return time.perf_counter()
    dist.barrier(); t0 = tick()
    while True:
        dist.barrier()
        a = tick(); opt.zero_grad(set_to_none=True); b = tick()
        args = (x,) if rank == tr.first_rank else ()
        kw = {"target": y, "losses": []} if rank == tr.last_rank else {}
        tr.schedule.step(*args, **kw); c = tick()
        loss = torch.zeros(()); dist.broadcast(loss, group_src=tr.last_rank); d = tick()
        opt.step(); e = tick()
        for k, v in zip(parts, (b - a, c - b, d - c, e - d, e - a)):
            parts[k].append(v * 1e3)
        flag = torch.tensor([1 if tick() - t0 > secs else 0]); dist.all_reduce(flag)
        if flag.item() == 2: break
    import statistics
    res = {k: (round(min(v), 1), round(statistics.median(v), 1)) for k, v in parts.items()}
    out = [None, None]; dist.all_gather_object(out, res)
    if rank == 0: print(strategy, "rank0", out[0], "\n   rank1", out[1], flush=True)
    dist.destroy_process_group()
if __name__ == '__main__':
    planfile, strategy = sys.argv[1], sys.argv[2]
    for k in range(2):
        mp.spawn(main, args=(planfile, strategy, 4.0, 29650 + k), nprocs=2)
