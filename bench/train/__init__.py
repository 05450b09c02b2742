"""`pipebench train`: the planned split trained on your data, to a checkpoint your model loads.

The parent checks everything it can before any worker starts, plans the strategy as `pipebench run` plans a
case (the same Plan, from the cached profile), starts the workers and shows their progress; each worker
runs loop.py. The modules, in the order a training meets them:

    options.py     TrainOptions: what the command is asked, checked when made (bounds, nodes, absolute paths)
    outputs.py     what it writes, checked first: the checkpoint, its state folder, --csv, --write-job's files
    parent.py      the parent process: the data and model checked, the strategy chosen and planned, the
                   workers started and watched (`run_training`), or the job written for torchrun (`write_job`)
    train_log.py   rank 0's progress rows as the user sees them: the recipe's log line, the tqdm bar
    data.py        the --data sources and their checks
    loop.py        one worker: DataLoader + DistributedSampler, the Trainer's step, checkpoints
    checkpoint.py  the user's state_dict, gathered; the per-process training state that --resume reads
    curves.py      the --csv log's columns, and its loss curve and throughput as `pipebench report` draws them
    own.py         the same pieces for a loop of your own under torchrun (`this_rank`)
"""
