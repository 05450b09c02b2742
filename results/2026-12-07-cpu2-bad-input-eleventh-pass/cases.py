"""The eleventh pass's inputs (issue 42's kinds; mostly new against the ninth). $P = pipebench under timeout (the battery holds the CPU lock), run
from /tmp/b11/work (fixtures.sh builds it); $NP = the same without CAP_DAC_OVERRIDE (a folder's mode holds);
$PY = the worktree's python."""
import hashlib, os, re, shlex
from driver import case

W = os.environ.get("B11W", "/tmp/b11/work") + "/"
LOCK = "OMP_NUM_THREADS=1 timeout 150"  # the battery holds the CPU lock (driver.py)
NODAC = "setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search"
PYX = "/work/wt-eleventh/.venv/bin/python"
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

def api(name, code, expect="err"):
    case(f"api11_{name}", f"{LOCK} $PY m/apih.py {shlex.quote('x = torch.randn(8, 4); ' + code)}", expect, timeout=150)


def c11(kind, name, cmd, expect="err", check=None, timeout=150, env=None, setup=""):
    sp(f"{kind}11_{name}", cmd, expect, check, timeout=timeout, env=env, setup=setup)

DIRECT = f"OMP_NUM_THREADS=1 timeout 20 {PYX} -m pipebench"
TD = f"$P train {G} --batch 8 --steps 2 --strategy single --device cpu"   # + --data
# ============ (0) the tenth's F1-F9 once more
c11("re", "F1_report_md_fifo", f"mkfifo sp/o4/report.md; {DIRECT} report r0 --out sp/o4", setup="mkdir sp/o4", timeout=60)
c11("re", "F2_folder_holding_a_report", "$P report sp/o1/res.csv --out sp/o1 >/dev/null 2>&1; $P report sp/o1 --out sp/o1rep", "any",
    setup="mkdir sp/o1; cp sp/res.csv sp/o1/res.csv")
c11("re", "F3_state_link_dangling", f"{T} --save sp/s2.pt", check=absent("sp/nowhere10", "sp/s2.pt"), setup="ln -s nowhere10 sp/s2.pt.train")
c11("re", "F4_import_tiny", OP + " --fresh", check=grep(r"did not finish|PIPEBENCH_IMPORT_SECONDS", "err"), env={"PIPEBENCH_IMPORT_SECONDS": "1e-4"})
c11("re", "F5_train_lr_arabic", f"{T} --lr ٠.١", check=nogrep("done: "))
c11("re", "F6_micro_batches_np_array", f"{LOCK} $PY m/apih.py \"pipebench.plan('mlp', flavour='tiny', device='cpu', stages=2, batch=8, micro_batches=np.array([1, 2]))\"", "any")
c11("re", "F7_run_steps_np_int64", f"{LOCK} $PY -c \"import numpy as np, pipebench; pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/api_run7', steps=np.int64(1), warmup=0, rounds=1)\"", "ok", timeout=200)
c11("re", "F8_run_chdir_model", "$P run --quick --models m/mf10_chdir.py:Net --input-shape 4 --strategies single --device cpu --steps 1 --warmup 0 --rounds 1 --out sp/cd11run; rc=$?; ls -d /sp 2>/dev/null && echo OUTSIDE; exit $rc",
    "ok", both(exists("sp/cd11run"), nogrep("OUTSIDE|unavailable")), timeout=200)
c11("re", "F9_resourcewarning", PLF, "ok", nogrep(r"unclosed file|ResourceWarning"), env={"PYTHONWARNINGS": "error::ResourceWarning"})

# ============ (1) two spellings of one option
c11("opt", "plan_mb_auto_chunks_auto_ok", f"{PP} --micro-batches auto --chunks auto", "ok")
c11("opt", "advise_mb_12_chunks_21_ok", f"{AP} --micro-batches 1,2 --chunks 2,1", "ok")
c11("opt", "advise_mb_12_chunks_122_ok", f"{AP} --micro-batches 1,2 --chunks 1,2,2", "ok")
c11("opt", "advise_mb_2_chunks_4", f"{AP} --micro-batches 2 --chunks 4")
c11("opt", "advise_mb_auto_chunks_12", f"{AP} --micro-batches auto --chunks 1,2")
c11("opt", "plan_mb_2_chunks_02_ok", f"{PP} --micro-batches 2 --chunks 02", "ok")
c11("opt", "plan_mb_sp2_chunks_2_ok", f"{PP} --micro-batches ' 2' --chunks 2", "ok")
c11("opt", "plan_mb_AUTO_chunks_auto_ok", f"{PP} --micro-batches AUTO --chunks auto", "any")
c11("opt", "run_cpu2_stages3", f"{RQ} --cpu-processes 2 --stages 3 --out sp/o", check=absent("sp/o"))
c11("opt", "train_cpu2_stages3", f"{T} --cpu-processes 2 --stages 3")
c11("opt", "run_mb_24_chunks_42", f"{RQ} --micro-batches 2,4 --chunks 4,2,9 --out sp/o", check=absent("sp/o"))
c11("opt", "plan_mb_twice_same_spelling", f"{PP} --micro-batches 2 --micro-batches 4", "any")
# ============ (2) --json - and /dev/stdout
c11("out", "plan_json_dash", f"cd sp && {PP.replace('p.json', '../p.json')} --json -; ls -A", "any", check=absent("sp/-"))
c11("out", "plan_json_dev_stdout_ok", f"{PP} --json /dev/stdout", "ok", grep(r'"stages"|\{'))
c11("out", "plan_json_dev_stderr_ok", f"{PP} --json /dev/stderr", "ok")
c11("out", "advise_json_dev_stdout_ok", f"{AP} --json /dev/stdout", "ok", grep(r"\{"))
c11("out", "plan_json_and_save_profile_dev_stdout", f"{PLF} --save-profile /dev/stdout --json /dev/stdout", "any")
c11("out", "plan_export_dash", f"cd sp && {PP.replace('p.json', '../p.json')} --export deepspeed -", "any", check=absent("sp/-"))
c11("out", "plan_json_dev_full", f"{PP} --json /dev/full")
c11("out", "plan_json_proc_self_fd1_ok", f"{PP} --json /proc/self/fd/1", "ok")
# ============ (3) --export with odd plans
for eng in ("torchtitan", "deepspeed", "megatron", "device-map"):
    c11("exp", f"{eng}_one_stage", f"$P plan --profile p.json --stages 1 --export {eng} sp/x.json", "any")
    c11("exp", f"{eng}_interleaved_v3", f"{PP} --schedule interleaved --virtual-stages 3 --export {eng} sp/x.json", "any")
    c11("exp", f"{eng}_balance_uniform_ok", f"{PP} --balance uniform --export {eng} sp/x.json", "ok", exists("sp/x.json"))
c11("exp", "deepspeed_zbv", f"{PP} --schedule zbv --export deepspeed sp/x.json", "any")
c11("exp", "torchtitan_eq_json", f"{PP} --export torchtitan sp/x.json --json sp/x.json", check=absent("sp/x.json"))
c11("exp", "megatron_into_dir", f"{PP} --export megatron sp/dir")
c11("exp", "unknown_engine", f"{PP} --export vllm sp/x.json", check=absent("sp/x.json"))
c11("exp", "export_one_arg", f"{PP} --export torchtitan")
c11("exp", "export_over_profile_read", f"{PP.replace('p.json', 'sp/p.json')} --export torchtitan sp/p.json", check=unchanged("sp/p.json"))
c11("exp", "export_twice", f"{PP} --export torchtitan sp/a.json --export deepspeed sp/b.json", "any")
c11("exp", "torchtitan_checkpoint_always", f"{PP} --checkpoint always --export torchtitan sp/x.json", "any")
c11("exp", "megatron_mb_8", f"{PP} --micro-batches 8 --export megatron sp/x.json", "any")
c11("exp", "export_over_users_notes", f"{PP} --export deepspeed sp/notes.txt", check=unchanged("sp/notes.txt"))
# ============ (4) --profile from another model, and what a saved profile fixes
c11("prof", "plan_good_with_mlp_profile", f"$P plan {G} --profile p.json --stages 2")
c11("prof", "advise_mlp_with_good_profile", "$P advise --model mlp --profile pg.json --stages 2")
c11("prof", "plan_profile_batch16", f"{PP} --batch 16", "any")
c11("prof", "plan_profile_bf16", f"{PP} --precision bf16", "any")
c11("prof", "plan_profile_flavour_small", f"{PP} --flavour small")
c11("prof", "plan_profile_set_depth", f"{PP} --set depth=8")
c11("prof", "plan_profile_fresh", f"{PP} --fresh", "any")
c11("prof", "plan_profile_save_profile_ok", f"{PP} --save-profile sp/q.json", "any")
c11("prof", "plan_profile_is_advice", "$P plan --profile adv.json --stages 2")
c11("prof", "plan_profile_is_plan", "$P plan --profile plan.json --stages 2")
c11("prof", "plan_profile_is_export", "$P plan --profile ex_ds.json --stages 2")
c11("prof", "plan_profile_is_results_json", "$P plan --profile sp/res.json --stages 2")
c11("prof", "plan_profile_two_stacked", f"{PP} --profile pg.json", "any")
c11("prof", "plan_profile_gpus0", "$P plan --profile p.json --gpus 0")
c11("prof", "plan_profile_compile_default", f"{PP} --compile default", "any")
c11("prof", "run_profiles_is_a_file", f"{RQ} --profiles p.json --out sp/o", check=absent("sp/o"))
c11("prof", "run_profiles_missing", f"{RQ} --profiles sp/nothere --out sp/o", "any")
# ============ (5) conflicts and numbers
c11("clash", "plan_gpus_and_stages", "$P plan --model mlp --gpus 0 --stages 2")
c11("clash", "plan_gpus_device_cpu", "$P plan --model mlp --flavour tiny --gpus 0,1 --device cpu")
c11("clash", "train_epochs_and_steps", f"{T} --epochs 1")
c11("clash", "run_resume_and_again", f"{RQ} --resume --again --out sp/o", check=absent("sp/o"))
c11("clash", "train_save_every_no_save", f"{T} --save-every 1")
c11("clash", "train_resume_no_save", f"{T} --resume")
c11("clash", "train_nodes_no_write_job", f"{T} --nodes 2")
for v in ("0", "-1", "1.5", "٢", "nan"):
    c11("num", f"train_nodes_{v}", f"{T} --nodes {v} --write-job sp/job", check=absent("sp/job"))
for o, v in (("save-every", "0"), ("save-every", "-3"), ("log-every", "0"), ("log-every", "nan"), ("loader-workers", "-1"), ("loader-workers", "1.5"),
             ("epochs", "0"), ("epochs", "-1"), ("epochs", "inf"), ("lr", "nan"), ("lr", "-0.1"), ("lr", "inf"), ("lr", "0")):
    c11("num", f"train_{o}_{v}", f"{T.replace('--steps 2 ', '') if o == 'epochs' else T} --{o} {v}", check=nogrep("done: "))
for o, v in (("schedule", "gpipe --virtual-stages 2"), ("schedule", "zbv --virtual-stages 3"), ("schedule", "bogus"), ("virtual-stages", "0"),
             ("speeds", "1,nan"), ("speeds", "1,-1"), ("speeds", "1"), ("speeds", "0,0"), ("speeds", "1,1,1"), ("max-memory", "0"),
             ("max-memory", "-1GiB"), ("max-memory", "nanGiB"), ("max-memory", "1e400"), ("link-gbps", "0"), ("link-gbps", "-1"),
             ("link-gbps", "inf"), ("granularity", "0"), ("granularity", "99"), ("balance", "memory"), ("micro-batches", "3"),
             ("micro-batches", "0"), ("batch", "7"), ("stages", "9")):
    c11("num", f"plan_profile_{o}_{v.split()[0]}{'_' + v.split()[-1] if ' ' in v else ''}", f"{PP} --{o} {v}")
for o, v in (("repeats", "0"), ("timeout", "0"), ("timeout", "-1"), ("timeout", "nan"), ("compile", "cudagraphs"), ("input-dtype", "bogus"),
             ("input-dtype", "int64"), ("num-classes", "0"), ("num-classes", "-2"), ("token-range", "0"), ("loss", "bogus"), ("input-shape", "4,0"),
             ("input-shape", "-4"), ("input-shape", "4,,"), ("precision", "fp16")):
    c11("num", f"plan_good_{o}_{v}", f"$P plan --model m/good.py:Net {'' if o == 'input-shape' else '--input-shape 4'} --stages 2 --batch 8 --device cpu --fresh --{o} {v}")
c11("num", "train_compile_cudagraphs_cpu", f"{T} --compile cudagraphs")
c11("num", "train_strategy_dataparallel_cpu", f"{T.replace('--strategy single', '--strategy dataparallel')}")
c11("num", "train_strategy_hybrid_cpu2", f"{T.replace('--strategy single', '--strategy hybrid')} --cpu-processes 2")
c11("num", "train_strategy_bogus", f"{T.replace('--strategy single', '--strategy pp-bogus')}")
c11("num", "run_compile_eager_bogus", f"{RQ} --compile eager,bogus --out sp/o", check=absent("sp/o"))
c11("num", "run_gpu_memory_on_cpu", f"{RQ} --gpu-memory 1GiB --out sp/o", "any")
for v in ("auto:0", "auto:-1", "auto:x", "auto:"):
    c11("num", f"run_strategies_{v}", f"{RQ.replace('--strategies single', '--strategies ' + v)} --out sp/o", check=absent("sp/o"))
c11("num", "run_strategies_empty_item", f"{RQ.replace('--strategies single', '--strategies single,,ddp')} --out sp/o", check=absent("sp/o"))
c11("num", "devices_gpus_0", "$P devices --gpus 0")
c11("num", "devices_gpus_auto0", "$P devices --gpus auto:0")
c11("num", "devices_no_links_ok", "$P devices --no-links", "any")
c11("num", "models_extra_arg", "$P models mlp")
c11("num", "version_ok", "$P --version", "ok")
c11("num", "no_command", "$P", "any")
c11("num", "plan_device_cuda7", "$P plan --model mlp --flavour tiny --stages 2 --device cuda:7")
c11("num", "plan_device_meta", "$P plan --model mlp --flavour tiny --stages 2 --device meta")
c11("num", "plan_device_cpu0", "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu:0", "any")
# ============ (6) --data that misbehaves
for f in ("raises", "raises_late", "wrong_shape", "empty", "nan", "inf_target", "float_target", "none", "boom", "len_raises", "not_tuple",
          "iterable", "small", "an_int", "notfunc", "needs_arg", "missing_name"):
    c11("data", f, f"{TD} --data m/d11.py:{f} --save sp/d.pt", "any", check=nogrep("Traceback"))
c11("data", "a_list_ok", f"{TD} --data m/d11.py:a_list", "any")
c11("data", "nan_csv", f"{TD} --data m/d11.py:nan --csv sp/n.csv", "any")
c11("data", "raises_ddp_cpu2", f"{TD.replace('--strategy single', '--strategy ddp')} --cpu-processes 2 --data m/d11.py:raises", "any")
c11("data", "wrong_shape_pp_cpu2", f"{TD.replace('--strategy single', '--strategy pp-1f1b')} --cpu-processes 2 --data m/d11.py:wrong_shape", "any")
c11("data", "loader_workers_2_raises_late", f"{TD} --data m/d11.py:raises_late --loader-workers 2", "any")
c11("data", "loader_workers_2_ok", f"{TD} --data m/data.py:data --loader-workers 2", "ok")
c11("data", "mnist_missing_dir", f"{TD} --data mnist:sp/nothere")
c11("data", "mnist_empty_dir", f"{TD} --data mnist:sp/dir")
c11("data", "unknown_scheme", f"{TD} --data s3://bucket/x")
c11("data", "data_py_is_dir", f"{TD} --data sp/dir:data")
# ============ (7) tokens: files
TG = "$P train --model gpt --flavour tiny --batch 8 --steps 2 --strategy single --device cpu --data tokens:"
c11("tok", "empty", TG + "sp/t0.bin", setup=": > sp/t0.bin")
c11("tok", "odd_3_bytes", TG + "sp/t3.bin", setup="printf 'abc' > sp/t3.bin")
c11("tok", "odd_sized_big", TG + "sp/t4.bin", "any", setup="head -c 20001 /dev/urandom > sp/t4.bin")
c11("tok", "shorter_than_block", TG + "sp/t5.bin", setup="head -c 20 /dev/zero > sp/t5.bin")
c11("tok", "fifo", TG + "sp/fifo", timeout=60)
c11("tok", "dir", TG + "sp/dir")
c11("tok", "dev_zero", TG + "/dev/zero", timeout=60)
c11("tok", "missing", TG + "sp/nothere.bin")
c11("tok", "ids_over_vocab", TG + "sp/t6.bin", "any", check=nogrep("Traceback|device-side"), setup="head -c 200000 /dev/urandom > sp/t6.bin")
c11("tok", "with_mlp_model", f"$P train {G} --batch 8 --steps 2 --strategy single --device cpu --data tokens:sp/t7.bin", "any",
    setup="head -c 20000 /dev/zero > sp/t7.bin")
c11("tok", "empty_name", TG)
# ============ (8) --resume from other runs
c11("res", "other_model", "$P train --model mlp --flavour tiny --data m/data.py:data --batch 8 --steps 3 --strategy single --device cpu --save sp/ck.pt --resume",
    check=unchanged("sp/ck.pt"))
c11("res", "other_strategy_ddp", f"{T.replace('--steps 2', '--steps 4').replace('--strategy single', '--strategy ddp')} --cpu-processes 2 --save sp/ck.pt --resume", "any")
c11("res", "other_strategy_pp", f"{T.replace('--steps 2', '--steps 4').replace('--strategy single', '--strategy pp-gpipe')} --cpu-processes 2 --save sp/ck.pt --resume", "any")
c11("res", "other_batch", f"{T.replace('--steps 2', '--steps 4').replace('--batch 8', '--batch 16')} --save sp/ck.pt --resume", "any")
c11("res", "other_optimizer", f"{T.replace('--steps 2', '--steps 4')} --optimizer adamw --save sp/ck.pt --resume", "any")
c11("res", "fewer_steps_than_done", f"{T.replace('--steps 2', '--steps 1')} --save sp/ck.pt --resume", "any", check=unchanged("sp/ck.pt"))
c11("res", "same_steps_done", f"{T} --save sp/ck.pt --resume", "any", check=unchanged("sp/ck.pt"))
c11("res", "missing_checkpoint", f"{T} --save sp/none.pt --resume", check=absent("sp/none.pt"))
c11("res", "no_state_folder", f"{T.replace('--steps 2', '--steps 4')} --save sp/ck2.pt --resume", "any", setup="cp ck.pt sp/ck2.pt")
c11("res", "latest_json_garbage", f"{T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", check=unchanged("sp/ck.pt"), setup="echo '{nope' > sp/ck.pt.train/latest.json")
c11("res", "latest_json_negative_step", f"{T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", "any", setup="ls sp/ck.pt.train > sp/ls.txt; $PY -c \"import json;p='sp/ck.pt.train/latest.json';d=json.load(open(p));[d.__setitem__(k,-5) for k in d if isinstance(d[k],int)];json.dump(d,open(p,'w'))\"")
c11("res", "latest_json_nan", f"{T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", "any", setup="$PY -c \"import json;p='sp/ck.pt.train/latest.json';d=json.load(open(p));[d.__setitem__(k,float('nan')) for k in d if isinstance(d[k],int)];json.dump(d,open(p,'w'))\"")
c11("res", "rank0_garbage", f"{T.replace('--steps 2', '--steps 4')} --save sp/ck.pt --resume", check=unchanged("sp/ck.pt"), setup="for f in sp/ck.pt.train/*.pt; do echo junk > $f; done")
c11("res", "lr_changed", f"{T.replace('--steps 2', '--steps 4')} --lr 0.01 --save sp/ck.pt --resume", "any")
c11("res", "resume_with_write_job", f"{T} --save sp/ck.pt --resume --write-job sp/job", "any")
# ============ (9) --write-job
c11("job", "new_ok", f"{T} --write-job sp/job", "ok", exists("sp/job/job.json", "sp/job/train.json"))
c11("job", "nodes3_cpu2_ok", f"{T.replace('--strategy single', '--strategy ddp')} --cpu-processes 2 --nodes 3 --write-job sp/job", "ok", exists("sp/job/job.json"))
c11("job", "is_a_file", f"{T} --write-job sp/notes.txt", check=unchanged("sp/notes.txt"))
c11("job", "users_job_json", f"{T} --write-job sp/mine", "any", check=unchanged("sp/mine"), setup="echo mine > sp/mine/job.json")
c11("job", "users_train_json_link", f"{T} --write-job sp/mine", "any", check=unchanged("sp/notes.txt"), setup="ln -s ../notes.txt sp/mine/train.json")
c11("job", "empty", f"{T} --write-job ''")
c11("job", "fifo", f"{T} --write-job sp/fifo", timeout=60)
c11("job", "dev_null", f"{T} --write-job /dev/null")
c11("job", "ro_folder", f"{T.replace('$P', '$NP')} --write-job sp/ro/job", check=absent("sp/ro/job"))
c11("job", "strategy_auto", f"{T.replace('--strategy single', '--strategy auto')} --write-job sp/job", "any")
c11("job", "with_csv", f"{T} --write-job sp/job --csv sp/l.csv", "any", check=absent("sp/l.csv"))
c11("job", "eq_save_folder", f"{T} --write-job sp/ck.pt.train --save sp/ck.pt", "any", check=unchanged("sp/ck.pt.train"))
c11("job", "data_relative_in_job", f"{T} --write-job sp/job; grep -o 'data[^,]*' sp/job/train.json | head -3", "ok")
# ============ (10) report on train's --csv and --out variants
c11("rep", "train_csv_ok", f"{T} --csv sp/tl.csv >/dev/null 2>&1; $P report sp/tl.csv --out sp/tr", "ok", exists("sp/tr/report.md"))
c11("rep", "train_csv_log_fixture_ok", "$P report sp/log.csv --out sp/tr", "ok", exists("sp/tr/report.md"))
c11("rep", "train_csv_nan_loss", "$P report sp/ln.csv --out sp/tr", "any", setup="printf 'step,epoch,loss,samples_per_s,time_s\\n1,0,nan,10,0.1\\n2,0,inf,-5,0.2\\n' > sp/ln.csv")
c11("rep", "train_csv_missing_column", "$P report sp/lm.csv --out sp/tr", setup="printf 'step,epoch,samples_per_s,time_s\\n1,0,10,0.1\\n' > sp/lm.csv")
c11("rep", "train_csv_header_only", "$P report sp/lh.csv --out sp/tr", "any", setup="printf 'step,epoch,loss,samples_per_s,time_s\\n' > sp/lh.csv")
c11("rep", "train_csv_text_values", "$P report sp/lt.csv --out sp/tr", setup="printf 'step,epoch,loss,samples_per_s,time_s\\none,0,x,y,z\\n' > sp/lt.csv")
c11("rep", "train_csv_and_results_ok", "$P report sp/log.csv sp/res.csv --out sp/tr", "ok")
c11("rep", "same_file_twice", "$P report sp/res.csv sp/res.csv --out sp/tr", "any")
c11("rep", "out_is_input_file", "$P report sp/res.csv --out sp/res.csv", check=unchanged("sp/res.csv"))
c11("rep", "out_is_users_file", "$P report sp/res.csv --out sp/notes.txt", check=unchanged("sp/notes.txt"))
c11("rep", "out_dev_null", "$P report sp/res.csv --out /dev/null")
c11("rep", "out_nested_new_ok", "$P report sp/res.csv --out sp/a/b/c", "ok", exists("sp/a/b/c/report.md"))
c11("rep", "out_link_to_users_dir", "$P report sp/res.csv --out sp/dirlink", "any")
c11("rep", "csv_bom_crlf", "$P report sp/bom.csv --out sp/tr", "any", setup="printf '\\xef\\xbb\\xbf' > sp/bom.csv; sed 's/$/\\r/' sp/res.csv >> sp/bom.csv")
c11("rep", "train_csv_crlf_ok", "$P report sp/lc.csv --out sp/tr", "any", setup="sed 's/$/\\r/' sp/log.csv > sp/lc.csv")
c11("rep", "results_json_empty_list", "$P report sp/el.json --out sp/tr", setup="echo '[]' > sp/el.json")
c11("rep", "results_json_nan_rows", "$P report sp/rn.json --out sp/tr", "any", setup=f"$PY -c \"import json;d=json.load(open('sp/res.json'));s=json.dumps(d).replace('\\\"ok\\\"','\\\"ok\\\"');open('sp/rn.json','w').write(s.replace(': 0.', ': NaN, \\\"_x\\\": 0.'))\"")
c11("rep", "train_csv_huge_step", "$P report sp/lb.csv --out sp/tr", "any", setup="printf 'step,epoch,loss,samples_per_s,time_s\\n1e308,0,1,10,0.1\\n99999999999999999999999,0,1,10,0.2\\n' > sp/lb.csv")
# ============ (11) --save over a file another train is writing
c11("save", "two_trains_same_save", f"({T.replace('--steps 2', '--steps 30')} --save sp/cc.pt > sp/a.log 2>&1 &); sleep 4; {T} --save sp/cc.pt; rc=$?; sleep 25; tail -1 sp/a.log; exit $rc", "any", timeout=200)
# ============ (12) signals during train on 2 CPU processes, then --resume
def sig_resume(rc_want):
    def check(r):
        ok1, note = sig_ok(rc_want)(r)
        m = re.search(r"RESUME_RC=(\S+)", r["out"])
        ok2 = m is not None and m.group(1) == "0"
        return ok1 and ok2, note[:250] + f" | resume rc {m.group(1) if m else None}: " + r["err"].strip()[-150:]
    return check
for strat, s, tgt, d in (("ddp", "TERM", "g", 14), ("ddp", "INT", "g", 14), ("pp-1f1b", "INT", "g", 14), ("pp-gpipe", "TERM", "p", 14), ("single", "INT", "g", 12)):
    TRS = (f"{PYX} -m pipebench train --model {W}m/good.py:Net --input-shape 4 --data {W}m/d11.py:slow --batch 8 --steps 80 --strategy {strat} "
           f"--device cpu {'--cpu-processes 2 ' if strat != 'single' else ''}--save {W}sp/sg.pt --save-every 2 --csv {W}sp/sg.csv")
    c11("sig", f"train_{strat}_{s}_{tgt}_then_resume", f"timeout 200 bash m/sig.sh {tgt} {s} {d} -- {TRS}; ls sp/sg.pt.train; "
        f"{LOCK} {TRS.replace('--steps 80', '--steps 8').replace('slow', 'data')} --resume 2>&1 | tail -3 >&2; echo RESUME_RC=${{PIPESTATUS[0]}}",
        "custom", sig_resume(("130",)), timeout=260)
c11("sig", "train_ddp_kill9_parent_then_resume", f"timeout 200 bash m/sig.sh p KILL 14 -- {TRS.replace('--strategy single', '--strategy ddp --cpu-processes 2')}; "
    f"{LOCK} {TRS.replace('--steps 80', '--steps 8').replace('slow', 'data').replace('--strategy single', '--strategy ddp --cpu-processes 2')} --resume 2>&1 | tail -3 >&2; echo RESUME_RC=${{PIPESTATUS[0]}}",
    "custom", sig_resume(("137",)), timeout=260)
# ============ (13) API types and values
Z = "pipebench.plan('mlp', flavour='tiny', device='cpu'"
A2 = "pipebench.advise('mlp', flavour='tiny', device='cpu', stages=2, batch=8"
for n, code, e in (("plan_model_int", "pipebench.plan(123, stages=2, batch=8)", "err"),
                   ("plan_model_none_no_profiles", "pipebench.plan(stages=2, batch=8)", "err"),
                   ("plan_stages_str", Z + ", stages='2', batch=8)", "err"),
                   ("plan_batch_float", Z + ", stages=2, batch=8.0)", "err"),
                   ("plan_batch_nan", Z + ", stages=2, batch=float('nan'))", "err"),
                   ("plan_speeds_str", Z + ", stages=2, batch=8, speeds='fast')", "err"),
                   ("plan_speeds_nan", Z + ", stages=2, batch=8, speeds=[1.0, float('nan')])", "err"),
                   ("plan_mb_set_ok", Z + ", stages=2, batch=8, micro_batches={1, 2})", "any"),
                   ("plan_mb_tuple_21_ok", Z + ", stages=2, batch=8, micro_batches=(2, 1))", "any"),
                   ("plan_mb_empty_list", Z + ", stages=2, batch=8, micro_batches=[])", "err"),
                   ("plan_mb_and_chunks_disagree", Z + ", stages=2, batch=8, micro_batches=2, chunks=4)", "err"),
                   ("plan_mb_and_chunks_agree_ok", Z + ", stages=2, batch=8, micro_batches=[1, 2], chunks=[2, 1])", "ok"),
                   ("plan_schedule_none_ok", Z + ", stages=2, batch=8, schedule=None)", "any"),
                   ("plan_schedule_int", Z + ", stages=2, batch=8, schedule=1)", "err"),
                   ("plan_link_nan", Z + ", stages=2, batch=8, link_gbps=float('nan'))", "err"),
                   ("plan_link_inf", Z + ", stages=2, batch=8, link_gbps=float('inf'))", "err"),
                   ("plan_max_memory_str", Z + ", stages=2, batch=8, max_memory='lots')", "err"),
                   ("plan_max_memory_neg", Z + ", stages=2, batch=8, max_memory=-1)", "err"),
                   ("plan_stages_0", Z + ", stages=0, batch=8)", "err"),
                   ("plan_unknown_kw", Z + ", stages=2, batch=8, stagez=2)", "err"),
                   ("plan_settings_list", Z + ", stages=2, batch=8, settings=[('depth', 2)])", "err"),
                   ("plan_settings_unknown_key", Z + ", stages=2, batch=8, settings={'nope': 2})", "err"),
                   ("plan_settings_depth_str", Z + ", stages=2, batch=8, settings={'depth': 'x'})", "err"),
                   ("plan_flavour_int", "pipebench.plan('mlp', flavour=1, device='cpu', stages=2, batch=8)", "err"),
                   ("plan_device_cuda7", "pipebench.plan('mlp', flavour='tiny', device='cuda:7', stages=2, batch=8)", "err"),
                   ("plan_device_torch_obj_ok", "pipebench.plan('mlp', flavour='tiny', device=torch.device('cpu'), stages=2, batch=8)", "any"),
                   ("plan_profiles_other_model", "p = pipebench.load_profiles('pg.json'); pipebench.plan('mlp', profiles=p, stages=2)", "err"),
                   ("plan_profiles_str", "pipebench.plan(profiles='p.json', stages=2)", "any"),
                   ("plan_profiles_list_of_str", "pipebench.plan(profiles=['p.json'], stages=2)", "err"),
                   ("plan_profiles_empty", "pipebench.plan(profiles=[], stages=2)", "err"),
                   ("plan_request_wrong_type", "pipebench.plan('mlp', request={'stages': 2})", "err"),
                   ("plan_example_wrong_shape", "pipebench.plan(nn.Linear(4, 3), torch.randn(8, 5), stages=2, batch=8)", "err"),
                   ("plan_example_list_of_str", "pipebench.plan(nn.Linear(4, 3), ['a'], stages=2, batch=8)", "err"),
                   ("plan_model_instance_no_example", "pipebench.plan(nn.Linear(4, 3), stages=2, batch=8)", "err"),
                   ("plan_model_lambda_ok", "pipebench.plan(lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(8, 4), stages=2, batch=8)", "any"),
                   ("plan_model_class_not_module", "pipebench.plan(dict, torch.randn(8, 4), stages=2, batch=8)", "err"),
                   ("plan_loss_fn_not_callable", "pipebench.plan(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 3)), torch.randn(8, 4), stages=2, batch=8, loss_fn=3)", "err"),
                   ("plan_loss_fn_raises", "pipebench.plan(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 3)), torch.randn(8, 4), stages=2, batch=8, loss_fn=lambda o, t: 1/0)", "err"),
                   ("plan_note_not_callable", Z + ", stages=2, batch=8, note=5)", "err"),
                   ("plan_progress_raises", Z + ", stages=2, batch=8, fresh=True, progress=lambda a, b, c: 1/0)", "any"),
                   ("advise_strategies_str", A2 + ", strategies='single')", "any"),
                   ("advise_strategies_bogus", A2 + ", strategies=['warp'])", "err"),
                   ("advise_strategies_empty", A2 + ", strategies=[])", "err"),
                   ("advise_mb_neg", A2 + ", micro_batches=[-1])", "err"),
                   ("profile_batch_zero", "pipebench.profile('mlp', flavour='tiny', device='cpu', batch=0)", "err"),
                   ("profile_rank_wrong", "pipebench.profile('mlp', flavour='tiny', device='cpu', batch=8, rank=3)", "err"),
                   ("profile_on_layers_not_callable", "pipebench.profile('mlp', flavour='tiny', device='cpu', batch=8, on_layers=3, fresh=True)", "err"),
                   ("run_models_str", "pipebench.run('mlp', strategies=['single'], quick=True, out='sp/ar1', steps=1, warmup=0, rounds=1)", "any"),
                   ("run_models_empty", "pipebench.run([], strategies=['single'], quick=True, out='sp/ar2')", "err"),
                   ("run_strategies_str", "pipebench.run(['mlp'], strategies='single', quick=True, out='sp/ar3', steps=1, warmup=0, rounds=1)", "any"),
                   ("run_out_path_ok", "pipebench.run(['mlp'], strategies=['single'], quick=True, out=Path('sp/ar4'), steps=1, warmup=0, rounds=1)", "ok"),
                   ("run_out_int", "pipebench.run(['mlp'], strategies=['single'], quick=True, out=5)", "err"),
                   ("run_unknown_option", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/ar5', stepz=1)", "err"),
                   ("run_machine_str", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/ar6', machine='h100')", "err"),
                   ("run_quick_str", "pipebench.run(['mlp'], strategies=['single'], quick='yes', out='sp/ar7')", "err"),
                   ("run_steps_neg", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/ar8', steps=-1)", "err"),
                   ("run_min_seconds_nan", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/ar9', min_seconds=float('nan'))", "err"),
                   ("run_note_none_ok", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/ar10', steps=1, warmup=0, rounds=1, note=None)", "any"),
                   ("run_resume_and_again", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='sp/ar11', resume=True, again=True)", "err"),
                   ("run_model_object", "pipebench.run([nn.Linear(4, 3)], strategies=['single'], quick=True, out='sp/ar12')", "err"),
                   ("request_bad_devices", "Request(devices='cpu:abc')", "err"),
                   ("training_bad_optimizer", "Training(optimizer='lion')", "err")):
    case(f"api11_{n}", f"{LOCK} $PY m/apih.py {shlex.quote(code)}", e, timeout=200 if "run(" in code else 150, setup=SETUP)
# ============ (14) more train/run outputs
c11("save", "csv_over_results_csv", f"{T} --csv sp/res.csv", check=unchanged("sp/res.csv"))
c11("save", "csv_over_users_notes", f"{T} --csv sp/notes.txt", check=unchanged("sp/notes.txt"))
c11("save", "csv_eq_save", f"{T} --csv sp/z.pt --save sp/z.pt", check=absent("sp/z.pt"))
c11("save", "save_over_results_csv", f"{T} --save sp/res.csv", check=unchanged("sp/res.csv"))
c11("save", "save_over_profile_json", f"{T} --save sp/p.json", check=unchanged("sp/p.json"))
c11("save", "csv_dev_stdout_ok", f"{T} --csv /dev/stdout", "ok", grep(r"step,epoch"))
c11("save", "csv_eq_data_file", f"{T.replace('m/data.py', 'sp/dd.py')} --csv sp/dd.py", check=unchanged("sp/dd.py"), setup="cp m/data.py sp/dd.py")
c11("save", "save_eq_model_file", f"{T.replace('m/good.py', 'sp/gg.py')} --save sp/gg.py", check=unchanged("sp/gg.py"), setup="cp m/good.py sp/gg.py")
c11("save", "csv_in_missing_folder_ok", f"{T} --csv sp/new/deeper/l.csv", "any")
c11("run11", "models_dup", f"{RQ.replace('--models mlp', '--models mlp,mlp')} --out sp/o", "any")
c11("run11", "models_empty", f"{RQ.replace('--models mlp', '--models ,')} --out sp/o", check=absent("sp/o"))
c11("run11", "strategies_dup", f"{RQ.replace('--strategies single', '--strategies single,single')} --out sp/o", "any")
c11("run11", "out_is_users_file", f"{RQ} --out sp/notes.txt", check=unchanged("sp/notes.txt"))
c11("run11", "out_is_report_folder", f"{RQ} --out sp/rep0", "any", check=unchanged("sp/rep0/report.md"))
c11("run11", "resume_other_folder_ok", f"{RQ} --out sp/r0 --resume", "any", check=unchanged("sp/r0/2026-12-07-vm-cpu2proc.csv"))
c11("run11", "flavour_bogus", f"{RQ} --flavour huge --out sp/o", check=absent("sp/o"))
c11("run11", "set_unknown", f"{RQ} --set nope=1 --out sp/o", check=absent("sp/o"))
c11("run11", "report_no_args_empty_cwd", "cd sp/dir && $P report", check=absent("sp/dir/pipebench-results-report"))
# ============ (15) harness fix: resume fixtures copied with cp -a (a plain cp made ck.pt newer than its state)
RS = SETUP + "; cp -a ck.pt sp/ck.pt"
T4 = T.replace('--steps 2', '--steps 4')
for n, cmd in (("other_model", "$P train --model mlp --flavour tiny --data m/data.py:data --batch 8 --steps 3 --strategy single --device cpu --save sp/ck.pt --resume"),
               ("other_strategy_ddp", f"{T4.replace('--strategy single', '--strategy ddp')} --cpu-processes 2 --save sp/ck.pt --resume"),
               ("other_strategy_pp", f"{T4.replace('--strategy single', '--strategy pp-gpipe')} --cpu-processes 2 --save sp/ck.pt --resume"),
               ("other_batch", f"{T4.replace('--batch 8', '--batch 16')} --save sp/ck.pt --resume"),
               ("other_optimizer", f"{T4} --optimizer adamw --save sp/ck.pt --resume"),
               ("same_model_ok", f"{T4} --save sp/ck.pt --resume"),
               ("fewer_steps_than_done", f"{T.replace('--steps 2', '--steps 1')} --save sp/ck.pt --resume"),
               ("latest_json_nan", f"{T4} --save sp/ck.pt --resume"),
               ("rank0_garbage", f"{T4} --save sp/ck.pt --resume")):
    extra = {"latest_json_nan": "; $PY -c \"import json;p='sp/ck.pt.train/latest.json';d=json.load(open(p));[d.__setitem__(k,float('nan')) for k in d if isinstance(d[k],int)];json.dump(d,open(p,'w'))\"",
             "rank0_garbage": "; for f in sp/ck.pt.train/*.pt; do echo junk > $f; done"}.get(n, "")
    case(f"res11h_{n}", cmd, "ok" if n == "same_model_ok" else "err", setup=RS + extra, timeout=150)
