"""Cases: which strategies and models a run measures, on which machine, in which order."""
