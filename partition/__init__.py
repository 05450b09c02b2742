"""Partitioning: profile layers, solve for balanced contiguous stages, simulate schedules, make Plans."""
from pipebench.partition.solver import InfeasibleError, bottleneck, solve, stage_memory, stage_times

__all__ = ["InfeasibleError", "bottleneck", "solve", "stage_memory", "stage_times"]
