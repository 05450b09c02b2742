"""The foundations every layer above stands on and none of them owns: the errors and their exit codes, the
Training, the schedule names, the process tree, time limits, the caller's state snapshot, text and files."""
