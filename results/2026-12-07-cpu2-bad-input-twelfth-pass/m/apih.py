"""Run API code given on argv[1]: UserError/TypeError -> one line 'pipebench: error: ...', rc 2; other -> traceback rc 1."""
import sys, os, traceback
sys.path.insert(0, "/tmp/b12/work/m")
import numpy as np, torch, torch.nn as nn, pipebench
from pathlib import Path
from pipebench import UserError, Training, Request
try:
    exec(sys.argv[1], globals())
except (UserError, TypeError) as e:
    print(f"pipebench: error: [{type(e).__name__}] {e}", file=sys.stderr); sys.exit(2)
