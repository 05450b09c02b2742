"""Bad-input harness (issue 42), shared by the passes: runs a pass's cases module, records, classifies. Run from the repo root:
`python scripts/bad_input/harness.py fixtures` (builds $BI_WORK), `... run PASS/cases.py [SUBSTRING ...]` (appends to
PASS/results.jsonl), `... classify PASS/cases.py` (prints counts; writes PASS/logs/verdicts.jsonl).

A cases module does `from harness import *` and calls case()/c()/api(); it may define DEFECT, DEBATABLE, SUPERSEDED
(lists of names) and HANDLED_DESPITE ({name: why}) for classify. In a command, $P is pipebench under `timeout`, $NP the same
without CAP_DAC_OVERRIDE (a folder's mode bits hold for root), $PY the worktree's python; c()'s `@` is the case's own folder
(c/NAME, under the work folder, made empty first). Every case runs in $BI_WORK with a TMPDIR of its own (tmp/NAME) and
OMP_NUM_THREADS=1, one at a time; a pipebench-* left in its TMPDIR, or a process of it alive after it ends, fails it.
Settings (environment): BI_WORK (/tmp/b13/work), BI_CACHE (/tmp/b13/cache: PIPEBENCH_CACHE), BI_PY (this worktree's .venv).
"""
import collections, hashlib, importlib.util, json, os, re, shlex, shutil, signal, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
W = Path(os.environ.get("BI_WORK", "/tmp/b13/work"))
CACHE = os.environ.get("BI_CACHE", "/tmp/b13/cache")
PY = os.environ.get("BI_PY", str(ROOT / ".venv/bin/python"))
NODAC = "setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search"
CASES = []
__all__ = ["case", "c", "api", "unchanged", "absent", "exists", "nosub", "grep", "both", "holds", "W", "PY", "CASES"]


def case(name, cmd, expect="err", check=None, setup=None, env=None, timeout=120):
    """expect: 'err' (rc 2, one 'pipebench...: error:' last line, no traceback), 'ok' (rc 0, no traceback), 'any' (0 or 2)."""
    assert not any(x["name"] == name for x in CASES), name
    CASES.append(dict(name=name, cmd=cmd, expect=expect, check=check, setup=setup, env=env, timeout=timeout))


def c(name, cmd, expect="err", check=None, setup=None, env=None, timeout=120):
    """case() with `@` in cmd, setup and the check's paths bound to the case's own empty folder c/NAME."""
    d = f"c/{name}"
    if check is not None and hasattr(check, "bind"):
        check = check.bind(d)
    full = f"rm -rf {d}; mkdir -p {d}" + ("; " + setup.replace("@", d) if setup else "")
    case(name, cmd.replace("@", d), expect, check, setup=full, env=env, timeout=timeout)


def api(name, code, expect="err", setup=None, check=None, timeout=120):
    """Python API code run by m/apih.py: UserError/TypeError are the one-line refusal (rc 2), another exception rc 1."""
    c(name, f"$PY m/apih.py {shlex.quote(code)}", expect, check, setup=setup, timeout=timeout)


def _digest(paths):
    out = {}
    for p in paths:
        q = str(W / p)
        try:
            st = os.lstat(q)
            kind = "link:" + os.readlink(q) if os.path.islink(q) else oct(st.st_mode)[:-4]
            if os.path.isdir(q) and not os.path.islink(q):
                body = ",".join(sorted(os.listdir(q)))
            elif os.path.isfile(q) and not os.path.islink(q):
                body = hashlib.sha256(open(q, "rb").read()).hexdigest()
            else:
                body = ""
            out[p] = (kind, body)
        except OSError as e:
            out[p] = repr(e)
    return out


def unchanged(*paths):
    """check: the paths keep their kind (file, link and its target, FIFO; a folder its names) and bytes."""
    state = {}
    def check(r):
        after = _digest(paths); diff = [p for p in paths if after[p] != state["before"][p]]
        return (not diff, f"CHANGED {[(p, state['before'][p], after[p]) for p in diff]}"[:300] if diff else "kept")
    check.prime = lambda: state.__setitem__("before", _digest(paths))
    check.bind = lambda d: unchanged(*[p.replace("@", d) for p in paths])
    return check


def absent(*paths):
    def check(r):
        there = [p for p in paths if os.path.lexists(W / p)]
        return (not there, f"CREATED {there}" if there else "none created")
    check.bind = lambda d: absent(*[p.replace("@", d) for p in paths])
    return check


def exists(*paths):
    def check(r):
        missing = [p for p in paths if not os.path.lexists(W / p)]
        return (not missing, f"MISSING {missing}" if missing else "written")
    check.bind = lambda d: exists(*[p.replace("@", d) for p in paths])
    return check


def holds(path, text):
    """check: the file at path still contains text (the user's content kept)."""
    def check(r):
        try:
            body = open(W / path).read()
        except OSError as e:
            return False, repr(e)
        return (text in body, "kept" if text in body else f"CHANGED to {body[:80]!r}")
    check.bind = lambda d: holds(path.replace("@", d), text)
    return check


def nosub(pattern):
    """check: stdout+stderr do not match `pattern` (e.g. profiling before a refusal)."""
    def check(r):
        hit = re.search(pattern, r["out"] + r["err"])
        return (not hit, f"SAW {hit.group(0)!r}" if hit else f"no {pattern}")
    return check


def grep(pattern):
    def check(r):
        hit = re.search(pattern, r["out"] + r["err"])
        return (bool(hit), "matched" if hit else f"NO {pattern}")
    return check


def both(*checks):
    def check(r):
        res = [x(r) for x in checks]
        return all(ok for ok, _ in res), "; ".join(n for _, n in res)
    check.prime = lambda: [x.prime() for x in checks if hasattr(x, "prime")]
    check.bind = lambda d: both(*[x.bind(d) if hasattr(x, "bind") else x for x in checks])
    return check


def _expand(cmd, timeout):
    pre = f"timeout -k 5 {timeout}"
    cmd = cmd.replace("$PWD", "\0WD")  # not $P (the twelfth pass lost a $PWD so)
    return (cmd.replace("$NP", "\0NP").replace("$PY", "\0PY").replace("$P", f"{pre} {PY} -m pipebench")
            .replace("\0NP", f"{pre} {NODAC} {PY} -m pipebench").replace("\0PY", f"{pre} {PY}").replace("\0WD", "$PWD"))


def _marked(mark):
    alive = []
    for f in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"BI_MARK={mark}".encode() in f.read_bytes().split(b"\0"):
                alive.append(int(f.parent.name))
        except OSError:
            pass
    return alive


def run_case(x):
    tmp = W / "tmp" / x["name"]
    shutil.rmtree(tmp, ignore_errors=True); tmp.mkdir(parents=True)
    mark = f"{x['name']}-{os.getpid()}"
    env = {**os.environ, "PIPEBENCH_CACHE": CACHE, "TMPDIR": str(tmp), "OMP_NUM_THREADS": "1", "BI_MARK": mark, **(x["env"] or {})}
    env = {k: v for k, v in env.items() if v is not None}
    if x["setup"]:
        subprocess.run(["bash", "-c", x["setup"]], cwd=W, capture_output=True)
    if x["check"] is not None and hasattr(x["check"], "prime"):
        x["check"].prime()
    t = time.time()
    try:
        p = subprocess.run(["bash", "-c", _expand(x["cmd"], x["timeout"])], cwd=W, env=env, capture_output=True, text=True,
                           timeout=x["timeout"] * 2 + 30, errors="replace")
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        dec = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        rc, out, err = "HUNG", dec(e.stdout), dec(e.stderr)
    secs = time.time() - t
    if rc == 124:
        rc = "TIMEOUT"
    time.sleep(0.5)
    alive = _marked(mark)
    for pid in alive:  # ours: started by this case
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    tb = int("Traceback (most recent call last)" in err + out)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else (out.strip().splitlines() or [""])[-1]
    if x["expect"] == "err":
        ok = rc == 2 and not tb and re.match(r"pipebench( [a-z-]+)?: error:", last) is not None
    elif x["expect"] == "ok":
        ok = rc == 0 and not tb
    else:
        ok = rc in (0, 2) and not tb
    notes = []
    if x["check"] is not None:
        ok2, n = x["check"](dict(rc=rc, out=out, err=err, tb=tb, last=last))
        ok = ok and ok2; notes.append(n)
    if x["expect"] == "err" and rc == 2 and len(lines) != 1:
        notes.append(f"stderr has {len(lines)} lines: " + " | ".join(l[:80] for l in lines[:-1])[:200])
    left = sorted(q.name for q in tmp.iterdir() if q.name.startswith("pipebench")) if tmp.is_dir() else []
    if left:
        ok = False; notes.append(f"LEFT IN TMPDIR {left[:4]}")
    if alive:
        ok = False; notes.append(f"ALIVE AFTER {len(alive)} process(es)")
    return dict(name=x["name"], cmd=x["cmd"], rc=rc, tb=tb, last=last[:400], nlines=len(lines), stdout_tail=out.strip()[-300:],
                stderr_head=err.strip()[:300] if tb else "", expect=x["expect"], ok=bool(ok), note="; ".join(notes),
                secs=round(secs, 1), env=x["env"])


def load(cases_py):
    sys.path.insert(0, str(HERE)); sys.modules.setdefault("harness", sys.modules[__name__])
    spec = importlib.util.spec_from_file_location("cases", cases_py)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def run(cases_py, want):
    load(cases_py)
    out = Path(cases_py).parent / "results.jsonl"
    done = {json.loads(l)["name"] for l in out.read_text().splitlines()} if out.exists() else set()
    (W / "m").mkdir(parents=True, exist_ok=True)
    for f in (HERE / "m").iterdir():
        shutil.copy(f, W / "m" / f.name)
    with out.open("a") as f:
        for x in CASES:
            if want and not any(w in x["name"] for w in want):
                continue
            if not want and x["name"] in done:
                continue
            r = run_case(x)
            f.write(json.dumps(r, ensure_ascii=False) + "\n"); f.flush()
            print("ok  " if r["ok"] else "FAIL", r["name"], r["rc"], r["tb"], r["secs"], r["last"][:160], r["note"][:200], flush=True)


def classify(cases_py):
    """The last record of each name; verdict: the cases module's lists, else 'handled' where the harness judged it ok."""
    mod = load(cases_py)
    verdict = {}
    for cause, names in getattr(mod, "DEFECT", {}).items():
        verdict.update({n: ("defect", cause) for n in names})
    for cause, names in getattr(mod, "DEBATABLE", {}).items():
        verdict.update({n: ("debatable", cause) for n in names})
    verdict.update({n: ("superseded", why) for n, why in getattr(mod, "SUPERSEDED", {}).items()})
    verdict.update({n: ("handled", why) for n, why in getattr(mod, "HANDLED_DESPITE", {}).items()})
    last = {}
    for line in (Path(cases_py).parent / "results.jsonl").read_text().splitlines():
        r = json.loads(line); last[r["name"]] = r
    count = collections.Counter()
    (Path(cases_py).parent / "logs").mkdir(exist_ok=True)
    with (Path(cases_py).parent / "logs/verdicts.jsonl").open("w") as f:
        for name, r in last.items():
            v, cause = verdict.get(name, ("handled" if r["ok"] else "UNJUDGED", ""))
            r["verdict"], r["cause"] = v, cause; count[v] += 1
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(dict(count))
    print("by group:", dict(collections.Counter(n.split("_")[0] for n, r in last.items() if r["verdict"] != "superseded")))
    print("unjudged:", [n for n, r in last.items() if r["verdict"] == "UNJUDGED"])
    print("not run:", [x["name"] for x in CASES if x["name"] not in last])


def fixtures():
    """The work folder every pass's cases read: m/ (this folder's), p.json (mlp tiny), pg.json (m/good.py:Net), r0 (a run),
    ck.pt (a training's checkpoint), adv.json, ex_ds.json, rep0 (a report)."""
    (W / "m").mkdir(parents=True, exist_ok=True); Path(CACHE).mkdir(parents=True, exist_ok=True)
    for f in (HERE / "m").iterdir():
        shutil.copy(f, W / "m" / f.name)
    P = f"timeout 300 {PY} -m pipebench"
    steps = [
        ("p.json", f"{P} plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu --save-profile p.json --json plan.json"),
        ("pg.json", f"{P} plan --model m/good.py:Net --input-shape 4 --stages 2 --batch 8 --device cpu --save-profile pg.json"),
        ("r0", f"{P} run --models mlp --flavour tiny --batch 8 --strategies single --steps 2 --warmup 1 --rounds 1 --device cpu --out r0"),
        ("ck.pt", f"{P} train --model m/good.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu --save ck.pt"),
        ("adv.json", f"{P} advise --profile p.json --stages 2 --json adv.json"),
        ("ex_ds.json", f"{P} plan --profile p.json --stages 2 --export deepspeed ex_ds.json"),
        ("rep0", f"{P} report r0 --out rep0"),
    ]
    env = {**os.environ, "PIPEBENCH_CACHE": CACHE, "OMP_NUM_THREADS": "1"}
    for made, cmd in steps:
        if not (W / made).exists():
            p = subprocess.run(["bash", "-c", cmd], cwd=W, env=env, capture_output=True, text=True)
            print(made, p.returncode, (p.stderr.strip().splitlines() or [""])[-1][:200], flush=True)
    print(sorted(os.listdir(W)))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "fixtures":
        fixtures()
    elif what == "run":
        run(sys.argv[2], sys.argv[3:])
    elif what == "classify":
        classify(sys.argv[2])
    else:
        sys.exit(__doc__)
