"""The eighth pass's inputs (issue 42's kinds, inputs of this pass's own). $P = pipebench under flock+timeout, run
from /tmp/b8/work (fixtures.sh builds it); $PY = the worktree's python."""
import hashlib, os, re, shlex
from driver import case

W = "/tmp/b8/work/"
LOCK = "OMP_NUM_THREADS=1 flock /tmp/pipebench-cpu.lock timeout 150"
PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu"
PP = "$P plan --profile p.json --stages 2"
G = "--model m/good.py:Net --input-shape 4"
OP = f"$P plan {G} --stages 2 --batch 8 --device cpu"
T = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu"
RQ = "$P run --quick --models mlp --strategies single --device cpu"
RES = "r0/2026-12-07-vm-cpu2proc"


def digest(paths):
    out = {}
    for p in paths:
        try:
            st = os.lstat(W + p)
            kind = "link:" + os.readlink(W + p) if os.path.islink(W + p) else oct(st.st_mode)[:-4]
            body = hashlib.sha256(open(W + p, "rb").read()).hexdigest() if os.path.isfile(W + p) and not os.path.islink(W + p) else ""
            out[p] = (kind, body)
        except OSError as e:
            out[p] = repr(e)
    return out


def unchanged(*paths):
    """check: the paths keep their kind (file, link and its target, FIFO, device) and their bytes."""
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


def sig_ok(rc_want):
    """check for m/sig.sh: the exit status wanted, nothing of ours alive 5 s later, no pipebench-* left in TMPDIR."""
    def check(r):
        m = re.search(r"RC=(\S+) LEFT=(\d+) PBTMP=(\d+) .*ERRLINES=(\d+) TB=(\d+)", r["out"])
        if not m:
            return False, "no harness line"
        rc, left, pbt, nl, tb = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
        ok = (rc in rc_want) and left == 0 and pbt == 0 and tb == 0
        return ok, r["out"].strip()[:400]
    return check


# ================================================================ (1) interrupts
RUN = "$PY -m pipebench run --quick --models mlp --strategies single,ddp,pp-1f1b --device cpu --out X --fresh"
TRAIN = (f"$PY -m pipebench train {G} --data m/data.py:data --batch 8 --steps 400 --strategy pp-1f1b --device cpu "
         "--stages 2 --csv X.csv --save X.pt --log-every 50")
def sig(name, tgt, s, delay, second="", cmd=RUN, want=("130",)):
    out = f"s8_{name}"
    c = cmd.replace(" X", f" {out}").replace("X.", f"{out}.")
    case(f"sig8_{name}", f"rm -rf {out} {out}.csv {out}.pt; flock /tmp/pipebench-cpu.lock timeout 200 bash m/sig.sh {tgt} {s} {delay} {second} -- {c}",
         "custom", sig_ok(want), timeout=200)
sig("run_int_0.6", "p", "INT", 0.6)                       # while the commands are imported
sig("run_int_g_4", "g", "INT", 4)                         # Ctrl-C to the group, before profiling
sig("run_term_8", "p", "TERM", 8)                         # profiling
sig("run_term_g_17", "g", "TERM", 17)                     # link probe, group
sig("run_int_int_16", "p", "INT", 16, "INT 0.15")         # link probe, twice
sig("run_term_term_23", "p", "TERM", 23, "TERM 0.1")      # workers starting, twice
sig("run_int_term_29", "g", "INT", 29, "TERM 0.5")        # measuring, INT then TERM to the group
sig("run_int_36.5", "p", "INT", 36.5)                     # last round / writing rows
sig("run_hup_9", "p", "HUP", 9, want=("130", "129"))      # terminal closed while profiling
sig("run_kill_7", "p", "KILL", 7, want=("137",))
sig("run_kill_27", "p", "KILL", 27, want=("137",))
sig("run_kill_16", "p", "KILL", 16, want=("137",))        # the link probe's folder and peers, parent gone at once
sig("run_hup_16", "p", "HUP", 16, want=("130", "129"))    # the same, by SIGHUP (not caught: its default action)
sig("train_int_1", "p", "INT", 1, cmd=TRAIN)
sig("train_term_6", "p", "TERM", 6, cmd=TRAIN)
sig("train_int_int_12", "g", "INT", 12, "INT 0.2", cmd=TRAIN)
sig("train_hup_10", "p", "HUP", 10, cmd=TRAIN, want=("130", "129"))
sig("train_kill_10", "p", "KILL", 10, cmd=TRAIN, want=("137",))

# ================================================================ (2) the caller's state through the API
def st(name, call, pre="x = torch.randn(8, 4)", expect="ok"):
    case(f"state8_{name}", f"{LOCK} $PY m/apistate.py {shlex.quote(call)} {shlex.quote(pre)}", expect, timeout=150)
st("odd_globals_plan_zoo", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)",
   "torch.set_num_threads(1); torch.set_default_dtype(torch.float64); torch.set_grad_enabled(False); torch.set_float32_matmul_precision('medium')")
st("odd_globals_profile_file", "pipebench.profile('m/good.py:Net', x, batch=8)",
   "x = torch.randn(8, 4, dtype=torch.float64); torch.set_default_dtype(torch.float64); torch.autograd.set_detect_anomaly(True)")
st("chdir_caller_plan_file", "pipebench.plan('m/good.py:Net', x, stages=2, batch=8)", "x = torch.randn(8, 4); os.chdir('/tmp/b8/work')")
st("nograd_ctx_advise", "with torch.no_grad(): pipebench.advise('mlp', flavour='tiny', stages=2, batch=8)")
st("inference_ctx_plan_module", "with torch.inference_mode(): pipebench.plan(net, x, stages=2, batch=8)", "import fwd8; net = fwd8.Bn(); x = torch.randn(8, 4)")
st("numpy_rng_plan_module", "pipebench.plan(net, x, stages=2, batch=8)", "import fwd8; net = fwd8.Bn().eval(); x = torch.randn(8, 4); np.random.seed(99); random.seed(3)")
st("env_cache_var_plan", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)", "x = 0; os.environ['PIPEBENCH_CACHE'] = '/tmp/b8/work/cache8'")
st("refused_plan_keeps_state", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=7, micro_batches=2)", "torch.set_num_threads(1)")

def ms(name, build, call):
    case(f"model8_{name}", f"{LOCK} $PY m/mstate.py {shlex.quote(build)} {shlex.quote(call)}", "ok", timeout=150)
BN = "import fwd8; torch.manual_seed(0); net = fwd8.Bn(); net(torch.randn(16, 4)); x = torch.randn(8, 4)"
ms("bn_eval_plan", BN + "; net.eval()", "pipebench.plan(net, x, stages=2, batch=8)")
ms("bn_train_profile", BN, "pipebench.profile(net, x, batch=8)")
ms("bn_eval_advise", BN + "; net.eval()", "pipebench.advise(net, x, stages=2, batch=8)")
ms("bn_frozen_grads_plan", BN + "; net.a.weight.requires_grad_(False); net(x).sum().backward()", "pipebench.plan(net, x, stages=2, batch=8)")
ms("hf_gpt2_eval_plan", "import hf8; net = hf8.gpt2(); x = torch.randint(0, 128, (4, 16))", "pipebench.plan(net, x, stages=2, batch=4)")
ms("seq_mixed_modes_plan", "net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(), nn.Linear(8, 3)); net(torch.randn(8, 4)); net[1].eval(); x = torch.randn(8, 4)",
   "pipebench.plan(net, x, stages=2, batch=8)")

# ================================================================ (3) special files as inputs and outputs
SETUP = ("rm -rf sp; mkdir -p sp/dir; mkfifo sp/fifo sp/fifo.json sp/fifo.csv sp/fifo.py; ln -s /dev/zero sp/zero.json; ln -s /dev/zero sp/zero.csv; "
         "ln -s /dev/zero sp/zero.py; ln -s /proc/self/fd/1 sp/stdout; ln -s /dev/null sp/null.json; printf 'PK\\005\\006' > sp/a.zip; "
         "head -c 18 /dev/zero > sp/empty.zip; printf '\\211PNG\\r\\n\\032\\n\\0\\0\\0\\rIHDR' > sp/img.png; cp p.json sp/p.json; cp plan.json sp/plan.json; "
         "cp r0/*.csv sp/res.csv; cp r0/*.json sp/res.json; ln -s nowhere sp/dangling.json; ln -s dir sp/dirlink; mknod sp/nulldev c 1 3; "
         "(cd sp && python3 -c \"import zipfile; zipfile.ZipFile('real.zip','w').writestr('x.txt','hello')\")")
def sp(name, cmd, expect="err", check=None, timeout=120):
    case(f"file8_{name}", cmd, expect, check, setup=SETUP, timeout=timeout)
sp("plan_json_fifo", f"{PP} --json sp/fifo.json", check=unchanged("sp/fifo.json"))
sp("plan_json_nulldev", f"{PP} --json sp/nulldev", "custom", unchanged("sp/nulldev"))
sp("plan_json_link_null", f"{PP} --json sp/null.json", "custom", unchanged("sp/null.json"))
sp("plan_saveprofile_link_stdout", f"{PL} --save-profile sp/stdout", "custom", unchanged("sp/stdout"))
sp("plan_json_proc_comm", f"{PP} --json /proc/self/comm")
sp("plan_json_sysfs", f"{PP} --json /sys/plan8.json")
sp("plan_json_dangling_link", f"{PP} --json sp/dangling.json", "custom", unchanged("sp/dangling.json"))
sp("plan_json_results_csv", f"{PP} --json sp/res.csv", check=unchanged("sp/res.csv"))
sp("plan_json_a_profile", f"{PP} --json sp/p.json", check=unchanged("sp/p.json"))
sp("plan_saveprofile_results_json", f"{PL} --save-profile sp/res.json", check=unchanged("sp/res.json"))
sp("plan_json_over_plan_ok", f"{PP} --json sp/plan.json", "ok")
sp("plan_profile_proc_status", f"{PP.replace('p.json', '/proc/self/status')}")
sp("plan_profile_proc_stdin_zero", f"{PP.replace('p.json', '/proc/self/fd/0')} < /dev/zero")
sp("plan_profile_png", f"{PP.replace('p.json', 'sp/img.png')}")
sp("plan_profile_results_csv", f"{PP.replace('p.json', 'sp/res.csv')}")
sp("plan_export_fifo", f"{PP} --export deepspeed sp/fifo", check=unchanged("sp/fifo"))
sp("plan_export_same_as_json_spelt_apart", f"{PP} --json sp/o.json --export torchtitan sp/dir/../o.json", check=absent("sp/o.json"))
sp("plan_json_link_to_profile", f"ln -s p.json sp/pl.json; {PP.replace('p.json', 'sp/p.json')} --json sp/pl.json", check=unchanged("sp/p.json"))
sp("plan_saveprofile_eq_export", f"{PL} --save-profile sp/q.json --export megatron ./sp/q.json", check=absent("sp/q.json"))
sp("report_fifo_csv", "$P report sp/fifo.csv --out sp/rep1", check=absent("sp/rep1"))
sp("report_zero_csv", "$P report sp/zero.csv --out sp/rep2", check=absent("sp/rep2"))
sp("report_out_is_input", "$P report sp/res.json --out sp/res.json", check=unchanged("sp/res.json"))
sp("report_out_fifo", "$P report sp/res.json --out sp/fifo", check=unchanged("sp/fifo"))
sp("report_profile_json", "$P report sp/p.json --out sp/rep6", check=absent("sp/rep6"))
sp("report_nothere_out", "$P report sp/nothere.csv --out sp/qr8", check=absent("sp/qr8"))
sp("train_csv_fifo", f"{T} --csv sp/fifo.csv", check=unchanged("sp/fifo.csv"))
sp("train_csv_link_stdout", f"{T} --csv sp/stdout", "custom", unchanged("sp/stdout"))
sp("train_save_dir", f"{T} --save sp/dir")
sp("train_save_fifo", f"{T} --save sp/fifo", check=unchanged("sp/fifo"))
sp("train_save_png", f"{T} --save sp/img.png", check=unchanged("sp/img.png"))
sp("train_save_real_zip", f"{T} --save sp/real.zip", check=unchanged("sp/real.zip"))
sp("train_save_plan_json", f"{T} --save sp/plan.json", check=unchanged("sp/plan.json"))
sp("train_save_eq_csv", f"{T} --save sp/tt --csv ./sp/tt", check=absent("sp/tt"))
sp("train_data_fifo_py", f"$P train {G} --data sp/fifo.py:data --batch 8 --steps 2 --strategy single --device cpu")
sp("train_data_zero_py", f"$P train {G} --data sp/zero.py:data --batch 8 --steps 2 --strategy single --device cpu")
sp("train_data_tokens_fifo", "$P train --model gpt --flavour tiny --data tokens:sp/fifo --batch 8 --steps 2 --strategy single --device cpu")
sp("train_resume_real_zip", f"{T} --save sp/real.zip --resume", check=unchanged("sp/real.zip"))
sp("train_resume_profile", f"{T} --save sp/p.json --resume", check=unchanged("sp/p.json"))
case("file8_train_resume_truncated_ckpt", f"{T} --save sp/ck.pt --resume", "err", unchanged("sp/ck.pt"), setup=SETUP + "; head -c 300 ck.pt > sp/ck.pt")
case("file8_train_resume_other_model_ckpt", f"$P train --model mlp --flavour tiny --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu --save sp/ck2.pt --resume",
   "err", unchanged("sp/ck2.pt"), setup=SETUP + "; cp ck.pt sp/ck2.pt")
sp("run_out_fifo", f"{RQ} --out sp/fifo", check=unchanged("sp/fifo"))
sp("run_out_zero_link", f"{RQ} --out sp/zero.json", check=unchanged("sp/zero.json"))
sp("run_out_zip", f"{RQ} --out sp/real.zip", check=unchanged("sp/real.zip"))

# ================================================================ (4) --resume into damaged folders
RSET = "rm -rf rr; cp -a r0 rr; "
def rs(name, damage, expect="err", check=None):
    case(f"resume8_{name}", f"{RSET}{damage}; $P run --models mlp --flavour tiny --batch 8 --strategies single,ddp --steps 1 --warmup 0 --rounds 1 --device cpu --out rr --resume",
         expect, check, timeout=150)
D = "rr/2026-12-07-vm-cpu2proc"
rs("json_link_zero", f"rm {D}.json; ln -s /dev/zero {D}.json")
rs("csv_is_dir", f"rm {D}.csv; mkdir {D}.csv")
rs("profiles_is_fifo", f"rm -r {D}-profiles; mkfifo {D}-profiles")
rs("plans_link_root", f"rm -r {D}-plans; ln -s / {D}-plans", "ok")  # a link to a folder is a folder; ddp writes no plan
rs("claims_dangling_link", f"rm -r rr/.2026-12-07-vm-cpu2proc.json.claims; ln -s /nonexistent8/x rr/.2026-12-07-vm-cpu2proc.json.claims")
rs("claims_is_fifo", f"rm -r rr/.2026-12-07-vm-cpu2proc.json.claims; mkfifo rr/.2026-12-07-vm-cpu2proc.json.claims")
rs("json_is_zip", f"python3 -c \"import zipfile; zipfile.ZipFile('{D}.json','w').writestr('a','b')\"")
rs("csv_formula_in_model", f"sed -i '2s/^mlp/=HYPERLINK(\"x\")/' {D}.csv", "any")
rs("out_link_to_fifo", f"rm -rf rr; mkfifo rr.fifo; ln -s rr.fifo rr")

# ================================================================ (5) valid inputs that must be accepted
def ok(name, cmd, check=None, timeout=200):
    case(f"valid8_{name}", cmd, "ok", check, timeout=timeout)
ok("run_batch5_single_pp_chunks1", "rm -rf v1; $P run --quick --models mlp --strategies single,pp-1f1b --batch 5 --chunks 1 --device cpu --out v1",
   grep(r"\| single \| cpu \| ok "))
ok("run_batch3_single", "rm -rf v2; $P run --quick --models mlp --strategies single,ddp --batch 3 --device cpu --out v2", grep(r"\| single \| cpu \| ok "))
ok("plan_chunks1_gpipe", f"{PL} --chunks 1 --schedule gpipe")
ok("plan_batch1", "$P plan --model mlp --flavour tiny --stages 2 --batch 1 --device cpu")
ok("tv_resnet18", "$P plan --model torchvision.models:resnet18 --input-shape 3,32,32 --num-classes 10 --stages 2 --batch 4 --device cpu")
ok("tv_vit_b16_file", "printf 'import torchvision\\ndef net(): return torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=5)\\n' > m/vit8.py; "
   "$P plan --model m/vit8.py:net --input-shape 3,32,32 --stages 2 --batch 4 --device cpu")
ok("hf_gpt2_tiny", "$P plan --model m/hf8.py:gpt2 --input-shape 16 --stages 2 --batch 4 --device cpu")
ok("hf_llama_tiny", "$P plan --model m/hf8.py:llama --input-shape 16 --stages 2 --batch 4 --device cpu")
ok("hf_bert_cls_tiny", "$P plan --model m/hf8.py:bert_cls --input-shape 16 --stages 2 --batch 4 --device cpu")
ok("train_batch7_leftover", f"$P train {G} --data m/data8.py:data --batch 7 --epochs 1 --strategy single --device cpu")
ok("train_pp_chunks_odd_batch", f"$P train {G} --data m/data8.py:data --batch 6 --steps 3 --strategy pp-1f1b --device cpu --stages 2")
ok("report_train_log", "rm -rf tl8 tl8.csv; " + T.replace("--steps 2", "--steps 3") + " --csv tl8.csv && $P report tl8.csv --out tl8")

# ================================================================ (6) the API with wrong types and values
def api(name, code, expect="err"):
    case(f"api8_{name}", f"{LOCK} $PY m/apih.py {shlex.quote('x = torch.randn(8, 4); ' + code)}", expect, timeout=150)
Z = "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8"
api("batch_true", "pipebench.plan('m/good.py:Net', x, stages=2, batch=True)")
api("stages_true", "pipebench.plan('mlp', flavour='tiny', stages=True, batch=8)")
api("batch_numpy_int_ok", "pipebench.plan('mlp', flavour='tiny', stages=np.int64(2), batch=np.int32(8))", "ok")
api("batch_huge", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=10**40)")
api("link_inf", Z + ", link_gbps=float('inf'))", "any")
api("link_str", Z + ", link_gbps='fast')")
api("max_memory_nan", Z + ", max_memory=float('nan'))")
api("max_memory_neg", Z + ", max_memory=-5)")
api("max_memory_str", Z + ", max_memory='lots')")
api("speeds_nan", Z + ", speeds=[1.0, float('nan')])")
api("micro_batches_empty", Z + ", micro_batches=[])")
api("micro_batches_bool", Z + ", micro_batches=True)")
api("repeats_zero", Z + ", repeats=0, fresh=True)")
api("granularity_neg", Z + ", granularity=-1)")
api("virtual_stages_bool", Z + ", virtual_stages=True, schedule='interleaved')")
api("devices_empty", "pipebench.plan('mlp', flavour='tiny', batch=8, devices=())")
api("unknown_kwarg", Z + ", chunk=4)")
api("model_int", "pipebench.plan(42, stages=2, batch=8)")
api("example_list_empty", "import good; pipebench.plan(good.Net(), [], stages=2, batch=8)")
api("example_nan", "import good; pipebench.plan(good.Net(), torch.full((8, 4), float('nan')), stages=2, batch=8)", "any")
api("example_wrong_batch", "import good; pipebench.plan(good.Net(), torch.randn(3, 4), stages=2, batch=8)", "any")
api("profiles_str", "pipebench.plan(profiles='p.json', stages=2)")
api("profile_micro_batches_zero", "pipebench.profile('mlp', flavour='tiny', batch=8, micro_batches=[0])")
api("advise_strategies_str", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8, strategies='single')")
api("training_bad_precision", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, training=pipebench.Training(precision='fp8'))")

# ================================================================ (7) model files that misbehave
E1 = {"PIPEBENCH_IMPORT_SECONDS": "4"}
def mf(name, target, expect="err", env=None, check=None, cmd=None, timeout=150):
    case(f"mf8_{name}", (cmd or OP.replace(G, f"--model {target} --input-shape 4")), expect, check, env=env, timeout=timeout,
         setup="cp /work/wt-battery8/results/2026-12-07-cpu2-bad-input-eighth-pass/m/mf8_selfdel.py m/")
mf("sleep_import_limit4", "m/mf8_sleep.py:Net", env=E1)
mf("busy_import_limit4", "m/mf8_busy.py:Net", env=E1)
mf("exit0_import", "m/mf8_exit0.py:Net")
mf("sysexit_import", "m/mf8_sysexit.py:Net")
mf("thread_nondaemon", "m/mf8_thread_nd.py:Net", "ok")
mf("fork_child_sleeps", "m/mf8_fork_sleep.py:Net", "ok", check=grep(r"stages"))
mf("chdir_import_rel_json", "m/mf8_chdir_tmp.py:Net", "ok", check=lambda r: (os.path.exists(W + "rel8.json") and not os.path.exists("/tmp/rel8.json"), f"here={os.path.exists(W + 'rel8.json')} tmp={os.path.exists('/tmp/rel8.json')}"),
   cmd="rm -f rel8.json /tmp/rel8.json; " + OP.replace(G, "--model m/mf8_chdir_tmp.py:Net --input-shape 4") + " --json rel8.json")
mf("bigalloc_import", "m/mf8_bigalloc.py:Net")
mf("bigparam_build", "m/mf8_bigparam.py:Big")
mf("sigterm_self_import", "m/mf8_killpg.py:Net")
mf("setenv_import", "m/mf8_setenv.py:Net", "ok")
mf("stdin_read_import", "m/mf8_stdin_read.py:Net", "any", env=E1, cmd=OP.replace(G, "--model m/mf8_stdin_read.py:Net --input-shape 4") + " < /dev/zero")
mf("import_timeout_option", "m/good.py:Net", cmd=OP + " --import-timeout 5")
mf("fwd_inf_plan", "m/fwd8.py:InfFwd", "any")
mf("fwd_fork_plan", "m/fwd8.py:ForkFwd", "any")
mf("fwd_thread_plan", "m/fwd8.py:ThreadFwd", "any", timeout=100)
mf("fwd_chdir_plan_json", "m/fwd8.py:ChdirFwd", "ok", check=lambda r: (os.path.exists(W + "rel9.json"), f"here={os.path.exists(W + 'rel9.json')}"),
   cmd="rm -f rel9.json /tmp/rel9.json; " + OP.replace(G, "--model m/fwd8.py:ChdirFwd --input-shape 4") + " --json rel9.json")
mf("fwd_bigalloc_plan", "m/fwd8.py:BigFwd")
mf("fwd_sleep_timeout", "m/fwd8.py:SleepFwd", cmd=OP.replace(G, "--model m/fwd8.py:SleepFwd --input-shape 4") + " --timeout 3 --fresh")
mf("train_nan_later_csv", "", "any", check=grep(r"diverg|nan|NaN"),
   cmd=f"rm -f nl8.csv; $P train --model m/fwd8.py:NanLater --input-shape 4 --data m/data.py:data --batch 8 --steps 6 --strategy single --device cpu --csv nl8.csv; cat nl8.csv")
mf("run_nan_later_row", "", "any", check=grep(r"diverg"),
   cmd="rm -rf nr8; $P run --quick --models m/fwd8.py:NanLater --input-shape 4 --strategies single --device cpu --out nr8; cat nr8/*.csv")
mf("train_nan_data", "", "any", check=grep(r"diverg|nan|NaN"),
   cmd=f"$P train {G} --data m/data8.py:nan_data --batch 8 --steps 4 --strategy single --device cpu")

# ================================================================ (8) CSV cells with formula characters
def formula_cells(cell):
    """check: summary.csv and report.md of the report hold the cell, and no CSV cell starts a formula."""
    import csv
    def check(r):
        try:
            rows = list(csv.reader(open(W + "cf8rep/summary.csv", newline="")))
        except OSError as e:
            return False, repr(e)
        bad = []
        for row in rows:
            for v in row:
                if v and v[0] in "=+-@\t\r":
                    try: float(v)
                    except ValueError: bad.append(v)
        seen = any(cell.strip("\t\r") in v for row in rows for v in row)
        return not bad, f"formula cells {bad[:3]}; cell seen={seen}"
    return check
def csvf(name, cell, expect="custom"):
    q = shlex.quote(cell)
    f = RES.replace("r0", "cf8") + ".csv"
    case(f"csv8_{name}", f"rm -rf cf8 cf8rep; cp -a r0 cf8; rm cf8/*.json; python3 -c \"import csv,sys; r=list(csv.reader(open('{f}'))); r[1][0]=sys.argv[1]; "
         f"csv.writer(open('{f}','w',newline='')).writerows(r)\" {q}; $P report {f} --out cf8rep",
         expect, formula_cells(cell), timeout=120)
csvf("plus_sum", "+SUM(A1:A9)")
csvf("at_cmd", "@cmd|' /C calc'!A0")
csvf("tab_eq", "\t=1+2")
csvf("cr_eq", "x\r=1+1")
csvf("fullwidth_eq", "\uff1d1+1")  # U+FF1D is text to a spreadsheet: seen here only to show it arrives
