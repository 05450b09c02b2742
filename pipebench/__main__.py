"""`python -m pipebench ...` is the `pipebench` command."""
import sys

from pipebench.bench.cli import main

sys.exit(main())
