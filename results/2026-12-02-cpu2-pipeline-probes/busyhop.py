import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp
def main(rank, nbytes):
    torch.set_num_threads(1)
    from pipebench.hardware.cpu import hold_memory; hold_memory()
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT='29571')
    dist.init_process_group('gloo', rank=rank, world_size=2)
    x = torch.randn(8, 32, 32, 32); w = torch.randn(32, 32, 3, 3)
    def compute(ms):
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end: torch.nn.functional.conv2d(x, w, padding=1)
    t = torch.zeros(nbytes // 4)
    for busy in (0, 1, 2, 0, 1, 2):
        waits = []
        for i in range(12):
            dist.barrier()
            if rank == 0:
                work = dist.isend(t, 1)          # posted, then the sender computes (busy) or sleeps (idle)
                if busy: compute(30)
                else: time.sleep(0.03)
                work.wait()
            else:
                import threading
                stop = threading.Event()
                def burn():
                    while not stop.is_set(): torch.nn.functional.conv2d(x, w, padding=1)
                th = threading.Thread(target=burn) if busy == 2 else None
                if th: th.start()
                time.sleep(0.005)                # the receiver posts its recv 5 ms later
                s = time.perf_counter(); dist.recv(t, 0); waits.append((time.perf_counter() - s) * 1e3)
                stop.set()
                if th: th.join()
        if rank == 1:
            waits.sort(); print(f"{nbytes/1e6:5.2f} MB sender {['sleeping ', 'computing', 'computing, both cores busy'][busy]}: recv waited median {waits[len(waits)//2]:6.2f} ms, p90 {waits[int(0.9*len(waits))]:6.2f}", flush=True)
    dist.destroy_process_group()
if __name__ == '__main__':
    for n in map(int, sys.argv[1:]): mp.spawn(main, args=(n,), nprocs=2)
