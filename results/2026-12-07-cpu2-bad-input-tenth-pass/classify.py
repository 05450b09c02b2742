"""Verdicts of the tenth pass: reads results.jsonl (the driver's), adds verdict/cause to each record and prints the counts.
Default: a record the driver judged ok is handled; the lists below are the judgement of each record that is not
(or that the driver's check could not judge). Usage: python classify.py results.jsonl > verdicts.jsonl"""
import collections, json, sys

SUPERSEDED = {  # harness bugs: rerun under NAME_h (the file was made in the command, after the check looked), or a wrong call
    "out10_report_out_users_summary_only", "out10_report_md_link_to_users_file", "out10_report_summary_csv_is_folder",
    "out10_report_users_png_in_out", "out10_report_input_inside_out_ok", "repro10_E3_summary_in_out",
    "clash10_export_eq_profile_read_hardlink", "clash10_saveprofile_link_to_model_py", "save10_state_folder_is_a_file",
    "save10_over_users_torch_tensor", "save10_eq_tokens_data", "save10_resume_weights_changed",
    "cwd10_noread_plan_model_file_relative",   # expected a refusal; a folder of mode 311 lets a named file be read
    "api10_request_np_ok",                     # Request has no `stages` field (devices=...): rerun as _h
    "state10_file_threads64_plan", "state10_file_nograd_plan", "state10_file_dtype64_plan", "state10_file_patch_randn_plan",
    "state10_file_umask_plan", "mf10_sysexit_x_api",  # passed an example for a FILE.py model: refused before the import
}
DEFECT = {
    "F1": ["out10_report_md_is_fifo", "repro10_F1_report_md_fifo_1", "repro10_F1_report_md_fifo_2", "out10_report_md_fifo_with_reader"],
    "F2": ["out10_report_folder_holding_a_report", "repro10_F2_folder_holding_a_report_1", "repro10_F2_folder_holding_a_report_2",
           "repro10_F2_json_input_folder_holding_a_report"],
    "F3": ["save10_state_folder_dangling_link", "repro10_F3_state_link_dangling_1", "repro10_F3_state_link_dangling_2"],
    "F4": ["env10_import_tiny", "repro10_F4_import_tiny_1", "repro10_F4_import_tiny_2", "repro10_F4_import_1e-4"],
    "F5": ["opt10_train_lr_arabic", "opt10_train_lr_underscore", "opt10_train_lr_fullwidth", "opt10_repro10_F5_train_lr_arabic_exp"],
    "F6": ["api10_micro_batches_np_array_ok", "api10_repro10_F6_advise_micro_batches_np_array"],
    "F7": ["api10_run_steps_np_ok", "repro10_F7_run_steps_np_int64"],
    "F8": ["mf10_chdir_run_out_relative_ok", "repro10_F8_run_chdir_model_1", "repro10_F8_run_chdir_model_2",
           "repro10_F8_run_chdir_model_out_absolute"],
    "F9": ["mf10_warnerr_plan_fresh", "leak10_resourcewarning_plan_fresh", "leak10_resourcewarning_plan_fresh_2"],
}
DEBATABLE = {
    "env float()": ["env10_drift_arabic_digit"],
    "empty env value": ["env10_drift_empty_plan", "env10_import_empty"],
    "env unread when cached": ["env10_drift_api_cached"],
    "--out ''": ["out10_report_out_empty_string"],
    "alias twice": ["opt10_run_cpu_processes_and_stages", "opt10_plan_micro_batches_and_chunks"],
    "PATH.train a link": ["save10_state_folder_link_to_users_folder"],
    "documented replace": ["save10_over_users_torch_tensor_h", "out10_report_users_png_in_out_h"],
    "umask from a model file": ["mf10_umask_plan_json", "state10_file_umask_plan_h"],
    "HOME empty": ["env10_home_empty"],
    "numpy arrays": ["api10_speeds_np_array_ok", "api10_repro10_F6_micro_batches_np_array_2"],
    "report's files checked late": ["out10_report_summary_csv_is_folder_h", "out10_report_summary_csv_fifo"],
    "float64 model file": ["state10_file_dtype64_plan_h"],
    "model's alarm": ["mf10_alarm_plan_fresh"],
}
NOT_COUNTED = {"cwd10_gone_api_profile": "torch's own import fails in a removed folder (Intel oneMKL FATAL ERROR), before pipebench",
               "cwd10_gone_api_run": "the same"}
HANDLED_DESPITE = {"cwd10_gone_api_import_pipebench_first": "pipebench.plan raises UserError('the working folder no longer exists'); "
                   "the traceback is the caller's script's, which does not catch it"}

verdict = {}
for cause, names in DEFECT.items():
    verdict.update({n: ("defect", cause) for n in names})
for cause, names in DEBATABLE.items():
    verdict.update({n: ("debatable", cause) for n in names})
verdict.update({n: ("superseded", "") for n in SUPERSEDED})
verdict.update({n: ("not counted", why) for n, why in NOT_COUNTED.items()})
verdict.update({n: ("handled", why) for n, why in HANDLED_DESPITE.items()})
last = {}
for line in open(sys.argv[1]):
    r = json.loads(line); last[r["name"]] = r
assert set(verdict) <= set(last), set(verdict) - set(last)
count = collections.Counter()
for name, r in last.items():
    v, cause = verdict.get(name, ("handled" if r["ok"] else "UNJUDGED", ""))
    r["verdict"], r["cause"] = v, cause
    count[v] += 1
    print(json.dumps(r))
print(dict(count), file=sys.stderr)
kinds = collections.Counter(n.split("_")[0] for n, r in last.items() if r["verdict"] not in ("superseded",))
print(dict(kinds), file=sys.stderr)
print({c: len(n) for c, n in DEFECT.items()}, file=sys.stderr)
