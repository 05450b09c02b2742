"""Run many API snippets in one process (torch imported once): argv[1] a JSON list of [name, code, expect];
one JSON record per snippet to argv[2] (the driver's fields): UserError/TypeError -> rc 2 with 'pipebench: error:
[Type] msg' as `last`, another exception -> rc 1 with its traceback flagged, none -> rc 0. Each snippet runs in a
TMPDIR of its own, and a pipebench-* left there fails it."""
import json, os, sys, tempfile, time, traceback, io, contextlib
sys.path.insert(0, "/tmp/b12/work/m")
import numpy as np, torch, torch.nn as nn, pipebench
from pathlib import Path
from pipebench import UserError, Training, Request
cases = json.load(open(sys.argv[1]))
with open(sys.argv[2], "a") as f:
    for name, code, expect in cases:
        tmp = Path("/tmp/b12/work/tmp") / name; tmp.mkdir(parents=True, exist_ok=True)
        os.environ["TMPDIR"] = str(tmp); tempfile.tempdir = None
        t = time.time(); buf = io.StringIO(); tb = 0
        try:
            with contextlib.redirect_stdout(buf):
                exec(code, {**globals()})
            rc, last = 0, (buf.getvalue().strip().splitlines() or [""])[-1]
        except (UserError, TypeError) as e:
            rc, last = 2, f"pipebench: error: [{type(e).__name__}] {e}"
        except BaseException as e:
            rc, tb, last = 1, 1, f"{type(e).__name__}: {e} @ {traceback.format_exc().strip().splitlines()[-3].strip()}"
        left = sorted(p.name for p in tmp.iterdir() if p.name.startswith("pipebench"))
        ok = (rc == 2 and "\n" not in last) if expect == "err" else (rc == 0) if expect == "ok" else rc in (0, 2)
        note = f"LEFT IN TMPDIR {left}" if left else ""
        ok = ok and not left
        r = dict(name=name, cmd=code, rc=rc, tb=tb, last=last[:300], nlines=1, stdout_tail=buf.getvalue()[-300:], expect=expect,
                 ok=ok, note=note, secs=round(time.time() - t, 1), env=None)
        f.write(json.dumps(r) + "\n"); f.flush()
        print("ok  " if ok else "FAIL", name, rc, tb, r["secs"], last[:150], note, flush=True)
