"""The planner, in the flow's order: capture/ (the model exported and its cut candidates), profiling/
(each segment measured, the `Profile` record and its cache) and planning/ (pure: the exact cut, the
schedules and their simulator, the `Plan` and its search, the cost models)."""
from pipebench.partition.planning.solver import InfeasibleError, bottleneck, solve, stage_memory, stage_times

__all__ = ["InfeasibleError", "bottleneck", "solve", "stage_memory", "stage_times"]
