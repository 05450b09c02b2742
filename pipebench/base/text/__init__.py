"""Text a user types and reads: the command line's specs (parse.py), byte sizes and seconds (units.py),
the fidelity table and the scripts' tables (text_tables.py) and progress bars (progress.py)."""
