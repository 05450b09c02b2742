"""Files pipebench writes and reads: atomic writes and checked paths (files.py), typed JSON records
(records.py) and spreadsheet-safe CSV (csvtext.py)."""
