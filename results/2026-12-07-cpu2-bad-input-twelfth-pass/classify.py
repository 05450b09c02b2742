"""Verdicts of the eleventh pass: reads results.jsonl (the driver's, both streams), adds verdict/cause and prints the counts.
Default: a record the driver judged ok is handled; the lists below judge the rest. Usage: python classify.py results.jsonl > verdicts.jsonl"""
import collections, json, sys

SUPERSEDED = {"rep11_results_json_nan_rows"}  # its setup wrote no file (quoting)
DEFECT = {
    "G1": ["opt11_advise_mb_12_chunks_21_ok", "opt11_plan_mb_2_chunks_02_ok"],
    "G2": ["prof11_plan_profile_flavour_small", "prof11_plan_profile_set_depth"],
    "G3": ["prof11_run_profiles_is_a_file"],
    "G4": ["clash11_train_save_every_no_save", "clash11_run_resume_and_again", "api11_run_resume_and_again"],
    "G5": ["job11_users_job_json", "job11_users_train_json_link", "job11_eq_save_folder"],
    "G6": ["job11_empty"],
    "G7": ["api11_plan_profiles_other_model"],
    "G8": ["res11h_other_batch", "res11h_other_optimizer"],
}
DEBATABLE = {
    "duplicates in a list of the other spelling": ["opt11_advise_mb_12_chunks_122_ok"],
    "a CPU profile planned onto --gpus 0 with no GPU": ["prof11_plan_profile_gpus0"],
    "empty strategy items taken": ["num11_run_strategies_auto:", "num11_run_strategies_empty_item"],
    "train log alone: train.png, no report.md": ["rep11_train_csv_ok", "rep11_train_csv_log_fixture_ok"],
    "a plainly copied checkpoint cannot be resumed (latest.json keeps mtime_ns)": [
        "res11_other_model", "res11_other_strategy_ddp", "res11_other_strategy_pp", "res11_other_batch", "res11_other_optimizer",
        "res11_fewer_steps_than_done", "res11_same_steps_done", "res11_latest_json_negative_step", "res11_latest_json_nan",
        "res11_rank0_garbage", "res11_lr_changed", "res11_resume_with_write_job"],
    "latest.json of NaN numbers resumed (seen once)": ["res11h_latest_json_nan"],
    "the caller's own progress callback raising propagates": ["api11_plan_progress_raises"],
    "run(quick='yes') taken as True": ["api11_run_quick_str"],
    "API schedule=None refused": ["api11_plan_schedule_none_ok"],
    "API: plan has no chunks= (run has)": ["api11_plan_mb_and_chunks_agree_ok", "api11_plan_mb_and_chunks_disagree"],
}
HANDLED_DESPITE = {
    "num11_train_log-every_0": "0 is in the documented range", "num11_train_strategy_dataparallel_cpu": "dataparallel runs on the CPU stand-in",
    "job11_nodes3_cpu2_ok": "batch 8 over 6 replicas: the right refusal", "save11_csv_dev_stdout_ok": "regular files only, as documented (a pipe)",
    "api11_plan_mb_tuple_21_ok": "a plan takes one count", "api11_plan_mb_set_ok": "one line",
    "num11_plan_profile_link-gbps_0": "0 documented: transfers not priced",
    "sig11_train_ddp_kill9_parent_then_resume": "nothing alive after SIGKILL of the parent; killed before its first checkpoint",
    "out11_plan_json_dash": "refused in one line (the rc was the harness's ls)",
}
for s in ("ddp_TERM_g", "ddp_INT_g", "pp-1f1b_INT_g", "pp-gpipe_TERM_p", "single_INT_g"):
    HANDLED_DESPITE[f"sig11_train_{s}_then_resume"] = "signal part right (130, nothing alive, no pipebench-*); its resume named a wrong --data (harness); resume by hand"
verdict = {}
for cause, names in DEFECT.items():
    verdict.update({n: ("defect", cause) for n in names})
for cause, names in DEBATABLE.items():
    verdict.update({n: ("debatable", cause) for n in names})
verdict.update({n: ("superseded", "") for n in SUPERSEDED})
verdict.update({n: ("handled", why) for n, why in HANDLED_DESPITE.items()})
last = {}
for line in open(sys.argv[1]):
    r = json.loads(line); last[r["name"]] = r
count = collections.Counter()
for name, r in last.items():
    v, cause = verdict.get(name, ("handled" if r["ok"] else "UNJUDGED", ""))
    r["verdict"], r["cause"] = v, cause
    count[v] += 1
    print(json.dumps(r))
print(dict(count), file=sys.stderr)
print(dict(collections.Counter(n.split("_")[0] for n, r in last.items() if r["verdict"] != "superseded")), file=sys.stderr)
print({c: len(n) for c, n in DEFECT.items()}, file=sys.stderr)
print([n for n, r in last.items() if r["verdict"] == "UNJUDGED"], file=sys.stderr)
