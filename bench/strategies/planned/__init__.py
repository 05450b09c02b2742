"""The strategies that follow a Plan: single, modelparallel (the blog recipe's hand placement,
generalised), pipeline (GPipe in one process) and every pp-* schedule (torch.distributed.pipelining, a
process per device) run the Plan's cuts, placement and micro-batch count as `make_plan` chose them, so
they share one price, price.py's `price_plan` (no torch); their Trainers are this package's modules
(single.py, modelparallel.py, pipeline.py, pp.py), on stages.py (the Plan's stages: split, placed,
chained) and float_coding.py (integer tensors crossing stages).

Each `*_trainer_class` below returns one of those Trainers, importing its module (and torch) only when
called: the registry holds these functions and is read where torch must not load, so this package
imports none.
"""


def single_trainer_class():
    """`SingleTrainer`: single's Trainer."""
    from pipebench.bench.strategies.planned.single import SingleTrainer

    return SingleTrainer


def modelparallel_trainer_class():
    """`ModelParallelTrainer`: modelparallel's Trainer."""
    from pipebench.bench.strategies.planned.modelparallel import ModelParallelTrainer

    return ModelParallelTrainer


def pipeline_trainer_class():
    """`PipelineTrainer`: pipeline's Trainer."""
    from pipebench.bench.strategies.planned.pipeline import PipelineTrainer

    return PipelineTrainer


def pp_trainer_class():
    """`PipelineParallelTrainer`: every pp-* schedule's Trainer."""
    from pipebench.bench.strategies.planned.pp import PipelineParallelTrainer

    return PipelineParallelTrainer
