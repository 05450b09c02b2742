"""The fifth pass's inputs. $P = pipebench under flock+timeout, $PY the venv's python, run from /tmp/b5/work."""
import json, os, re, shlex
from driver import case

W = "/tmp/b5/work"
G = "--model m/good.py:Net --input-shape 4"
T = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single"
PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8"
AD = "$P advise --model mlp --flavour tiny --stages 2 --batch 8"
LOCK = "OMP_NUM_THREADS=1 flock /tmp/pipebench-cpu.lock timeout 120"

def unchanged(path):
    import hashlib
    p = f"{W}/{path}"; state = {}
    def prime(): state["b"] = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None
    def check(r):
        after = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None
        return (after == state["b"], "" if after == state["b"] else f"{path} changed")
    check.prime = prime
    return check

def says(text):
    def check(r):
        ok = text in r["out"] + r["err"]; return ok, "" if ok else f"output lacks {text!r}"
    return check

def lacks(text):
    def check(r):
        ok = text not in r["out"] + r["err"]; return ok, "" if ok else f"output has {text!r}"
    return check

def api(name, code, expect="err", check=None, timeout=150):
    # through -c, not as a script: a script calling pipebench.run without a __main__ guard is F1's input, tried once below
    case(f"api_{name}", f"{LOCK} $PY -c \"exec(open('m/apih.py').read())\" {shlex.quote(code)}", expect, check=check, timeout=timeout)

# ------------------------------------------------------------------ model files that misbehave
OP = "$P plan --input-shape 4 --stages 2 --batch 8 --model"
for f, exp in [("printy.py:Net", "ok"), ("sysexit0.py:Net", "err"), ("kbint.py:Net", "err"), ("patch.py:Net", "any"),
               ("defmeta.py:Net", "any"), ("thread.py:Net", "any"), ("ignsig.py:Net", "ok"), ("chdir.py:Net", "ok"),
               ("nostdout.py:Net", "any"), ("reclimit.py:Net", "any"), ("atexit7.py:Net", "any"), ("envmod.py:Net", "ok"),
               ("nul.py:Net", "err"), ("empty.py:Net", "err"), ("utf16.py:Net", "err"), ("latin1.py:Net", "ok"),
               ("globals.py:Net", "ok"), ("zero.py:Net", "err"), ("fifo.py:Net", "err"), ("dir.py:Net", "err"),
               ("selfimp.py:Net", "any")]:
    case(f"mf_plan_{f.split('.')[0]}", f"{OP} m/{f}", exp, timeout=150)
case("mf_printy_json_stdout", "$P plan --input-shape 4 --stages 2 --batch 8 --model m/printy.py:Net --json - | $PY -c 'import json,sys; json.load(sys.stdin); print(\"JSONOK\")'",
     "custom", check=lambda r: ("JSONOK" in r["out"], "stdout is not the plan's JSON alone" if "JSONOK" not in r["out"] else ""))
case("mf_train_printy", f"$P train --model m/printy.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single", "ok")
case("mf_train_patch_pp", f"$P train --model m/patch.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 2", "any")
case("mf_train_thread", f"$P train --model m/thread.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single", "any")
case("mf_train_chdir_ddp", f"$P train --model m/chdir.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy ddp", "ok")
case("mf_advise_sysexit0", "$P advise --input-shape 4 --stages 2 --batch 8 --model m/sysexit0.py:Net", "err")
case("mf_run_kbint", "$P run --models m/kbint.py:Net --input-shape 4 --batch 8 --strategies single --out rkb", "any",
     check=lambda r: (r["rc"] != 0 or "unavailable" in r["out"] + r["err"] or "failed" in r["out"] + r["err"], f"rc={r['rc']}"))
for n, exp in [("NotClass", "err"), ("Text", "err"), ("Instance", "any"), ("Lam", "err"), ("ret_none", "err"), ("ret_tuple", "err"),
               ("meta", "err"), ("BuffersOnly", "err"), ("Recurse", "err"), ("RetNone", "err"), ("RetInt", "err"),
               ("NeedsArgs", "err"), ("NoSuper", "err"), ("Frozen", "err"), ("Complex", "any"), ("NanW", "any"),
               ("Deep", "ok"), ("AuxOut", "ok"), ("InPlaceInput", "any"), ("ScalarOut", "err"), ("IntParams", "ok"), ("Missing", "err")]:
    case(f"odd_plan_{n}", f"{OP} m/odd.py:{n}", exp, timeout=200)
for n, exp in [("BuffersOnly", "err"), ("Frozen", "err"), ("meta", "err"), ("Recurse", "err"), ("IntParams", "ok"), ("AuxOut", "ok")]:
    case(f"odd_train_{n}", f"$P train --model m/odd.py:{n} --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy single", exp)
case("odd_train_IntParams_pp", f"$P train --model m/odd.py:IntParams --input-shape 4 --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 2", "any")
case("odd_run_Deep", "$P run --models m/odd.py:Deep --input-shape 4 --batch 8 --strategies single,pp-1f1b --out rdeep", "ok", timeout=300)

# ------------------------------------------------------------------ --data functions of new kinds
for f, exp in [("gen", "err"), ("tuple_pairs", "any"), ("dict_ds", "any"), ("nested_input", "any"), ("triple", "any"),
               ("neg_targets", "err"), ("nan_inputs", "err"), ("half_inputs", "any"), ("wrong_width", "err"), ("len_zero", "err"),
               ("len_7", "err"), ("noncontig", "ok"), ("prints", "ok"), ("sysexit", "err"), ("kbint", "err"),
               ("tensor_itself", "err"), ("bool_true", "err")]:
    case(f"data_{f}", f"$P train {G} --data m/ds5.py:{f} --batch 8 --steps 2 --strategy single", exp)

# ------------------------------------------------------------------ --set values
for v, exp in [("depth=２", "any"), ("=3", "err"), ("depth==3", "err"), ("a=b=c", "err"), ("dépth=2", "err"), ("depth=", "err"),
               ("depth=1e3", "err"), ("depth=nan", "err"), ("depth=0", "err"), ("depth=True", "err"), (" depth=2", "any"),
               ("depth=2\n", "any"), ("width=3", "any"), ("depth=10000000", "err"), ("\u202edepth=2", "err"), ("hidden=-4", "err")]:
    case(f"set_{re.sub(r'[^a-z0-9]', '_', v.encode('unicode_escape').decode())}", f"{PL} --set {shlex.quote(v)}", exp)
case("set_own_model_key", f"$P plan {G} --stages 2 --batch 8 --set depth=2", "err")
case("set_twice_same", f"{PL} --set depth=2 --set depth=3", "any")
case("set_gpt_heads_not_dividing", "$P plan --model gpt --flavour tiny --stages 2 --batch 4 --set heads=3", "err")

# ------------------------------------------------------------------ torchvision models, valid and not
TV = "$P plan --stages 2 --batch 4 --repeats 1 --model torchvision.models:"
case("tv_squeezenet1_0", f"{TV}squeezenet1_0 --input-shape 3,64,64 --num-classes 10", "ok", timeout=300)
case("tv_mobilenet_v3_small_nc10", f"{TV}mobilenet_v3_small --input-shape 3,64,64 --num-classes 10", "ok", timeout=300)
case("tv_mnasnet0_5", f"{TV}mnasnet0_5 --input-shape 3,32,32", "ok", timeout=300)
case("tv_inception_v3_aux", f"{TV}inception_v3 --input-shape 3,75,75 --num-classes 10", "any", timeout=300)
case("tv_vit_b_16_wrong_size", f"{TV}vit_b_16 --input-shape 3,64,64", "err", timeout=300)
case("tv_resnet18_1channel", f"{TV}resnet18 --input-shape 1,64,64", "err", timeout=300)
case("tv_get_model", f"{TV}get_model --input-shape 3,32,32", "err")
case("tv_weights_enum", f"{TV}ResNet18_Weights --input-shape 3,32,32", "err")
case("tv_nonexistent", f"{TV}resnet9000 --input-shape 3,32,32", "err")
case("tv_module_not_callable", "$P plan --stages 2 --batch 4 --model torchvision:models --input-shape 3,32,32", "err")
case("tv_detection", "$P plan --stages 2 --batch 2 --repeats 1 --model torchvision.models.detection:fasterrcnn_mobilenet_v3_large_fpn --input-shape 3,64,64", "err", timeout=300)
case("tv_squeezenet_flavour_none", f"{TV}squeezenet1_0 --input-shape 3,64,64 --flavour none", "err")
case("tv_squeezenet_nc_0", f"{TV}squeezenet1_0 --input-shape 3,64,64 --num-classes 0", "err")
case("tv_squeezenet_input_1d", f"{TV}squeezenet1_0 --input-shape 64", "err")
case("tv_train_mobilenet", "$P train --model torchvision.models:mobilenet_v3_small --input-shape 3,32,32 --num-classes 10 --batch 4 --steps 2 --strategy single", "any", timeout=300)
case("tv_no_input_shape", "$P plan --stages 2 --batch 4 --model torchvision.models:squeezenet1_0", "any")

# ------------------------------------------------------------------ option combinations
for d, exp in [("cuda:0", "err"), ("cuda:abc", "err"), ("cpu:0", "any"), ("CPU", "any"), ("mps", "err"), ("xla", "err"), ("cuda:-1", "err"), ("", "err")]:
    case(f"opt_plan_device_{re.sub(r'[^a-z0-9]', '_', d.lower()) or 'empty'}", f"{PL} --device '{d}'", exp)
case("opt_train_device_cuda", f"{T} --device cuda", "err")
case("opt_train_gpus_0", f"{T} --gpus 0", "err")
case("opt_train_stages_4_three_layers", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 4", "err")
case("opt_train_pp_no_stages", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b", "any")
case("opt_train_stages_single", f"{T} --stages 2", "any")
case("opt_train_batch7_pp2", f"$P train {G} --data m/data.py:data --batch 7 --steps 2 --strategy pp-1f1b --stages 2", "any")
case("opt_train_bf16_pp", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 2 --precision bf16", "ok")
case("opt_train_compile_cudagraphs", f"{T} --compile cudagraphs", "err")
case("opt_train_checkpoint_auto_pp", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 2 --checkpoint auto", "any")
case("opt_train_ddp_batch_odd", f"$P train {G} --data m/data.py:data --batch 7 --steps 2 --strategy ddp", "any")
case("opt_train_fsdp_bf16_adamw", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy fsdp --precision bf16 --optimizer adamw", "any")
case("opt_plan_compile_default_timeout3", f"{PL} --fresh --compile default --timeout 3", "any", timeout=200)
case("opt_plan_compile_maxautotune_timeout2", f"{PL} --fresh --compile max-autotune --timeout 2", "any", timeout=200)
case("opt_plan_bf16_fresh_file", f"$P plan {G} --stages 2 --batch 8 --precision bf16 --fresh", "ok")
case("opt_plan_profile_with_model_other", "$P plan --profile p.json --model convnet --stages 2", "err")
case("opt_plan_profile_with_batch_other", "$P plan --profile p.json --stages 2 --batch 16", "err")
case("opt_plan_profile_bf16_over_tf32", "$P plan --profile p.json --stages 2 --precision bf16", "err")
case("opt_plan_profile_compile", "$P plan --profile p.json --stages 2 --compile default", "err")
case("opt_plan_stages_more_than_layers", "$P plan --profile pg.json --stages 4", "err")
case("opt_plan_batch_3_stages_2_chunks_2", f"$P plan {G} --stages 2 --batch 3 --chunks 2", "err")
case("opt_plan_vs_with_gpipe", "$P plan --profile p.json --stages 2 --schedule gpipe --virtual-stages 2", "err")
case("opt_plan_balance_uniform_zbv", "$P plan --profile p.json --stages 2 --schedule zbv --balance uniform", "any")
case("opt_plan_speeds_auto_cpu", "$P plan --profile p.json --stages 2 --speeds auto", "any")
case("opt_plan_maxmem_per_dev", "$P plan --profile p.json --stages 2 --max-memory 1GiB,2GiB", "any")
case("opt_plan_maxmem_unit_weird", "$P plan --profile p.json --stages 2 --max-memory 1.5e3MiB", "any")
case("opt_plan_maxmem_unit_lower", "$P plan --profile p.json --stages 2 --max-memory 1gib", "any")
case("opt_advise_gpus_and_device", "$P advise --profile p.json --gpus 0,1 --device cpu", "err")
case("opt_advise_max_memory_cpu_fresh", f"{AD} --max-memory 1KiB", "any")
case("opt_advise_checkpoint_always_chunks", "$P advise --profile p.json --stages 2 --checkpoint always --chunks 4", "any")
case("opt_advise_profile_of_file_model", "$P advise --profile pg.json --stages 2", "ok")
case("opt_run_device_cuda", "$P run --models mlp --strategies single --device cuda --out ro1", "err")
case("opt_run_compile_cudagraphs", "$P run --models mlp --strategies single --compile cudagraphs --out ro2", "err")
case("opt_run_compile_two_modes", "$P run --models mlp --strategies single --compile default,bogus --out ro3", "err")
case("opt_run_stages_and_gpus", "$P run --models mlp --strategies single --stages 2 --gpus 0 --out ro4", "err")
case("opt_run_min_seconds_nan", "$P run --models mlp --strategies single --min-seconds nan --out ro5", "err")
case("opt_run_auto_0", "$P run --models mlp --strategies auto:0 --out ro6", "err")
case("opt_run_auto_huge", "$P run --models mlp --strategies auto:99 --out ro7", "err")
case("opt_run_quick_flavour_full_given", "$P run --quick --models mlp --flavour full --strategies single --steps 1 --warmup 0 --rounds 1 --out ro8", "any", timeout=300)

# ------------------------------------------------------------------ checkpoint folders with links
RS = f"$P train {G} --data m/data.py:data --batch 8 --steps 4 --strategy single --save ckX.pt --resume"
FRESH = "rm -rf ckX.pt ckX.pt.train; cp -a ck.pt ckX.pt; cp -a ck.pt.train ckX.pt.train; touch -r ck.pt ckX.pt; "
def ck(name, setup, exp="err", check=None):
    case(f"resume_{name}", FRESH + setup + "; " + RS, exp, check=check)
ck("train_dir_link_other_run", "rm -rf ckX.pt.train; ln -s ck2.pt.train ckX.pt.train", "err", check=unchanged("ck2.pt.train/latest.json"))
ck("weights_link_other_run", "rm -f ckX.pt; ln -s ck2.pt ckX.pt", "err", check=unchanged("ck2.pt"))
ck("weights_link_same_run", "rm -f ckX.pt; ln -s ck.pt ckX.pt; $PY -c \"import os,json; d=json.load(open('ckX.pt.train/latest.json')); s=os.stat('ck.pt'); d['size']=s.st_size; d['mtime_ns']=s.st_mtime_ns; json.dump(d, open('ckX.pt.train/latest.json','w'))\"", "any", check=unchanged("ck.pt"))
ck("rank_link_devzero", "rm ckX.pt.train/rank0.pt; ln -s /dev/zero ckX.pt.train/rank0.pt")
ck("rank_link_weights", "rm ckX.pt.train/rank0.pt; ln ckX.pt ckX.pt.train/rank0.pt")
ck("rank_dangling_link", "rm ckX.pt.train/rank0.pt; ln -s nowhere.pt ckX.pt.train/rank0.pt")
ck("train_dir_link_loop", "rm -rf ckX.pt.train; ln -s ckX.pt.train ckX.pt.train")
ck("train_dir_link_proc", "rm -rf ckX.pt.train; ln -s /proc/self ckX.pt.train")
ck("latest_link_other_run", "rm ckX.pt.train/latest.json; ln -s ../ck2.pt.train/latest.json ckX.pt.train/latest.json", "err", check=unchanged("ck2.pt.train/latest.json"))
ck("rank_fifo", "rm ckX.pt.train/rank0.pt; mkfifo ckX.pt.train/rank0.pt")
ck("extra_rank1", "cp ckX.pt.train/rank0.pt ckX.pt.train/rank1.pt", "any")
ck("no_rank0", "rm ckX.pt.train/rank0.pt")
ck("latest_unicode_junk", "printf '{\"step\": 2, \"\\\\ud800\": 1}' > ckX.pt.train/latest.json")
ck("latest_huge", "$PY -c \"open('ckX.pt.train/latest.json','w').write('[' * 100000 + ']' * 100000)\"")
case("train_save_dangling_link", "rm -f dl.pt; ln -sfn nowhere_dir/dl.pt dl.pt; " + f"{T} --save dl.pt", "any")
case("train_save_link_to_other_ck", f"rm -f lo.pt; cp -a ck2.pt ck3.pt; ln -sfn ck3.pt lo.pt; {T} --save lo.pt", "any")
case("train_resume_without_save", f"{T} --resume", "err")
case("train_resume_missing", f"$P train {G} --data m/data.py:data --batch 8 --steps 4 --strategy single --save nothere.pt --resume", "any")

# ------------------------------------------------------------------ report on odd CSVs
H = "step,epoch,loss,samples_per_s,time_s"
case("report_csv_dup_header", f"printf 'step,step,loss,samples_per_s,time_s\\n1,1,1.0,100,0.1\\n' > rd1.csv; $P report rd1.csv --out rrd1", "any")
case("report_csv_header_twice", f"printf '{H}\\n{H}\\n1,1,1.0,100,0.1\\n' > rd2.csv; $P report rd2.csv --out rrd2", "any")
case("report_results_csv_header_only", "mkdir -p rho; head -1 r0/2026-12-05-vm-cpu2proc.csv > rho/x.csv; $P report rho/x.csv --out rrho", "err")
case("report_csv_huge_cell", f"$PY -c \"open('rd3.csv','w').write('{H}\\n1,1,' + '9'*2000000 + ',100,0.1\\n')\"; $P report rd3.csv --out rrd3", "any")
case("report_csv_nul", f"printf '{H}\\n1,1,1.0\\x00,100,0.1\\n' > rd4.csv; $P report rd4.csv --out rrd4", "any")
case("report_csv_unbalanced_quote", f"printf '{H}\\n1,1,\"1.0,100,0.1\\n' > rd5.csv; $P report rd5.csv --out rrd5", "any")
case("report_csv_many_columns", f"$PY -c \"open('rd6.csv','w').write('{H},' + ','.join('c%d'%i for i in range(100000)) + '\\n')\"; $P report rd6.csv --out rrd6", "any")
case("report_csv_empty", ": > rd7.csv; $P report rd7.csv --out rrd7", "err")
case("report_csv_binary", "cp ck.pt rd8.csv; $P report rd8.csv --out rrd8", "err")
case("report_csv_quoted_newline", f"printf '{H}\\n\"1\\n\",1,1.0,100,0.1\\n' > rd9.csv; $P report rd9.csv --out rrd9", "any")
case("report_csv_latin1", f"printf '{H},note\\n1,1,1.0,100,0.1,\\xe9\\n' > rd10.csv; $P report rd10.csv --out rrd10", "any")
case("report_csv_short_rows", f"printf '{H}\\n1,1\\n2\\n' > rd11.csv; $P report rd11.csv --out rrd11", "any")
case("report_results_json_csv_mismatch", "mkdir -p rmm; cp r0/*.json rmm/; printf 'a,b\\n1,2\\n' > rmm/2026-12-05-vm-cpu2proc.csv; $P report rmm --out rrmm", "any")
case("report_file_named_dash", f"cp trainlog.csv ./-; $P report - --out rrdash", "any")
case("report_out_unicode", f"$P report trainlog.csv --out 'räp_ü'", "ok")
case("report_same_file_twice", f"$P report trainlog.csv trainlog.csv --out rr2x", "any")
case("report_csv_utf16", f"$PY -c \"open('rd12.csv','wb').write(open('trainlog.csv').read().encode('utf-16'))\"; $P report rd12.csv --out rrd12", "err")
case("report_csv_loss_words", f"printf '{H}\\n1,1,NaN,100,0.1\\n2,1,-inf,100,0.2\\n' > rd13.csv; $P report rd13.csv --out rrd13", "any")

# ------------------------------------------------------------------ the Python API: types
PR = "pr = pipebench.load_profiles('p.json'); "
api("plan_np_stages", "pipebench.plan('mlp', flavour='tiny', stages=np.int64(2), batch=8)", "any")
api("plan_np_batch", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=np.int32(8))", "any")
api("plan_bool_stages", "pipebench.plan('mlp', flavour='tiny', stages=True, batch=8)")
api("plan_bool_batch", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=True)")
api("plan_huge_batch", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=10**30)")
api("plan_float_batch", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8.0)")
api("plan_np_float_batch", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=np.float64(8))")
api("plan_gpus_tuple_cpu", "pipebench.plan('mlp', flavour='tiny', gpus=(0, 1), batch=8)")
api("plan_gpus_np_array", "pipebench.plan('mlp', flavour='tiny', gpus=np.array([0, 1]), batch=8)")
api("plan_profiles_tuple", PR + "print(pipebench.plan(profiles=tuple(pr), stages=2).balance)", "ok")
api("plan_profiles_generator", PR + "pipebench.plan(profiles=(p for p in pr), stages=2)")
api("plan_profiles_mixed", PR + "pipebench.plan(profiles=[pr[0], 'x'], stages=2)")
api("plan_profiles_dict", PR + "pipebench.plan(profiles={1: pr[0]}, stages=2)")
api("plan_speeds_np", PR + "pipebench.plan(profiles=pr, stages=2, speeds=np.array([1.0, 0.5]))", "any")
api("plan_speeds_list", PR + "pipebench.plan(profiles=pr, stages=2, speeds=[1, 0.5])", "ok")
api("plan_speeds_bool", PR + "pipebench.plan(profiles=pr, stages=2, speeds=[True, True])")
api("plan_maxmem_str", PR + "pipebench.plan(profiles=pr, stages=2, max_memory='1GiB')", "any")
api("plan_maxmem_nan", PR + "pipebench.plan(profiles=pr, stages=2, max_memory=float('nan'))")
api("plan_maxmem_np", PR + "pipebench.plan(profiles=pr, stages=2, max_memory=np.float32(1e9))", "any")
api("plan_link_inf", PR + "pipebench.plan(profiles=pr, stages=2, link_gbps=float('inf'))", "any")
api("plan_link_complex", PR + "pipebench.plan(profiles=pr, stages=2, link_gbps=1j)")
api("plan_device_torch_device", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, device=torch.device('cpu'))", "any")
api("plan_device_path", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, device=Path('cpu'))")
api("plan_model_path_obj", "pipebench.plan(Path('m/good.py:Net'), settings={'input_shape': (4,)}, stages=2, batch=8)", "any")
api("plan_model_bytes", "pipebench.plan(b'mlp', flavour='tiny', stages=2, batch=8)")
api("plan_flavour_bytes", "pipebench.plan('mlp', flavour=b'tiny', stages=2, batch=8)")
api("plan_settings_np_int", "pipebench.plan('mlp', flavour='tiny', settings={'depth': np.int64(2)}, stages=2, batch=8)", "any")
api("plan_settings_unicode_key", "pipebench.plan('mlp', flavour='tiny', settings={'dépth': 2}, stages=2, batch=8)")
api("plan_settings_tuple_items", "pipebench.plan('mlp', flavour='tiny', settings=[('depth', 2)], stages=2, batch=8)")
api("plan_settings_input_shape_list", "pipebench.plan('m/good.py:Net', settings={'input_shape': [4]}, stages=2, batch=8)", "any")
api("plan_micro_batches_list", PR + "pipebench.plan(profiles=pr, stages=2, micro_batches=[2])", "any")
api("plan_micro_batches_bool", PR + "pipebench.plan(profiles=pr, stages=2, micro_batches=True)")
api("plan_schedule_np_str", PR + "pipebench.plan(profiles=pr, stages=2, schedule=np.str_('gpipe'))", "any")
api("plan_training_dict", PR + "pipebench.plan(profiles=pr, stages=2, training={'precision': 'bf16'})")
api("plan_training_and_precision", PR + "pipebench.plan(profiles=pr, stages=2, training=Training(), precision='bf16')")
api("plan_unknown_kw", PR + "pipebench.plan(profiles=pr, stages=2, stagse=3)")
api("plan_request_and_kw", PR + "pipebench.plan(profiles=pr, request=Request(), stages=2)", "any")
api("plan_request_wrong_type", PR + "pipebench.plan(profiles=pr, request={'batch': 8})")
api("request_devices_str", "Request(devices='cpu')")
api("request_devices_list", "print(Request(devices=['cpu', 'cpu']).devices)", "ok")
api("request_devices_empty", "Request(devices=())")
api("request_batch_np", "print(Request(batch=np.int64(8)).batch)", "any")
api("training_compile_empty", "Training(compile='')")
api("training_precision_none", "Training(precision=None)")
api("training_precision_space", "Training(precision='bf16 ')")
api("training_positional_junk", "Training('bf16', 'adamw', 'always', 'default', 1)")
api("profile_np_example", "pipebench.profile(nn.Linear(4, 3), np.zeros((2, 4), np.float32))")
api("profile_zero_batch", "pipebench.profile(nn.Linear(4, 3), torch.randn(0, 4))")
api("profile_list_example", "pipebench.profile(nn.Linear(4, 3), [torch.randn(2, 4)], batch=8)", "any")
api("profile_meta_module", "pipebench.profile(nn.Linear(4, 3, device='meta'), torch.randn(2, 4), batch=8)")
api("profile_example_meta", "pipebench.profile(nn.Linear(4, 3), torch.randn(2, 4, device='meta'), batch=8)")
api("profile_int_example_float_model", "pipebench.profile(nn.Linear(4, 3), torch.ones(2, 4, dtype=torch.long), batch=8)")
api("profile_example_requires_grad", "pipebench.profile(nn.Linear(4, 3), torch.randn(2, 4, requires_grad=True), batch=8)", "ok")
api("profile_module_class", "pipebench.profile(nn.Linear, torch.randn(2, 4), batch=8)")
api("profile_scripted", "pipebench.profile(torch.jit.script(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))), torch.randn(2, 4), batch=8)", "any")
api("profile_loss_fn_not_callable", "pipebench.profile(nn.Linear(4, 3), torch.randn(2, 4), batch=8, loss_fn=5)")
api("profile_note_not_callable", "pipebench.profile('mlp', flavour='tiny', batch=8, note='x')")
api("advise_strategies_str", PR + "a = pipebench.advise(profiles=pr, stages=2, strategies='single'); print(a.recommended)", "any")
api("advise_strategies_tuple", PR + "print(pipebench.advise(profiles=pr, stages=2, strategies=('single', 'ddp')).recommended)", "ok")
api("advise_strategies_empty", PR + "pipebench.advise(profiles=pr, stages=2, strategies=[])")
api("advise_strategies_set", PR + "pipebench.advise(profiles=pr, stages=2, strategies={'single', 'ddp'})", "any")
api("advise_batch_np", PR + "pipebench.advise(profiles=pr, stages=2, batch=np.int64(8))", "any")
RUNO = "import tempfile; o = tempfile.mkdtemp(dir='/tmp/b5/work'); "
api("run_strategies_str", RUNO + "r = pipebench.run(['mlp'], strategies='single', out=o, steps=1, warmup=0, rounds=1); print(len(r[0]))", "any")
api("run_models_tuple", RUNO + "r = pipebench.run(('mlp',), strategies=['single'], out=Path(o), steps=1, warmup=0, rounds=1); print([x.get('status') if isinstance(x, dict) else x for x in r[0]])", "ok")
api("run_models_bool_batch", RUNO + "pipebench.run({'mlp': True}, strategies=['single'], out=o)")
api("run_models_np_batch", RUNO + "pipebench.run({'mlp': np.int64(8)}, strategies=['single'], out=o, steps=1, warmup=0, rounds=1)", "any")
api("run_models_float_batch", RUNO + "pipebench.run({'mlp': 8.5}, strategies=['single'], out=o)")
api("run_models_set", RUNO + "pipebench.run({'mlp'}, strategies=['single'], out=o)")
api("run_steps_bool", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, steps=True)")
api("run_steps_huge", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, steps=2**70)")
api("run_steps_np", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, steps=np.int64(1), warmup=0, rounds=1)", "any")
api("run_out_int", "pipebench.run(['mlp'], strategies=['single'], out=123)")
api("run_out_bytes", "pipebench.run(['mlp'], strategies=['single'], out=b'/tmp/b5/work/rbytes', steps=1, warmup=0, rounds=1)", "any")
api("run_chunks_int", RUNO + "pipebench.run(['mlp'], strategies=['pp-1f1b'], out=o, chunks=2, steps=1, warmup=0, rounds=1)", "any")
api("run_chunks_bool", RUNO + "pipebench.run(['mlp'], strategies=['pp-1f1b'], out=o, chunks=[True])")
api("run_compiles_bogus", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, compiles=('bogus',))")
api("run_compiles_str", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, compiles='default')")
api("run_compiles_cudagraphs", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, compiles=('cudagraphs',))")
api("run_training_compile_cudagraphs", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, training=Training(compile='cudagraphs'))")
api("run_training_compile_and_compiles", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, training=Training(compile='default'), compiles=('max-autotune',))")
api("run_training_str", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, training='bf16')")
api("run_timeout_nan", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, timeout=float('nan'))")
api("run_timeout_zero", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, timeout=0)")
api("run_warmup_neg", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, warmup=-1)")
api("run_rounds_zero", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, rounds=0)")
api("run_note_int", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, note=123)")
api("run_machine_str", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, machine='cpu')")
api("run_overrides_bad_value", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, overrides={'depth': 'x'})")
api("run_overrides_empty_key", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, overrides={'': 1})")
api("run_resume_str", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, resume='yes')")
api("run_quick_str", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, quick='no', steps=1, warmup=0, rounds=1)", "any")
api("run_again_int", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, again=1)")
api("run_data_dir_path_missing", RUNO + "pipebench.run(['convnet'], strategies=['single'], out=o, data_dir=Path('/nonexistent'))")
api("run_profiles_path_obj", RUNO + "pipebench.run(['mlp'], strategies=['single'], out=o, profiles=Path(o), steps=1, warmup=0, rounds=1)", "any")
api("run_quick_defaults_cpu", RUNO + "import time; t=time.time(); rows, c, j = pipebench.run(['mlp'], strategies=['single'], out=o); print('ROW', rows[-1] if rows else None); print('SECS', round(time.time()-t))", "ok",
    check=lambda r: ("tiny" in r["out"], "" if "tiny" in r["out"] else "not tiny"), timeout=300)
api("run_flavour_given_cpu", RUNO + "rows, c, j = pipebench.run(['mlp'], strategies=['single'], out=o, flavour='tiny', steps=1, warmup=0, rounds=1); print('ROW', rows[-1])", "ok")

# ------------------------------------------------------------------ caller's objects and global state
STATE = ("import signal, logging, warnings, copy\n"
         "def snap(): return dict(env=dict(os.environ), cwd=os.getcwd(), path=list(sys.path), sigint=signal.getsignal(signal.SIGINT), sigterm=signal.getsignal(signal.SIGTERM), "
         "mm=torch.get_float32_matmul_precision(), thr=torch.get_num_threads(), dt=torch.get_default_dtype(), det=torch.are_deterministic_algorithms_enabled(), grad=torch.is_grad_enabled(), "
         "rng=torch.get_rng_state().sum().item(), nprng=np.random.get_state()[1].sum(), log=list(logging.getLogger().handlers), lvl=logging.getLogger().level, warn=list(warnings.filters), relu=torch.nn.functional.relu, randn=torch.randn, mods=set(sys.modules) & {'odd', 'good', 'patch'})\n")
def state_case(name, call, allow_mods=False):
    code = STATE + "a = snap(); " + call + "; b = snap(); d = [k for k in a if a[k] != b[k]]; print('CHANGED', d) if d else print('SAME')"
    api(name, code, "custom", check=lambda r: ("SAME" in r["out"] and r["rc"] == 0, (r["out"].strip().splitlines() or [r["last"]])[-1][:200]), timeout=200)
state_case("state_plan_zoo", "pipebench.plan('mlp', flavour='tiny', stages=2, batch=8, fresh=True)")
state_case("state_plan_file_patch", "pipebench.plan('m/patch.py:Net', settings={'input_shape': (4,)}, stages=2, batch=8)")
state_case("state_plan_file_globals", "pipebench.plan('m/globals.py:Net', settings={'input_shape': (4,)}, stages=2, batch=8, fresh=True)")
state_case("state_plan_file_envmod", "pipebench.plan('m/envmod.py:Net', settings={'input_shape': (4,)}, stages=2, batch=8)")
state_case("state_plan_file_ignsig", "pipebench.plan('m/ignsig.py:Net', settings={'input_shape': (4,)}, stages=2, batch=8)")
state_case("state_plan_file_chdir", "pipebench.plan('m/chdir.py:Net', settings={'input_shape': (4,)}, stages=2, batch=8)")
state_case("state_advise_zoo", "pipebench.advise('mlp', flavour='tiny', stages=2, batch=8)")
state_case("state_run_zoo", RUNO.strip('; ') + "; pipebench.run(['mlp'], strategies=['single'], out=o, steps=1, warmup=0, rounds=1, note=None)")
state_case("state_plan_bf16_module", "pipebench.plan(nn.Linear(4, 3), torch.randn(2, 4), stages=1, batch=8, precision='bf16')")
MOD = ("m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)); m[0].weight.requires_grad_(False); m.eval(); "
       "before = ({k: v.clone() for k, v in m.state_dict().items()}, m.training, [p.requires_grad for p in m.parameters()], [p.grad for p in m.parameters()], "
       "len(m._forward_hooks) + sum(len(x._forward_hooks) + len(x._forward_pre_hooks) + len(x._backward_hooks) for x in m.modules()), m[0].weight.data_ptr()); ")
MODCHK = ("; after = ({k: v.clone() for k, v in m.state_dict().items()}, m.training, [p.requires_grad for p in m.parameters()], [p.grad for p in m.parameters()], "
          "len(m._forward_hooks) + sum(len(x._forward_hooks) + len(x._forward_pre_hooks) + len(x._backward_hooks) for x in m.modules()), m[0].weight.data_ptr()); "
          "diff = [n for n, x, y in zip(['state', 'training', 'requires_grad', 'grad', 'hooks', 'storage'], before, after) if (not all(torch.equal(x[k], y[k]) for k in x) if n == 'state' else x != y)]; "
          "print('CHANGED', diff) if diff else print('SAME')")
for name, call in [("plan", "pipebench.plan(m, torch.randn(2, 4), stages=2, batch=8)"),
                   ("profile_bf16", "pipebench.profile(m, torch.randn(2, 4), batch=8, precision='bf16')"),
                   ("advise", "pipebench.advise(m, torch.randn(2, 4), stages=2, batch=8)")]:
    api(f"module_{name}", MOD + call + MODCHK, "custom", check=lambda r: ("SAME" in r["out"] and r["rc"] == 0, (r["out"].strip().splitlines() or [r["last"]])[-1][:200]), timeout=200)
api("module_eval_mode_caller_frozen_all", "m = nn.Linear(4, 3); m.requires_grad_(False); pipebench.plan(m, torch.randn(2, 4), stages=1, batch=8)")

# ------------------------------------------------------------------ interrupts: the parent signalled, workers and temp files after 5 s
PYP = "$PY -m pipebench"
def sig(name, signal, delay, cmd):
    case(f"sig_{name}", f"flock /tmp/pipebench-cpu.lock bash sig.sh {signal} {delay} {cmd}", "custom",
         check=lambda r: (" LEFT=0 TMP=0 " in r["out"], r["out"].strip()[-200:]), timeout=200)
sig("kill_train_pp_loader_workers", "KILL", 12, f"{PYP} train {G} --data m/data.py:data --batch 8 --steps 100000 --strategy pp-1f1b --stages 2 --loader-workers 2")
sig("kill_train_ddp", "KILL", 12, f"{PYP} train {G} --data m/data.py:data --batch 8 --steps 100000 --strategy ddp")
sig("term_train_fsdp_save", "TERM", 12, f"{PYP} train {G} --data m/data.py:data --batch 8 --steps 100000 --strategy fsdp --save sigck.pt --save-every 5")
sig("int_plan_file_fresh_sleepy", "INT", 6, f"{PYP} plan --model m/odd.py:Sleepy --input-shape 4 --stages 2 --batch 8 --fresh --repeats 50")
sig("kill_plan_file_fresh_sleepy", "KILL", 6, f"{PYP} plan --model m/odd.py:Sleepy --input-shape 4 --stages 2 --batch 8 --fresh --repeats 50")
sig("kill_run_ddp_pp", "KILL", 15, f"{PYP} run --models mlp --strategies ddp,pp-1f1b --steps 2000 --out rsig1")
sig("term_run_ignsig_model", "TERM", 12, f"{PYP} run --models m/ignsig.py:Net --input-shape 4 --strategies ddp --steps 100000 --out rsig2")
sig("kill_train_ignsig_model", "KILL", 12, f"{PYP} train --model m/ignsig.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 100000 --strategy ddp")
sig("kill_train_thread_model", "KILL", 12, f"{PYP} train --model m/thread.py:Net --input-shape 4 --data m/data.py:data --batch 8 --steps 100000 --strategy single")
sig("int_advise_fresh", "INT", 5, f"{PYP} advise --model mlp --flavour tiny --stages 2 --batch 8 --fresh --repeats 200")
case("sig_term_save_kept", "ls sigck.pt sigck.pt.train/latest.json && $PY -c \"import torch; torch.load('sigck.pt', weights_only=True); print('LOADS')\"", "custom",
     check=lambda r: ("LOADS" in r["out"], r["last"][:200]))

case("api_script_no_main_guard_run", f"{LOCK} $PY runscript.py", "custom", check=lambda r: (not r["tb"] and "ROWS 1 ['ok']" in r["out"], r["out"].strip()[-80:]))
case("api_script_no_main_guard_side_effect", "rm -f se.log; printf 'import pipebench\\nopen(\"se.log\", \"a\").write(\"x\")\\npipebench.run([\"mlp\"], strategies=[\"single\"], out=\"rse\", steps=1, warmup=0, rounds=1, note=None)\\n' > se.py; " + f"{LOCK} $PY se.py; cat se.log", "custom",
     check=lambda r: (r["out"].strip().endswith("x") and not r["out"].strip().endswith("xx"), "se.log: " + r["out"].strip()[-20:]))
