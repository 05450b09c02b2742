"""Profile: the captured model measured segment by segment at each micro-batch size, on the device it
will train on; the `Profile` record it makes (no torch) and the cache that keeps it."""
