"""The thirteenth pass's inputs (issue 42), for scripts/bad_input/harness.py:
`python scripts/bad_input/harness.py fixtures; python scripts/bad_input/harness.py run results/2026-12-08-cpu2-bad-input-thirteenth-pass/cases.py`.
Part 1: the twelfth pass's unrun num12/path12/rnum12/twin12 cases, its commands unchanged. Part 2 (*13): new, on what changed
since 44e4eed (check_profiled, --resume needs --save, TrainSettings / train.json, --data-dir with --profile), refused runs'
--out folders, --resume --again, train's outputs, --strategies, the API's wrong types, each with a good twin."""
from harness import *

PL = "$P plan --model mlp --flavour tiny --stages 2 --batch 8 --device cpu"          # the cache answers it
PP = "$P plan --profile p.json --stages 2"
AP = "$P advise --profile p.json --stages 2"
G = "--model m/good.py:Net --input-shape 4"
T = f"$P train {G} --data m/data.py:data --batch 8 --steps 2 --strategy single --device cpu"
T4 = T.replace("--steps 2", "--steps 4")
RQ = "$P run --quick --models mlp --strategies single --device cpu --steps 1 --warmup 0 --rounds 1 --min-seconds 0"
RSU = "cp -a ck.pt ck.pt.train @/"
LP = "from pipebench import load_profiles; "

# ======================= Part 1: the twelfth's unrun cases (names and commands as its cases.py)
for v in ("nan", "inf", "-8", "٨", "1e1", "8.0", "0x8", "+8", "8_0", "99999999999999999999999", "' 8'", "８"):
    c(f"num12_plan_batch_{v.strip(chr(39)).strip()}", f"$P plan --model mlp --flavour tiny --stages 2 --device cpu --batch {v}",
      "any" if v in ("+8", "' 8'", "8_0") else "err")
for v in ("nan", "-1", "٢", "0", "1e9"):
    c(f"num12_profile_stages_{v}", f"$P plan --profile p.json --stages {v}")
c("num12_advise_mb_huge", f"{AP} --micro-batches 99999999999999999999")
c("num12_advise_chunks_nan", f"{AP} --chunks nan")
c("path12_profile_empty", "$P plan --profile '' --stages 2")
c("path12_profile_fifo", "$P plan --profile @/f --stages 2", setup="mkfifo @/f", timeout=40)
c("path12_profile_devzero", "$P plan --profile /dev/zero --stages 2", timeout=40)
c("path12_json_devfull", f"{PP} --json /dev/full")
c("path12_json_users_file", f"{PP} --json @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c("path12_save_profile_users_file", f"{PL} --save-profile @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c("path12_save_profile_link", f"{PL} --save-profile @/l.json", setup="echo notes > @/n.txt; ln -s n.txt @/l.json", check=unchanged("@/n.txt"))
c("path12_export_fifo", f"{PP} --export deepspeed @/f", setup="mkfifo @/f", timeout=40)
c("path12_report_out_users_file", "$P report r0 --out @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c("path12_run_out_devnull", f"{RQ} --out /dev/null")
c("twin12_resume_batch_08_ok", f"{T4.replace('--batch 8', '--batch 08')} --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c("twin12_resume_optimizer_sgd_ok", f"{T4} --optimizer sgd --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c("twin12_resume_precision_tf32_ok", f"{T4} --precision tf32 --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c("twin12_resume_optimizer_SGD", f"{T4} --optimizer SGD --save @/ck.pt --resume", "any", setup=RSU)
c("twin12_resume_batch_16_quick", f"{T4.replace('--batch 8', '--batch 16')} --save @/ck.pt --resume", setup=RSU, check=nosub("profiling"))
c("twin12_resume_save_every_ok", f"{T4} --save @/ck.pt --save-every 1 --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c("twin12_pg_model_symlink_file", "$P plan --profile pg.json --stages 2 --model @/alias.py:Net", "any", setup="ln -s ../../m/good.py @/alias.py")
c("twin12_pg_model_doubleslash_ok", "$P plan --profile pg.json --stages 2 --model m//good.py:Net", "ok")
c("twin12_pg_model_tilde_ok", "HOME=$PWD $P plan --profile pg.json --stages 2 --model '~/m/good.py:Net'", "ok")
c("twin12_pg_model_other_class", "$P plan --profile pg.json --stages 2 --model m/dfl.py:Net", "err")
c("twin12_p_model_MLP", f"{PP} --model MLP", "any")
c("twin12_p_model_gpt", f"{PP} --model gpt")
c("twin12_p_input_shape_64", f"{PP} --input-shape 64", "any")
c("twin12_p_input_shape_65", f"{PP} --input-shape 65")
c("twin12_pg_input_shape_4comma_ok", "$P plan --profile pg.json --stages 2 --input-shape 4,", "any")
c("twin12_advise_pg_input_shape5", "$P advise --profile pg.json --stages 2 --input-shape 5")
c("twin12_run_mb12_chunks21_ok", f"{RQ.replace('--strategies single', '--strategies pp-gpipe')} --micro-batches 1,2 --chunks 2,1 --out @/o", "ok")
c("twin12_run_mb2_chunks4", f"{RQ} --micro-batches 2 --chunks 4 --out @/o", check=absent("@/o"))
c("twin12_run_resume_ok", f"{RQ} --out @/o && {RQ} --out @/o --resume", "ok")
c("twin12_run_again_ok", f"{RQ} --out @/o && {RQ} --out @/o --again", "ok")
c("twin12_run_auto1_ok", f"{RQ.replace('--strategies single', '--strategies auto:1')} --out @/o", "ok")
c("twin12_run_models_file_ok", f"{RQ.replace('--models mlp', '--models m/good.py:Net')} --input-shape 4 --out @/o", "any")
c("twin12_train_write_job_nodes2_ok", f"{T} --nodes 2 --write-job @/j", "ok", check=exists("@/j/job.json"))
c("twin12_train_write_job_then_users_edit", f"{T} --write-job @/j && echo '{{\"x\":1}}' > @/j/job.json && {T} --write-job @/j",
  check=holds("@/j/job.json", '"x"'))
for opt, v in (("min-seconds", "''"), ("min-seconds", "nan"), ("min-seconds", "-1"), ("min-seconds", "inf"), ("min-seconds", "٠"),
               ("timeout", "''"), ("timeout", "0"), ("timeout", "nan"), ("steps", "''"), ("steps", "1.0"), ("warmup", "-0"), ("rounds", "٢"),
               ("repeats", "0"), ("batch", "''"), ("batch", "0")):
    base = RQ.replace(" --min-seconds 0", "").replace(" --steps 1", "") if opt in ("min-seconds", "steps") else RQ
    c(f"rnum12_{opt}_{v.strip(chr(39)) or 'empty'}", f"{base} --{opt} {v} --out @/o", "any" if v in ("-0", "1.0") else "err", check=absent("@/o"))

# ======================= Part 2: new
# ---- (a) ModelSpec.check_profiled: the API (H1's fix compares only the class name now)
api("prof13_api_netobj_pg_ok", LP + "import good; print(pipebench.plan(good.Net(), profiles=load_profiles('pg.json'), stages=2))", "ok")
api("prof13_api_advise_netobj_pg_ok", LP + "import good; print(pipebench.advise(good.Net(), profiles=load_profiles('pg.json'), stages=2))", "ok")
api("prof13_api_other_netobj_pg", LP + "import other; print(pipebench.plan(other.Net(), profiles=load_profiles('pg.json'), stages=2))")
api("prof13_api_advise_other_netobj_pg", LP + "import other; print(pipebench.advise(other.Net(), profiles=load_profiles('pg.json'), stages=2))")
api("prof13_api_local_class_Net_pg", LP + "class Net(nn.Module):\n    def __init__(s): super().__init__(); s.l = nn.Linear(7, 2)\n    def forward(s, x): return s.l(x)\n"
    "print(pipebench.plan(Net(), profiles=load_profiles('pg.json'), stages=2))")
api("prof13_api_linear_pg", LP + "pipebench.plan(nn.Linear(4, 3), profiles=load_profiles('pg.json'), stages=2)")
api("prof13_api_netobj_p", LP + "import good; pipebench.plan(good.Net(), profiles=load_profiles('p.json'), stages=2)")
api("prof13_api_netobj_pg_flavour", LP + "import good; pipebench.plan(good.Net(), profiles=load_profiles('pg.json'), stages=2, flavour='tiny')")
api("prof13_api_netobj_pg_settings_x", LP + "import good; pipebench.plan(good.Net(), profiles=load_profiles('pg.json'), stages=2, settings={'depth': 3})")
api("prof13_api_other_file_pg", LP + "pipebench.plan('m/other.py:Net', profiles=load_profiles('pg.json'), stages=2)")
api("prof13_api_good_file_abs_pg_ok", LP + "import os; print(pipebench.plan(os.path.abspath('m/good.py') + ':Net', profiles=load_profiles('pg.json'), stages=2))", "ok")
api("prof13_api_mlp_p_tiny_ok", LP + "print(pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, flavour='tiny'))", "ok")
api("prof13_api_mlp_p_small", LP + "pipebench.plan('mlp', profiles=load_profiles('p.json'), stages=2, flavour='small')")
api("prof13_api_mlp_p_depth8", LP + "pipebench.advise('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': 8})")
api("prof13_api_mlp_p_depth3_ok", LP + "print(pipebench.advise('mlp', profiles=load_profiles('p.json'), stages=2, settings={'depth': 3}))", "ok")
api("prof13_api_gpt_p", LP + "pipebench.plan('gpt', profiles=load_profiles('p.json'), stages=2)")
api("prof13_api_mixed_profiles", LP + "print(pipebench.plan('mlp', profiles=load_profiles('p.json') + load_profiles('pg.json'), stages=2))", "any")
api("prof13_api_mixed_profiles_pg_first", LP + "print(pipebench.plan('mlp', profiles=load_profiles('pg.json') + load_profiles('p.json'), stages=2))")
api("prof13_api_profiles_tuple_ok", LP + "print(pipebench.plan('mlp', profiles=tuple(load_profiles('p.json')), stages=2))", "ok")
api("prof13_api_profiles_gen", LP + "print(pipebench.plan('mlp', profiles=(p for p in load_profiles('p.json')), stages=2))", "any")
api("prof13_api_profiles_dict", "pipebench.plan('mlp', profiles={'a': 1}, stages=2)")
api("prof13_api_profiles_str_list", "pipebench.plan('mlp', profiles=['p.json'], stages=2)")
# a profile made from an nn.Module object (its model recorded as the class name)
api("prof13_api_objprofile_then_obj_ok",
    "import good; ps = pipebench.profile(good.Net(), torch.randn(8, 4), device='cpu', batch=8); print(ps[0].model); print(pipebench.plan(good.Net(), profiles=ps, stages=2))", "ok")
api("prof13_api_objprofile_then_file",
    "import good; ps = pipebench.profile(good.Net(), torch.randn(8, 4), device='cpu', batch=8); print(pipebench.plan('m/good.py:Net', profiles=ps, stages=2))", "any")
api("prof13_api_objprofile_then_other_obj",
    "import good, other; ps = pipebench.profile(good.Net(), torch.randn(8, 4), device='cpu', batch=8); print(pipebench.plan(other.Net(), profiles=ps, stages=2))")
# ---- (a') the CLI's --profile beside --model/--flavour/--set/--input-shape/--data-dir
c("prof13_pg_other_file", "$P plan --profile pg.json --stages 2 --model m/other.py:Net")
c("prof13_advise_pg_other_file", "$P advise --profile pg.json --stages 2 --model m/other.py:Net")
c("prof13_pg_same_file_copy", "$P plan --profile pg.json --stages 2 --model @/good.py:Net", "any", setup="cp m/good.py @/")
c("prof13_pg_input_shape_4_ok", "$P plan --profile pg.json --stages 2 --input-shape 4", "ok")
c("prof13_pg_input_shape_1x4", "$P plan --profile pg.json --stages 2 --input-shape 1,4")
c("prof13_pg_input_dtype_int64", "$P plan --profile pg.json --stages 2 --input-dtype int64")
c("prof13_pg_input_dtype_float32_ok", "$P plan --profile pg.json --stages 2 --input-dtype float32", "any")
c("prof13_pg_num_classes_7", "$P plan --profile pg.json --stages 2 --num-classes 7", "any")
c("prof13_p_set_depth_twice", f"{PP} --set depth=8 --set depth=3", "any")
c("prof13_p_set_depth_3_0", f"{PP} --set depth=3.0", "any")
c("prof13_p_set_depth_space3", f"{PP} --set 'depth= 3'", "any")
c("prof13_p_set_nokey", f"{PP} --set nope=1")
c("prof13_p_set_noeq", f"{PP} --set depth")
c("prof13_p_flavour_empty", f"{PP} --flavour ''")
c("prof13_p_model_empty", f"{PP} --model ''")
c("prof13_p_data_dir_missing", f"{PP} --data-dir @/nope", check=absent("@/nope"))
c("prof13_advise_p_data_dir_missing", f"{AP} --data-dir @/nope", check=absent("@/nope"))
c("prof13_p_data_dir_file", f"{PP} --data-dir p.json")
c("prof13_p_data_dir_empty", f"{PP} --data-dir ''")
c("prof13_p_data_dir_ok", f"{PP} --data-dir @", "ok")
c("prof13_plan_data_dir_missing_noprofile", f"{PL} --data-dir @/nope", check=nosub("profiling"))
c("prof13_p_model_mlp_flavour_small_json", f"{PP} --model mlp --flavour small --json @/o.json", check=absent("@/o.json"))
c("prof13_p_json_users_file_refused_first", f"{PP} --flavour small --json @/n.txt", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
# ---- (b) refused runs and the --out folders: theirs removed, the user's kept
c("out13_run_bad_strategy_deep_out", f"{RQ.replace('--strategies single', '--strategies nope')} --out @/a/b/c", check=absent("@/a"))
c("out13_run_bad_model_deep_out", f"{RQ.replace('--models mlp', '--models nope')} --out @/a/b", check=absent("@/a"))
c("out13_run_flavour_huge_out", f"{RQ} --flavour huge --out @/o", check=absent("@/o"))
c("out13_run_users_empty_out_kept", f"{RQ.replace('--strategies single', '--strategies nope')} --out @/mine", setup="mkdir @/mine", check=exists("@/mine"))
c("out13_run_users_out_with_file_kept", f"{RQ} --flavour huge --out @/mine", setup="mkdir @/mine; echo notes > @/mine/n.txt", check=unchanged("@/mine", "@/mine/n.txt"))
c("out13_run_users_parent_kept", f"{RQ} --flavour huge --out @/mine/sub/o", setup="mkdir @/mine", check=both(exists("@/mine"), absent("@/mine/sub")))
c("out13_run_bad_model_file_out", f"{RQ.replace('--models mlp', '--models m/nofile.py:Net')} --out @/o", check=absent("@/o"))
c("out13_run_input_shape_bad_out", f"{RQ.replace('--models mlp', '--models m/good.py:Net')} --input-shape 0 --out @/o", check=absent("@/o"))
c("out13_run_out_is_file", f"{RQ} --out @/f", setup="echo notes > @/f", check=unchanged("@/f"))
c("out13_run_out_link_to_users", f"{RQ} --flavour huge --out @/l", setup="mkdir @/u; echo n > @/u/n.txt; ln -s u @/l", check=unchanged("@/l", "@/u", "@/u/n.txt"))
c("out13_run_results_kept_on_refused_resume", f"{RQ} --out @/o && {RQ} --out @/o --resume --flavour huge; ls @/o/*/ > /dev/null",
  check=exists("@/o"))
c("out13_train_deep_save_refused", f"{T.replace('--strategy single', '--strategy nope')} --save @/a/b/ck.pt", check=absent("@/a"))
c("out13_train_deep_csv_refused", f"{T.replace('--batch 8', '--batch 0')} --csv @/a/b/x.csv", check=absent("@/a"))
c("out13_train_deep_write_job_refused", f"{T.replace('--strategy single', '--strategy nope')} --write-job @/a/b", check=absent("@/a"))
c("out13_plan_deep_json_refused", f"{PP} --flavour small --json @/a/b/p.json", check=absent("@/a"))
# ---- (c) --resume with --again; --resume/--save-every without --save (f4e9e19)
c("res13_run_resume_again_existing", f"{RQ} --out @/o && {RQ} --out @/o --resume --again", check=exists("@/o"))
c("res13_run_resume_again_new", f"{RQ} --out @/o --resume --again", check=absent("@/o"))
c("res13_run_resume_new_ok", f"{RQ} --out @/o --resume", "any")
api("res13_api_resume_again", "pipebench.run(['mlp'], strategies=['single'], quick=True, steps=1, warmup=0, rounds=1, min_seconds=0, out='@/o', resume=True, again=True)",
    check=absent("@/o"))
c("res13_train_resume_no_save", f"{T} --resume", check=nosub("profiling|done:"))
c("res13_train_resume_save_empty", f"{T} --resume --save ''", check=nosub("profiling|done:"))
c("res13_train_save_every_save_empty", f"{T} --save-every 1 --save ''", check=nosub("profiling|done:"))
c("res13_train_save_empty", f"{T} --save ''", check=nosub("profiling|done:"))
c("res13_train_save_every_no_save", f"{T} --save-every 1", check=nosub("profiling|done:"))
c("res13_train_resume_missing_ckpt", f"{T} --resume --save @/none.pt", check=both(nosub("profiling|done:"), absent("@/none.pt")))
c("res13_train_resume_write_job", f"{T} --resume --save @/ck.pt --write-job @/j", "any", setup=RSU)
api("res13_api_train_resume_no_save", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, overrides={'input_shape': [4]}, resume=True)")
api("res13_api_train_save_every_no_save", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, overrides={'input_shape': [4]}, save_every=1)")
api("res13_api_train_save_every_save_empty", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, overrides={'input_shape': [4]}, save='', save_every=1)")
# ---- (d) --resume with other settings (the state's batch/optimizer/... ), and twins
c("res13_resume_other_lr", f"{T4} --lr 0.5 --save @/ck.pt --resume", "any", setup=RSU)
c("res13_resume_other_strategy", f"{T4.replace('--strategy single', '--strategy ddp')} --save @/ck.pt --resume", "any", setup=RSU, check=nosub("Traceback"))
c("res13_resume_other_model", f"{T4.replace('m/good.py:Net --input-shape 4', 'm/other.py:Net --input-shape 5')} --save @/ck.pt --resume", setup=RSU, check=nosub("profiling|done:"))
c("res13_resume_input_shape5", f"{T4.replace('--input-shape 4', '--input-shape 5')} --save @/ck.pt --resume", setup=RSU, check=nosub("done:"))
c("res13_resume_fewer_steps", f"{T.replace('--steps 2', '--steps 1')} --save @/ck.pt --resume", "any", setup=RSU)
c("res13_resume_batch_16_and_adamw", f"{T4.replace('--batch 8', '--batch 16')} --optimizer adamw --save @/ck.pt --resume", setup=RSU, check=nosub("profiling"))
c("res13_resume_batch_16_ckpt_kept", f"{T4.replace('--batch 8', '--batch 16')} --save @/ck.pt --resume", setup=RSU, check=unchanged("@/ck.pt", "@/ck.pt.train"))
c("res13_resume_same_epochs_ok", f"{T4.replace('--steps 4', '--epochs 2')} --save @/ck.pt --resume", "any", setup=RSU)
c("res13_resume_same_ok", f"{T4} --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c("res13_resume_log_every_ok", f"{T4} --log-every 1 --save @/ck.pt --resume", "ok", setup=RSU, check=grep("done: 4/4"))
c("res13_resume_batch_08_adamw", f"{T4.replace('--batch 8', '--batch 08')} --optimizer adamw --save @/ck.pt --resume", setup=RSU, check=nosub("profiling"))
# ---- (e) train's outputs: --write-job's job.json/train.json (TrainSettings.names, fc17f21/6f9a044), links, --save's state
c("job13_write_job_twice_ok", f"{T} --write-job @/j && {T} --write-job @/j", "ok", check=exists("@/j/train.json"))
c("job13_write_job_then_other_steps_ok", f"{T} --write-job @/j && {T.replace('--steps 2', '--steps 3')} --write-job @/j", "ok", check=grep("torchrun|python"))
c("job13_users_train_json_extra_key", f"{T} --write-job @/j && $PY -c \"import json;p='@/j/train.json';d=json.load(open(p));d['mine']=1;json.dump(d,open(p,'w'))\" && {T} --write-job @/j",
  check=holds("@/j/train.json", '"mine"'))
c("job13_users_train_json_less_key", f"{T} --write-job @/j && $PY -c \"import json;p='@/j/train.json';d=json.load(open(p));del d['workers'];json.dump(d,open(p,'w'))\" && {T} --write-job @/j",
  "any", check=holds("@/j/train.json", '"epochs"'))
c("job13_train_json_user_edited_value", f"{T} --write-job @/j && sed -i 's/\"steps\": 2/\"steps\": 99/' @/j/train.json && {T} --write-job @/j", "any")
c("job13_old_style_train_json", f"{T} --write-job @/j", "any",
  setup="mkdir -p @/j; echo '{\"data\": {}, \"epochs\": 1, \"print_every\": 10, \"steps\": 2}' > @/j/train.json", check=unchanged("@/j/train.json"))
c("job13_users_job_json", f"{T} --write-job @/j", setup="mkdir -p @/j; echo '{\"mine\":1}' > @/j/job.json", check=unchanged("@/j/job.json"))
c("job13_train_json_array", f"{T} --write-job @/j", setup="mkdir -p @/j; echo '[1]' > @/j/train.json", check=unchanged("@/j/train.json"))
c("job13_train_json_link_to_users", f"{T} --write-job @/j", setup="mkdir -p @/j; echo notes > @/n.txt; ln -s ../n.txt @/j/train.json", check=unchanged("@/n.txt", "@/j/train.json"))
c("job13_train_json_link_to_own", f"{T} --write-job @/k && {T} --write-job @/j", "any", setup="mkdir -p @/j; ln -s ../k/train.json @/j/train.json")
c("job13_job_json_dangling_link", f"{T} --write-job @/j", "any", setup="mkdir -p @/j; ln -s ../nowhere.json @/j/job.json", check=absent("@/nowhere.json"))
c("job13_write_job_is_link_to_dir_ok", f"{T} --write-job @/l", "any", setup="mkdir -p @/u; ln -s u @/l", check=exists("@/u/job.json"))
c("job13_write_job_eq_save_state", f"{T} --save @/ck.pt --write-job @/ck.pt.train", setup=RSU, check=unchanged("@/ck.pt.train"))
c("job13_write_job_link_into_save_state", f"{T} --save @/ck.pt --write-job @/l", setup=RSU + "; ln -s ck.pt.train @/l", check=unchanged("@/ck.pt.train"))
c("job13_save_eq_write_job_dir", f"{T} --save @/j --write-job @/j", setup="mkdir -p @/j")
c("job13_csv_in_write_job_ok", f"{T} --write-job @/j --csv @/j/log.csv", "any")
c("job13_save_in_write_job_ok", f"{T} --write-job @/j --save @/j/ck.pt", "any")
c("job13_save_is_users_file", f"{T} --save @/n.txt", "any", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c("job13_save_state_is_file", f"{T} --save @/ck.pt", setup="echo notes > @/ck.pt.train", check=unchanged("@/ck.pt.train"))
c("job13_save_state_users_dir", f"{T} --save @/ck.pt", "any", setup="mkdir @/ck.pt.train; echo n > @/ck.pt.train/mine.txt", check=unchanged("@/ck.pt.train/mine.txt"))
c("job13_csv_users_file", f"{T} --csv @/n.txt", "any", setup="echo notes > @/n.txt", check=unchanged("@/n.txt"))
c("job13_csv_eq_save", f"{T} --csv @/ck.pt --save @/ck.pt")
c("job13_csv_is_dir", f"{T} --csv @")
c("job13_run_written_job_ok", f"{T} --write-job @/j && OMP_NUM_THREADS=1 timeout 100 {PY} -m pipebench.bench.train.loop $PWD/@/j/job.json $PWD/@/j", "any", timeout=120)
c("job13_run_written_job_extra_key", f"{T} --write-job @/j && $PY -c \"import json;p='@/j/train.json';d=json.load(open(p));d['mine']=1;json.dump(d,open(p,'w'))\" && timeout 100 {PY} -m pipebench.bench.train.loop $PWD/@/j/job.json $PWD/@/j", "any", timeout=120)
api("job13_api_write_job_empty", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, overrides={'input_shape': [4]}, write_job='')")
api("job13_api_write_job_ok", "print(pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='single', steps=2, overrides={'input_shape': [4]}, write_job='@/j'))", "ok", check=exists("@/j/train.json"))
# ---- (f) --strategies parsing
for n, v in (("empty_item", "single,,ddp"), ("auto_colon", "auto:"), ("lead_comma", ",single"), ("space_item", "'single, ,ddp'"),
             ("auto1_auto1", "auto:1,auto:1"), ("auto_colon_single", "auto:,single"), ("comma_space_ok", "'single, ddp'"),
             ("dup_ok", "single,single"), ("semicolon", "'single;ddp'"), ("newline", "$'single\\nddp'")):
    c(f"strat13_{n}", f"{RQ.replace('--strategies single', '--strategies ' + v)} --out @/o", "ok" if n.endswith("_ok") else "err",
      check=None if n.endswith("_ok") else absent("@/o"))
c("strat13_strategies_given_twice", f"{RQ} --strategies ddp --out @/o", "any")
c("strat13_train_strategy_auto_colon", T.replace("--strategy single", "--strategy auto:"))
c("strat13_train_strategy_empty_item", T.replace("--strategy single", "--strategy single,,ddp"))
c("strat13_train_strategy_auto_ok", f"{T.replace('--strategy single', '--strategy auto')}", "ok", check=grep("done: 2/2"))
api("strat13_api_run_strategies_empty_str_item", "pipebench.run(['mlp'], strategies=['single', ''], quick=True, out='@/o')", check=absent("@/o"))
api("strat13_api_run_strategies_auto_colon", "pipebench.run(['mlp'], strategies=['auto:'], quick=True, out='@/o')", check=absent("@/o"))
api("strat13_api_run_strategies_csv_str", "pipebench.run(['mlp'], strategies=['single,ddp'], quick=True, out='@/o')", "any", check=absent("@/o"))
api("strat13_api_train_strategy_list", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy=['single'], steps=2, overrides={'input_shape': [4]})")
api("strat13_api_train_strategy_empty", "pipebench.train('m/good.py:Net', 'm/data.py:data', batch=8, strategy='', steps=2, overrides={'input_shape': [4]})")
# ---- (g) the API, wrong types (run and train keywords)
RK = "strategies=['single'], steps=1, warmup=0, rounds=1, min_seconds=0, out='@/o'"
for n, q, e in (("quick_yes", "'yes'", "err"), ("quick_no", "'no'", "err"), ("quick_0", "0", "err"), ("quick_npbool", "np.bool_(True)", "any"),
                ("quick_false_ok", "False", "any"), ("quick_list", "[True]", "err")):
    api(f"api13_run_quick_{n.split('_', 1)[1]}", f"pipebench.run(['mlp'], {RK}, quick={q}, flavour='tiny')", e, check=None if e != "err" else absent("@/o"))
api("api13_run_again_str", f"pipebench.run(['mlp'], {RK}, quick=True, again='no')", check=absent("@/o"))
api("api13_run_resume_0", f"pipebench.run(['mlp'], {RK}, quick=True, resume=0)", check=absent("@/o"))
api("api13_run_out_path_ok", f"print(len(pipebench.run(['mlp'], strategies=['single'], steps=1, warmup=0, rounds=1, min_seconds=0, quick=True, out=Path('@/o'))[0]))", "ok")
api("api13_run_note_int", f"pipebench.run(['mlp'], {RK}, quick=True, note=3)", check=absent("@/o"))
api("api13_run_machine_str", f"pipebench.run(['mlp'], {RK}, quick=True, machine='cpu')", check=absent("@/o"))
api("api13_run_strategies_tuple_ok", f"print(len(pipebench.run(['mlp'], strategies=('single',), steps=1, warmup=0, rounds=1, min_seconds=0, quick=True, out='@/o')[0]))", "ok")
api("api13_run_models_bytes", f"pipebench.run(b'mlp', {RK}, quick=True)", check=absent("@/o"))
api("api13_run_models_none", f"pipebench.run(None, {RK}, quick=True)", check=absent("@/o"))
TA = "'m/good.py:Net', 'm/data.py:data'"
TK = "strategy='single', overrides={'input_shape': [4]}"
for n, kw in (("batch_str", "batch='8', steps=2"), ("batch_float", "batch=8.0, steps=2"), ("batch_bool", "batch=True, steps=2"),
              ("batch_zero", "batch=0, steps=2"), ("batch_nan", "batch=float('nan'), steps=2"), ("steps_str", "batch=8, steps='2'"),
              ("steps_true", "batch=8, steps=True"), ("steps_float", "batch=8, steps=2.5"), ("steps_neg", "batch=8, steps=-1"),
              ("steps_and_epochs", "batch=8, steps=2, epochs=1"), ("epochs_zero", "batch=8, epochs=0"), ("lr_str", "batch=8, steps=2, lr='0.1'"),
              ("lr_nan", "batch=8, steps=2, lr=float('nan')"), ("lr_neg", "batch=8, steps=2, lr=-1.0"), ("lr_inf", "batch=8, steps=2, lr=float('inf')"),
              ("save_int", "batch=8, steps=2, save=123"), ("save_every_str", "batch=8, steps=2, save='@/z.pt', save_every='1'"),
              ("save_every_zero", "batch=8, steps=2, save='@/z.pt', save_every=0"), ("resume_str", "batch=8, steps=2, save='@/z.pt', resume='yes'"),
              ("write_job_int", "batch=8, steps=2, write_job=123"), ("nodes_str", "batch=8, steps=2, nodes='2', write_job='@/j'"),
              ("nodes_no_write_job", "batch=8, steps=2, nodes=2"), ("workers_neg", "batch=8, steps=2, workers=-1"), ("workers_str", "batch=8, steps=2, workers='0'"),
              ("log_every_neg", "batch=8, steps=2, log_every=-1"), ("unknown_kw", "batch=8, steps=2, stepz=2"), ("device_kw", "batch=8, steps=2, device='cpu'"),
              ("training_dict", "batch=8, steps=2, training={'optimizer': 'adamw'}"), ("machine_str", "batch=8, steps=2, machine='cpu'"),
              ("csv_int", "batch=8, steps=2, csv=5"), ("timeout_neg", "batch=8, steps=2, timeout=-1"), ("seed_str", "batch=8, steps=2, seed='1'"),
              ("overrides_list", "batch=8, steps=2, overrides=[('input_shape', [4])]"), ("flavour_on_own", "batch=8, steps=2, flavour='tiny'"),
              ("note_int", "batch=8, steps=2, note=3")):
    tk = TK.replace(", overrides={'input_shape': [4]}", "") if "overrides" in kw else TK
    api(f"api13_train_{n}", f"pipebench.train({TA}, {tk}, {kw})", check=nosub("done:"))
api("api13_train_model_obj", f"import good; pipebench.train(good.Net(), 'm/data.py:data', batch=8, steps=2, {TK})")
api("api13_train_data_obj", f"import data; pipebench.train('m/good.py:Net', data.data(), batch=8, steps=2, {TK})")
api("api13_train_ok", f"print(pipebench.train({TA}, {TK}, batch=8, steps=2, save='@/z.pt'))", "ok", check=exists("@/z.pt"))
api("api13_train_path_save_ok", f"print(pipebench.train({TA}, {TK}, batch=8, steps=2, save=Path('@/z.pt')))", "any")
api("api13_train_save_every_ok", f"print(pipebench.train({TA}, {TK}, batch=8, steps=2, save='@/z.pt', save_every=1))", "ok", check=exists("@/z.pt"))
api("api13_train_np_batch", f"print(pipebench.train({TA}, {TK}, batch=np.int64(8), steps=2))", "any")

# ---- (h) added during the run: is a quoted ~ in --model a path anywhere? (twin12_pg_model_tilde_ok was refused)
c("late13_plan_model_tilde_noprofile", "HOME=$PWD $P plan --model '~/m/good.py:Net' --input-shape 4 --stages 2 --batch 8 --device cpu", "any")
c("late13_train_model_tilde", "HOME=$PWD " + T.replace("m/good.py:Net", "'~/m/good.py:Net'"), "any")
c("late13_train_data_tilde_ok", "HOME=$PWD " + T.replace("m/data.py:data", "'~/m/data.py:data'"), "ok")

api("late13_api_local_class_Net_pg", "from pipebench import load_profiles\nclass Net(nn.Module):\n    def __init__(s):\n        super().__init__(); s.l = nn.Linear(7, 2)\n"
    "    def forward(s, x): return s.l(x)\nprint(pipebench.plan(Net(), profiles=load_profiles('pg.json'), stages=2))")
c("late13_train_write_job_nodes2_ddp_ok", f"{T.replace('--strategy single', '--strategy ddp')} --nodes 2 --write-job @/j", "ok", check=exists("@/j/job.json"))
c("late13_pg_other_file_cli_twin", "$P plan --profile pg.json --stages 2 --model m/other.py:Net --input-shape 4")

# I2's breadth: which refusals leave an output file's new parent folders behind
c("late13_plan_deep_save_profile_refused", f"{PL} --flavour huge --save-profile @/a/b/p.json", check=absent("@/a"))
c("late13_advise_deep_json_refused", f"{AP} --flavour small --json @/a/b/adv.json", check=absent("@/a"))
c("late13_plan_deep_export_refused", f"{PP} --flavour small --export deepspeed @/a/b/ds.json", check=absent("@/a"))
c("late13_train_deep_csv_bad_strategy", f"{T.replace('--strategy single', '--strategy nope')} --csv @/a/b/x.csv", check=absent("@/a"))
c("late13_train_deep_save_bad_model", f"{T.replace('m/good.py:Net', 'm/nofile.py:Net')} --save @/a/b/ck.pt", check=absent("@/a"))
c("late13_train_deep_save_ok", f"{T} --save @/a/b/ck.pt", "ok", check=exists("@/a/b/ck.pt"))
c("late13_plan_deep_json_ok", f"{PP} --json @/a/b/p.json", "ok", check=exists("@/a/b/p.json"))
api("late13_api_plan_deep_json", "pipebench.plan('mlp', flavour='huge', stages=2, batch=8, device='cpu', json='@/a/b/p.json')", "any", check=absent("@/a"))

# I3's breadth: the written job's worker (the torchrun program) reading a train.json edited by hand
def edited(name, py, expect="err"):
    c(name, f"{T} --write-job @/j && $PY -c \"import json;p='@/j/train.json';d=json.load(open(p));{py};json.dump(d,open(p,'w'))\" && "
      f"timeout 100 {PY} -m pipebench.bench.train.loop $PWD/@/j/job.json $PWD/@/j", expect, timeout=120)
edited("late13_job_worker_data_missing_file", "d['data']['path']='/nonexistent.py'")
edited("late13_job_worker_no_data_key", "del d['data']")
edited("late13_job_worker_steps_str", "d['steps']='2'")
edited("late13_job_worker_unedited_ok", "pass", "ok")

# ======================= verdicts (harness.py classify)
DEFECT = {
    "I1": ["prof13_api_other_netobj_pg", "prof13_api_advise_other_netobj_pg", "late13_api_local_class_Net_pg"],
    "I2": ["out13_plan_deep_json_refused", "out13_train_deep_save_refused", "late13_plan_deep_save_profile_refused",
           "late13_advise_deep_json_refused", "late13_plan_deep_export_refused", "late13_train_deep_csv_bad_strategy",
           "late13_train_deep_save_bad_model"],
    "I3": ["job13_run_written_job_extra_key", "late13_job_worker_data_missing_file", "late13_job_worker_no_data_key",
           "late13_job_worker_steps_str"],
    "I4": ["api13_run_note_int"],
    "I5": ["api13_train_steps_and_epochs", "api13_train_timeout_neg"],
}
DEBATABLE = {
    "a profile of an nn.Module object records only its class name": ["prof13_api_objprofile_then_other_obj", "prof13_api_objprofile_then_file"],
    "--model does not expand a quoted ~ (--data, --write-job do)": ["twin12_pg_model_tilde_ok"],
    "--lr changed on --resume taken": ["res13_resume_other_lr"],
    "train's own train.json, edited by the user (same keys), replaced": ["job13_train_json_user_edited_value"],
    "a user's folder at PATH.train taken as --save's state folder (its file kept)": ["job13_save_state_users_dir"],
    "API train: seed='1' and overrides as a list of pairs taken": ["api13_train_seed_str", "api13_train_overrides_list"],
    "--chunks nan refused in --micro-batches' words": ["num12_advise_chunks_nan"],
    "--profile '' refused as '--model NAME is required'": ["path12_profile_empty"],
}
SUPERSEDED = {"prof13_api_local_class_Net_pg": "SyntaxError in my snippet; rerun as late13_api_local_class_Net_pg"}
HANDLED_DESPITE = {
    "twin12_train_write_job_nodes2_ok": "single spans no nodes: the right refusal; late13_train_write_job_nodes2_ddp_ok is the twin",
    "rnum12_warmup_-0": "-0 is 0: good input, ran; the case's absent() check was wrong for a run that runs",
    "out13_run_results_kept_on_refused_resume": "rc is the trailing ls's; the resume was refused in one line, the results kept",
}
