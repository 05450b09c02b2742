"""The twelfth pass's inputs (issue 42's kinds; mostly new against the ninth). $P = pipebench under timeout (the battery holds the CPU lock), run
from /tmp/b12/work (fixtures.sh builds it); $NP = the same without CAP_DAC_OVERRIDE (a folder's mode holds);
$PY = the worktree's python."""
import hashlib, os, re, shlex
from driver import case

W = os.environ.get("B12W", "/tmp/b12/work") + "/"
LOCK = "OMP_NUM_THREADS=1 timeout 150"  # the battery holds the CPU lock (driver.py)
NODAC = "setpriv --inh-caps=-dac_override,-dac_read_search --bounding-set=-dac_override,-dac_read_search"
PYX = "/work/wt-twelfth/.venv/bin/python"
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
    check.bind = lambda d: unchanged(*[p.replace('@', d) for p in paths])
    return check


def absent(*paths):
    def check(r):
        there = [p for p in paths if os.path.lexists(W + p)]
        return (not there, f"CREATED {there}" if there else "none created")
    check.bind = lambda d: absent(*[p.replace('@', d) for p in paths])
    return check


def exists(*paths):
    def check(r):
        missing = [p for p in paths if not os.path.lexists(p if p.startswith("/") else W + p)]
        return (not missing, f"MISSING {missing}" if missing else "written")
    check.bind = lambda d: exists(*[p.replace('@', d) for p in paths])
    return check


def nosub(pattern):
    """check: stdout+stderr do not contain `pattern` (e.g. profiling before a refusal)."""
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
        res = [c(r) for c in checks]
        return all(ok for ok, _ in res), "; ".join(n for _, n in res)
    check.prime = lambda: [c.prime() for c in checks if hasattr(c, "prime")]
    return check


def c12(kind, name, cmd, expect="err", check=None, setup=None, timeout=150):
    d = f"c/{kind}12_{name}"
    if check is not None and hasattr(check, "bind"):
        check = check.bind(d)
    cmd = cmd.replace("@", d)
    full = f"rm -rf {d}; mkdir -p {d}; " + (setup.replace("@", d) + "; " if setup else "")
    case(f"{kind}12_{name}", cmd, expect, check, setup=full, timeout=timeout)


PY = "/work/wt-twelfth/.venv/bin/python"
def api(name, code, expect="err", setup=None):
    c12("api", name, f"{LOCK} $PY m/apih.py {shlex.quote(code)}", expect, setup=setup)


RUNK = "strategies=['single'], quick=True, steps=1, warmup=0, rounds=1, min_seconds=0"
# ============ (1) G1-G8 again, and their good twins
c12("re", "g1_advise_mb12_chunks21_ok", f"{AP} --micro-batches 1,2 --chunks 2,1", "ok")
c12("re", "g1_plan_mb2_chunks02_ok", f"{PP} --micro-batches 2 --chunks 02", "ok")
c12("re", "g1_plan_mb2_chunks4", f"{PP} --micro-batches 2 --chunks 4")
c12("re", "g1_advise_mb12_chunks13", f"{AP} --micro-batches 1,2 --chunks 1,3")
c12("re", "g1_advise_mb12_chunks122", f"{AP} --micro-batches 1,2 --chunks 1,2,2", "any")
c12("re", "g2_profile_flavour_small", f"{PP} --flavour small")
c12("re", "g2_profile_set_depth8", f"{PP} --set depth=8")
c12("re", "g2_profile_set_width3", f"{PP} --set width=3")
c12("re", "g2_profile_flavour_tiny_ok", f"{PP} --flavour tiny", "ok")
c12("re", "g2_profile_set_depth3_ok", f"{PP} --set depth=3", "ok")
c12("re", "g2_profile_set_hidden64_depth3_ok", f"{PP} --set hidden=64 --set depth=3", "ok")
c12("re", "g2_profile_set_depth03_ok", f"{PP} --set depth=03", "ok")
c12("re", "g2_profile_model_mlp_ok", f"{PP} --model mlp --flavour tiny", "ok")
c12("re", "g2_profile_flavour_TINY", f"{PP} --flavour TINY", "any")
c12("re", "g2_pg_input_shape4_ok", "$P plan --profile pg.json --stages 2 --input-shape 4", "ok")
c12("re", "g2_pg_input_shape5", "$P plan --profile pg.json --stages 2 --input-shape 5")
c12("re", "g2_pg_model_rel_ok", "$P plan --profile pg.json --stages 2 --model m/good.py:Net", "ok")
c12("re", "g2_pg_model_dotdot_ok", "$P plan --profile pg.json --stages 2 --model ./m/../m/good.py:Net", "ok")
c12("re", "g2_pg_model_abs_ok", f"$P plan --profile pg.json --stages 2 --model {W}m/good.py:Net", "ok")
c12("re", "g2_pg_flavour_tiny", "$P plan --profile pg.json --stages 2 --flavour tiny")
c12("re", "g2_pg_set_x", "$P plan --profile pg.json --stages 2 --set width=3")
c12("re", "g2_advise_profile_flavour_small", f"{AP} --flavour small")
c12("re", "g2_advise_profile_set_depth8", f"{AP} --set depth=8")
c12("re", "g2_advise_profile_set_depth3_ok", f"{AP} --set depth=3", "ok")
c12("re", "g3_run_profiles_file", f"{RQ} --profiles p.json --out @/o1", check=absent("@/o1"))
c12("re", "g3_run_profiles_eq_out", f"{RQ} --profiles @/o2 --out @/o2", check=absent("@/o2"))
c12("re", "g3_run_deep_out_refused", f"{RQ} --flavour huge --out @/a/b/c", check=absent("@/a"))
c12("re", "g4_train_save_every_no_save", f"{T} --save-every 1", check=nosub("done:"))
c12("re", "g4_run_resume_again", f"{RQ} --resume --again --out @/o", check=absent("@/o"))
api("re12_g4_api_resume_again", f"pipebench.run(['mlp'], {RUNK}, out='c/o_g4', resume=True, again=True)")
c12("re", "g5_users_job_json", f"{T} --write-job @/mine", setup="mkdir -p @/mine; echo '{\"mine\":1}' > @/mine/job.json", check=None)
c12("re", "g5_users_train_json_link", f"{T} --write-job @/mine", setup="mkdir -p @/mine; echo notes > @/notes.txt; ln -s ../notes.txt @/mine/train.json")
c12("re", "g5_in_save_state", f"{T} --save @/ck.pt --write-job @/ck.pt.train", setup="cp -a ck.pt ck.pt.train @/")
c12("re", "g5_in_save_state_sub", f"{T} --save @/ck.pt --write-job @/ck.pt.train/sub", setup="cp -a ck.pt ck.pt.train @/")
c12("re", "g6_write_job_empty", f"{T} --write-job ''", check=nosub("done:"))
api("re12_g7_api_plan_mlp_pg", "from pipebench import load_profiles; pipebench.plan('mlp', profiles=load_profiles('pg.json'), stages=2)")
api("re12_g7_api_plan_gpt_pg", "from pipebench import load_profiles; pipebench.plan('gpt', profiles=load_profiles('pg.json'), stages=2)")
api("re12_g7_api_advise_mlp_pg", "from pipebench import load_profiles; pipebench.advise('mlp', profiles=load_profiles('pg.json'), stages=2)")
api("re12_g7_api_plan_good_pg_ok", "from pipebench import load_profiles; print(pipebench.plan('m/good.py:Net', profiles=load_profiles('pg.json'), stages=2))", "ok")
api("re12_g7_api_plan_none_pg_ok", "from pipebench import load_profiles; print(pipebench.plan(profiles=load_profiles('pg.json'), stages=2))", "ok")
api("re12_g7_api_plan_mlp_tiny_p_ok", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, flavour='tiny'))", "ok")
api("re12_g7_api_plan_mlp_p_noflavour_ok", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2))", "ok")
api("re12_g7_api_plan_mlp_small_p", "from pipebench import load_profiles; pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, flavour='small')")
api("re12_g7_api_plan_settings_depth8", "from pipebench import load_profiles; pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': 8})")
api("re12_g7_api_plan_settings_depth3_ok", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': 3}))", "ok")
api("re12_g7_api_plan_module_pg", "from pipebench import load_profiles; import good; pipebench.plan(nn.Linear(4,3), profiles=load_profiles('pg.json'), stages=2)")
api("re12_g7_api_plan_netobj_pg_ok", "from pipebench import load_profiles; import good; print(pipebench.plan(good.Net(), profiles=load_profiles('pg.json'), stages=2))", "ok")
T4 = T.replace('--steps 2', '--steps 4')
RSU = "cp -a ck.pt ck.pt.train @/"
c12("re", "g8_resume_other_batch", f"{T4.replace('--batch 8', '--batch 16')} --save @/ck.pt --resume", setup=RSU, check=nosub("profiling"))
c12("re", "g8_resume_other_optimizer", f"{T4} --optimizer adamw --save @/ck.pt --resume", setup=RSU, check=nosub("profiling"))
c12("re", "g8_resume_other_precision", f"{T4} --precision fp32 --save @/ck.pt --resume", "any", setup=RSU, check=nosub("profiling"))
c12("re", "g8_resume_same_ok", f"{T4} --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c12("re", "g5_write_job_empty_dir_ok", f"{T} --write-job @/j", "ok", setup="mkdir -p @/j", check=exists("@/j/job.json"))
c12("re", "g5_write_job_twice_ok", f"{T} --write-job @/j && {T} --write-job @/j", "ok", check=exists("@/j/train.json"))
# ============ (2) new code: write-job files
c12("job", "job_json_fifo", f"{T} --write-job @/j", setup="mkdir -p @/j; mkfifo @/j/job.json", timeout=60)
c12("job", "train_json_fifo", f"{T} --write-job @/j", setup="mkdir -p @/j; mkfifo @/j/train.json", timeout=60)
c12("job", "job_json_folder", f"{T} --write-job @/j", setup="mkdir -p @/j/job.json")
c12("job", "train_json_devnull", f"{T} --write-job @/j", setup="mkdir -p @/j; ln -s /dev/null @/j/train.json")
c12("job", "csv_is_job_json", f"{T} --write-job @/j --csv @/j/job.json")
c12("job", "save_is_train_json", f"{T} --write-job @/j --save @/j/train.json")
c12("job", "job_json_empty_file", f"{T} --write-job @/j", setup="mkdir -p @/j; : > @/j/job.json", check=unchanged("@/j/job.json"))
c12("job", "train_json_other_json", f"{T} --write-job @/j", setup="mkdir -p @/j; echo '{\"data\":1}' > @/j/train.json")
c12("job", "write_job_is_file", f"{T} --write-job @/f", setup="echo x > @/f")
c12("job", "write_job_readonly", f"{T.replace('$P', '$NP')} --write-job @/ro/j", setup="mkdir -p @/ro; chmod 555 @/ro")
c12("job", "write_job_link_to_users_dir", f"{T} --write-job @/lnk", "any", setup="mkdir -p @/u; echo '{\"u\":1}' > @/u/job.json; ln -s u @/lnk", check=None)
c12("job", "write_job_eq_model_dir_ok", f"cp m/good.py m/data.py @/ && {T.replace('m/good.py','@/good.py').replace('m/data.py','@/data.py')} --write-job @", "ok")
c12("job", "write_job_tilde", f"HOME=$PWD/@ {T} --write-job '~/jj'", "ok", check=exists("@/jj/job.json"))
# ============ (2) save-every
for v in ("0", "-1", "1.5", "nan", "inf", "٢", "''", "1e3", "99999999999999999999"):
    c12("save", f"every_{v.strip(chr(39)) or 'empty'}", f"{T} --save @/z.pt --save-every {v}", "any" if v in ("1e3", "99999999999999999999") else "err")
c12("save", "every_1_ok", f"{T} --save @/z.pt --save-every 1", "ok", check=exists("@/z.pt"))
c12("save", "every_gt_steps_ok", f"{T} --save @/z.pt --save-every 100", "ok", check=exists("@/z.pt"))
# ============ (2) --strategies parsing (run)
for n, v in (("empty_item", "single,,ddp"), ("trailing", "single,"), ("comma", ","), ("empty", "''"), ("spaces_ok", "' single '"),
             ("case", "SINGLE"), ("dup_ok", "single,single"), ("auto_colon", "auto:"), ("auto0", "auto:0"), ("auto99", "auto:99"),
             ("auto_neg", "auto:-1"), ("auto_float", "auto:1.5"), ("auto_arabic", "auto:٢"), ("auto_space", "'auto: 1'"),
             ("auto_and_single", "auto,single"), ("single_and_auto", "single,auto"), ("autox", "autox"), ("auto_AUTO", "AUTO"),
             ("auto_2colon", "auto:1:1"), ("nbsp", "'single\u00a0'"), ("tab_ok", "$'single\\t'"), ("unknown", "nope")):
    c12("strat", n, f"{RQ.replace('--strategies single', '--strategies ' + v)} --out @/o", "ok" if n.endswith("_ok") else "any" if n in ("case", "auto_space", "nbsp") else "err",
        check=None if n.endswith("_ok") else absent("@/o"))
c12("strat", "train_strategy_empty", f"{T.replace('--strategy single', '--strategy ' + chr(39)*2)}")
c12("strat", "train_strategy_comma", f"{T.replace('--strategy single', '--strategy single,ddp')}")
c12("strat", "train_strategy_auto3", f"{T.replace('--strategy single', '--strategy auto:3')}")
# ============ (2) run API keywords (RunOptions.from_keywords)
for n, code, e in (
        ("models_str", "pipebench.run('mlp', " + RUNK + ", out='c/a1')", "err"),
        ("models_empty_list", "pipebench.run([], " + RUNK + ", out='c/a2')", "err"),
        ("models_empty_dict", "pipebench.run({}, " + RUNK + ", out='c/a3')", "err"),
        ("models_dict_float", "pipebench.run({'mlp': 8.0}, " + RUNK + ", out='c/a4')", "any"),
        ("models_dict_bool", "pipebench.run({'mlp': True}, " + RUNK + ", out='c/a5')", "err"),
        ("models_dict_str", "pipebench.run({'mlp': '8'}, " + RUNK + ", out='c/a6')", "err"),
        ("models_dict_nan", "pipebench.run({'mlp': float('nan')}, " + RUNK + ", out='c/a7')", "err"),
        ("models_dict_none", "pipebench.run({'mlp': None}, " + RUNK + ", out='c/a8')", "any"),
        ("models_set", "pipebench.run({'mlp'}, " + RUNK + ", out='c/a9')", "err"),
        ("models_unknown", "pipebench.run(['nope'], " + RUNK + ", out='c/a10')", "err"),
        ("models_int_key", "pipebench.run({1: 8}, " + RUNK + ", out='c/a11')", "err"),
        ("models_gen", "pipebench.run((m for m in ['mlp']), " + RUNK + ", out='c/a12')", "err"),
        ("strategies_str", "pipebench.run(['mlp'], strategies='single', quick=True, out='c/a13', steps=1, warmup=0, rounds=1)", "any"),
        ("strategies_empty", "pipebench.run(['mlp'], strategies=[], quick=True, out='c/a14')", "err"),
        ("strategies_case", "pipebench.run(['mlp'], strategies=['SINGLE'], quick=True, out='c/a15')", "any"),
        ("strategies_none_item", "pipebench.run(['mlp'], strategies=[None], quick=True, out='c/a16')", "err"),
        ("strategies_int", "pipebench.run(['mlp'], strategies=3, quick=True, out='c/a17')", "err"),
        ("strategies_auto_str", "pipebench.run(['mlp'], strategies=['auto:2'], quick=True, out='c/a18')", "any"),
        ("auto_zero", "pipebench.run(['mlp'], quick=True, out='c/a19', auto=0)", "err"),
        ("auto_true", "pipebench.run(['mlp'], quick=True, out='c/a20', auto=True)", "err"),
        ("auto_float", "pipebench.run(['mlp'], quick=True, out='c/a21', auto=1.5)", "err"),
        ("auto_str", "pipebench.run(['mlp'], quick=True, out='c/a22', auto='2')", "err"),
        ("auto_and_strategies", "pipebench.run(['mlp'], strategies=['ddp'], quick=True, out='c/a23', auto=1)", "any"),
        ("chunks_and_mb", "pipebench.run(['mlp'], " + RUNK + ", out='c/a24', chunks=[2], micro_batches=[2])", "err"),
        ("chunks_int", "pipebench.run(['mlp'], " + RUNK + ", out='c/a25', chunks=2)", "err"),
        ("chunks_zero", "pipebench.run(['mlp'], " + RUNK + ", out='c/a26', chunks=[0])", "err"),
        ("chunks_bool", "pipebench.run(['mlp'], " + RUNK + ", out='c/a27', chunks=[True])", "err"),
        ("chunks_str", "pipebench.run(['mlp'], " + RUNK + ", out='c/a28', chunks='2')", "err"),
        ("mb_float", "pipebench.run(['mlp'], " + RUNK + ", out='c/a29', micro_batches=[2.5])", "err"),
        ("mb_empty", "pipebench.run(['mlp'], " + RUNK + ", out='c/a30', micro_batches=[])", "err"),
        ("mb_np", "pipebench.run(['mlp'], " + RUNK + ", out='c/a31', micro_batches=[np.int64(2)])", "any"),
        ("unknown_kw", "pipebench.run(['mlp'], " + RUNK + ", out='c/a32', stepz=1)", "err"),
        ("kw_models_dup", "pipebench.run(['mlp'], " + RUNK + ", out='c/a33', models=['mlp'])", "err"),
        ("kw_strategies_in_options", "pipebench.run(['mlp'], quick=True, out='c/a34', **{'strategies': ['single']})", "any"),
        ("quick_1", "pipebench.run(['mlp'], strategies=['single'], quick=1, out='c/a35')", "err"),
        ("quick_none", "pipebench.run(['mlp'], strategies=['single'], quick=None, out='c/a36')", "err"),
        ("resume_str", "pipebench.run(['mlp'], " + RUNK + ", out='c/a37', resume='yes')", "err"),
        ("again_1", "pipebench.run(['mlp'], " + RUNK + ", out='c/a38', again=1)", "err"),
        ("steps_true", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a39', steps=True)", "err"),
        ("steps_float", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a40', steps=1.5)", "err"),
        ("steps_zero", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a41', steps=0)", "err"),
        ("steps_huge", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a42', steps=10**30)", "err"),
        ("timeout_inf", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a43', timeout=float('inf'))", "err"),
        ("timeout_neg", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a44', timeout=-1)", "err"),
        ("min_seconds_neg", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a45', min_seconds=-1)", "err"),
        ("min_seconds_inf", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a46', min_seconds=float('inf'))", "err"),
        ("warmup_neg", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a47', warmup=-1)", "err"),
        ("rounds_zero", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a48', rounds=0)", "err"),
        ("repeats_zero", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a49', repeats=0)", "err"),
        ("out_int", "pipebench.run(['mlp'], strategies=['single'], quick=True, out=123)", "err"),
        ("out_empty", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='')", "err"),
        ("out_none", "pipebench.run(['mlp'], strategies=['single'], quick=True, out=None)", "err"),
        ("profiles_empty", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a50', profiles='')", "err"),
        ("profiles_file", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a51', profiles='p.json')", "err"),
        ("compiles_str", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a52', compiles='default')", "err"),
        ("compiles_empty", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a53', compiles=[])", "err"),
        ("compiles_bogus", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a54', compiles=['fastest'])", "err"),
        ("training_dict", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a55', training={'optimizer': 'adamw'})", "err"),
        ("flavour_int", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a56', flavour=3)", "err"),
        ("flavour_bogus", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a57', flavour='huge')", "err"),
        ("overrides_list", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a58', overrides=[('depth', 2)])", "err"),
        ("overrides_unknown", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a59', overrides={'nope': 1})", "err"),
        ("data_dir_missing", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a60', data_dir='nope')", "err"),
        ("machine_int", "pipebench.run(['mlp'], strategies=['single'], quick=True, out='c/a61', machine=3)", "err"),
        ("ok_dict", "r = pipebench.run({'mlp': 8}, " + RUNK + ", out='c/a62'); print(len(r[0]))", "ok"),
        ("ok_chunks", "r = pipebench.run(['mlp'], strategies=['pp-gpipe'], quick=True, steps=1, warmup=0, rounds=1, out='c/a63', chunks=[2]); print(len(r[0]))", "ok"),
        ("ok_resume", "pipebench.run(['mlp'], " + RUNK + ", out='c/a64'); r = pipebench.run(['mlp'], " + RUNK + ", out='c/a64', resume=True); print(r[0])", "ok"),
        ):
    api(f"run_{n}", code, e)
# schedule=None and others on plan/advise
for n, code, e in (("plan_schedule_none", "print(pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, device='cpu', schedule=None))", "any"),
                   ("advise_schedule_none", "print(pipebench.advise('mlp', flavour='tiny', stages=2, batch=8, device='cpu', schedule=None))", "any"),
                   ("plan_profiles_empty", "pipebench.plan('mlp', profiles=[], stages=2)", "err"),
                   ("plan_profiles_str", "pipebench.plan('mlp', profiles='p.json', stages=2)", "err"),
                   ("plan_profiles_flavour_none_model_none", "from pipebench import load_profiles; pipebench.plan(profiles=load_profiles('p.json'), stages=2, flavour='small')", "err"),
                   ("plan_profiles_settings_str", "from pipebench import load_profiles; pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings='depth=3')", "err"),
                   ("plan_profiles_settings_none_ok", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': None}))", "ok"),
                   ("plan_profiles_settings_depth_str3", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': '3'}))", "any"),
                   ("plan_profiles_settings_depth_float3", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': 3.0}))", "any"),
                   ("plan_profiles_settings_depth_true", "from pipebench import load_profiles; print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': True}))", "err"),
                   ("plan_profiles_example_inputs", "from pipebench import load_profiles; print(pipebench.plan('mlp', torch.randn(8, 5), profiles=load_profiles('p.json'), stages=2))", "any"),
                   ("train_save_every_no_save", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, device='cpu', input_shape=[4], save_every=1)", "err"),
                   ("train_write_job_empty", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, device='cpu', input_shape=[4], write_job='')", "err"),
                   ):
    api(n, code, e)
# ============ (3) numbers and paths, fast ones
for v in ("nan", "inf", "-8", "٨", "1e1", "8.0", "0x8", "+8", "8_0", "99999999999999999999999", "' 8'", "８"):
    c12("num", f"plan_batch_{v.strip(chr(39)).strip()}", f"$P plan --model mlp --flavour tiny --stages 2 --device cpu --batch {v}", "any" if v in ("+8", "' 8'", "8_0") else "err")
for v in ("nan", "-1", "٢", "0", "1e9"):
    c12("num", f"profile_stages_{v}", f"$P plan --profile p.json --stages {v}")
c12("num", "advise_mb_huge", f"{AP} --micro-batches 99999999999999999999")
c12("num", "advise_chunks_nan", f"{AP} --chunks nan")
c12("path", "profile_empty", "$P plan --profile '' --stages 2")
c12("path", "profile_fifo", "$P plan --profile @/f --stages 2", setup="mkfifo @/f", timeout=40)
c12("path", "profile_devzero", "$P plan --profile /dev/zero --stages 2", timeout=40)
c12("path", "json_devfull", f"{PP} --json /dev/full")
c12("path", "json_users_file", f"{PP} --json @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c12("path", "save_profile_users_file", f"{PL} --save-profile @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c12("path", "save_profile_link", f"{PL} --save-profile @/l.json", setup="echo notes > @/n.txt; ln -s n.txt @/l.json", check=unchanged("@/n.txt"))
c12("path", "export_fifo", f"{PP} --export deepspeed @/f", setup="mkfifo @/f", timeout=40)
c12("path", "report_out_users_file", "$P report r0 --out @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c12("path", "run_out_devnull", f"{RQ} --out /dev/null")
# ============ (4) more: good twins of the new checks
c12("twin", "resume_batch_08_ok", f"{T4.replace('--batch 8', '--batch 08')} --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c12("twin", "resume_optimizer_sgd_ok", f"{T4} --optimizer sgd --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c12("twin", "resume_precision_tf32_ok", f"{T4} --precision tf32 --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c12("twin", "resume_optimizer_SGD", f"{T4} --optimizer SGD --save @/ck.pt --resume", "any", setup=RSU)
c12("twin", "resume_batch_16_quick", f"{T4.replace('--batch 8', '--batch 16')} --save @/ck.pt --resume", setup=RSU, check=nosub("profiling"))
c12("twin", "resume_save_every_ok", f"{T4} --save @/ck.pt --save-every 1 --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c12("twin", "pg_model_symlink_file", "$P plan --profile pg.json --stages 2 --model @/alias.py:Net", "any", setup="ln -s ../../m/good.py @/alias.py")
c12("twin", "pg_model_doubleslash_ok", "$P plan --profile pg.json --stages 2 --model m//good.py:Net", "ok")
c12("twin", "pg_model_tilde_ok", "HOME=$PWD $P plan --profile pg.json --stages 2 --model '~/m/good.py:Net'", "ok")
c12("twin", "pg_model_other_class", "$P plan --profile pg.json --stages 2 --model m/dfl.py:Net", "err")
c12("twin", "p_model_MLP", f"{PP} --model MLP", "any")
c12("twin", "p_model_gpt", f"{PP} --model gpt")
c12("twin", "p_input_shape_64", f"{PP} --input-shape 64", "any")
c12("twin", "p_input_shape_65", f"{PP} --input-shape 65")
c12("twin", "pg_input_shape_4comma_ok", "$P plan --profile pg.json --stages 2 --input-shape 4,", "any")
c12("twin", "advise_pg_input_shape5", "$P advise --profile pg.json --stages 2 --input-shape 5")
c12("twin", "run_mb12_chunks21_ok", f"{RQ.replace('--strategies single', '--strategies pp-gpipe')} --micro-batches 1,2 --chunks 2,1 --out @/o", "ok")
c12("twin", "run_mb2_chunks4", f"{RQ} --micro-batches 2 --chunks 4 --out @/o", check=absent("@/o"))
c12("twin", "run_resume_ok", f"{RQ} --out @/o && {RQ} --out @/o --resume", "ok")
c12("twin", "run_again_ok", f"{RQ} --out @/o && {RQ} --out @/o --again", "ok")
c12("twin", "run_auto1_ok", f"{RQ.replace('--strategies single', '--strategies auto:1')} --out @/o", "ok")
c12("twin", "run_models_file_ok", f"{RQ.replace('--models mlp', '--models m/good.py:Net')} --input-shape 4 --out @/o", "any")
c12("twin", "train_write_job_nodes2_ok", f"{T} --nodes 2 --write-job @/j", "ok", check=exists("@/j/job.json"))
def holds(path, text):
    def check(r):
        try:
            body = open(W + path).read()
        except OSError as e:
            return False, repr(e)
        return (text in body, "kept" if text in body else f"CHANGED to {body[:80]!r}")
    return check


c12("twin", "train_write_job_then_users_edit", f"{T} --write-job @/j && echo '{{\"x\":1}}' > @/j/job.json && {T} --write-job @/j", check=holds("c/twin12_train_write_job_then_users_edit/j/job.json", '"x"'))
# ============ (5) run's numbers through the CLI
for opt, v in (("min-seconds", "''"), ("min-seconds", "nan"), ("min-seconds", "-1"), ("min-seconds", "inf"), ("min-seconds", "٠"),
               ("timeout", "''"), ("timeout", "0"), ("timeout", "nan"), ("steps", "''"), ("steps", "1.0"), ("warmup", "-0"), ("rounds", "٢"),
               ("repeats", "0"), ("batch", "''"), ("batch", "0")):
    c12("rnum", f"{opt}_{v.strip(chr(39)) or 'empty'}", f"{RQ.replace(' --min-seconds 0', '').replace(' --steps 1', '') if opt in ('min-seconds', 'steps') else RQ} --{opt} {v} --out @/o",
        "any" if v in ("-0", "1.0") else "err", check=absent("@/o"))
