"""Run API code given on argv[1] (cwd: the work folder): UserError/TypeError -> one line 'pipebench: error: [Type] msg',
rc 2; another exception -> its traceback, rc 1; none -> rc 0."""
import sys, os
sys.path.insert(0, os.path.join(os.getcwd(), "m"))
import numpy as np, torch, torch.nn as nn, pipebench
from pathlib import Path
from pipebench import UserError
try:
    exec(sys.argv[1], globals())
except (UserError, TypeError) as e:
    print(f"pipebench: error: [{type(e).__name__}] {e}", file=sys.stderr); sys.exit(2)
