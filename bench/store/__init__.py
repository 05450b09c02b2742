"""The results store: a row per case, appended under a lock, read back by report."""
