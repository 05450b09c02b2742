"""The fourth pass's inputs. $P = pipebench under flock+timeout, run from /tmp/b4/work."""
import os, re
from driver import case

G = "--model m/good.py:Net --input-shape 4"
T = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single"
PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8"
AD = "$P advise --model mlp --flavour tiny --stages 2 --batch 8"
RN = "$P run --models mlp --flavour tiny --batch 8 --steps 2 --warmup 1"

def unchanged(path, digest_cmd=None):
    """check: the file's bytes are the same as before the case (taken at import of this module)"""
    import hashlib
    p = "/tmp/b4/work/" + path
    state = {}
    def prime():
        state["b"] = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None
    def check(r):
        before = state["b"]
        after = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None
        return (after == before, "" if after == before else f"{path} changed")
    check.prime = prime
    return check

def no_file(path):
    def check(r):
        e = os.path.lexists("/tmp/b4/work/" + path)
        return (not e, f"{path} exists" if e else "")
    return check

def says(text):
    def check(r):
        ok = text in r["out"] + r["err"]
        return ok, "" if ok else f"output lacks {text!r}"
    return check

# ---------------------------------------------------------------- plan: option combinations
for eng in ("torchtitan", "deepspeed", "megatron", "device-map"):
    case(f"plan_export_{eng}", f"$P plan --profile p.json --stages 2 --export {eng} ex_{eng}.json", "ok")
    case(f"plan_export_{eng}_interleaved", f"$P plan --profile p.json --stages 2 --schedule interleaved --virtual-stages 2 --export {eng} exi_{eng}.json", "any")
    case(f"plan_export_{eng}_zbv", f"$P plan --profile p.json --stages 2 --schedule zbv --export {eng} exz_{eng}.json", "any")
case("plan_export_bogus", "$P plan --profile p.json --stages 2 --export nemo ex.json")
case("plan_export_no_file", "$P plan --profile p.json --stages 2 --export torchtitan")
case("plan_export_engine_case", "$P plan --profile p.json --stages 2 --export TorchTitan ex.json", "any")
for s in ("gpipe", "1f1b", "interleaved", "zb", "zbv", "zb-interleaved", "dualpipev", "GPIPE", "bogus", ""):
    case(f"plan_schedule_{s or 'empty'}", f"$P plan --profile p.json --stages 2 --schedule '{s}'", "any")
case("plan_vs_interleaved_3", "$P plan --profile p.json --stages 2 --schedule interleaved --virtual-stages 3", "any")
case("plan_vs_zbv_1", "$P plan --profile p.json --stages 2 --schedule zbv --virtual-stages 1", "any")
for b in ("params", "uniform", "time", "TIME"):
    case(f"plan_balance_{b}", f"$P plan --profile p.json --stages 2 --balance {b}", "ok" if b != "TIME" else "err")
case("plan_gpus_and_stages", f"{PL} --gpus 0,1", "err")
case("plan_gpus_nogpu", "$P plan --profile p.json --gpus 0,1", "any")
case("plan_device_cuda_nogpu", f"{PL} --device cuda", "err")
case("plan_device_meta", f"{PL} --device meta", "err")
case("plan_compile_cpu", f"{PL} --compile cudagraphs", "any")
case("plan_precision_bf16", f"{PL} --precision bf16", "ok")
case("plan_precision_BF16", f"{PL} --precision BF16", "any")
case("plan_checkpoint_always", f"{PL} --checkpoint always", "ok")
case("plan_optimizer_adamw", f"{PL} --optimizer adamw", "ok")
case("plan_optimizer_adam", f"{PL} --optimizer adam", "err")
case("plan_speeds_cpu_mismatch", "$P plan --profile p.json --stages 2 --speeds 1,1,1", "err")
case("plan_speeds_cpu_ok", "$P plan --profile p.json --stages 2 --speeds 1,0.5", "ok")
case("plan_timeout_tiny", f"{PL} --fresh --timeout 0.001", "err")
case("plan_timeout_tiny_cached", f"{PL} --timeout 0.001", "any")
case("plan_input_dtype_zoo", f"{PL} --input-dtype float64", "any")
case("plan_num_classes_zoo", f"{PL} --num-classes 5", "any")
case("plan_token_range_gpt", "$P plan --model gpt --flavour tiny --stages 2 --batch 8 --token-range 10", "any")
case("plan_token_range_gpt_huge", "$P plan --model gpt --flavour tiny --stages 2 --batch 8 --token-range 100000000", "err")
case("plan_granularity_5_mlp", f"{PL} --granularity 5", "any")
case("plan_chunks_auto_sched", "$P plan --profile p.json --stages 2 --chunks auto --schedule gpipe", "ok")
case("plan_chunks_3_batch8", "$P plan --profile p.json --stages 2 --chunks 3", "err")
case("plan_maxmem_with_profile", "$P plan --profile p.json --stages 2 --max-memory 1KiB", "err")
case("plan_link_0", "$P plan --profile p.json --stages 2 --link-gbps 0", "ok")
case("plan_stages_1", "$P plan --profile p.json --stages 1", "any")
case("plan_batch1_stages2", "$P plan --model mlp --flavour tiny --stages 2 --batch 1", "any")
case("plan_eq_syntax", "$P plan --model=mlp --flavour=tiny --stages=2 --batch=8", "ok")
case("plan_abbrev", "$P plan --mod mlp --flav tiny --stag 2 --bat 8", "any")
case("plan_abbrev_ambiguous", "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --ch 2", "err")
case("plan_option_twice", f"{PL} --stages 3", "any")
case("plan_positional_junk", f"{PL} extra", "err")
case("plan_model_tilde", "cp m/good.py ~/b4good.py; $P plan --model '~/b4good.py:Net' --input-shape 4 --stages 2 --batch 8", "ok")
case("plan_model_dotslash", "$P plan --model ./m/good.py:Net --input-shape 4 --stages 2 --batch 8", "ok")
case("plan_model_dir_colon", "$P plan --model m:Net --input-shape 4 --stages 2 --batch 8", "err")
case("plan_model_pyc", "cp m/good.py m/goodc.py; $PY -m py_compile m/goodc.py; cp m/__pycache__/goodc*.pyc m/goodc.pyc; $P plan --model m/goodc.pyc:Net --input-shape 4 --stages 2 --batch 8", "any")
case("plan_model_no_py_ext", "cp m/good.py m/good_noext; $P plan --model m/good_noext:Net --input-shape 4 --stages 2 --batch 8", "any")
case("plan_json_dir", "mkdir -p outdir; $P plan --profile p.json --stages 2 --json outdir", "err")
case("plan_json_devfull", "$P plan --profile p.json --stages 2 --json /dev/full", "err")
case("plan_saveprof_devfull", f"{PL} --save-profile /dev/full", "err")
case("plan_export_devfull", "$P plan --profile p.json --stages 2 --export torchtitan /dev/full", "err")
case("plan_json_ro_dir", "mkdir -p rodir; chmod 555 rodir; $P plan --profile p.json --stages 2 --json rodir/x.json", "err")
case("plan_json_existing_ro_file", "$P plan --profile p.json --stages 2 --json ro.json", "any", setup="echo keep > ro.json; chmod 444 ro.json", check=unchanged("ro.json"))
case("plan_json_symlink_to_model", "$P plan --profile p.json --stages 2 --json link_to_good.json", "err", setup="cp m/data.py m/victim.py; ln -sf m/victim.py link_to_good.json", check=unchanged("m/victim.py"))
case("plan_json_hardlink_profile", "ln -f p.json p_hard.json; $P plan --profile p.json --stages 2 --json p_hard.json", "any", check=unchanged("p.json"))
case("plan_saveprof_is_datadir_file", f"{PL} --save-profile m/data.py", "err", check=unchanged("m/data.py"))
case("plan_profile_is_plan", "$P plan --profile plan.json --stages 2", "err")
case("plan_profile_is_results", "$P plan --profile r0/2026-12-04-vm-cpu2proc.json --stages 2", "err")
case("plan_profile_is_ckpt", "$P plan --profile ck.pt --stages 2", "err")
case("plan_profile_gz", "gzip -kf p.json; $P plan --profile p.json.gz --stages 2", "err")
case("advise_profile_is_plan", "$P advise --profile plan.json --stages 2", "err")

# ---------------------------------------------------------------- advise combos
case("advise_chunks_list", "$P advise --profile p.json --stages 2 --chunks 1,2", "ok")
case("advise_chunks_list_unmeasured", "$P advise --profile p.json --stages 2 --chunks 1,8", "any")
case("advise_json_and_saveprof_same", f"{AD} --json same.json --save-profile same.json", "err")
case("advise_gpus_nogpu", "$P advise --profile p.json --gpus 0,1", "any")
case("advise_speeds", "$P advise --profile p.json --stages 2 --speeds 1,0.5", "ok")
case("advise_compile_default", "$P advise --profile p.json --stages 2 --compile default", "any")
case("advise_checkpoint_auto_bf16_adamw", "$P advise --profile p.json --stages 2 --checkpoint auto --precision bf16 --optimizer adamw", "any")
case("advise_stages_1", "$P advise --profile p.json --stages 1", "any")
case("advise_stages_3_profile2", "$P advise --profile p.json --stages 3", "any")
case("advise_maxmem_tiny", "$P advise --profile p.json --stages 2 --max-memory 1KiB", "any")
case("advise_schedule_opt", "$P advise --profile p.json --stages 2 --schedule gpipe", "err")
case("advise_export_opt", "$P advise --profile p.json --stages 2 --export torchtitan x.json", "err")

# ---------------------------------------------------------------- run combos
case("run_quick_and_steps", f"$P run --quick --models mlp --strategies single --steps 3 --out rq1", "ok")
case("run_compile_cudagraphs_cpu", f"{RN} --strategies single --compile cudagraphs --out rc1", "any")
case("run_gpu_memory_cpu", f"{RN} --strategies single --gpu-memory 1GiB --out rc2", "any")
case("run_profiles_is_file", f"{RN} --strategies single --profiles p.json --out rc3", "err")
case("run_out_is_file", f"{RN} --strategies single --out p.json", "err", check=unchanged("p.json"))
case("run_out_devnull", f"{RN} --strategies single --out /dev/null", "err")
case("run_models_dup", f"$P run --models mlp,mlp --flavour tiny --batch 8 --steps 2 --warmup 1 --strategies single --out rc4", "any")
case("run_models_space", f"$P run --models 'mlp, convnet' --flavour tiny --batch 8 --steps 2 --warmup 1 --strategies single --out rc5", "any")
case("run_strategies_dup", f"{RN} --strategies single,single --out rc6", "any")
case("run_strategies_case", f"{RN} --strategies Single --out rc7", "any")
case("run_hybrid_2", f"{RN} --strategies hybrid --stages 2 --out rc8", "any")
case("run_pipeline_chunks3", f"{RN} --strategies pipeline --chunks 3 --out rc9", "any")
case("run_chunks_list_dup", f"{RN} --strategies pp-1f1b --chunks 2,2 --out rc10", "any")
case("run_convnet_datadir_missing", f"$P run --models convnet --flavour tiny --batch 8 --steps 2 --strategies single --data-dir /nonexistent --out rc11", "err")
case("run_convnet_datadir_mnist", f"$P run --models convnet --flavour tiny --batch 8 --steps 2 --warmup 1 --strategies single --data-dir mn_ok --out rc12", "ok")
case("run_set_other_model_key", f"$P run --models mlp,convnet --flavour tiny --batch 8 --steps 2 --strategies single --set depth=2 --out rc13", "any")
case("run_input_shape_zoo", f"{RN} --strategies single --input-shape 4 --out rc14", "any")
case("run_profiles_eq_out_plans", f"{RN} --strategies single --profiles r0/2026-12-04-vm-cpu2proc-plans --out rc15", "any")
case("run_resume_and_fresh", f"{RN} --strategies single --resume --fresh --out rc16", "any")
case("run_out_symlink_loop", "ln -sfn loopB loopA; ln -sfn loopA loopB; " + f"{RN} --strategies single --out loopA", "err")
case("run_out_in_proc", f"{RN} --strategies single --out /proc/self/x", "err")
case("run_try_anyway_no_cap", f"{RN} --strategies single --try-anyway --out rc17", "any")
case("run_speeds_auto_cpu", f"{RN} --strategies single --speeds auto --out rc18", "any")
case("run_granularity_mlp", f"{RN} --strategies pp-1f1b --granularity 2 --out rc19", "any")

# ---------------------------------------------------------------- train: options and data
case("train_ok", T, "ok")
case("train_epochs_and_steps", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --epochs 1 --strategy single", "err")
case("train_strategy_auto", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy auto", "ok")
case("train_strategy_bogus", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-foo", "err")
case("train_log_every_huge", f"{T} --log-every 1000000000", "any")
case("train_log_every_neg", f"{T} --log-every -1", "err")
case("train_save_every_gt_steps", f"{T} --save tsv.pt --save-every 100", "ok")
case("train_nodes_no_job", f"{T} --nodes 2", "err")
case("train_write_job_existing_file", f"{T} --write-job wjfile", "err", setup="echo keep > wjfile", check=unchanged("wjfile"))
case("train_write_job_is_model_dir", f"{T} --write-job m", "any", check=unchanged("m/good.py"))
case("train_save_is_model", f"{T} --save m/good.py", "err", check=unchanged("m/good.py"))
case("train_csv_is_data", f"{T} --csv m/data.py", "err", check=unchanged("m/data.py"))
case("train_csv_is_profile", f"{T} --csv p.json", "any", check=unchanged("p.json"))
case("train_save_dir", f"mkdir -p savedir; {T} --save savedir", "err")
case("train_save_train_folder_is_file", f"{T} --save st.pt", "err", setup="echo x > st.pt.train", check=unchanged("st.pt.train"))
case("train_save_symlink_devnull", f"ln -sf /dev/null sdn.pt; {T} --save sdn.pt", "err")
case("train_csv_symlink_to_model", f"{T} --csv csvlink.csv", "err", setup="ln -sf m/good.py csvlink.csv", check=unchanged("m/good.py"))
case("train_save_symlink_to_model", f"{T} --save savelink.pt", "err", setup="ln -sf m/good.py savelink.pt", check=unchanged("m/good.py"))
case("train_csv_existing_log", f"cp trainlog.csv tl2.csv; {T} --csv tl2.csv", "ok")
case("train_pipeline_stages2", f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy pp-1f1b --stages 2", "ok")
case("train_lr_0", f"{T} --lr 0", "any")
case("train_flavour_own_model", f"{T} --flavour tiny", "any")
case("train_set_own_model", f"{T} --set depth=3", "any")
case("train_precision_bf16", f"{T} --precision bf16", "ok")
case("train_checkpoint_always_single", f"{T} --checkpoint always", "any")
case("train_compile_default_cpu", f"{T} --compile default", "any", timeout=300)
case("train_loader_workers_2", f"{T} --loader-workers 2", "ok")
# data sets
DS = '''import torch
from torch.utils.data import Dataset, IterableDataset, DataLoader, Subset, ConcatDataset, TensorDataset
X = torch.randn(32, 4); Y = torch.randint(0, 3, (32,))
def iterable():
    class D(IterableDataset):
        def __iter__(self): return iter(zip(X, Y))
    return D()
def loader(): return DataLoader(TensorDataset(X, Y), batch_size=8)
def subset(): return Subset(TensorDataset(X, Y), list(range(16)))
def concat(): return ConcatDataset([TensorDataset(X, Y), TensorDataset(X, Y)])
def needs_arg(n): return TensorDataset(X, Y)
instance = TensorDataset(X, Y)
def int_inputs(): return TensorDataset(X.long(), Y)
def f64_inputs(): return TensorDataset(X.double(), Y)
def targets_float(): return TensorDataset(X, Y.float())
def targets_2d(): return TensorDataset(X, Y[:, None])
def input_3d(): return TensorDataset(X[:, None, :], Y)
def np_arrays():
    class D(Dataset):
        def __len__(self): return 32
        def __getitem__(self, i): return X[i].numpy(), int(Y[i])
    return D()
def list_pairs(): return [(X[i], Y[i]) for i in range(32)]
def huge_len():
    class D(Dataset):
        def __len__(self): return 2**62
        def __getitem__(self, i): return X[i % 32], Y[i % 32]
    return D()
def len_float():
    class D(Dataset):
        def __len__(self): return 32.0
        def __getitem__(self, i): return X[i], Y[i]
    return D()
def getitem_slow():
    import time
    class D(Dataset):
        def __len__(self): return 32
        def __getitem__(self, i): time.sleep(1000); return X[i], Y[i]
    return D()
def getitems_wrong():
    class D(Dataset):
        def __len__(self): return 32
        def __getitem__(self, i): return X[i], Y[i]
        def __getitems__(self, idx): return [(X[0], Y[0])]
    return D()
def bool_targets(): return TensorDataset(X, Y.bool())
def str_targets():
    class D(Dataset):
        def __len__(self): return 32
        def __getitem__(self, i): return X[i], "cat"
    return D()
def cuda_tensors_meta(): return TensorDataset(X.to("meta"), Y.to("meta"))
def changes_cwd():
    import os; os.chdir("/"); return TensorDataset(X, Y)
def returns_none_item():
    class D(Dataset):
        def __len__(self): return 32
        def __getitem__(self, i): return None
    return D()
'''
open("/tmp/b4/work/m/ds4.py", "w").write(DS)
for f, exp in [("iterable", "err"), ("loader", "err"), ("subset", "ok"), ("concat", "ok"), ("needs_arg", "err"),
               ("instance", "any"), ("int_inputs", "err"), ("f64_inputs", "any"), ("targets_float", "any"), ("targets_2d", "any"),
               ("input_3d", "any"), ("np_arrays", "any"), ("list_pairs", "any"), ("huge_len", "err"), ("len_float", "err"),
               ("getitem_slow", "err"), ("getitems_wrong", "any"), ("bool_targets", "any"), ("str_targets", "err"),
               ("cuda_tensors_meta", "err"), ("changes_cwd", "any"), ("returns_none_item", "err")]:
    case(f"train_data_{f}", f"$P train {G} --data m/ds4.py:{f} --batch 8 --steps 2 --strategy single", exp, timeout=200)
# tokens
GPT = "$P train --model gpt --flavour tiny --batch 4 --steps 2 --strategy single"
case("tok_ok", f"{GPT} --data tokens:tok_ok.bin", "ok")
case("tok_bigid", f"{GPT} --data tokens:tok_bigid.bin", "err")
case("tok_devzero", f"{GPT} --data tokens:/dev/zero", "err")
case("tok_symlink_devzero", f"ln -sf /dev/zero tz.bin; {GPT} --data tokens:tz.bin", "err")
case("tok_proc_file", f"{GPT} --data tokens:/proc/self/stat", "err")
case("tok_dir", f"{GPT} --data tokens:m", "err")
case("tok_input_shape_2d", f"{GPT} --data tokens:tok_ok.bin --input-shape 4,4", "err")
case("tok_input_shape_long", f"{GPT} --data tokens:tok_ok.bin --input-shape 5000", "err")
case("tok_own_float_model", f"$P train {G} --data tokens:tok_ok.bin --batch 8 --steps 2 --strategy single", "err")
case("tok_pipeline", f"$P train --model gpt --flavour tiny --batch 4 --steps 2 --strategy pp-1f1b --stages 2 --data tokens:tok_ok.bin", "ok")
case("tok_unreadable", f"cp tok_ok.bin tok_noperm.bin; chmod 000 tok_noperm.bin; {GPT} --data tokens:tok_noperm.bin", "err")
case("tok_name_colon", f"cp tok_ok.bin 'tok:x.bin'; {GPT} --data 'tokens:tok:x.bin'", "ok")
case("tok_uppercase_kind", f"{GPT} --data TOKENS:tok_ok.bin", "any")
# mnist
CNV = "$P train --model convnet --flavour tiny --batch 8 --steps 2 --strategy single"
for d, exp in [("mn_ok", "ok"), ("mn_label_mismatch", "err"), ("mn_label_11", "err"), ("mn_shape_14", "err"), ("mn_trunc", "err"),
               ("mn_header_huge", "err"), ("mn_magic_bad", "err"), ("mn_fewer_than_batch", "err"), ("mn_test_only_bad", "any"),
               ("mn_fifo", "err"), ("mn_zero", "err")]:
    case(f"train_{d}", f"{CNV} --data mnist:{d}", exp)
case("train_mnist_own_model_wrong", f"$P train {G} --data mnist:mn_ok --batch 8 --steps 2 --strategy single", "err")
case("train_mnist_with_gpt", f"$P train --model gpt --flavour tiny --batch 8 --steps 2 --strategy single --data mnist:mn_ok", "err")
case("plan_convnet_datadir_trunc", "$P plan --model convnet --flavour tiny --stages 2 --batch 8 --data-dir mn_trunc --fresh", "err")
case("plan_mlp_datadir", f"{PL} --data-dir mn_ok", "any")

# ---------------------------------------------------------------- resume / checkpoint tampering
RS = f"$P train {G} --data m/data.py:data --batch 8 --steps 4 --strategy single --save ckX.pt --resume"
def ck(setup, name, exp="err", check=None):
    case(f"resume_{name}", "rm -rf ckX.pt ckX.pt.train; cp -a ck.pt ckX.pt; cp -a ck.pt.train ckX.pt.train; touch -r ck.pt ckX.pt; " + setup + "; " + RS, exp, check=check)
ck("true", "ok", "ok")
MAL = ('$PY -c "import torch,os\nclass E:\n  def __reduce__(self): return (os.system, (\'touch /tmp/b4/work/PWNED\',))\n'
       'torch.save({\'x\': E()}, \'ckX.pt.train/rank0.pt\')"')
ck("rm -f PWNED; " + MAL, "malicious_rank_state", "err", check=no_file("PWNED"))
ck("$PY -c \"import zipfile; z=zipfile.ZipFile('ckX.pt.train/rank0.pt','w'); z.writestr('x','y'); z.close()\"", "zip_not_torch")
ck("head -c 200 ck.pt.train/rank0.pt > ckX.pt.train/rank0.pt", "rank_truncated")
ck("$PY -c \"import torch; torch.save({'step': 'two', 'layout': {}, 'optimizer': {}, 'rng': torch.get_rng_state()}, 'ckX.pt.train/rank0.pt')\"", "rank_step_str")
ck("$PY -c \"import torch; d=torch.load('ck.pt.train/rank0.pt', weights_only=False); d['step']=10**9; torch.save(d, 'ckX.pt.train/rank0.pt')\"", "rank_step_huge")
ck("$PY -c \"import torch; d=torch.load('ck.pt.train/rank0.pt', weights_only=False); d['rng']=torch.zeros(3, dtype=torch.uint8); torch.save(d, 'ckX.pt.train/rank0.pt')\"", "rank_rng_bad")
ck("$PY -c \"import torch; torch.save([1,2,3], 'ckX.pt.train/rank0.pt')\"", "rank_is_list")
ck("$PY -c \"import json; d=json.load(open('ck.pt.train/latest.json')); d['layout']['processes']=2; json.dump(d, open('ckX.pt.train/latest.json','w'))\"", "latest_processes_2")
ck("$PY -c \"import json; d=json.load(open('ck.pt.train/latest.json')); d['layout']='x'; json.dump(d, open('ckX.pt.train/latest.json','w'))\"", "latest_layout_str")
ck("$PY -c \"import json; d=json.load(open('ck.pt.train/latest.json')); d['step']=3; json.dump(d, open('ckX.pt.train/latest.json','w'))\"", "latest_step_differs", "any")
ck("$PY -c \"import torch; torch.save({'a.weight': torch.zeros(8,4)}, 'ckX.pt')\"; $PY -c \"import json,os; d=json.load(open('ck.pt.train/latest.json')); s=os.stat('ckX.pt'); d['size']=s.st_size; d['mtime_ns']=s.st_mtime_ns; json.dump(d, open('ckX.pt.train/latest.json','w'))\"", "weights_other_model_latest_fixed")
ck("$PY -c \"import torch,os\nclass E:\n  def __reduce__(self): return (os.system, ('touch /tmp/b4/work/PWNED2',))\ntorch.save({'x': E()}, 'ckX.pt')\"; $PY -c \"import json,os; d=json.load(open('ck.pt.train/latest.json')); s=os.stat('ckX.pt'); d['size']=s.st_size; d['mtime_ns']=s.st_mtime_ns; json.dump(d, open('ckX.pt.train/latest.json','w'))\"", "malicious_weights", "err", check=no_file("PWNED2"))
ck("ln -sf /dev/zero ckX.pt.train/latest.json", "latest_devzero")
ck("rm ckX.pt.train/latest.json; mkdir ckX.pt.train/latest.json", "latest_dir")
ck("chmod 000 ckX.pt.train/rank0.pt", "rank_noperm")

# ---------------------------------------------------------------- report
RJ = "r0/2026-12-04-vm-cpu2proc.json"
case("report_ok", f"$P report {RJ} --out rep_ok", "ok")
case("report_profile_json", "$P report p.json --out rep1", "err")
case("report_plan_json", "$P report plan.json --out rep2", "err")
case("report_job_json", "$P report ck.pt.train/latest.json --out rep3", "err")
case("report_csv_only", "$P report r0/2026-12-04-vm-cpu2proc.csv --out rep4", "any")
case("report_out_is_file", f"$P report {RJ} --out repfile", "err", setup="echo keep > repfile", check=unchanged("repfile"))
case("report_out_is_input", f"$P report {RJ} --out {RJ}", "err", check=unchanged(RJ))
case("report_out_is_input_folder", f"$P report r0c --out r0c", "any", setup="rm -rf r0c; cp -a r0 r0c", check=unchanged("r0c/2026-12-04-vm-cpu2proc.json"))
case("report_out_devnull", f"$P report {RJ} --out /dev/null", "err")
case("report_out_devfull_sub", f"$P report {RJ} --out /dev/full/x", "err")
case("report_trainlog_and_results", f"$P report {RJ} trainlog.csv --out rep5", "ok")
case("report_trainlog_only", "$P report trainlog.csv --out rep6", "ok")
case("report_trainlog_header_only", "head -1 trainlog.csv > tlh.csv; $P report tlh.csv --out rep7", "any")
case("report_trainlog_bom", "printf '\\xef\\xbb\\xbf' > tlb.csv; cat trainlog.csv >> tlb.csv; $P report tlb.csv --out rep8", "any")
case("report_trainlog_crlf", "sed 's/$/\\r/' trainlog.csv > tlc.csv; $P report tlc.csv --out rep9", "any")
case("report_trainlog_neg_step", "printf 'step,epoch,loss,samples_per_s,time_s\\n-1,1,1.0,100,0.1\\n2,1,0.5,100,0.2\\n' > tln.csv; $P report tln.csv --out rep10", "any")
case("report_trainlog_inf_loss", "printf 'step,epoch,loss,samples_per_s,time_s\\n1,1,inf,100,0.1\\n2,1,0.5,100,0.2\\n' > tli.csv; $P report tli.csv --out rep11", "any")
case("report_trainlog_neg_speed", "printf 'step,epoch,loss,samples_per_s,time_s\\n1,1,1.0,-100,0.1\\n2,1,0.5,-5,0.2\\n' > tls.csv; $P report tls.csv --out rep12", "err")
case("report_trainlog_huge_step", "printf 'step,epoch,loss,samples_per_s,time_s\\n1e308,1,1.0,100,0.1\\n2,1,0.5,100,0.2\\n' > tlhs.csv; $P report tlhs.csv --out rep13", "any")
case("report_trainlog_unsorted", "printf 'step,epoch,loss,samples_per_s,time_s\\n5,1,1.0,100,0.1\\n2,1,0.5,100,0.2\\n' > tlu.csv; $P report tlu.csv --out rep14", "any")
case("report_trainlog_extra_col_reordered", "printf 'epoch,step,loss,samples_per_s,time_s\\n1,1,1.0,100,0.1\\n1,2,0.5,100,0.2\\n' > tlr.csv; $P report tlr.csv --out rep15", "any")
case("report_13_trainlogs", "mkdir -p tl13; for i in $(seq 1 13); do cp trainlog.csv tl13/log$i.csv; done; $P report tl13 --out rep16", "ok")
case("report_results_csv_formula", "mkdir -p rcf; cp r0/*.json rcf/; $PY -c \"import json,glob; f=glob.glob('rcf/*.json')[0]; d=json.load(open(f)); d['rows'][0]['reason']='=HYPERLINK(1)'; json.dump(d, open(f,'w'))\"; $P report rcf --out rep17", "any")
case("report_stdin", f"cat {RJ} | $P report /dev/stdin --out rep18", "any")
case("report_fifo_input", f"rm -f rfifo.json; mkfifo rfifo.json; $P report rfifo.json --out rep19", "err")
case("report_dir_loop", "mkdir -p rloop; cp r0/*.json rloop/; ln -sfn ../rloop rloop/self; $P report rloop --out rep20", "any")
case("report_empty_dir", "mkdir -p remptyd; $P report remptyd --out rep21", "err")
case("report_two_dates", f"mkdir -p r2d; cp {RJ} r2d/2026-12-04-a.json; cp {RJ} r2d/2026-12-05-b.json; $P report r2d --out rep22", "any")
case("report_out_equals_other_input", f"$P report {RJ} trainlog.csv --out trainlog.csv", "err", check=unchanged("trainlog.csv"))
case("report_stdout_closed", f"$P report {RJ} --out rep23 >&-", "any")

# ---------------------------------------------------------------- models / devices
case("models_extra_arg", "$P models mlp", "err")
case("models_ok", "$P models", "ok")
case("devices_ok", "$P devices", "ok")
case("devices_gpus", "$P devices --gpus 0", "err")
case("devices_gpus_auto", "$P devices --gpus auto:2", "err")
case("devices_no_links_gpus_junk", "$P devices --no-links --gpus x", "err")
case("version_flag", "$P --version", "ok")
case("help_flag_sub", "$P plan -h", "ok")

# ---------------------------------------------------------------- environment
case("env_pipebench_temp_user_dir", f"{PL} --fresh", "ok", setup="mkdir -p victim_t; echo keep > victim_t/f", env={"PIPEBENCH_TEMP": "/tmp/b4/work/victim_t"}, check=unchanged("victim_t/f"))
case("env_pipebench_parent_junk", f"{PL} --fresh", "any", env={"PIPEBENCH_PARENT": "abc"})
case("env_pipebench_parent_1", f"{T}", "any", env={"PIPEBENCH_PARENT": "1"})
case("env_pipebench_run_junk", f"{T}", "ok", setup="mkdir -p victim_r; echo keep > victim_r/f", env={"PIPEBENCH_RUN": "999999 /tmp/b4/work/victim_r"}, check=unchanged("victim_r/f"))
case("env_pipebench_run_self", f"{T}", "ok", setup="mkdir -p victim_r2; echo keep > victim_r2/f", env={"PIPEBENCH_RUN": "1 /tmp/b4/work/victim_r2"}, check=unchanged("victim_r2/f"))
case("env_cvd_empty", f"{PL}", "ok", env={"CUDA_VISIBLE_DEVICES": ""})
case("env_cvd_junk", f"{PL}", "ok", env={"CUDA_VISIBLE_DEVICES": "GPU-nonexistent"})
case("env_cvd_neg", "$P devices", "ok", env={"CUDA_VISIBLE_DEVICES": "-1"})
case("env_lang_c_unicode_name", "cp m/good.py m/mödel_é.py; $P plan --model m/mödel_é.py:Net --input-shape 4 --stages 2 --batch 8", "ok", env={"LANG": "C", "LC_ALL": "C", "PYTHONIOENCODING": "ascii"})
case("env_ioenc_ascii_err", "$P plan --profile nö_such_é.json --stages 2", "err", env={"PYTHONIOENCODING": "ascii"})
case("env_pythonwarnings_error", f"{PL}", "any", env={"PYTHONWARNINGS": "error"})
case("env_pythonpath_shadow", "mkdir -p shadow/torch; echo 'raise ImportError(\"shadow\")' > shadow/torch/__init__.py; " + f"{PL}", "any", env={"PYTHONPATH": "/tmp/b4/work/shadow"})
case("env_cwd_shadow_models", "mkdir -p cwdshadow && cd cwdshadow && printf 'raise RuntimeError(\"my models\")\\n' > models.py && printf 'raise RuntimeError(\"my bench\")\\n' > bench.py && " + PL.replace("$P", "$P"), "ok")
case("env_cache_is_file", f"{PL} --fresh", "any", setup="echo x > cachefile", env={"PIPEBENCH_CACHE": "/tmp/b4/work/cachefile"}, check=unchanged("cachefile"))
case("env_linkcache_is_dir", f"mkdir -p lcdir; {PL} --fresh", "any", env={"PIPEBENCH_LINK_CACHE": "/tmp/b4/work/lcdir"})
case("env_linkcache_junk", f"echo '{{bad' > lcjunk; {PL} --fresh", "any", env={"PIPEBENCH_LINK_CACHE": "/tmp/b4/work/lcjunk"})
case("env_linkcache_devnull", f"{PL} --fresh", "any", env={"PIPEBENCH_LINK_CACHE": "/dev/null"})
case("env_import_seconds_huge", f"$P plan {G} --stages 2 --batch 8", "any", env={"PIPEBENCH_IMPORT_SECONDS": "1e300"})
case("env_tmpdir_relative", f"{PL}", "ok", env={"TMPDIR": "reltmp"})
case("env_home_relative", f"{PL}", "any", env={"HOME": "relhome", "XDG_CACHE_HOME": ""})
case("env_omp_huge", f"{PL} --fresh", "any", env={"OMP_NUM_THREADS": "100000"})
case("env_columns_0", f"{PL}", "ok", env={"COLUMNS": "0"})
case("env_rank_set", f"{T}", "ok", env={"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
case("env_master_port_junk", f"{T}", "ok", env={"MASTER_PORT": "junk", "MASTER_ADDR": "8.8.8.8"})

# ---------------------------------------------------------------- valid, unusual models
for n in ("Buffers", "Shared", "DictOut", "NamedTupleOut", "ModDict", "WeightNorm", "Dropout", "LSTMNet", "NonPersistent", "Half", "Unused"):
    case(f"valid_plan_{n}", f"$P plan --model m/valid.py:{n} --input-shape 4 --stages 2 --batch 8", "ok", timeout=200)
case("valid_plan_Tied", "$P plan --model m/valid.py:Tied --input-shape 6 --input-dtype int64 --stages 2 --batch 8", "ok")
case("valid_plan_TwoInputs", "$P plan --model m/two.py:TwoInputs --stages 2 --batch 8", "ok")
for n in ("Buffers", "Tied", "Shared", "Unused", "TwoInputs"):
    shape = "--input-shape 6 --input-dtype int64" if n == "Tied" else ("" if n == "TwoInputs" else "--input-shape 4")
    case(f"valid_run_{n}", f"$P run --models m/{'two' if n == 'TwoInputs' else 'valid'}.py:{n} {shape} --batch 8 --steps 2 --warmup 1 --strategies single,ddp,pp-1f1b --out rv_{n}", "ok", timeout=300,
         check=lambda r: (not any(w in r["out"] + r["err"] for w in ("unavailable", "failed", "diverged")), "a case unavailable/failed" if any(w in r["out"] + r["err"] for w in ("unavailable", "failed", "diverged")) else ""))
case("valid_train_Tied_pp", f"$P train --model m/valid.py:Tied --input-shape 6 --input-dtype int64 --data tokens:tok_ok.bin --batch 4 --steps 2 --strategy pp-1f1b --stages 2", "err")
for name, shape in (("mobilenet_v3_small", "3,32,32"), ("squeezenet1_1", "3,64,64"), ("googlenet", "3,64,64"), ("shufflenet_v2_x0_5", "3,32,32"), ("regnet_x_400mf", "3,32,32")):
    case(f"tv_plan_{name}", f"$P plan --model torchvision.models:{name} --input-shape {shape} --stages 2 --batch 4 --repeats 1", "ok", timeout=300)
for name, shape in (("gpt2", "16"), ("bert_cls", "16"), ("t5", "16"), ("vit", "3,32,32")):
    case(f"hf_plan_{name}", f"$P plan --model m/hf.py:{name} --input-shape {shape} --stages 2 --batch 4 --repeats 1", "ok", timeout=300)
case("hf_train_gpt2_tokens", "$P train --model m/hf.py:gpt2 --input-shape 16 --data tokens:tok_bigid.bin --batch 4 --steps 2 --strategy single", "err")
case("hf_train_gpt2_tokens_ok", "$PY -c \"import numpy as np; (np.arange(2000)%100).astype(np.uint16).tofile('tok100.bin')\"; $P train --model m/hf.py:gpt2 --input-shape 16 --data tokens:tok100.bin --batch 4 --steps 2 --strategy pp-1f1b --stages 2", "ok", timeout=300)

# ---------------------------------------------------------------- timeouts at other moments
case("plan_timeout_tiny_fresh_file", f"$P plan {G} --stages 2 --batch 8 --fresh --timeout 0.001", "err")
case("plan_timeout_0.5_fresh", f"{PL} --fresh --timeout 0.5", "err")
case("advise_timeout_tiny_fresh", f"{AD} --fresh --timeout 0.001", "err")
case("run_timeout_tiny_fresh", f"{RN} --strategies single --fresh --timeout 0.001 --out rto", "any")
# ---------------------------------------------------------------- closed or odd standard streams
case("plan_stdout_closed", f"{PL} >&-", "any")
case("plan_stderr_closed_err", "$P plan --profile nope.json --stages 2 2>&-", "custom", check=lambda r: (r["rc"] == 2, f"rc={r['rc']}"))
case("advise_stdout_closed", "$P advise --profile p.json --stages 2 >&-", "any")
case("models_stdout_closed", "$P models >&-", "any")
case("train_stdout_closed", f"{T} >&-", "any")
case("run_stdout_closed", f"{RN} --strategies single --out rsc >&-", "any")
case("plan_stdout_devfull", f"{PL} > /dev/full", "err")
case("report_stdout_devfull", "$P report r0/2026-12-04-vm-cpu2proc.json --out rep30 > /dev/full", "err")

# ---------------------------------------------------------------- concurrency: two commands on one output
def both_fine(r):
    import re as _re
    rcs = _re.findall(r"RC=(\S+)", r["out"])
    ok = len(rcs) == 2 and all(x in ("0", "2") for x in rcs) and "Traceback" not in r["err"] + r["out"]
    return ok, f"rcs={rcs}"
PB = "OMP_NUM_THREADS=1 timeout 120 /work/wt-battery4/.venv/bin/python -m pipebench"
case("conc_two_train_same_save", f"rm -rf cc.pt cc.pt.train; ( {PB} train {G} --data m/data.py:data --batch 8 --steps 20 --strategy single --save cc.pt >c1.log 2>&1; echo RC=$? ) & ( {PB} train {G} --data m/data.py:data --batch 8 --steps 20 --strategy single --save cc.pt >c2.log 2>&1; echo RC=$? ); wait; cat c1.log c2.log 1>&2; $PY -c \"import torch; torch.load('cc.pt')\" && echo LOADS", "custom",
     check=lambda r: (both_fine(r)[0] and "LOADS" in r["out"], both_fine(r)[1] + (" loads" if "LOADS" in r["out"] else " cc.pt unreadable")))
case("conc_two_plan_same_json", f"rm -f cj.json; ( {PB} plan --profile p.json --stages 2 --json cj.json >/dev/null 2>&1; echo RC=$? ) & ( {PB} plan --profile p.json --stages 2 --chunks 2 --json cj.json >/dev/null 2>&1; echo RC=$? ); wait; $PY -c \"import pipebench; pipebench.Plan.load('cj.json')\" && echo LOADS", "custom",
     check=lambda r: (both_fine(r)[0] and "LOADS" in r["out"], both_fine(r)[1]))
case("conc_two_report_same_out", f"rm -rf cro; ( {PB} report r0/2026-12-04-vm-cpu2proc.json --out cro >/dev/null 2>&1; echo RC=$? ) & ( {PB} report r0/2026-12-04-vm-cpu2proc.json --out cro >/dev/null 2>&1; echo RC=$? ); wait; ls cro", "custom", check=both_fine)
case("conc_two_run_same_out", f"rm -rf cru; ( {PB} run --models mlp --flavour tiny --batch 8 --steps 2 --warmup 1 --strategies single --out cru >/dev/null 2>&1; echo RC=$? ) & ( {PB} run --models mlp --flavour tiny --batch 8 --steps 2 --warmup 1 --strategies single --out cru >/dev/null 2>&1; echo RC=$? ); wait; $PY -c \"import json,glob; d=json.load(open(glob.glob('cru/*.json')[0])); print('ROWS', len(d['rows']))\"", "custom", check=both_fine, timeout=300)
case("valid_plan_LSTMNet_seq", "$P plan --model m/valid.py:LSTMNet --input-shape 5,4 --stages 2 --batch 8", "ok")
case("env_ioenc_ascii_plain_plan", "$P plan --profile p.json --stages 2", "ok", env={"PYTHONIOENCODING": "ascii"})
case("env_lc_all_c_plain_plan", "$P plan --profile p.json --stages 2", "ok", env={"LC_ALL": "C", "LANG": "C"})
case("env_ioenc_latin1_plan", "$P plan --profile p.json --stages 2", "ok", env={"PYTHONIOENCODING": "latin-1"})
