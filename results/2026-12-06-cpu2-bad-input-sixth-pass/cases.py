"""The sixth pass's inputs (cut short by the timebox). $P = pipebench under flock+timeout, run from /tmp/b6/work."""
import shlex
from driver import case
LOCK = "OMP_NUM_THREADS=1 flock /tmp/pipebench-cpu.lock timeout 120"
PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8"
OP = "$P plan --input-shape 4 --stages 2 --batch 8 --model"
def st(name, code, expect="ok"):
    # rc 0 = caller's state unchanged; rc 3 = STATE CHANGED line
    case(f"api_state_{name}", f"{LOCK} $PY m/apistate.py {shlex.quote(code)}", expect, timeout=150)
for f in ["mf_prec", "mf_seed", "mf_threads", "mf_dtype64", "mf_nograd", "mf_sigint", "mf_log", "mf_warn", "mf_env",
          "mf_umask", "mf_excepthook", "mf_recurs", "mf_tensoradd", "mf_relu", "mf_deterministic", "mf_anomaly", "mf_sysmod"]:
    st(f"plan_file_{f}", f"pipebench.plan('m/{f}.py:Net', torch.randn(8, 4), stages=2, batch=8)", "ok")
for c in ["ChdirFwd", "EnvFwd", "SeedFwd", "PrecFwd", "GradOffFwd", "DtypeFwd", "ThreadsFwd", "WarnFwd"]:
    st(f"plan_fwd_{c}", f"import fwd; pipebench.plan(fwd.{c}(), torch.randn(8, 4), stages=2, batch=8)", "ok")
st("plan_zoo_mlp", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8)")
st("advise_zoo_mlp", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8)")
st("profile_zoo_mlp", "pipebench.profile('mlp', flavour='tiny', batch=8)")
st("run_zoo_mlp", "pipebench.run(['mlp'], strategies=['single'], out='rst', steps=1, warmup=0, rounds=1, note=None)")
st("plan_bad_stages", "pipebench.plan('mlp', flavour='tiny', stages=-1, batch=8)")
for f in ["mf_prec", "mf_env", "mf_umask", "mf_sigint", "mf_tensoradd", "mf_relu", "mf_fork", "mf_signal_alarm", "mf_stderr_close", "mf_rlimit", "mf_inference"]:
    case(f"mf_cli_plan_{f}", f"{OP} m/{f}.py:Net", "any")
for c in ["ExitFwd", "SysExitFwd", "KbFwd", "NanFwd", "MemoryErr", "RecErr", "GenOut", "DictOut", "Stochastic"]:
    case(f"fwd_cli_plan_{c}", f"{OP} m/fwd.py:{c}", "any")

# ================================================================== seventh helper's block (new inputs, same day)
import os as _os
PP = "$P plan --profile p.json --stages 2"
AP = "$P advise --profile p.json --stages 2"
G = "--model m/good.py:Net --input-shape 4"
T = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single"
R = "$P run --models mlp --flavour tiny --batch 8 --strategies single --steps 1 --warmup 0 --rounds 1"
def unchanged(*paths):
    """check: the files keep their bytes (results already written are never lost)."""
    import hashlib
    W = "/tmp/b6/work/"
    def digest():
        out = {}
        for p in paths:
            try: out[p] = hashlib.sha256(open(W + p, "rb").read()).hexdigest()
            except OSError as e: out[p] = repr(e)
        return out
    state = {}
    def check(r):
        after = digest(); diff = [p for p in paths if after[p] != state["before"][p]]
        return (not diff, f"CHANGED {diff}" if diff else "kept")
    check.prime = lambda: state.__setitem__("before", digest())
    return check
def rows_kept(csv, atleast):
    def check(r):
        try: n = sum(1 for _ in open("/tmp/b6/work/" + csv)) - 1
        except OSError as e: return False, repr(e)
        return n >= atleast, f"rows={n}"
    return check

# ---- (1) options
for name, opt in [("stages_twice", "--stages 2 --stages 3"), ("stages_fullwidth", "--stages ２"), ("stages_plus", "--stages +2"),
                  ("stages_underscore", "--stages 1_0"), ("stages_space", "--stages ' 2 '"), ("stages_empty", "--stages ''"),
                  ("batch_fullwidth", "--batch ８"), ("batch_arabic", "--batch ٨"), ("batch_underscore", "--batch 1_6"),
                  ("batch_huge", "--batch 99999999999999999999"), ("batch_neg", "--batch -8"), ("batch_float", "--batch 8.0"),
                  ("chunks_zero", "--chunks 0"), ("chunks_huge", "--chunks 1000000000"), ("chunks_not_dividing", "--chunks 3"),
                  ("chunks_list_bad", "--chunks 2,x"), ("link_zero", "--link-gbps 0"), ("link_neg", "--link-gbps -1"),
                  ("link_nan", "--link-gbps nan"), ("link_inf", "--link-gbps inf"), ("link_overflow", "--link-gbps 1e400"),
                  ("link_empty", "--link-gbps ''"), ("link_tiny", "--link-gbps 1e-320"), ("maxmem_empty", "--max-memory ''"),
                  ("maxmem_zero", "--max-memory 0"), ("maxmem_neg", "--max-memory -1GiB"), ("maxmem_fullwidth", "--max-memory １GiB"),
                  ("maxmem_trailing_comma", "--max-memory 1GiB,"), ("maxmem_three_for_two", "--max-memory 1GiB,1GiB,1GiB"),
                  ("speeds_empty", "--speeds ''"), ("speeds_zero", "--speeds 1,0"), ("speeds_neg", "--speeds 1,-1"),
                  ("speeds_nan", "--speeds nan,1"), ("speeds_three_for_two", "--speeds 1,1,1"), ("speeds_inf", "--speeds inf,1"),
                  ("vs_zero", "--schedule interleaved --virtual-stages 0"), ("vs_neg", "--virtual-stages -1"),
                  ("schedule_empty", "--schedule ''"), ("schedule_upper", "--schedule GPIPE"), ("schedule_list", "--schedule gpipe,1f1b"),
                  ("precision_upper", "--precision FP32"), ("precision_empty", "--precision ''"), ("optimizer_empty", "--optimizer ''"),
                  ("checkpoint_bool", "--checkpoint true"), ("balance_empty", "--balance ''"), ("gpus_empty", "--gpus ''"),
                  ("gpus_dup", "--gpus 0,0"), ("gpus_neg", "--gpus -1"), ("device_empty", "--device ''"), ("device_upper", "--device CPU"),
                  ("device_cpu0", "--device cpu:0"), ("device_meta", "--device meta"), ("export_bogus", "--export bogus ex.json"),
                  ("export_same_as_json", "--export torchtitan same.json --json same.json"), ("json_empty", "--json ''"),
                  ("json_dir", "--json r0"), ("json_devfull", "--json /dev/full"), ("json_is_profile_input", "--json p.json"),
                  ("json_nul_dir", "--json nodir/x.json"), ("json_newline_name", "--json $'a\\nb.json'")]:
    exp = "any" if name in ("stages_twice", "json_is_profile_input", "chunks_not_dividing", "maxmem_three_for_two") else "err"
    chk = unchanged("p.json") if name == "json_is_profile_input" else None
    case(f"opt7_plan_{name}", f"{PP} {opt}", exp, check=chk)
for name, opt in [("model_empty", "--model ''"), ("model_space", "--model ' mlp'"), ("model_upper", "--model MLP"),
                  ("model_zwsp", "--model $'mlp\\u200b'"), ("model_newline", "--model $'mlp\\n'"), ("flavour_empty", "--model mlp --flavour ''"),
                  ("flavour_upper", "--model mlp --flavour TINY"), ("set_empty", "--model mlp --flavour tiny --set ''"),
                  ("set_eq_only", "--model mlp --flavour tiny --set ="), ("set_no_value", "--model mlp --flavour tiny --set depth="),
                  ("set_unicode_key", "--model mlp --flavour tiny --set dépth=2"), ("set_bare", "--model mlp --flavour tiny --set depth"),
                  ("repeats_zero", "--model mlp --flavour tiny --repeats 0"), ("repeats_huge", "--model mlp --flavour tiny --repeats 1000000000"),
                  ("repeats_float", "--model mlp --flavour tiny --repeats 2.5"), ("timeout_zero", "--model mlp --flavour tiny --timeout 0"),
                  ("timeout_nan", "--model mlp --flavour tiny --timeout nan"), ("timeout_inf", "--model mlp --flavour tiny --timeout inf"),
                  ("timeout_neg", "--model mlp --flavour tiny --timeout -5"), ("timeout_huge", "--model mlp --flavour tiny --timeout 1e308"),
                  ("granularity_neg", "--model mlp --flavour tiny --granularity -1"), ("granularity_huge", "--model mlp --flavour tiny --granularity 100000"),
                  ("input_shape_empty", "--model m/good.py:Net --input-shape ''"), ("input_shape_zero", "--model m/good.py:Net --input-shape 0"),
                  ("input_shape_neg", "--model m/good.py:Net --input-shape 4,-1"), ("input_shape_x", "--model m/good.py:Net --input-shape 4x4"),
                  ("input_shape_huge", "--model m/good.py:Net --input-shape 100000,100000,100000"),
                  ("input_dtype_bogus", "--model m/good.py:Net --input-shape 4 --input-dtype float128"),
                  ("input_dtype_empty", "--model m/good.py:Net --input-shape 4 --input-dtype ''"),
                  ("num_classes_zero", "--model m/good.py:Net --input-shape 4 --num-classes 0"),
                  ("token_range_reversed", "--model m/good.py:Net --input-shape 4 --input-dtype int64 --token-range 5:3"),
                  ("token_range_empty", "--model m/good.py:Net --input-shape 4 --token-range ''"),
                  ("loss_bogus", "--model m/good.py:Net --input-shape 4 --loss bogus"), ("loss_empty", "--model m/good.py:Net --input-shape 4 --loss ''"),
                  ("input_shape_on_zoo", "--model mlp --flavour tiny --input-shape 4"),
                  ("profile_and_save_profile_same", "--model mlp --flavour tiny --save-profile sp.json --json sp.json"),
                  ("profile_missing", "--profile nothere.json"), ("profile_and_fresh", "--profile p.json --fresh"),
                  ("data_dir_missing_mlp", "--model mlp --flavour tiny --data-dir nothere")]:
    exp = "any" if name in ("input_shape_on_zoo", "profile_and_fresh", "data_dir_missing_mlp", "repeats_huge") else "err"
    case(f"opt7_plan_{name}", f"$P plan --stages 2 --batch 8 {opt}", exp, timeout=60 if name == "repeats_huge" else 150)
for name, opt in [("chunks_auto_list", "--chunks auto,4"), ("chunks_zero", "--chunks 0"), ("stages_zero", "--stages 0"),
                  ("json_dir", "--json r0"), ("json_devfull", "--json /dev/full"), ("gpus_letters", "--gpus a,b"),
                  ("link_nan", "--link-gbps nan"), ("speeds_nan", "--speeds nan"), ("maxmem_nan", "--max-memory nanGiB")]:
    case(f"opt7_advise_{name}", f"$P advise --profile p.json {opt}" if "stages" in name else f"{AP} {opt}", "err")
for name, opt in [("strategies_empty", "--strategies ''"), ("strategies_double_comma", "--strategies single,,ddp"),
                  ("strategies_dup", "--strategies single,single"), ("strategies_upper", "--strategies SINGLE"),
                  ("models_dup", "--models mlp,mlp"), ("models_trailing_comma", "--models mlp,"), ("steps_zero", "--steps 0"),
                  ("rounds_zero", "--rounds 0"), ("warmup_neg", "--warmup -1"), ("out_empty", "--out ''"), ("out_devnull", "--out /dev/null"),
                  ("out_is_file", "--out p.json"), ("resume_and_again", "--resume --again"), ("batch_zero", "--batch 0"),
                  ("gpu_memory_cpu", "--gpu-memory 1GiB"), ("min_seconds_neg", "--min-seconds -1"), ("min_seconds_inf", "--min-seconds inf"),
                  ("timeout_zero", "--timeout 0"), ("profiles_missing", "--profiles nothere"), ("profiles_file", "--profiles p.json"),
                  ("chunks_zero", "--chunks 0"), ("stages_one_pp", "--strategies pp-1f1b --stages 1"), ("compile_empty", "--compile ''")]:
    o = "" if name.startswith("out_") else f" --out ro7_{name}"
    base = R.replace("--strategies single ", "") if name.startswith("strategies_") or name == "stages_one_pp" else R
    base = base.replace("--models mlp ", "") if name.startswith("models_") else base
    exp = "any" if name in ("strategies_dup", "models_dup", "stages_one_pp") else "err"
    chk = unchanged("p.json") if name == "out_is_file" else None
    case(f"opt7_run_{name}", f"{base} {opt}{o}", exp, check=chk, timeout=200)
for name, opt in [("epochs_zero", "--epochs 0"), ("steps_and_epochs", "--steps 2 --epochs 1"), ("lr_nan", "--lr nan"),
                  ("lr_neg", "--lr -1"), ("lr_inf", "--lr inf"), ("lr_empty", "--lr ''"), ("save_every_zero", "--save ck7.pt --save-every 0"),
                  ("save_every_no_save", "--save-every 2"), ("log_every_zero", "--log-every 0"), ("csv_empty", "--csv ''"),
                  ("csv_dir", "--csv r0"), ("csv_same_as_save", "--save same7.pt --csv same7.pt"), ("loader_workers_neg", "--loader-workers -1"),
                  ("loader_workers_huge", "--loader-workers 100000"), ("nodes_without_write_job", "--nodes 2"),
                  ("write_job_is_file", "--write-job p.json"), ("nodes_zero", "--write-job wj7 --nodes 0"), ("save_empty", "--save ''"),
                  ("csv_is_results_csv", "--csv r0/2026-12-06-vm-cpu2proc.csv"), ("save_is_profile", "--save p.json"),
                  ("strategy_empty", "--strategy ''"), ("data_empty", "--data ''"), ("data_tokens_missing", "--data tokens:nothere.bin"),
                  ("data_mnist_file", "--data mnist:p.json")]:
    cmd = T
    if name in ("strategy_empty",): cmd = T.replace("--strategy single", "")
    if name.startswith("data_"): cmd = T.replace("--data m/data.py:data", "")
    if name == "steps_and_epochs": cmd = T.replace("--steps 2 ", "")
    chk = unchanged("p.json", "r0/2026-12-06-vm-cpu2proc.csv") if name in ("write_job_is_file", "csv_is_results_csv", "save_is_profile") else None
    case(f"opt7_train_{name}", f"{cmd} {opt}", "err", check=chk, timeout=200)
RC = "r0/2026-12-06-vm-cpu2proc"
for name, cmd in [("no_args", "$P report"), ("out_empty", f"$P report {RC}.json --out ''"), ("missing", "$P report nothere.json"),
                  ("out_is_input_folder", f"cp -a r0 rr7a; $P report rr7a --out rr7a"),
                  ("out_is_input_file", f"cp -a r0 rr7b; $P report rr7b/2026-12-06-vm-cpu2proc.json --out rr7b/2026-12-06-vm-cpu2proc.csv"),
                  ("out_devnull", f"$P report {RC}.json --out /dev/null"), ("plan_json", "$P report plan.json --out rr7c"),
                  ("profile_json", "$P report p.json --out rr7d"), ("empty_dir", "mkdir -p emp7; $P report emp7 --out rr7e"),
                  ("fifo", "rm -f f7.json; mkfifo f7.json; $P report f7.json --out rr7f"),
                  ("devzero_link", "ln -sfn /dev/zero z7.json; $P report z7.json --out rr7g"),
                  ("devzero_link_csv", "ln -sfn /dev/zero z7.csv; $P report z7.csv --out rr7h"),
                  ("csv_bom", f"printf '\\xef\\xbb\\xbf' > b7.csv; cat {RC}.csv >> b7.csv; $P report b7.csv --out rr7i"),
                  ("json_utf16", f"$PY -c \"open('u7.json','wb').write(open('{RC}.json',encoding='utf-8').read().encode('utf-16'))\"; $P report u7.json --out rr7j"),
                  ("json_deep", "$PY -c \"open('deep7.json','w').write('['*200000 + ']'*200000)\"; $P report deep7.json --out rr7k"),
                  ("json_huge_ws", "$PY -c \"f=open('huge7.json','w'); f.write(' '*300_000_000 + '{}')\"; $P report huge7.json --out rr7l"),
                  ("json_nan_rows", f"$PY -c \"import json; d=json.load(open('{RC}.json')); print(type(d))\"; sed 's/[0-9]\\+\\.[0-9]\\+/NaN/g' {RC}.json > nan7.json; $P report nan7.json --out rr7m"),
                  ("json_truncated", f"head -c 300 {RC}.json > tr7.json; $P report tr7.json --out rr7n"),
                  ("json_list", "echo '[]' > l7.json; $P report l7.json --out rr7o"), ("json_null", "echo null > n7.json; $P report n7.json --out rr7p"),
                  ("dir_loop_link", "rm -rf lp7; mkdir lp7; ln -sfn ../lp7 lp7/sub; $P report lp7 --out rr7q"),
                  ("unicode_name", f"cp {RC}.json 'ré✓.json'; $P report 'ré✓.json' --out rr7r")]:
    exp = "ok" if name in ("csv_bom", "unicode_name", "json_utf16") else "err"
    chk = unchanged("rr7a/2026-12-06-vm-cpu2proc.csv", "rr7a/2026-12-06-vm-cpu2proc.json") if name == "out_is_input_folder" else \
          unchanged("rr7b/2026-12-06-vm-cpu2proc.csv") if name == "out_is_input_file" else None
    if name in ("out_is_input_folder", "out_is_input_file", "out_devnull", "no_args"): exp = "any"
    case(f"report7_{name}", cmd, exp, check=chk, timeout=100)
# --profile files
for name, setup in [("fifo", "rm -f pf7.json; mkfifo pf7.json"), ("devzero", "ln -sfn /dev/zero pf7.json"), ("dir", "rm -rf pf7.json; mkdir pf7.json"),
                    ("utf16", "$PY -c \"open('pf7.json','wb').write(open('p.json',encoding='utf-8').read().encode('utf-16'))\""),
                    ("utf8_bom", "printf '\\xef\\xbb\\xbf' > pf7.json; cat p.json >> pf7.json"),
                    ("latin1_junk", "printf '{\"a\": \"\\xe9\"}' > pf7.json"), ("deep", "$PY -c \"open('pf7.json','w').write('{\\\"a\\\":'*100000 + '1' + '}'*100000)\""),
                    ("huge_ws", "$PY -c \"f=open('pf7.json','w'); f.write(' '*300_000_000 + '{}')\""),
                    ("nul", "printf '\\x00\\x00' > pf7.json"), ("empty", ": > pf7.json"), ("number", "echo 3 > pf7.json"),
                    ("plan_json", "cp plan.json pf7.json"), ("results_json", f"cp {RC}.json pf7.json"),
                    ("dup_keys", "$PY -c \"import json; t=open('p.json').read(); open('pf7.json','w').write(t.replace('{', '{\\\"version\\\": 999, ', 1))\""),
                    ("nan_times", "sed 's/\\([0-9]\\)\\.\\([0-9]\\)/NaN/' p.json > pf7.json"), ("neg_numbers", "sed 's/: \\([0-9]\\)/: -\\1/g' p.json > pf7.json"),
                    ("huge_numbers", "sed 's/: \\([0-9]\\)/: 1e400\\1/g' p.json > pf7.json"), ("csv", f"cp {RC}.csv pf7.json")]:
    case(f"prof7_plan_{name}", f"rm -rf pf7.json; {setup}; $P plan --profile pf7.json --stages 2", "err", timeout=100)
for name in ("fifo", "devzero", "deep", "plan_json", "nan_times"):
    setup = dict(fifo="rm -f pf7.json; mkfifo pf7.json", devzero="ln -sfn /dev/zero pf7.json", deep="$PY -c \"open('pf7.json','w').write('['*100000 + ']'*100000)\"",
                 plan_json="cp plan.json pf7.json", nan_times="sed 's/\\([0-9]\\)\\.\\([0-9]\\)/NaN/' p.json > pf7.json")[name]
    case(f"prof7_advise_{name}", f"rm -rf pf7.json; {setup}; $P advise --profile pf7.json --stages 2", "err", timeout=100)
# ---- (4) run --resume folders damaged
RR = "$P run --models mlp --flavour tiny --batch 8 --strategies single,ddp --steps 1 --warmup 0 --rounds 1 --resume --out rz7"
FR = "rm -rf rz7; cp -a r0 rz7; "
CSV, JS = "rz7/2026-12-06-vm-cpu2proc.csv", "rz7/2026-12-06-vm-cpu2proc.json"
for name, setup, exp in [("csv_truncated_midline", f"head -c -20 {CSV} > t; mv t {CSV}", "any"),
                         ("json_truncated", f"head -c 100 {JS} > t; mv t {JS}", "err"),
                         ("json_is_dir", f"rm {JS}; mkdir {JS}", "err"), ("csv_fifo", f"rm {CSV}; mkfifo {CSV}", "err"),
                         ("csv_devzero", f"rm {CSV}; ln -s /dev/zero {CSV}", "err"), ("json_devzero", f"rm {JS}; ln -s /dev/zero {JS}", "err"),
                         ("csv_extra_column", f"sed -i '1s/$/,extra/; 2,$s/$/,x/' {CSV}", "any"),
                         ("csv_bom", f"printf '\\xef\\xbb\\xbf' > t; cat {CSV} >> t; mv t {CSV}", "any"),
                         ("csv_crlf", f"sed -i 's/$/\\r/' {CSV}", "any"), ("plans_is_file", "rm -rf rz7/2026-12-06-vm-cpu2proc-plans; touch rz7/2026-12-06-vm-cpu2proc-plans", "err"),
                         ("profiles_loop", "rm -rf rz7/2026-12-06-vm-cpu2proc-profiles; ln -s 2026-12-06-vm-cpu2proc-profiles rz7/2026-12-06-vm-cpu2proc-profiles", "err"),
                         ("json_utf16", f"$PY -c \"p='{JS}'; t=open(p,encoding='utf-8').read(); open(p,'wb').write(t.encode('utf-16'))\"", "err"),
                         ("csv_header_only", f"head -1 {CSV} > t; mv t {CSV}", "any"), ("csv_empty_json_ok", f": > {CSV}", "err"),
                         ("csv_link_other_folder", f"rm {CSV}; ln -s ../r0/2026-12-06-vm-cpu2proc.csv {CSV}", "err"),
                         ("out_is_link_to_r0", "rm -rf rz7; ln -s r0 rz7", "any"),
                         ("json_rows_swapped_model", f"sed -i 's/\"mlp\"/\"gpt\"/g' {JS}", "any"),
                         ("csv_nul", f"printf '\\x00' >> {CSV}", "err")]:
    chk = unchanged("r0/2026-12-06-vm-cpu2proc.csv", "r0/2026-12-06-vm-cpu2proc.json") if "r0" in setup else None
    case(f"resume7_{name}", FR + setup + "; " + RR, exp, check=chk, timeout=300)
# ---- (2) PIPEBENCH_* environment variables (given through env=, never in the command text)
PLZ = "$P plan --model mlp --flavour tiny --stages 2 --batch 8"
PLF = "$P plan --model m/good.py:Net --input-shape 4 --stages 2 --batch 8 --fresh"
for name, var, val, cmd, exp in [
        ("drift_empty", "PIPEBENCH_DRIFT_SECONDS", "", PLZ, "err"), ("drift_zero", "PIPEBENCH_DRIFT_SECONDS", "0", PLZ, "err"),
        ("drift_inf", "PIPEBENCH_DRIFT_SECONDS", "inf", PLZ, "err"), ("drift_nan", "PIPEBENCH_DRIFT_SECONDS", "nan", PLZ, "err"),
        ("drift_most", "PIPEBENCH_DRIFT_SECONDS", "3600", PLZ, "err"), ("drift_hex", "PIPEBENCH_DRIFT_SECONDS", "0x10", PLZ, "err"),
        ("drift_tiny", "PIPEBENCH_DRIFT_SECONDS", "1e-300", PLZ + " --fresh", "any"), ("drift_fullwidth", "PIPEBENCH_DRIFT_SECONDS", "５", PLZ, "any"),
        ("drift_advise_neg", "PIPEBENCH_DRIFT_SECONDS", "-1", "$P advise --model mlp --flavour tiny --stages 2 --batch 8", "err"),
        ("drift_run_bad", "PIPEBENCH_DRIFT_SECONDS", "x", R + " --out re7a", "err"), ("drift_train_bad", "PIPEBENCH_DRIFT_SECONDS", "x", T, "any"),
        ("import_zero", "PIPEBENCH_IMPORT_SECONDS", "0", PLF, "err"), ("import_nan", "PIPEBENCH_IMPORT_SECONDS", "nan", PLF, "err"),
        ("import_empty", "PIPEBENCH_IMPORT_SECONDS", "", PLF, "err"), ("import_most", "PIPEBENCH_IMPORT_SECONDS", "1e6", PLF, "err"),
        ("import_tiny", "PIPEBENCH_IMPORT_SECONDS", "1e-9", PLF, "err"), ("import_run_bad", "PIPEBENCH_IMPORT_SECONDS", "x", "$P run --models m/good.py:Net --input-shape 4 --batch 8 --strategies single --steps 1 --warmup 0 --rounds 1 --out re7b", "err"),
        ("import_train_bad", "PIPEBENCH_IMPORT_SECONDS", "x", T, "err"), ("import_zoo_bad", "PIPEBENCH_IMPORT_SECONDS", "x", PLZ, "any"),
        ("cache_is_file", "PIPEBENCH_CACHE", "/tmp/b6/work/p.json", PLZ, "err"), ("cache_devnull", "PIPEBENCH_CACHE", "/dev/null", PLZ, "err"),
        ("cache_under_file", "PIPEBENCH_CACHE", "/tmp/b6/work/p.json/sub", PLZ, "err"), ("cache_long", "PIPEBENCH_CACHE", "/tmp/b6/work/" + "x" * 5000, PLZ, "err"),
        ("cache_proc", "PIPEBENCH_CACHE", "/proc/self/x", PLZ, "err"), ("cache_OFF_upper", "PIPEBENCH_CACHE", "OFF", PLZ, "ok"),
        ("cache_off_space", "PIPEBENCH_CACHE", " off", PLZ, "any"), ("cache_unicode_dir", "PIPEBENCH_CACHE", "/tmp/b6/work/cäche ✓", PLZ, "ok"),
        ("cache_tilde_nouser", "PIPEBENCH_CACHE", "~nosuchuser7/c", PLZ, "any"), ("cache_file_run", "PIPEBENCH_CACHE", "/tmp/b6/work/p.json", R + " --out re7c", "err"),
        ("link_cache_file", "PIPEBENCH_LINK_CACHE", "/tmp/b6/work/p.json", PLZ, "err"), ("link_cache_long", "PIPEBENCH_LINK_CACHE", "/tmp/b6/work/" + "y" * 5000, PLZ, "err"),
        ("link_cache_devnull", "PIPEBENCH_LINK_CACHE", "/dev/null", PLZ, "err"),
        ("parent_letters", "PIPEBENCH_PARENT", "abc", PLF, "ok"), ("parent_one", "PIPEBENCH_PARENT", "1", PLF, "ok"),
        ("parent_neg", "PIPEBENCH_PARENT", "-5", PLF, "ok"), ("parent_huge", "PIPEBENCH_PARENT", "9" * 30, PLF, "ok"),
        ("temp_set", "PIPEBENCH_TEMP", "/tmp/b6/work/victim7", PLF, "ok"), ("run_garbage", "PIPEBENCH_RUN", "garbage", PLF, "ok"),
        ("run_other_folder", "PIPEBENCH_RUN", "1 /tmp/b6/work/victim7", PLF, "ok"), ("tmpdir_missing", "TMPDIR", "/tmp/b6/nothere7", PLF, "ok"),
        ("tmpdir_file", "TMPDIR", "/tmp/b6/work/p.json", PLF, "ok"), ("parent_letters_run", "PIPEBENCH_PARENT", "abc", R + " --out re7d", "ok"),
        ("parent_letters_train_ddp", "PIPEBENCH_PARENT", "abc", T.replace("single", "ddp"), "ok")]:
    env = {var: val}
    if name in ("drift_tiny",): env["PIPEBENCH_CACHE"] = "off"
    setup = "rm -rf victim7; mkdir -p victim7; echo keep > victim7/keep.txt" if "victim7" in val else None
    chk = (lambda r: (_os.path.exists("/tmp/b6/work/victim7/keep.txt"), "victim kept" if _os.path.exists("/tmp/b6/work/victim7/keep.txt") else "VICTIM REMOVED")) if setup else None
    case(f"env7_{name}", cmd, exp, env=env, setup=setup, check=chk, timeout=200)
# the two internal ones together: a child told a pid that is not its parent, and a folder to remove
case("env7_parent_one_and_temp", PLF, "ok", env={"PIPEBENCH_PARENT": "1", "PIPEBENCH_TEMP": "/tmp/b6/work/victim7"},
     setup="rm -rf victim7; mkdir -p victim7; echo keep > victim7/keep.txt",
     check=lambda r: (_os.path.exists("/tmp/b6/work/victim7/keep.txt"), "victim kept" if _os.path.exists("/tmp/b6/work/victim7/keep.txt") else "VICTIM REMOVED"))
# ---- (5) signals to run --quick --models mlp --strategies single,ddp
RQ = "$PY -m pipebench run --quick --models mlp --strategies single,ddp --out rsq7"
def sig7(name, signal, delay, cmd, second=None, want_rc=None):
    def check(r):
        o = r["out"]; ok = " LEFT=0 " in o and "NEWTMP=0 " in o and "TB=0" in o and ("TMP=0 " in o or "TMP=1 torchinductor_root " in o)
        if want_rc is not None: ok = ok and o.startswith(f"RC={want_rc} ")
        return ok, o.strip()[-240:]
    case(f"sig7_{name}", f"rm -rf rsq7 rsq7k; flock /tmp/pipebench-cpu.lock bash sig7.sh {signal} {delay} {second or ''} -- {cmd}", "custom", check=check, timeout=300)
for d in (0.3, 1, 3, 6, 10, 16):
    sig7(f"int_{d}s", "INT", d, RQ, want_rc=130)
for d in (1, 5, 12):
    sig7(f"term_{d}s", "TERM", d, RQ)
for d in (1, 4, 9, 15):
    sig7(f"kill_{d}s", "KILL", d, RQ)
for d in (2, 8):
    sig7(f"int_twice_{d}s", "INT", d, RQ, second=0.5, want_rc=130)
sig7("hup_6s", "HUP", 6, RQ)
sig7("int_resume_keeps_rows", "INT", 14, "$PY -m pipebench run --quick --models mlp --strategies single,ddp --resume --out rsq7k")
# ---- (6) data sets in m/ds6.py
for f in ["good", "float_targets", "targets_oob", "exits", "returns_loader", "returns_list_tensors", "int_inputs", "inf_inputs", "meta_inputs",
          "item_raises", "neg_len", "iterable_inf", "with_args", "requires_grad_inputs", "wide_targets", "nothere"]:
    exp = "ok" if f in ("good", "returns_loader", "requires_grad_inputs") else "any" if f in ("inf_inputs", "iterable_inf", "float_targets") else "err"
    case(f"data7_{f}", f"$P train {G} --data m/ds6.py:{f} --batch 8 --steps 2 --strategy single", exp, timeout=200)
# ---- (7) valid inputs that must be accepted
for name, cmd in [("plan_maxmem_space", f"{PP} --max-memory '1 GiB'"), ("plan_maxmem_sci", f"{PP} --max-memory 1e9"),
                  ("plan_link_half", f"{PP} --link-gbps 0.5"), ("plan_batch16_chunks4", "$P plan --model mlp --flavour tiny --stages 2 --batch 16 --chunks 4"),
                  ("plan_json_stdout", f"{PP} --json - | $PY -c 'import json,sys; json.load(sys.stdin)'"),
                  ("plan_json_unicode_path", f"{PP} --json 'plän ü ✓.json' && test -s 'plän ü ✓.json'"),
                  ("plan_speeds_two", f"{PP} --speeds 1,2"), ("plan_maxmem_two", f"{PP} --max-memory 1GiB,2GiB"),
                  ("plan_timeout_big", "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --timeout 1e3"),
                  ("plan_schedule_interleaved", f"$P plan --model mlp --flavour tiny --stages 2 --batch 8 --schedule interleaved --virtual-stages 2"),
                  ("advise_chunks_auto", f"{AP} --chunks auto"), ("advise_json_stdout", f"{AP} --json - | $PY -c 'import json,sys; json.load(sys.stdin)'"),
                  ("run_strategies_spaces", "$P run --models mlp --flavour tiny --batch 8 --strategies 'single, ddp' --steps 1 --warmup 0 --rounds 1 --out rv7a"),
                  ("run_out_unicode", "$P run --models mlp --flavour tiny --batch 8 --strategies single --steps 1 --warmup 0 --rounds 1 --out 'résultats ✓'"),
                  ("run_resume_fresh_folder", "rm -rf rv7c; $P run --models mlp --flavour tiny --batch 8 --strategies single --steps 1 --warmup 0 --rounds 1 --resume --out rv7c"),
                  ("run_resume_r0_copy", "rm -rf rv7d; cp -a r0 rv7d; $P run --models mlp --flavour tiny --batch 8 --strategies single --steps 1 --warmup 0 --rounds 1 --resume --out rv7d"),
                  ("report_r0", "rm -rf rv7e; $P report r0 --out rv7e"), ("report_json", f"rm -rf rv7f; $P report {RC}.json --out rv7f"),
                  ("report_csv", f"rm -rf rv7g; $P report {RC}.csv --out rv7g"),
                  ("train_lr_csv", f"rm -f tv7.csv; {T} --lr 0.1 --csv tv7.csv && test -s tv7.csv"),
                  ("train_epochs", f"$P train {G} --data m/data.py:data --batch 8 --epochs 1 --strategy single"),
                  ("train_save_resume", f"rm -rf sv7.pt sv7.pt.train; {T} --save sv7.pt && $P train {G} --data m/data.py:data --batch 8 --steps 4 --strategy single --save sv7.pt --resume"),
                  ("train_pp2", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 2"),
                  ("plan_set_depth", "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --set depth=4"),
                  ("plan_model_file_abs", f"$P plan --model /tmp/b6/work/m/good.py:Net --input-shape 4 --stages 2 --batch 8"),
                  ("plan_model_path_spaces", "mkdir -p 'sp ace ✓'; cp m/good.py 'sp ace ✓/g.py'; $P plan --model 'sp ace ✓/g.py:Net' --input-shape 4 --stages 2 --batch 8"),
                  ("plan_input_shape_spaces", "$P plan --model m/good.py:Net --input-shape ' 4 ' --stages 2 --batch 8"),
                  ("plan_stages_equals", "$P plan --model=mlp --flavour=tiny --stages=2 --batch=8"),
                  ("plan_profile_symlink", "ln -sfn p.json plink7.json; $P plan --profile plink7.json --stages 2"),
                  ("plan_profile_crlf", "sed 's/$/\\r/' p.json > pcrlf7.json; $P plan --profile pcrlf7.json --stages 2"),
                  ("plan_profile_readonly", "cp p.json pro7.json; chmod 444 pro7.json; $P plan --profile pro7.json --stages 2"),
                  ("plan_profile_bom", "printf '\\xef\\xbb\\xbf' > pbom7.json; cat p.json >> pbom7.json; $P plan --profile pbom7.json --stages 2")]:
    exp = "any" if name in ("plan_profile_bom",) else "ok"
    case(f"valid7_{name}", cmd, exp, env={"PIPEBENCH_DRIFT_SECONDS": "0.5"} if name == "plan_timeout_big" else None, timeout=300)
