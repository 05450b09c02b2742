"""Launching: the job a case runs as, its processes, its sessions and the worker inside them."""
