"""The ninth pass's inputs (issue 42's kinds, inputs of this pass's own). $P = pipebench under flock+timeout, run
from /tmp/b9/work (fixtures.sh builds it); $PY = the worktree's python."""
import hashlib, os, re, shlex
from driver import case

W = "/tmp/b9/work/"
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



def popen_left(pattern):
    """check: the harness line LEFT=[pids] of processes matching `pattern` 5 s after the command ended."""
    def check(r):
        m = re.search(r"LEFT=\[([^\]]*)\]", r["out"])
        if not m:
            return False, "no LEFT line"
        return (m.group(1).strip() == "", f"left alive: [{m.group(1).strip()}]" if m.group(1).strip() else "none left")
    return check
def after5(cmd, pattern):
    return f"{cmd}; rc=$?; sleep 5; left=$(pgrep -fx {shlex.quote(pattern)} | tr '\\n' ' '); echo LEFT=[$left]; [ -n \"$left\" ] && kill $left; exit $rc"


# ================================================================ (1) interrupts (new moments; the two the eighth did not run)
RUN = "$PY -m pipebench run --quick --models mlp --strategies single,ddp,pp-1f1b --device cpu --out X --fresh"
TRAIN = (f"$PY -m pipebench train {G} --data m/data.py:data --batch 8 --steps 400 --strategy pp-1f1b --device cpu "
         "--stages 2 --csv X.csv --save X.pt --log-every 50")
def sig(name, tgt, s, delay, second="", cmd=RUN, want=("130",)):
    out = f"s9_{name}"
    c = cmd.replace(" X", f" {out}").replace("X.", f"{out}.")
    case(f"sig9_{name}", f"rm -rf {out} {out}.csv {out}.pt; flock /tmp/pipebench-cpu.lock timeout 200 bash m/sig.sh {tgt} {s} {delay} {second} -- {c}",
         "custom", sig_ok(want), timeout=200)
sig("run_kill_16", "p", "KILL", 16, want=("137",))        # the eighth's sig8_run_kill_16: link probe, parent gone at once
sig("run_hup_16", "p", "HUP", 16, want=("130", "129"))    # the eighth's sig8_run_hup_16
sig("run_int_2", "p", "INT", 2)                           # after the imports, before profiling starts
sig("run_int_g_12", "g", "INT", 12)                       # Ctrl-C to the group as the link probe starts
sig("run_term_g_14", "g", "TERM", 14, "TERM 0.05")        # the group, twice, 50 ms apart, in the probe
sig("run_kill_g_14", "g", "KILL", 14, want=("137",))      # SIGKILL to every process at once, in the probe
sig("run_int_int_int_20", "p", "INT", 20, "INT 0.05")     # twice fast, as the workers start
sig("run_hup_g_25", "g", "HUP", 25, want=("130", "129"))  # terminal closed: HUP to the group while measuring
sig("run_term_33", "p", "TERM", 33)                       # late measuring
sig("run_int_g_term_5", "g", "INT", 5, "TERM 0.3")        # profiling, Ctrl-C then SIGTERM
sig("train_int_0.5", "p", "INT", 0.5, cmd=TRAIN)          # during the commands' import
sig("train_int_g_3", "g", "INT", 3, cmd=TRAIN)            # Ctrl-C to the group, train's checks / workers starting
sig("train_term_g_8", "g", "TERM", 8, "TERM 0.1", cmd=TRAIN)
sig("train_kill_4", "p", "KILL", 4, cmd=TRAIN, want=("137",))
sig("train_hup_g_7", "g", "HUP", 7, cmd=TRAIN, want=("130", "129"))

# ================================================================ re-verifying the eighth's defects (D1-D3)
case("repro9_D1_exhook_1", f"{LOCK} $PY m/exhook.py", "custom", lambda r: ("[rank0]" not in r["err"] and "the caller's own error" in r["err"], r["err"].strip().splitlines()[0][:200] if r["err"].strip() else ""))
case("repro9_D1_exhook_2", f"{LOCK} $PY m/exhook.py", "custom", lambda r: ("[rank0]" not in r["err"] and "the caller's own error" in r["err"], r["err"].strip().splitlines()[0][:200] if r["err"].strip() else ""))
for i in (1, 2, 3):
    case(f"repro9_D3_int1_{i}", "flock /tmp/pipebench-cpu.lock bash m/int1.sh 1", "custom",
         lambda r: ("400/400" not in r["out"] and "rc=130" in r["out"], " | ".join(r["out"].strip().splitlines()[-4:])[:300]), timeout=200)

# ================================================================ (2) the caller's state through the API
def st(name, call, pre="x = torch.randn(8, 4)", expect="ok"):
    case(f"state9_{name}", f"{LOCK} $PY m/apistate.py {shlex.quote(call)} {shlex.quote(pre)}", expect,
         grep(r"CALL OK|CALL REFUSED \[(UserError|TypeError|ValueError)\]"), timeout=150)
st("own_excepthook_plan_fresh", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)", "x = 0\ndef myhook(*a): print('MINE', a)\nsys.excepthook = myhook")
st("excepthook_profile_fresh", "pipebench.profile('mlp', flavour='tiny', batch=8, fresh=True)")
st("excepthook_advise_fresh", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8, fresh=True)")
st("own_signal_handlers_plan", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)",
   "x = 0; h = lambda *a: None; signal.signal(signal.SIGTERM, h); signal.signal(signal.SIGINT, h); signal.signal(signal.SIGHUP, h)")
st("deterministic_threads2_plan", "pipebench.plan(net, x, stages=2, batch=8)", "import fwd8; net = fwd8.Bn(); x = torch.randn(8, 4); torch.use_deterministic_algorithms(True); torch.set_num_threads(2)")
st("bf16_default_dtype_plan", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)", "x = 0; torch.set_default_dtype(torch.bfloat16)")
st("warnings_error_plan", "pipebench.plan('m/good.py:Net', x, stages=2, batch=8)", "x = torch.randn(8, 4); warnings.simplefilter('error')")
st("logging_debug_profile", "pipebench.profile('m/good.py:Net', x, batch=8)", "x = torch.randn(8, 4); logging.basicConfig(level=logging.DEBUG)")
st("default_device_cpu_rng_plan", "pipebench.plan(net, x, stages=2, batch=8)", "import fwd9; torch.set_default_device('cpu'); net = fwd9.Lstm(); x = torch.randn(8, 5, 4); torch.manual_seed(4)")
st("refused_profile_keeps_state", "pipebench.profile('mlp', flavour='tiny', batch=8, micro_batches=[3, 0])", "torch.set_num_threads(1); torch.set_default_dtype(torch.float64); torch.set_grad_enabled(False)")

def ms(name, build, call):
    case(f"model9_{name}", f"{LOCK} $PY m/mstate.py {shlex.quote(build)} {shlex.quote(call)}", "ok", grep("CALL OK"), timeout=150)
ms("counter_buffer_train_plan", "import fwd9; net = fwd9.CounterBuf(); x = torch.randn(8, 4)", "pipebench.plan(net, x, stages=2, batch=8)")
ms("spectral_norm_train_profile", "import fwd9; net = fwd9.SpecNorm(); net(torch.randn(8, 4)); x = torch.randn(8, 4)", "pipebench.profile(net, x, batch=8)")
ms("tied_weights_plan", "import fwd9; net = fwd9.Tied(); x = torch.randn(8, 4)", "pipebench.plan(net, x, stages=2, batch=8)")
ms("lstm_dropout_train_advise", "import fwd9; net = fwd9.Lstm(); x = torch.randn(8, 5, 4)", "pipebench.advise(net, x, stages=2, batch=8)")
ms("bn_momentum_none_plan", "import fwd9; net = fwd9.BnMomNone(); net(torch.randn(16, 4)); x = torch.randn(8, 4)", "pipebench.plan(net, x, stages=2, batch=8)")
ms("resnet18_train_plan", "import torchvision; net = torchvision.models.resnet18(num_classes=10); x = torch.randn(4, 3, 32, 32)", "pipebench.plan(net, x, stages=2, batch=4)")
ms("float64_model_hook_plan", "import fwd8; net = fwd8.Bn().double(); net.register_forward_hook(lambda m, i, o: None); x = torch.randn(8, 4, dtype=torch.float64)", "pipebench.plan(net, x, stages=2, batch=8)")

# ================================================================ (3) special files as inputs and outputs
SETUP = ("rm -rf sp; mkdir -p sp/dir; mkfifo sp/fifo sp/fifo.json sp/fifo.csv sp/fifo.py; ln -s /dev/zero sp/zero.json; ln -s /dev/zero sp/zero.csv; "
         "ln -s /dev/zero sp/zero.py; ln -s /proc/self/fd/1 sp/stdout; ln -s /dev/null sp/null.json; printf 'PK\\005\\006' > sp/a.zip; "
         "printf '\\211PNG\\r\\n\\032\\n\\0\\0\\0\\rIHDR' > sp/img.png; cp p.json sp/p.json; cp plan.json sp/plan.json; cp adv.json sp/adv.json; "
         "cp r0/*.csv sp/res.csv; cp r0/*.json sp/res.json; ln -s nowhere sp/dangling.json; ln -s dir sp/dirlink; mknod sp/nulldev c 1 3; "
         "printf 'my own notes\\n' > sp/notes.txt; printf '{\"mine\": 1}\\n' > sp/mine.json; ln -s res.csv sp/reslink.json; : > sp/empty.json; "
         "cp ck.pt sp/ck.pt; printf 'import torch\\n' > sp/user.py")
def sp(name, cmd, expect="err", check=None, timeout=120):
    case(f"file9_{name}", cmd, expect, check, setup=SETUP, timeout=timeout)
AP = "$P advise --profile p.json --stages 2"
# D2 re-verify (the eighth's three, and new spellings)
sp("plan_json_results_csv", f"{PP} --json sp/res.csv", check=unchanged("sp/res.csv"))
sp("plan_json_a_profile", f"{PP} --json sp/p.json", check=unchanged("sp/p.json"))
sp("plan_saveprofile_results_json", f"{PL} --save-profile sp/res.json", check=unchanged("sp/res.json"))
sp("plan_json_users_notes", f"{PP} --json sp/notes.txt", check=unchanged("sp/notes.txt"))
sp("plan_json_users_json", f"{PP} --json sp/mine.json", check=unchanged("sp/mine.json"))
sp("plan_json_link_to_results", f"{PP} --json sp/reslink.json", check=unchanged("sp/res.csv", "sp/reslink.json"))
sp("plan_json_an_advise", f"{PP} --json sp/adv.json", check=unchanged("sp/adv.json"))
sp("plan_saveprofile_a_plan", f"{PL} --save-profile sp/plan.json", check=unchanged("sp/plan.json"))
sp("plan_saveprofile_checkpoint", f"{PL} --save-profile sp/ck.pt", check=unchanged("sp/ck.pt"))
sp("plan_json_model_file_py", f"{PP} --json sp/user.py", check=unchanged("sp/user.py"))
sp("advise_json_results_csv", f"{AP} --json sp/res.csv", check=unchanged("sp/res.csv"))
sp("advise_json_a_plan", f"{AP} --json sp/plan.json", check=unchanged("sp/plan.json"))
sp("advise_json_over_advise_ok", f"{AP} --json sp/adv.json", "ok")
sp("plan_json_empty_file_ok", f"{PP} --json sp/empty.json", "ok")
sp("plan_saveprofile_over_profile_ok", f"{PL} --save-profile sp/p.json", "ok")
# --export: the same class of output, not covered by not_another_file?
sp("plan_export_results_csv", f"{PP} --export deepspeed sp/res.csv", check=unchanged("sp/res.csv"))
sp("plan_export_a_profile", f"{PP} --export torchtitan sp/p.json", check=unchanged("sp/p.json"))
sp("plan_export_users_notes", f"{PP} --export megatron sp/notes.txt", check=unchanged("sp/notes.txt"))
sp("plan_export_checkpoint", f"{PP} --export device-map sp/ck.pt", check=unchanged("sp/ck.pt"))
# train's outputs over other files
sp("train_csv_results_csv", f"{T} --csv sp/res.csv", check=unchanged("sp/res.csv"))
sp("train_csv_users_notes", f"{T} --csv sp/notes.txt", check=unchanged("sp/notes.txt"))
sp("train_save_users_json", f"{T} --save sp/mine.json", check=unchanged("sp/mine.json"))
sp("train_writejob_is_file", f"{T} --write-job sp/notes.txt", check=unchanged("sp/notes.txt"))
sp("train_writejob_fifo", f"{T} --write-job sp/fifo", check=unchanged("sp/fifo"))
# special files, new ones
sp("plan_json_dev_full", f"{PP} --json /dev/full")
sp("plan_stdout_dev_full", f"{PP} > /dev/full")
sp("plan_model_fifo", f"$P plan --model sp/fifo.py:Net --input-shape 4 --stages 2 --batch 8 --device cpu", timeout=60)
sp("plan_model_zero_link", f"$P plan --model sp/zero.py:Net --input-shape 4 --stages 2 --batch 8 --device cpu", timeout=60)
sp("plan_model_png", f"$P plan --model sp/img.png:Net --input-shape 4 --stages 2 --batch 8 --device cpu")
sp("plan_model_dir", f"$P plan --model sp/dir:Net --input-shape 4 --stages 2 --batch 8 --device cpu")
sp("plan_profile_eq_json", f"{PP.replace('p.json', 'sp/p.json')} --json ./sp/p.json", check=unchanged("sp/p.json"))
sp("plan_json_trailing_slash", f"{PP} --json sp/newdir/", check=absent("sp/newdir"))
sp("plan_json_missing_parent", f"{PP} --json sp/no/such/x.json", check=absent("sp/no"))
sp("report_input_eq_summary", "mkdir -p sp/rq; cp sp/res.csv sp/rq/summary.csv; $P report sp/rq/summary.csv --out sp/rq", check=unchanged("sp/rq/summary.csv"))
sp("report_stdin_dev", "$P report /dev/stdin --out sp/rep9 < sp/res.csv", "any")
sp("train_data_tokens_zero", "$P train --model gpt --flavour tiny --data tokens:sp/zero.json --batch 8 --steps 2 --strategy single --device cpu", timeout=60)
sp("train_data_dirlink", f"$P train {G} --data sp/dirlink --batch 8 --steps 2 --strategy single --device cpu")
sp("run_out_results_csv", f"{RQ} --out sp/res.csv", check=unchanged("sp/res.csv"))

# ================================================================ (4) --resume into damaged folders
RSET = "rm -rf rr; cp -a r0 rr; "
def rs(name, damage, expect="err", check=None):
    case(f"resume9_{name}", f"{RSET}{damage}; $P run --models mlp --flavour tiny --batch 8 --strategies single,ddp --steps 1 --warmup 0 --rounds 1 --device cpu --out rr --resume",
         expect, check, timeout=150)
D = "rr/2026-12-07-vm-cpu2proc"
rs("csv_truncated_midrow", f"python3 -c \"p='{D}.csv'; b=open(p,'rb').read(); open(p,'wb').write(b[:len(b)*2//3])\"", "any")
rs("json_garbage", f"printf '{{\"rows\": [' > {D}.json")
rs("json_empty_file", f": > {D}.json", "any")
rs("csv_header_only", f"sed -i '2,$d' {D}.csv", "any")
rs("csv_is_fifo", f"rm {D}.csv; mkfifo {D}.csv")
rs("csv_link_dev_null", f"rm {D}.csv; ln -s /dev/null {D}.csv", "any")
rs("out_is_a_file", "rm -rf rr; printf 'mine\\n' > rr", check=unchanged("rr"))
rs("profiles_garbage_inside", f"for f in {D}-profiles/*; do printf 'garbage' > $f; done; ls {D}-profiles >&2", "any")
rs("csv_bom_and_crlf", f"python3 -c \"p='{D}.csv'; t=open(p).read(); open(p,'w',newline='').write(chr(0xfeff)+t.replace(chr(10), chr(13)+chr(10)))\"", "ok")
rs("claims_holds_a_file", f"rm -rf rr/.2026-12-07-vm-cpu2proc.json.claims; mkdir rr/.2026-12-07-vm-cpu2proc.json.claims; mkfifo rr/.2026-12-07-vm-cpu2proc.json.claims/x", "any")

# ================================================================ (5) valid inputs that must be accepted
def ok(name, cmd, check=None, timeout=200):
    case(f"valid9_{name}", cmd, "ok", check, timeout=timeout)
ok("run_batch7_single_pp_chunks1", "rm -rf v1; $P run --quick --models mlp --strategies single,pp-1f1b --batch 7 --chunks 1 --device cpu --out v1",
   grep(r"\| single \| cpu \| ok "))
ok("run_batch1_single_gpipe_chunks1", "rm -rf v2; $P run --quick --models mlp --strategies single,pp-gpipe --batch 1 --chunks 1 --device cpu --out v2", grep(r"\| single \| cpu \| ok "))
ok("plan_chunks_auto_auto", f"{PL} --chunks auto,auto")
ok("plan_json_dev_stdout", f"{PP} --json /dev/stdout", grep(r'"format": "pipebench-plan"'))
ok("plan_json_unicode_space_name", f"rm -f 'é ü.json'; {PP} --json 'é ü.json' && test -s 'é ü.json'")
ok("advise_profile", f"{AP}")
ok("tv_mobilenet_v3_small", "$P plan --model torchvision.models:mobilenet_v3_small --input-shape 3,32,32 --num-classes 10 --stages 2 --batch 4 --device cpu")
ok("model_instance_attr", "$P plan --model m/mf9_instance.py:net --input-shape 4 --stages 2 --batch 8 --device cpu")
ok("train_epoch_whole_data", f"$P train {G} --data m/data.py:data --batch 32 --epochs 1 --strategy single --device cpu")
ok("report_results_json", "rm -rf rj9; $P report r0 --out rj9 && test -s rj9/summary.csv")
ok("report_bom_csv", "rm -rf bom9 bom9rep; cp -a r0 bom9; rm bom9/*.json; python3 -c \"import glob; p=glob.glob('bom9/*.csv')[0]; t=open(p).read(); open(p,'w').write(chr(0xfeff)+t)\"; $P report bom9 --out bom9rep")
ok("plan_json_over_own_plan", f"cp plan.json own9.json; {PP} --json own9.json")

# ================================================================ (6) the API with wrong types and values
def api(name, code, expect="err"):
    case(f"api9_{name}", f"{LOCK} $PY m/apih.py {shlex.quote('x = torch.randn(8, 4); ' + code)}", expect, timeout=150)
Z = "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8"
api("batch_float_integral", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8.0)")
api("batch_zero", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=0)")
api("stages_zero", "pipebench.plan('mlp', flavour='tiny', stages=0, batch=8)")
api("stages_numpy_float", "pipebench.plan('mlp', flavour='tiny', stages=np.float64(2.5), batch=8)")
api("link_neg", Z + ", link_gbps=-1)")
api("link_zero", Z + ", link_gbps=0)")
api("max_memory_inf", Z + ", max_memory=float('inf'))", "any")
api("speeds_empty", Z + ", speeds=[])")
api("speeds_wrong_len", Z + ", speeds=[1.0, 2.0, 3.0])")
api("speeds_str", Z + ", speeds='fast')")
api("micro_batches_float", Z + ", micro_batches=[2.5])")
api("micro_batches_range_ok", Z + ", micro_batches=range(1, 3))", "ok")
api("schedule_bogus", Z + ", schedule='zigzag')")
api("schedule_int", Z + ", schedule=1)")
api("flavour_int", "pipebench.plan('mlp', flavour=3, stages=2, batch=8)")
api("model_none_no_profiles", "pipebench.plan(stages=2, batch=8)")
api("model_empty_str", "pipebench.plan('', stages=2, batch=8)")
api("model_unknown_zoo", "pipebench.plan('nosuchmodel9', stages=2, batch=8)")
api("model_file_no_name", "pipebench.plan('m/good.py', x, stages=2, batch=8)")
api("example_meta", "import good; pipebench.plan(good.Net(), torch.randn(8, 4, device='meta'), stages=2, batch=8)")
api("example_dict", "import good; pipebench.plan(good.Net(), {'x': x}, stages=2, batch=8)", "any")
api("example_numpy", "import good; pipebench.plan(good.Net(), np.zeros((8, 4), dtype=np.float32), stages=2, batch=8)")
api("example_wrong_dtype_long", "import good; pipebench.plan(good.Net(), torch.zeros(8, 4, dtype=torch.long), stages=2, batch=8)")
api("request_str", "pipebench.plan('mlp', 'notatensor', 'notarequest', flavour='tiny', stages=2, batch=8)")
api("training_bad_optimizer", Z + ", training=pipebench.Training(optimizer='lion'))")
api("training_dict", Z + ", training={'precision': 'fp32'})")
api("profiles_list_of_objects", "pipebench.plan(profiles=[object()], stages=2)")
api("profiles_path_fifo", "os.mkfifo('/tmp/b9/work/api9.fifo') if not os.path.exists('/tmp/b9/work/api9.fifo') else None; pipebench.plan(profiles=[Path('/tmp/b9/work/api9.fifo')], stages=2)")
api("advise_strategies_unknown", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8, strategies=['nope'])")
api("advise_strategies_empty", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8, strategies=[])")
api("run_models_empty", "pipebench.run([], quick=True)")
api("run_models_int", "pipebench.run(42, quick=True)")
api("run_strategies_str", "pipebench.run(['mlp'], strategies='single', quick=True)")
api("cwd_deleted_plan", "import tempfile; d = tempfile.mkdtemp(); os.chdir(d); os.rmdir(d); pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)", "any")

# ================================================================ (7) model files that misbehave
def mf(name, target, expect="err", env=None, check=None, cmd=None, timeout=150):
    case(f"mf9_{name}", (cmd or OP.replace(G, f"--model {target} --input-shape 4")), expect, check, env=env, timeout=timeout)
mf("kbint_import", "m/mf9_kbint.py:Net", "any")
mf("memerr_import", "m/mf9_memerr.py:Net")
mf("recursion_import", "m/mf9_recurse.py:Net")
mf("syntax_error", "m/mf9_syntax.py:Net")
mf("bigprint_import", "m/mf9_bigprint.py:Net", "ok", cmd=OP.replace(G, "--model m/mf9_bigprint.py:Net --input-shape 4") + " > /dev/null")
mf("close_stdout_stderr_import", "m/mf9_closefd12.py:Net", "any")
mf("exit3_thread_later", "m/mf9_exit3_thread.py:Net", "any", check=lambda r: (r["rc"] in (2, 3) and not r["tb"], f"rc={r['rc']} last={r['last'][:120]}"))
mf("popen_at_import", "", "any", check=popen_left("sleep 41.5"), cmd=after5(OP.replace(G, "--model m/mf9_popen.py:Net --input-shape 4"), "sleep 41.5"))
mf("stdout_none_import", "m/mf9_stdout_none.py:Net", "any")
mf("excepthook_import", "m/mf9_excepthook.py:Net", "ok")
mf("name_is_int", "m/mf9_notclass.py:Num")
mf("name_fn_returns_int", "m/mf9_notclass.py:fn")
mf("init_needs_args", "m/mf9_needargs.py:Args")
mf("sig_ignored_import", "m/mf9_sigign.py:Net", "ok")
mf("import_seconds_zero", "m/good.py:Net", env={"PIPEBENCH_IMPORT_SECONDS": "0"})
mf("import_seconds_abc", "m/good.py:Net", env={"PIPEBENCH_IMPORT_SECONDS": "abc"})
mf("import_seconds_nan", "m/good.py:Net", env={"PIPEBENCH_IMPORT_SECONDS": "nan"})
mf("fwd_sys_exit0", "m/fwd9.py:ExitFwd")
mf("fwd_returns_str", "m/fwd9.py:StrFwd")
mf("fwd_returns_none", "m/fwd9.py:NoneFwd")
mf("fwd_keyboardinterrupt", "m/fwd9.py:KbFwd", "any")
mf("fwd_popen", "", "any", check=popen_left("sleep 42.5"), cmd=after5(OP.replace(G, "--model m/fwd9.py:PopenFwd --input-shape 4"), "sleep 42.5"))
mf("input_shape_huge", "", cmd=OP.replace("--input-shape 4", "--input-shape 100000,100000,100000"), timeout=60)
mf("input_shape_zero", "", cmd=OP.replace("--input-shape 4", "--input-shape 0"))

# ================================================================ (8) CSV cells with formula characters
def formula_cells(cell):
    """check: summary.csv of the report holds the cell, and no CSV cell starts a formula."""
    import csv
    def check(r):
        try:
            rows = list(csv.reader(open(W + "cf9rep/summary.csv", newline="")))
        except OSError as e:
            return False, repr(e)
        bad = []
        for row in rows:
            for v in row:
                s = v.lstrip(" ")
                if s and s[0] in "=+-@\t\r\n" and v not in ("-",):
                    try: float(v)
                    except ValueError: bad.append(v)
        seen = any(cell.strip("\t\r\n ") in v for row in rows for v in row)
        return not bad, f"formula cells {bad[:3]}; cell seen={seen}"
    return check
def csvf(name, cell, col=0, expect="custom"):
    q = shlex.quote(cell)
    f = RES.replace("r0", "cf9") + ".csv"
    case(f"csv9_{name}", f"rm -rf cf9 cf9rep; cp -a r0 cf9; rm cf9/*.json; python3 -c \"import csv,sys; r=list(csv.reader(open('{f}'))); r[1][{col}]=sys.argv[1]; "
         f"csv.writer(open('{f}','w',newline='')).writerows(r)\" {q}; $P report {f} --out cf9rep",
         expect, formula_cells(cell), timeout=120)
csvf("newline_eq", "mlp\n=1+1")
csvf("minus_formula", "-2+3")
csvf("spaces_eq", "  =1+1")
csvf("strategy_col_hyperlink", '=HYPERLINK("http://x","y")', col=1)
csvf("at_sum", "@SUM(1+1)*cmd|' /C calc'!A0")

# ================================================================ (9) second batch: fixed harness checks and follow-ups of the first
SET_RQ = SETUP + "; mkdir -p sp/rq sp/rq2 sp/runout; cp sp/res.csv sp/rq/summary.csv; printf 'my own report\\n' > sp/rq2/report.md; printf 'mine\\n' > sp/runout/notes.txt"
case("file9_report_input_is_out_summary", "$P report sp/rq/summary.csv --out sp/rq", "err", unchanged("sp/rq/summary.csv"), setup=SET_RQ)
case("file9_report_out_holds_users_report_md", f"$P report {RES}.csv --out sp/rq2", "custom", unchanged("sp/rq2/report.md"), setup=SET_RQ)
case("file9_run_out_with_users_file", f"{RQ} --out sp/runout", "ok", unchanged("sp/runout/notes.txt"), setup=SET_RQ, timeout=200)
sp("plan_export_user_py", f"{PP} --export deepspeed sp/user.py", check=unchanged("sp/user.py"))
sp("plan_export_eq_profile_input", f"{PP.replace('p.json', 'sp/p.json')} --export deepspeed ./sp/p.json", check=unchanged("sp/p.json"))
sp("plan_export_over_export_ok", f"{PP} --export deepspeed sp/ds.json && {PP} --export deepspeed sp/ds.json", "ok")
sp("advise_json_users_notes", f"{AP} --json sp/notes.txt", check=unchanged("sp/notes.txt"))
case("resume9_out_is_a_file_kept", "$P run --models mlp --flavour tiny --batch 8 --strategies single,ddp --steps 1 --warmup 0 --rounds 1 --device cpu --out rr9f --resume",
     "err", unchanged("rr9f"), setup="rm -rf rr9f; printf 'mine\\n' > rr9f")
api("link_zero_cli_same", "import subprocess; r = subprocess.run([sys.executable, '-m', 'pipebench', 'plan', '--profile', 'p.json', '--stages', '2', '--link-gbps', '0'], capture_output=True, text=True); print(r.returncode, r.stderr.strip()[-200:]); sys.exit(r.returncode)", "ok")
api("plan_from_a_thread", "import threading; out = []; t = threading.Thread(target=lambda: out.append(pipebench.plan('mlp', flavour='tiny', stages=2, batch=8))); t.start(); t.join(120); assert out and not t.is_alive(), 'no plan'; print('PLAN', type(out[0]).__name__)", "ok")
mf("cached_profile_bad_env_fresh", "m/good.py:Net", env={"PIPEBENCH_IMPORT_SECONDS": "abc"}, cmd=OP + " --fresh")
sig("run_term_22", "p", "TERM", 22)                       # measuring (sig9_run_term_33 came after this run's end: the run took 25 s)
