"""Plan, pure (no torch): the exact cut, the schedules and their simulator, the `Plan` record and its
search over micro-batch counts, the memory model, the replicas' cost models, and a Plan as text or as
another engine's configuration."""
