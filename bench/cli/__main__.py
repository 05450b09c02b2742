"""`python -m pipebench.bench.cli ...` is the `pipebench` command."""
import sys

from pipebench.bench.cli import main

sys.exit(main())
