"""The report: tables, notes and plots from the results store."""
