"""The strategies that follow a Plan: single, modelparallel (the blog recipe's hand placement,
generalised), pipeline (GPipe in one process) and every pp-* schedule (torch.distributed.pipelining, a
process per device) run the Plan's cuts, placement and micro-batch count as `make_plan` chose them, so
they share one price, price.py's `price_plan` (no torch); their Trainers are this package's modules
(single.py, modelparallel.py, pipeline.py, pp.py), on stages.py (the Plan's stages: split, placed,
chained) and float_coding.py (integer tensors crossing stages).
"""
