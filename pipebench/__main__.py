"""`python -m pipebench ...` is the `pipebench` command."""
import sys

try:
    from pipebench.bench.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line itself is imported: one line, as later
    print("pipebench: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
