"""The tenth pass's inputs (issue 42's kinds; mostly new against the ninth). $P = pipebench under timeout (the battery holds the CPU lock), run
from /tmp/b10/work (fixtures.sh builds it); $NP = the same without CAP_DAC_OVERRIDE (a folder's mode holds);
$PY = the worktree's python."""
import hashlib, os, re, shlex
from driver import case

W = "/tmp/b10/work/"
LOCK = "OMP_NUM_THREADS=1 timeout 150"  # the battery holds the CPU lock (driver.py)
NODAC = "setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search"
PYX = "/work/wt-tenth/.venv/bin/python"
PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu"          # the cache answers it
PLF = PL + " --fresh"
PP = "$P plan --profile p.json --stages 2"
AP = "$P advise --profile p.json --stages 2"
ADZ = "$P advise --model mlp --flavour tiny --stages 2 --batch 8 --device cpu"
G = "--model m/good.py:Net --input-shape 4"
OP = f"$P plan {G} --stages 2 --batch 8 --device cpu"
T = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu"
RQ = "$P run --quick --models mlp --strategies single --device cpu --steps 1 --warmup 0 --rounds 1 --min-seconds 0"
RES = "r0/2026-12-07-vm-cpu2proc"


def digest(paths):
    out = {}
    for p in paths:
        try:
            st = os.lstat(W + p)
            kind = "link:" + os.readlink(W + p) if os.path.islink(W + p) else oct(st.st_mode)[:-4]
            if os.path.isdir(W + p) and not os.path.islink(W + p):
                body = ",".join(sorted(os.listdir(W + p)))
            else:
                body = hashlib.sha256(open(W + p, "rb").read()).hexdigest() if os.path.isfile(W + p) and not os.path.islink(W + p) else ""
            out[p] = (kind, body)
        except OSError as e:
            out[p] = repr(e)
    return out


def unchanged(*paths):
    """check: the paths keep their kind (file, link and its target, FIFO, device; a folder its names) and bytes."""
    state = {}
    def check(r):
        after = digest(paths); diff = [p for p in paths if after[p] != state["before"][p]]
        return (not diff, f"CHANGED {[(p, state['before'][p], after[p]) for p in diff]}"[:300] if diff else "kept")
    check.prime = lambda: state.__setitem__("before", digest(paths))
    return check


def absent(*paths):
    def check(r):
        there = [p for p in paths if os.path.lexists(W + p)]
        return (not there, f"CREATED {there}" if there else "none created")
    return check


def exists(*paths):
    def check(r):
        missing = [p for p in paths if not os.path.lexists(p if p.startswith("/") else W + p)]
        return (not missing, f"MISSING {missing}" if missing else "written")
    return check


def both(*checks):
    def check(r):
        res = [c(r) for c in checks]
        return all(ok for ok, _ in res), "; ".join(n for _, n in res)
    check.prime = lambda: [c.prime() for c in checks if hasattr(c, "prime")]
    return check


def grep(pattern, where="out"):
    def check(r):
        m = re.search(pattern, r[where] + (r["err"] if where == "out" else ""))
        return (m is not None, "found" if m else f"no {pattern!r}")
    return check


def nogrep(pattern):
    def check(r):
        m = re.search(pattern, r["out"] + r["err"])
        return (m is None, f"FOUND {m.group(0)[:80]!r}" if m else "not found")
    return check


def sig_ok(rc_want):
    """check for m/sig.sh: the exit status wanted, nothing of ours alive 5 s later, no pipebench-* left in TMPDIR."""
    def check(r):
        m = re.search(r"RC=(\S+) LEFT=(\d+) PBTMP=(\d+) .*ERRLINES=(\d+) TB=(\d+)", r["out"])
        if not m:
            return False, "no harness line"
        rc, left, pbt, nl, tb = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
        return (rc in rc_want) and left == 0 and pbt == 0 and tb == 0, r["out"].strip()[:400]
    return check


SETUP = ("rm -rf sp; mkdir -p sp/dir sp/mine; mkfifo sp/fifo sp/fifo.json; ln -s /dev/zero sp/zero.json; "
         "ln -s /dev/null sp/null.json; printf 'PK\\005\\006\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0\\0' > sp/a.zip; "
         "cp p.json sp/p.json; cp plan.json sp/plan.json; cp adv.json sp/adv.json; cp ex_ds.json sp/ex_ds.json; "
         "cp r0/*.csv sp/res.csv; cp r0/*.json sp/res.json; ln -s nowhere sp/dangling; ln -s dir sp/dirlink; "
         "printf 'my own notes\\n' > sp/notes.txt; ln -s notes.txt sp/noteslink; printf 'x\\n' > sp/mine/a; : > sp/empty.json; "
         "cp ck.pt sp/ck.pt; cp -a ck.pt.train sp/ck.pt.train; cp -a rep0 sp/rep0; cp -a r0 sp/r0; "
         "mkdir -p sp/ro sp/ro_r0; cp r0/*.csv sp/ro_r0/; chmod 555 sp/ro sp/ro_r0; "
         "printf 'step,epoch,loss,samples_per_s,time_s\\n1,0,1.0,10,0.1\\n' > sp/log.csv")


def sp(name, cmd, expect="err", check=None, timeout=120, env=None, setup=""):
    case(name, cmd, expect, check, setup=SETUP + (("; " + setup) if setup else ""), timeout=timeout, env=env)


# ===================================================================== (1) report --out
sp("out10_report_out_is_a_file", "$P report r0 --out sp/notes.txt", check=unchanged("sp/notes.txt"))
sp("out10_report_out_link_to_folder_ok", "$P report r0 --out sp/dirlink", "ok", check=exists("sp/dir/report.md"))
sp("out10_report_out_readonly_folder", "$NP report r0 --out sp/ro", check=unchanged("sp/ro"))
sp("out10_report_default_out_readonly", "$NP report sp/ro_r0", check=unchanged("sp/ro_r0"))
sp("out10_report_out_empty_string", "$P report r0 --out ''", check=absent("report.md", "summary.csv"))
sp("out10_report_out_earlier_report_ok", "$P report r0 --out sp/rep0", "ok")
sp("out10_report_out_users_summary_only", "mkdir sp/o2; printf 'mine,1\\n' > sp/o2/summary.csv; $P report r0 --out sp/o2",
   check=unchanged("sp/o2/summary.csv"))
sp("out10_report_md_link_to_users_file", "mkdir sp/o3; ln -s ../notes.txt sp/o3/report.md; $P report r0 --out sp/o3",
   check=unchanged("sp/notes.txt", "sp/o3/report.md"))
sp("out10_report_md_is_fifo", "mkdir sp/o4; mkfifo sp/o4/report.md; $P report r0 --out sp/o4", "any", timeout=60)
sp("out10_report_summary_csv_is_folder", "mkdir -p sp/o5/summary.csv; $P report r0 --out sp/o5", check=unchanged("sp/o5/summary.csv"))
sp("out10_report_users_png_in_out", "mkdir sp/o6; printf 'my png' > sp/o6/throughput.png; $P report r0 --out sp/o6",
   "custom", check=unchanged("sp/o6/throughput.png"))
sp("out10_report_input_inside_out_ok", "mkdir sp/o1; cp sp/res.csv sp/o1/res.csv; $P report sp/o1/res.csv --out sp/o1", "ok",
   check=unchanged("sp/o1/res.csv"))
sp("out10_report_folder_holding_a_report", "mkdir sp/o1; cp sp/res.csv sp/o1/res.csv; $P report sp/o1/res.csv --out sp/o1 >/dev/null 2>&1; "
   "$P report sp/o1 --out sp/o1rep", "ok", check=grep(r"\b1 row\(s\) read"))
sp("out10_report_out_in_input_folder", "mkdir sp/o7; cp sp/res.csv sp/o7/; $P report sp/o7 --out sp/o7/sub >/dev/null 2>&1; "
   "$P report sp/o7 --out sp/o7rep", "ok", check=grep(r"\b1 row\(s\) read"))
sp("repro10_E3_summary_in_out", "mkdir sp/rq; cp sp/res.csv sp/rq/summary.csv; $P report sp/rq/summary.csv --out sp/rq",
   check=unchanged("sp/rq/summary.csv"))

# ===================================================================== (2) plan --export, each engine
for e in ("torchtitan", "deepspeed", "megatron", "device-map"):
    sp(f"exp10_{e}_ok", f"{PP} --export {e} sp/{e}.json && head -c 40 sp/{e}.json", "ok", check=grep(r'"engine"'))
    sp(f"exp10_{e}_over_results_csv", f"{PP} --export {e} sp/res.csv", check=unchanged("sp/res.csv"))
for e in ("deepspeed", "device-map"):
    sp(f"exp10_{e}_dev_stdout", f"{PP} --export {e} /dev/stdout", "ok", check=grep(r'"engine": "'))
sp("exp10_over_other_engine_ok", f"{PP} --export torchtitan sp/ex_ds.json", "ok")
sp("exp10_engine_case", f"{PP} --export DeepSpeed sp/e1.json", "any", check=absent("sp/e1.json"))
sp("exp10_fifo_no_reader", f"{PP} --export deepspeed sp/fifo.json", timeout=60)
sp("exp10_readonly_folder", f"{PP.replace('$P', '$NP')} --export deepspeed sp/ro/x.json", check=unchanged("sp/ro"))
sp("exp10_megatron_zbv", f"{PP} --schedule zbv --export megatron sp/m.json", "any")
sp("exp10_torchtitan_interleaved_4", f"{PP.replace('--stages 2', '--stages 4')} --schedule interleaved --export torchtitan sp/t.json", "any")
sp("exp10_batch_not_split_nothing_written", f"{PL.replace('--batch 8', '--batch 7')} --micro-batches 2 --export deepspeed sp/e4.json",
   check=absent("sp/e4.json"))

# ===================================================================== (3) --json / --save-profile / --export clashes
sp("clash10_json_eq_saveprofile", f"{PL} --json sp/c.json --save-profile sp/c.json", check=absent("sp/c.json"))
sp("clash10_json_eq_export", f"{PP} --json sp/c.json --export deepspeed sp/c.json", check=absent("sp/c.json"))
sp("clash10_saveprofile_eq_export", f"{PL} --save-profile sp/c.json --export torchtitan ./sp/c.json", check=absent("sp/c.json"))
sp("clash10_export_link_to_json", f"ln -s c.json sp/clink.json; {PP} --json sp/c.json --export deepspeed sp/clink.json",
   check=absent("sp/c.json"))
sp("clash10_export_eq_profile_read_hardlink", f"ln sp/p.json sp/phard.json; $P plan --profile sp/p.json --stages 2 --export deepspeed sp/phard.json",
   check=unchanged("sp/p.json", "sp/phard.json"))
sp("clash10_json_and_export_stdout_ok", f"{PP} --json /dev/stdout --export deepspeed /dev/stdout", "ok", check=grep(r'"engine"'))
sp("clash10_saveprofile_link_to_model_py", f"ln -s ../m/good.py sp/g.json; {OP} --save-profile sp/g.json",
   check=unchanged("m/good.py", "sp/g.json"))
sp("clash10_advise_json_eq_saveprofile", f"{ADZ} --json sp/d.json --save-profile sp/d.json", check=absent("sp/d.json"))
sp("clash10_advise_json_over_export", f"{AP} --json sp/ex_ds.json", check=unchanged("sp/ex_ds.json"))

# ===================================================================== (4) train --save
sp("save10_readonly_folder", f"{T.replace('$P', '$NP')} --save sp/ro/s.pt", check=unchanged("sp/ro"))
sp("save10_state_folder_is_a_file", f"printf 'mine' > sp/s1.pt.train; {T} --save sp/s1.pt", check=both(unchanged("sp/s1.pt.train"), absent("sp/s1.pt")))
sp("save10_state_folder_dangling_link", f"ln -s nowhere10 sp/s2.pt.train; {T} --save sp/s2.pt", "any", check=absent("sp/nowhere10"))
sp("save10_state_folder_link_to_users_folder", f"ln -s mine sp/s3.pt.train; {T} --save sp/s3.pt", "custom", check=unchanged("sp/mine"))
sp("save10_state_folder_holds_users_file_ok", f"mkdir sp/s4.pt.train; printf 'x' > sp/s4.pt.train/notes; {T} --save sp/s4.pt", "ok",
   check=exists("sp/s4.pt.train/notes", "sp/s4.pt"))
sp("save10_over_users_zip", f"{T} --save sp/a.zip", check=unchanged("sp/a.zip"))
sp("save10_over_users_torch_tensor", f"$PY -c \"import torch; torch.save({{'mine': torch.ones(3)}}, 'sp/t.pt')\"; {T} --save sp/t.pt", "custom",
   check=unchanged("sp/t.pt"))
sp("save10_eq_tokens_data", "head -c 20000 /dev/urandom > sp/tok.bin; $P train --model gpt --flavour tiny --data tokens:sp/tok.bin "
   "--batch 8 --steps 2 --strategy single --device cpu --save sp/tok.bin", check=unchanged("sp/tok.bin"))
sp("save10_resume_another_model", "$P train --model m/fwd8.py:Bn --input-shape 4 --data m/data.py:data --batch 8 --steps 4 --strategy single "
   "--device cpu --save sp/ck.pt --resume", check=unchanged("sp/ck.pt"))
sp("save10_resume_torn_latest", f"python3 -c \"p='sp/ck.pt.train/latest.json'; b=open(p).read(); open(p,'w').write(b[:len(b)//2])\"; "
   f"{T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", check=unchanged("sp/ck.pt"))
sp("save10_resume_weights_changed", f"printf 'x' >> sp/ck.pt; {T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", check=unchanged("sp/ck.pt"))
sp("save10_every_without_save", f"{T} --save-every 1", "any")
sp("save10_long_name_ok", f"{T} --save sp/{'a' * 237}", "ok")
sp("save10_over_earlier_checkpoint_ok", f"{T} --save sp/ck.pt", "ok")

# ===================================================================== (5) the working folder: removed, read-only, unreadable
def gone(name, cmd, expect="err", check=None, timeout=150, env=None):
    d = f"/tmp/b10/gone_{name}"
    case(f"cwd10_gone_{name}", f"rm -rf {d}; mkdir -p {d} && cd {d} && rmdir {d} && {cmd}", expect, check, timeout=timeout, env=env)
A = W  # absolute inputs
gone("plan_zoo", PL)
gone("run", f"{RQ} --out {A}gone_run", check=absent("gone_run"))
gone("train", f"$P train --model {A}m/good.py:Net --input-shape 4 --data {A}m/data.py:data --batch 8 --steps 2 --strategy single --device cpu")
gone("report", f"$P report {A}r0 --out {A}gone_rep", "any")
gone("models", "$P models", "any")
gone("api_profile", f"{LOCK} $PY {A}m/apih.py \"pipebench.profile('mlp', flavour='tiny', batch=8)\"")
gone("api_run", f"{LOCK} $PY {A}m/apih.py \"pipebench.run(['mlp'], strategies=['single'], quick=True, out='{A}gone_api_run', steps=1, warmup=0, rounds=1)\"",
     check=absent("gone_api_run"))

def ro(name, cmd, expect="ok", check=None, mode="555", timeout=150):
    d = f"/tmp/b10/work/ro_{name}"
    case(f"cwd10_{'ro' if mode == '555' else 'noread' if mode == '311' else 'none'}_{name}",
         f"rm -rf {d}; mkdir -p {d} && cp -a m {d}/m && cp r0/*.csv {d}/ && chmod {mode} {d} && cd {d} && {cmd}; rc=$?; chmod 755 {d}; exit $rc",
         expect, check, timeout=timeout)
ro("plan_zoo_ok", PL.replace("$P", "$NP"))
ro("plan_json_relative", PL.replace("$P", "$NP") + " --json rel.json", "err")
ro("run_default_out", RQ.replace("$P", "$NP"), "err")
ro("train_save_relative", T.replace("$P", "$NP") + " --save rel.pt", "err")
ro("report_default_out", "$NP report 2026-12-07-vm-cpu2proc.csv", "err")
ro("api_plan_ok", f"{LOCK} {NODAC} $PY /tmp/b10/work/m/apih.py \"pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)\"")
ro("plan_zoo_ok", PL.replace("$P", "$NP"), mode="311")
ro("plan_model_file_relative", OP.replace("$P", "$NP"), "err", mode="311")
ro("plan_zoo", PL.replace("$P", "$NP"), "any", mode="000")
ro("train_model_file_relative", T.replace("$P", "$NP"), "err", mode="000")
ro("models", "$NP models", "ok", mode="000")

# ===================================================================== (6) environment variables
def env(name, cmd, values, expect="err", check=None, timeout=150, extra=None):
    case(name, cmd, expect, check, env={**values, **(extra or {})}, timeout=timeout)
D = "PIPEBENCH_DRIFT_SECONDS"; I = "PIPEBENCH_IMPORT_SECONDS"; C = "PIPEBENCH_CACHE"
env("env10_drift_empty_plan", PL, {D: ""}, "any")
env("env10_drift_nan_report", "$P report r0 --out rep_drift", {D: "nan"})
env("env10_drift_tiny_fresh_ok", PLF, {D: "1e-300"}, "ok")
env("env10_drift_arabic_digit", PL, {D: "٢"}, "any")
env("env10_drift_run", RQ + " --out drift_run", {D: "-5"}, check=absent("drift_run"))
env("env10_drift_api_cached", f"{LOCK} $PY m/apih.py \"pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)\"", {D: "abc"}, "any")
env("env10_drift_api_fresh", f"{LOCK} $PY m/apih.py \"pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)\"", {D: "abc"})
env("env10_import_empty", OP + " --fresh", {I: ""}, "any")
env("env10_import_train", T, {I: "abc"})
env("env10_import_run", f"$P run --quick --models m/good.py:Net --input-shape 4 --strategies single --device cpu --out imp_run", {I: "abc"},
    check=absent("imp_run"))
env("env10_import_tv_module", "$P plan --model torchvision.models:mobilenet_v3_small --input-shape 3,32,32 --num-classes 10 --stages 2 --batch 4 --device cpu",
    {I: "nan"})
env("env10_import_tiny", OP + " --fresh", {I: "1e-9"}, check=grep("PIPEBENCH_IMPORT_SECONDS|did not finish|import", "err"))
env("env10_cache_OFF_ok", PL, {C: "OFF"}, "ok", check=nogrep("from the profile cache"))
env("env10_cache_readonly", "rm -rf cro; mkdir cro; chmod 555 cro; " + PL.replace("$P", "$NP"), {C: W + "cro"}, "any")
env("env10_cache_api_is_file", f"{LOCK} $PY m/apih.py \"pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)\"", {C: W + "p.json"})
env("env10_cache_entries_garbage", "rm -rf cg; cp -a /tmp/b10/cache cg; find cg -type f -exec sh -c 'printf garbage > \"$1\"' _ {} \\; ; " + PL,
    {C: W + "cg"}, "ok")
env("env10_cache_entries_unreadable", "rm -rf cu; cp -a /tmp/b10/cache cu; find cu -type f -exec chmod 000 {} \\; ; " + PL.replace("$P", "$NP"),
    {C: W + "cu"}, "any")
env("env10_link_cache_garbage", "rm -rf lg; cp -a /tmp/b10/cache lg; find lg -type f -exec sh -c 'printf \"{{\" > \"$1\"' _ {} \\; ; " + PL,
    {C: "off", "PIPEBENCH_LINK_CACHE": W + "lg"}, "ok")
env("env10_xdg_is_file", PL, {C: None, "XDG_CACHE_HOME": W + "p.json"})
env("env10_home_empty", "rm -rf homeempty; mkdir homeempty; cd homeempty; " + PL + "; rc=$?; ls -A; exit $rc", {C: None, "XDG_CACHE_HOME": None, "HOME": ""}, "any")
env("env10_parent_abc_run_ddp", RQ.replace("--strategies single", "--strategies ddp") + " --out par_run", {"PIPEBENCH_PARENT": "abc"}, "ok",
    check=grep(r"\| ddp \| cpu \| ok "))
env("env10_parent_1_run_ddp", RQ.replace("--strategies single", "--strategies ddp") + " --out par1_run", {"PIPEBENCH_PARENT": "1"}, "ok",
    check=grep(r"\| ddp \| cpu \| ok "))
case("env10_temp_users_folder_run_ddp", RQ.replace("--strategies single", "--strategies ddp") + " --out tmp_run", "ok",
     both(unchanged("sp/mine"), grep(r"\| ddp \| cpu \| ok ")), setup=SETUP, env={"PIPEBENCH_TEMP": W + "sp/mine"}, timeout=200)
case("env10_run_mark_users_folder", RQ + " --out mark_run", "ok", unchanged("sp/mine"), setup=SETUP,
     env={"PIPEBENCH_RUN": "1 " + W + "sp/mine"}, timeout=200)
env("env10_master_port_abc_fresh_ok", PLF, {"MASTER_PORT": "abc", "MASTER_ADDR": "nowhere.invalid", "RANK": "3", "WORLD_SIZE": "x"}, "ok")
env("env10_cvd_abc_plan_gpus", PL.replace("--stages 2", "--gpus 0").replace(" --device cpu", ""), {"CUDA_VISIBLE_DEVICES": "abc"})
env("env10_tmpdir_readonly_run", "mkdir -p tro; chmod 555 tro; " + RQ.replace("$P", "$NP") + " --out tro_run", {"TMPDIR": W + "tro"}, "any")

# ===================================================================== (7) option spellings
def opt(name, cmd, expect="err", check=None, timeout=150):
    case(f"opt10_{name}", cmd, expect, check, timeout=timeout)
RUN1 = "$P run --quick --models mlp --strategies single --device cpu --steps 1 --warmup 0 --rounds 1 --min-seconds 0 --out opt_run"
TR1 = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu"
for label, v in (("plus", "+2"), ("arabic", "٢"), ("hex", "0x2"), ("exp", "1e3")):
    opt(f"run_cpu_processes_{label}", f"{RUN1} --cpu-processes {shlex.quote(v)}", check=absent("opt_run"))
opt("train_cpu_processes_arabic", f"{TR1} --cpu-processes ٣")
opt("run_cpu_processes_spaces_ok", f"{RUN1}sp --cpu-processes ' 2 '", "ok")
opt("run_cpu_processes_and_stages", f"{RUN1}2 --cpu-processes 2 --stages 3", "any", check=absent("opt_run2"))
opt("train_stages_alias_ok", f"{TR1.replace('single', 'pp-1f1b')} --stages 2", "ok")
opt("plan_cpu_processes_unknown", f"{PL} --cpu-processes 2")
for label, v in (("plus", "+2"), ("arabic", "٢"), ("hex", "0x10")):
    opt(f"plan_micro_batches_{label}", f"{PL} --micro-batches {shlex.quote(v)}")
opt("plan_micro_batches_space", f"{PL} --micro-batches ' 2'", "any")
opt("plan_micro_batches_and_chunks", f"{PL} --micro-batches 2 --chunks 4", "any")
opt("advise_micro_batches_double_comma", f"{ADZ} --micro-batches 2,,4")
for label, v in (("arabic", "٨"), ("plus", "+8")):
    opt(f"plan_batch_{label}", f"{PL.replace('--batch 8', '--batch ' + shlex.quote(v))}")
opt("plan_batch_trailing_space_ok", PL.replace("--batch 8", "--batch '8 '"), "ok")
opt("plan_link_gbps_arabic", f"{PP} --link-gbps ١")
opt("train_lr_arabic", f"{TR1} --lr ٠.١", check=nogrep(r"done: "))
opt("train_lr_underscore", f"{TR1} --lr 1_0", check=nogrep(r"done: "))
opt("train_lr_fullwidth", f"{TR1} --lr １", check=nogrep(r"done: "))
opt("train_lr_underflow", f"{TR1} --lr 1e-400")
opt("train_lr_space_ok", f"{TR1} --lr ' 0.1'", "ok")
opt("set_depth_arabic", f"{PL} --set depth=٣")
opt("input_shape_arabic", f"$P plan --model m/good.py:Net --input-shape ٤ --stages 2 --batch 8 --device cpu")

# ===================================================================== (8) the API: types
def api(name, code, expect="err"):
    case(f"api10_{name}", f"{LOCK} $PY m/apih.py {shlex.quote('x = torch.randn(8, 4); ' + code)}", expect, timeout=150)
Z = "pipebench.plan('mlp', flavour='tiny', device='cpu'"
api("batch_bool", Z + ", stages=2, batch=True)")
api("batch_np_int64_ok", Z + ", stages=2, batch=np.int64(8))", "ok")
api("stages_np_int32_ok", Z + ", stages=np.int32(2), batch=8)", "ok")
api("batch_np_bool", Z + ", stages=2, batch=np.bool_(True))")
api("micro_batches_np_int_ok", Z + ", stages=2, batch=8, micro_batches=np.int64(2))", "ok")
api("micro_batches_np_array_ok", Z + ", stages=2, batch=8, micro_batches=np.array([1, 2]))", "any")
api("speeds_np_array_ok", Z + ", stages=2, batch=8, speeds=np.array([1.0, 0.5]))", "ok")
api("max_memory_np_int_ok", Z + ", stages=2, batch=8, max_memory=np.int64(2**30))", "ok")
api("link_gbps_np_float_ok", Z + ", stages=2, batch=8, link_gbps=np.float32(1.0))", "ok")
api("link_gbps_np_nan", Z + ", stages=2, batch=8, link_gbps=np.float64('nan'))")
api("profile_batch_np_ok", "pipebench.profile('mlp', flavour='tiny', batch=np.int64(8))", "ok")
api("advise_stages_np_ok", "pipebench.advise('mlp', flavour='tiny', stages=np.int64(2), batch=8)", "ok")
api("advise_profiles_tuple_ok", "pipebench.advise(profiles=tuple(pipebench.load_profiles('p.json')), stages=2)", "ok")
api("training_np_str_ok", Z + ", stages=2, batch=8, training=pipebench.Training(precision=np.str_('fp32')))", "ok")
api("request_np_ok", "pipebench.plan('mlp', request=pipebench.Request(batch=np.int64(8), stages=np.int64(2), device='cpu'), flavour='tiny')", "ok")
api("settings_np_depth_ok", "pipebench.plan('mlp', flavour='tiny', settings={'depth': np.int64(3)}, stages=2, batch=8, device='cpu')", "any")
api("run_batch_dict_np_ok", "pipebench.run({'mlp': np.int64(8)}, strategies=['single'], quick=True, out='api_run1', steps=1, warmup=0, rounds=1)", "ok")
api("run_batch_dict_bool", "pipebench.run({'mlp': True}, strategies=['single'], quick=True, out='api_run2')")
api("run_steps_np_ok", "pipebench.run(('mlp',), strategies=('single',), quick=True, out='api_run4', steps=np.int64(1), warmup=np.int8(0), rounds=1)", "ok")
api("run_out_int", "pipebench.run(['mlp'], strategies=['single'], quick=True, out=123)")

# ===================================================================== (9) the caller's state and model
def st(name, call, pre="x = torch.randn(8, 4)", expect="ok"):
    case(f"state10_{name}", f"{LOCK} $PY m/apistate.py {shlex.quote(call)} {shlex.quote(pre)}", expect,
         grep(r"CALL OK|CALL REFUSED \[(UserError|TypeError|ValueError)\]"), timeout=150)
st("inference_mode_plan", "with torch.inference_mode(): pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)")
st("autocast_bf16_profile", "with torch.autocast('cpu', dtype=torch.bfloat16): pipebench.profile('mlp', flavour='tiny', batch=8, fresh=True)")
st("f64_nograd_threads2_model_plan", "pipebench.plan(net, x, stages=2, batch=8)",
   "import fwd8; torch.set_default_dtype(torch.float64); net = fwd8.Bn(); x = torch.randn(8, 4); torch.set_grad_enabled(False); torch.set_num_threads(2)")
st("np_ints_plan", "pipebench.plan('mlp', flavour='tiny', stages=np.int64(2), batch=np.int64(8), micro_batches=[np.int64(2)])")
st("run_state", "pipebench.run(['mlp'], strategies=['single', 'ddp'], quick=True, out='st_run', steps=1, warmup=0, rounds=1)")
for f in ("threads64", "nograd", "dtype64", "patch_randn", "umask"):
    st(f"file_{f}_plan", f"pipebench.plan('m/mf10_{f}.py:Net', x, stages=2, batch=8, fresh=True)")

def ms(name, build, call):
    case(f"model10_{name}", f"{LOCK} $PY m/mstate.py {shlex.quote(build)} {shlex.quote(call)}", "ok", grep("CALL OK"), timeout=150)
ms("grad_set_profile", "import good; net = good.Net(); net(torch.randn(2, 4)).sum().backward(); x = torch.randn(8, 4)", "pipebench.profile(net, x, batch=8)")
ms("requires_grad_off_plan", "import good; net = good.Net(); net.a.requires_grad_(False); x = torch.randn(8, 4)", "pipebench.plan(net, x, stages=2, batch=8)")
ms("eval_mode_np_batch_advise", "import fwd8; net = fwd8.Bn().eval(); x = torch.randn(8, 4)", "pipebench.advise(net, x, stages=np.int64(2), batch=np.int64(8))")

# ===================================================================== (10) model files that misbehave at import
def mf(name, cmd, expect="any", check=None, timeout=150, setup=None):
    case(f"mf10_{name}", cmd, expect, check, setup=setup, timeout=timeout)
def opm(f, extra=""):
    return f"$P plan --model m/mf10_{f}.py:Net --input-shape 4 --stages 2 --batch 8 --device cpu{extra}"
mf("print_json_stdout_ok", opm("print", " --json /dev/stdout"), "ok", check=grep('"format": "pipebench-plan"'))
mf("chdir_plan_json_relative_ok", "rm -f cd10.json; " + opm("chdir", " --json cd10.json"), "ok", check=exists("cd10.json"))
mf("chdir_train_csv_relative_ok", f"rm -f cd10.csv cd10.pt; $P train --model m/mf10_chdir.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 "
   "--strategy single --device cpu --csv cd10.csv --save cd10.pt", "ok", check=exists("cd10.csv", "cd10.pt"))
mf("chdir_run_out_relative_ok", "rm -rf cd10run; $P run --quick --models m/mf10_chdir.py:Net --input-shape 4 --strategies single --device cpu "
   "--steps 1 --warmup 0 --rounds 1 --out cd10run", "ok", check=exists("cd10run"))
mf("sysexit_x_plan", opm("sysexit_x"), "err")
mf("sysexit_0_train", "$P train --model m/mf10_sysexit_0.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu", "err")
mf("sysexit_x_run", "$P run --quick --models m/mf10_sysexit_x.py:Net --input-shape 4 --strategies single --device cpu --out sx10run", "any",
   check=lambda r: (r["rc"] != 0 or "failed" in r["out"] or "x" in r["last"], f"rc={r['rc']} last={r['last'][:100]}"))
mf("sysexit_x_api", f"{LOCK} $PY m/apih.py \"pipebench.plan('m/mf10_sysexit_x.py:Net', torch.randn(8, 4), stages=2, batch=8)\"", "err")
FORKLEFT = 'echo LEFT=[$(for q in $(pgrep -f mf10_fork); do [ "$(ps -o comm= -p $q)" != bash ] && echo -n "$q "; done)]'
mf("fork_continues_plan", opm("fork") + f"; rc=$?; sleep 3; {FORKLEFT}; exit $rc", "any", check=grep(r"LEFT=\[\]"))
mf("distinit_plan_fresh", opm("distinit", " --fresh"), "any")
mf("alarm_plan_fresh", opm("alarm", " --fresh"), "any", check=lambda r: (r["rc"] in (0, 2), f"rc={r['rc']}"))
mf("warnerr_plan_fresh", opm("warnerr", " --fresh"), "ok")
mf("umask_plan_json", "rm -f um10.json; " + opm("umask", " --fresh --json um10.json") + "; rc=$?; stat -c MODE=%a um10.json; exit $rc", "any",
   check=grep(r"MODE=6[0-4][0-4]"))
mf("nofile_plan_fresh", opm("nofile", " --fresh"), "any")

# ===================================================================== (11) valid inputs that must be accepted
def ok(name, cmd, check=None, timeout=200):
    case(f"valid10_{name}", cmd, "ok", check, timeout=timeout)
ok("run_stages_alias_quick", "rm -rf v10a; " + RQ + " --stages 2 --out v10a", grep(r"\| single \| cpu \| ok "))
ok("train_cpu_processes_ddp", T.replace("--strategy single", "--strategy ddp") + " --cpu-processes 2")
ok("advise_micro_batches_1_2", ADZ + " --micro-batches 1,2")
ok("plan_link_gbps_exp", PP + " --link-gbps 1e3")
ok("report_two_inputs_one_out", "rm -rf v10rep v10r1; cp -a r0 v10r1; $P report r0 v10r1 --out v10rep")
ok("plan_profile_relative_dotdot", "cd m && " + PP.replace("p.json", "../p.json"))
ok("report_csv_only", "rm -rf v10c; mkdir v10c; cp r0/*.csv v10c/; $P report v10c")

# ===================================================================== (12) signals on paths the ninth did not cover
def sig(name, tgt, s, delay, cmd, second="", want=("130",)):
    case(f"sig10_{name}", f"timeout 200 bash m/sig.sh {tgt} {s} {delay} {second} -- {cmd}",
         "custom", sig_ok(want), timeout=200)
SLOWP = f"{PYX} -m pipebench plan --model /tmp/b10/work/m/slow10.py:Net --input-shape 4 --stages 2 --batch 8 --device cpu --fresh"
sig("plan_term_profiling", "p", "TERM", 6, SLOWP)
sig("advise_int_g_profiling", "g", "INT", 6, SLOWP.replace(" plan ", " advise "))
sig("report_int_1", "p", "INT", 1.0, f"{PYX} -m pipebench report /tmp/b10/work/r0 --out /tmp/b10/work/sig_rep", want=("130", "0"))
sig("model_ignores_term", "p", "TERM", 6, SLOWP.replace("slow10.py", "mf10_termign_slow.py"))
sig("model_handlers_int_g", "g", "INT", 6, SLOWP.replace("slow10.py", "mf10_sighandlers.py") + " --repeats 200")
sig("train_cpu_processes_int_g_6", "g", "INT", 6, f"{PYX} -m pipebench train --model /tmp/b10/work/m/good.py:Net --input-shape 4 --data "
    "/tmp/b10/work/m/data.py:data --batch 8 --steps 400 --strategy pp-1f1b --device cpu --cpu-processes 2")

# ===================================================================== (13) second batch: harness fixes (_h: the first's file was made in
# the command, after the check had looked) and follow-ups of the first batch's findings
def sph(name, make, cmd, expect="err", check=None, timeout=120):
    sp(name + "_h", cmd, expect, check, timeout=timeout, setup=make)
sph("out10_report_out_users_summary_only", "mkdir sp/o2; printf 'mine,1\\n' > sp/o2/summary.csv", "$P report r0 --out sp/o2", check=unchanged("sp/o2/summary.csv"))
sph("out10_report_md_link_to_users_file", "mkdir sp/o3; ln -s ../notes.txt sp/o3/report.md", "$P report r0 --out sp/o3", check=unchanged("sp/notes.txt", "sp/o3/report.md"))
sph("out10_report_summary_csv_is_folder", "mkdir -p sp/o5/summary.csv", "$P report r0 --out sp/o5", check=unchanged("sp/o5/summary.csv"))
sph("out10_report_users_png_in_out", "mkdir sp/o6; printf 'my png' > sp/o6/throughput.png", "$P report r0 --out sp/o6", "custom", check=unchanged("sp/o6/throughput.png"))
sph("out10_report_input_inside_out_ok", "mkdir sp/o1; cp sp/res.csv sp/o1/res.csv", "$P report sp/o1/res.csv --out sp/o1", "ok", check=unchanged("sp/o1/res.csv"))
sph("repro10_E3_summary_in_out", "mkdir sp/rq; cp sp/res.csv sp/rq/summary.csv", "$P report sp/rq/summary.csv --out sp/rq", check=unchanged("sp/rq/summary.csv"))
sph("clash10_export_eq_profile_read_hardlink", "ln sp/p.json sp/phard.json", "$P plan --profile sp/p.json --stages 2 --export deepspeed sp/phard.json",
    check=unchanged("sp/p.json", "sp/phard.json"))
sph("clash10_saveprofile_link_to_model_py", "ln -s ../m/good.py sp/g.json", f"{OP} --save-profile sp/g.json", check=unchanged("m/good.py", "sp/g.json"))
sph("save10_state_folder_is_a_file", "printf 'mine' > sp/s1.pt.train", f"{T} --save sp/s1.pt", check=both(unchanged("sp/s1.pt.train"), absent("sp/s1.pt")))
sph("save10_over_users_torch_tensor", f"{PYX} -c \"import torch; torch.save({{'mine': torch.ones(3)}}, 'sp/t.pt')\"", f"{T} --save sp/t.pt", "custom",
    check=unchanged("sp/t.pt"))
sph("save10_eq_tokens_data", "head -c 20000 /dev/urandom > sp/tok.bin", "$P train --model gpt --flavour tiny --data tokens:sp/tok.bin "
    "--batch 8 --steps 2 --strategy single --device cpu --save sp/tok.bin", check=unchanged("sp/tok.bin"))
sph("save10_resume_weights_changed", "printf 'x' >> sp/ck.pt", f"{T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", check=unchanged("sp/ck.pt"))
ro("plan_model_file_relative_ok_h", OP.replace("$P", "$NP"), "ok", mode="311")   # x without r: a name inside is reachable (the first expected a refusal)
api("request_np_ok_h", "pipebench.plan('mlp', request=pipebench.Request(batch=np.int64(8), devices=('cpu', 'cpu')), flavour='tiny')", "ok")
S4 = "settings={'input_shape': [4]}"
for f in ("threads64", "nograd", "dtype64", "patch_randn", "umask"):   # the first passed x, refused for a file: the file was never imported
    st(f"file_{f}_plan_h", f"pipebench.plan('m/mf10_{f}.py:Net', {S4}, stages=2, batch=8, fresh=True)")
mf("sysexit_x_api_h", f"{LOCK} $PY m/apih.py \"pipebench.plan('m/mf10_sysexit_x.py:Net', settings={{'input_shape': [4]}}, stages=2, batch=8)\"", "err")

# follow-ups: each finding again, and its neighbours
DIRECT = f"OMP_NUM_THREADS=1 timeout 20 {PYX} -m pipebench"   # 20 s: a hang shows as rc 124
for i in (1, 2):
    sp(f"repro10_F1_report_md_fifo_{i}", f"mkfifo sp/o4/report.md; {DIRECT} report r0 --out sp/o4", setup="mkdir sp/o4", timeout=60)
    sp(f"repro10_F2_folder_holding_a_report_{i}", "$P report sp/o1/res.csv --out sp/o1 >/dev/null 2>&1; $P report sp/o1 --out sp/o1rep", "ok",
       check=grep(r"\b1 row\(s\) read"), setup="mkdir sp/o1; cp sp/res.csv sp/o1/res.csv")
    sp(f"repro10_F3_state_link_dangling_{i}", f"{T.replace('--steps 2', f'--steps {i + 1}')} --save sp/s2.pt", check=absent("sp/nowhere10", "sp/s2.pt"),
       setup="ln -s nowhere10 sp/s2.pt.train")
    case(f"repro10_F4_import_tiny_{i}", OP + " --fresh", "err", grep(r"did not finish|PIPEBENCH_IMPORT_SECONDS to wait", "err"),
         env={"PIPEBENCH_IMPORT_SECONDS": "1e-9" if i == 1 else "1e-6"})
    case(f"repro10_F8_run_chdir_model_{i}", f"rm -rf cd10run{i} /cd10run{i}; $P run --quick --models m/mf10_chdir.py:Net --input-shape 4 --strategies single "
         f"--device cpu --steps 1 --warmup 0 --rounds 1 --out cd10run{i}; rc=$?; ls -d /cd10run{i} 2>/dev/null && echo OUTSIDE; exit $rc", "ok",
         both(exists(f"cd10run{i}"), nogrep("OUTSIDE|unavailable")), timeout=200)
sp("out10_report_summary_csv_fifo", f"mkfifo sp/o9/summary.csv; {DIRECT} report r0 --out sp/o9", setup="mkdir sp/o9", timeout=60)
sp("out10_report_md_fifo_with_reader", f"mkfifo sp/o10/report.md; (cat sp/o10/report.md > /dev/null &); {DIRECT} report r0 --out sp/o10", "any",
   setup="mkdir sp/o10", timeout=60)
sp("repro10_F2_json_input_folder_holding_a_report", "$P report sp/o1/res.json --out sp/o1 >/dev/null 2>&1; $P report sp/o1 --out sp/o1rep", "ok",
   check=grep(r"\b1 row\(s\) read"), setup="mkdir sp/o1; cp sp/res.json sp/o1/res.json")
case("repro10_F4_import_1e-4", OP + " --fresh", "err", grep(r"did not finish|PIPEBENCH_IMPORT_SECONDS to wait", "err"), env={"PIPEBENCH_IMPORT_SECONDS": "1e-4"})
case("repro10_F8_run_chdir_model_out_absolute", f"rm -rf {W}cd10abs; $P run --quick --models m/mf10_chdir.py:Net --input-shape 4 --strategies single "
     f"--device cpu --steps 1 --warmup 0 --rounds 1 --out {W}cd10abs", "ok", nogrep("unavailable"), timeout=200)
opt("repro10_F5_train_lr_arabic_exp", f"{TR1} --lr ١e-٢", check=nogrep(r"done: "))
opt("repro10_F5_run_has_no_lr", f"{RUN1} --lr ٠.١", check=absent("opt_run"))
api("repro10_F6_micro_batches_np_array_2", Z + ", stages=2, batch=8, micro_batches=np.array([2]))", "any")
api("repro10_F6_advise_micro_batches_np_array", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8, micro_batches=np.array([1, 2]))", "any")
case("repro10_F7_run_steps_np_int64", f"rm -rf api_run7; {LOCK} $PY -c \"import numpy as np, pipebench; pipebench.run(['mlp'], strategies=['single'], quick=True, "
     "out='api_run7', steps=np.int64(1), warmup=0, rounds=1)\"", "ok", timeout=200)
case("repro10_F7_run_min_seconds_np_float", f"rm -rf api_run8; {LOCK} $PY -c \"import numpy as np, pipebench; pipebench.run(['mlp'], strategies=['single'], quick=True, "
     "out='api_run8', steps=1, warmup=0, rounds=1, min_seconds=np.float64(0.5))\"", "ok", timeout=200)
case("repro10_F7_run_chunks_np_int64", f"rm -rf api_run9; {LOCK} $PY -c \"import numpy as np, pipebench; pipebench.run(['mlp'], strategies=['single', 'pp-1f1b'], quick=True, "
     "out='api_run9', steps=1, warmup=0, rounds=1, chunks=[np.int64(2)])\"", "ok", timeout=200)
case("leak10_resourcewarning_plan_fresh", PLF, "ok", nogrep(r"unclosed file|ResourceWarning"), env={"PYTHONWARNINGS": "error::ResourceWarning"})
case("leak10_resourcewarning_plan_fresh_2", PLF, "ok", nogrep(r"unclosed file|ResourceWarning"), env={"PYTHONWARNINGS": "error::ResourceWarning"})
gone("api_import_pipebench_first", f"{LOCK} $PY -c \"import pipebench; pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)\"", "any")
