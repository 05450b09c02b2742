"""Bad input, tenth pass (issue 42): run each case, record rc, traceback, last stderr line, what was left in its
TMPDIR, verdict. Usage: python driver.py [substring ...]   (only cases whose name contains one of them).
Adapted from the ninth pass's driver: every case gets a TMPDIR of its own (tmp/<name>), and a pipebench-* left
there fails it; PIPEBENCH_CACHE is this pass's (/tmp/b12/cache) unless the case sets it."""
import json, os, re, shlex, shutil, subprocess, sys, time
from pathlib import Path

W = Path(os.environ.get("B12W", "/tmp/b12/work")); M = W / "m"
PY = "/work/wt-twelfth/.venv/bin/python"
P = f"{PY} -m pipebench"
PRE = "OMP_NUM_THREADS=1 timeout 150"
# root without CAP_DAC_OVERRIDE: a folder's mode bits hold for us (a read-only or unreadable folder as a user has it)
NODAC = "setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search"
OUT = Path(os.environ.get("B12OUT", "/tmp/b12/results.jsonl"))
CASES = []


def case(name, cmd, expect="err", check=None, setup=None, env=None, timeout=150):
    assert not any(c["name"] == name for c in CASES), name
    CASES.append(dict(name=name, cmd=cmd, expect=expect, check=check, setup=setup, env=env, timeout=timeout))


def expand(cmd):
    return (cmd.replace("$NP", "\0NP").replace("$PY", "\0PY").replace("$P", f"{PRE} {P}")
            .replace("\0NP", f"{PRE} {NODAC} {P}").replace("\0PY", PY))


def sh(cmd, env=None, timeout=150):
    e = dict(os.environ); e.update(env or {})
    e = {k: v for k, v in e.items() if v is not None}  # env value None: unset
    t = time.time()
    try:
        p = subprocess.run(["bash", "-c", cmd], cwd=W, env=e, capture_output=True, text=True, timeout=timeout, errors="replace")
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as x:
        dec = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        rc, out, err = "HUNG", dec(x.stdout), dec(x.stderr)
    return rc, out, err, time.time() - t


def run_case(c):
    tmp = W / "tmp" / c["name"]
    shutil.rmtree(tmp, ignore_errors=True); tmp.mkdir(parents=True)
    env = {"PIPEBENCH_CACHE": "/tmp/b12/cache", "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1", **(c["env"] or {})}
    if c["setup"]:
        subprocess.run(["bash", "-c", c["setup"]], cwd=W, capture_output=True)
    if c["check"] and hasattr(c["check"], "prime"):
        c["check"].prime()
    rc, out, err, secs = sh(expand(c["cmd"]), env, c["timeout"] + 900)  # + the shared lock's wait
    tb = int("Traceback (most recent call last)" in err or "Traceback (most recent call last)" in out)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else (out.strip().splitlines() or [""])[-1]
    if c["expect"] == "err":
        ok = rc == 2 and not tb and re.match(r"pipebench( [a-z]+)?: error:", last) is not None
    elif c["expect"] == "ok":
        ok = rc == 0 and not tb
    else:
        ok = rc in (0, 2) and not tb
    note = ""
    if c["check"]:
        ok2, note = c["check"](dict(rc=rc, out=out, err=err, tb=tb, last=last))
        ok = ok and ok2 if c["expect"] != "custom" else ok2
    if c["expect"] == "err" and ok and len(lines) != 1:
        note = (note + "; " if note else "") + f"stderr has {len(lines)} lines: " + " | ".join(l[:80] for l in lines[:-1])[:200]
    left = sorted(p.name for p in tmp.iterdir() if p.name.startswith("pipebench")) if tmp.is_dir() else []
    if left:
        ok = False
        note = (note + "; " if note else "") + f"LEFT IN TMPDIR {left[:4]}"
    return dict(name=c["name"], cmd=c["cmd"], rc=rc, tb=tb, last=last[:300], nlines=len(lines), stdout_tail=out.strip()[-300:],
                expect=c["expect"], ok=bool(ok), note=note, secs=round(secs, 1), env=c["env"])


def main():
    import cases  # noqa: F401  (fills CASES)
    want = sys.argv[1:]
    done = {}
    if OUT.exists():
        for l in OUT.read_text().splitlines():
            r = json.loads(l); done[r["name"]] = r
    with OUT.open("a") as f:
        for c in CASES:
            if want and not any(w in c["name"] for w in want):
                continue
            if not want and c["name"] in done and done[c["name"]]["rc"] != "HUNG":
                continue
            r = run_case(c)
            f.write(json.dumps(r) + "\n"); f.flush()
            print(("ok  " if r["ok"] else "FAIL"), r["name"], r["rc"], r["tb"], r["secs"], r["last"][:150], r["note"][:160], flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); sys.modules["driver"] = sys.modules["__main__"]
    main()
