"""The report on hand-made rows with known figures: speed-ups, efficiency, prediction errors, text, plots."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from pipebench.bench.report.tables import frame, markdown_table, recommend, summarise, write_report
from pipebench.bench.store.row import Row, timeline_from_ops
from pipebench.partition.planning.simulator import simulate

REPO = Path(__file__).resolve().parents[1]
GIB = 2**30
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_row(strategy, **changes) -> Row:
    values = dict(
        model="gpt", flavour="800m", strategy=strategy, gpus="0,1", world_size=1, batch=64, micro_batches=1,
        status="ok", device_name="NVIDIA H200", torch_version="2.11.0+cu130", host="gpu1",
        started_at="2026-11-29T10:00:00", duration_s=30.0,
    )
    values.update(changes)
    if values["status"] == "ok":
        values.setdefault("step_ms", values["batch"] / values["samples_per_s"] * 1e3)
    return Row(**values)


def gantt(m=8, stretch=1.0):
    """A 2-stage 1F1B step as the simulator draws it; `stretch` > 1 stands for a slower measured one."""
    ops = timeline_from_ops(simulate([10.0, 12.0], [20.0, 22.0], m, "1f1b", [1.0]).ops)
    return [dict(op, start_ms=op["start_ms"] * stretch + 5.0, end_ms=op["end_ms"] * stretch + 5.0) for op in ops]


@pytest.fixture
def rows():
    return [
        make_row("single", gpus="0", samples_per_s=100.0, peak_memory_bytes=[40 * GIB], first_loss=9.5),
        make_row("dataparallel", samples_per_s=150.0, peak_memory_bytes=[21 * GIB, 20 * GIB]),
        make_row("modelparallel", samples_per_s=105.0, peak_memory_bytes=[22 * GIB, 19 * GIB], bounds=[0, 8, 16]),
        # A failed first try of the 1F1B case, then the rerun that --resume made: the rerun is reported.
        make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", status="failed", reason="NCCL timeout",
                 started_at="2026-11-29T09:00:00"),
        make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=160.0, step_ms=400.0,
                 predicted_step_ms=380.0, peak_memory_bytes=[20 * GIB, 12 * GIB],
                 predicted_memory_bytes=[18 * GIB, 10 * GIB], bubble_fraction=0.11, bounds=[0, 8, 16],
                 timeline=gantt(stretch=1.05), predicted_timeline=gantt()),
        make_row("pp-1f1b", world_size=2, micro_batches=4, schedule="1f1b", samples_per_s=120.0,
                 peak_memory_bytes=[18 * GIB, 11 * GIB], timeline=gantt(m=4)),
        make_row("pp-interleaved", world_size=2, micro_batches=4, virtual_stages=2, schedule="interleaved1f1b",
                 samples_per_s=140.0, peak_memory_bytes=[19 * GIB, 13 * GIB]),
        make_row("pp-gpipe", world_size=2, micro_batches=8, schedule="gpipe", status="oom",
                 reason="CUDA out of memory. Tried to allocate 2.00 GiB | GPU 0"),
        make_row("single", model="resnet101", flavour="full", gpus="0", batch=256, samples_per_s=1400.0,
                 peak_memory_bytes=[30 * GIB]),
        make_row("pipeline", model="resnet101", flavour="full", batch=256, micro_batches=4, schedule="gpipe",
                 samples_per_s=1750.0, peak_memory_bytes=[18 * GIB, 12 * GIB]),
    ]


def by_case(summary):
    return {(r.model, r.case): r for r in summary.itertuples()}


def test_frame_keeps_one_row_per_case_and_the_lists(rows):
    df = frame(rows)
    assert len(df) == len(rows) - 1  # the failed first try of pp-1f1b m=8 is replaced by its rerun
    rerun = df[(df["strategy"] == "pp-1f1b") & (df["micro_batches"] == 8)].iloc[0]
    assert rerun["status"] == "ok" and rerun["peak_memory_bytes"] == [20 * GIB, 12 * GIB]
    assert rerun["peak_gib_max"] == 20.0 and rerun["predicted_gib_max"] == 18.0 and rerun["devices"] == 2
    assert math.isnan(df[df["strategy"] == "pp-gpipe"].iloc[0]["peak_gib_max"])


def test_summarise_speedups_efficiency_and_errors(rows):
    s = by_case(summarise(frame(rows)))
    single, dp, mp = s["gpt", "single"], s["gpt", "dataparallel"], s["gpt", "modelparallel"]
    pp8, pp4 = s["gpt", "pp-1f1b (m=8)"], s["gpt", "pp-1f1b (m=4)"]
    assert (single.x_single, single.efficiency, dp.x_dataparallel) == (1.0, 1.0, 1.0)
    assert math.isnan(single.x_dataparallel)  # one GPU has no DataParallel of its size to compare with
    assert dp.x_single == 1.5 and dp.efficiency == pytest.approx(150 / 200)  # ideal: 2 x single
    assert mp.efficiency == pytest.approx(105 / 200)  # not a pipeline: ideal is p x single
    # GPipe's ideal for m=8, p=2 is 2 x 100 x 8/9 samples/s.
    assert pp8.ideal_samples_per_s == pytest.approx(1600 / 9)
    assert pp8.efficiency == pytest.approx(160 / (1600 / 9)) == pytest.approx(0.9)
    assert pp8.x_single == 1.6 and pp8.x_dataparallel == pytest.approx(160 / 150)
    assert pp8.step_error_pct == pytest.approx(-5.0)  # (380 - 400) / 400
    assert pp8.memory_error_pct == pytest.approx(-10.0)  # (18 - 20) / 20, the largest device
    assert pp8.peak_gib == "20.0 / 12.0" and pp8.peak_gib_max == 20.0
    assert pp4.efficiency == pytest.approx(120 / (200 * 4 / 5))
    assert math.isnan(pp4.step_error_pct)  # nothing predicted
    # Interleaved, 2 stages per device: the bubble shrinks v-fold, the ideal is 2 x 100 x 8/9 again.
    assert s["gpt", "pp-interleaved (m=4, v=2)"].ideal_samples_per_s == pytest.approx(1600 / 9)
    oom = s["gpt", "pp-gpipe (m=8)"]
    assert oom.status == "oom" and "out of memory" in oom.reason and math.isnan(oom.x_single)
    assert s["resnet101", "pipeline gpipe (m=4)"].x_single == 1.25  # compared within its own model and batch
    assert s["gpt", "single"].first_loss == 9.5


def test_summarise_orders_strategies_like_people_read_them(rows):
    summary = summarise(frame(rows))
    assert list(summary[summary["model"] == "gpt"]["case"]) == [
        "single", "dataparallel", "modelparallel", "pp-gpipe (m=8)", "pp-1f1b (m=4)", "pp-1f1b (m=8)",
        "pp-interleaved (m=4, v=2)"]  # the strategy registry's order


def test_a_plan_cut_for_speeds_says_so_in_its_case():
    summary = summarise(frame([make_row("single", gpus="0", samples_per_s=80.0),
                               make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b",
                                        samples_per_s=100.0, speeds="1;0.45")]))
    assert list(summary["case"]) == ["single", "pp-1f1b (m=8), planned for speeds 1/0.45"]


def test_cpu_processes_count_as_devices():
    df = frame([make_row("pp-1f1b", gpus="cpu", world_size=2, micro_batches=2, samples_per_s=10.0),
                make_row("single", gpus="cpu", samples_per_s=8.0)])
    assert list(df["devices"]) == [2, 1]
    assert summarise(df).set_index("strategy").loc["pp-1f1b", "efficiency"] == pytest.approx(10 / (2 * 8 * 2 / 3))


def test_recommend(rows):
    rows.append(make_row("single", model="convnet", flavour="tiny", status="failed", reason="boom", gpus="0"))
    rows.append(make_row("ddp", model="vit", flavour="base", world_size=2, samples_per_s=50.0,
                         peak_memory_bytes=[8 * GIB, 8 * GIB]))
    assert recommend(summarise(frame(rows))) == [
        "convnet tiny: no case ran (1 failed)",
        "gpt 800m: pp-1f1b (m=8) is fastest at 160.0 samples/s, 1.60x one GPU, 20.0 GiB peak per GPU "
        "(single: 40.0 GiB)",
        "resnet101 full: pipeline gpipe (m=4) is fastest at 1750.0 samples/s, 1.25x one GPU, 18.0 GiB peak per GPU "
        "(single: 30.0 GiB)",
        "vit base: ddp is fastest at 50.0 samples/s (no single run to compare with), 8.0 GiB peak per GPU",
    ]


def test_recommend_names_the_batch_only_when_a_model_has_several(rows):
    rows.append(make_row("single", gpus="0", batch=128, samples_per_s=110.0, peak_memory_bytes=[70 * GIB]))
    lines = recommend(summarise(frame(rows)))
    assert lines[0].startswith("gpt 800m, batch 64: pp-1f1b (m=8)")
    assert lines[1] == "gpt 800m, batch 128: single is fastest at 110.0 samples/s, 70.0 GiB peak per GPU"


def test_markdown_table(rows):
    summary = summarise(frame(rows))
    table = markdown_table(summary[summary["model"] == "gpt"]).splitlines()
    assert table[0].startswith("| case | GPUs | status | samples/s | x single | x DataParallel | efficiency |")
    assert table[1] == "|" + "---|" * table[0].count(" | ") + "---|"
    assert len(table) == 2 + 7
    pp8 = next(line for line in table if line.startswith("| pp-1f1b (m=8) |"))
    assert "| 160.0 | 1.60 | 1.07 | 0.90 | 400.0 | 380.0 | -5.0 | 20.0 / 12.0 | 18.0 | -10.0 |" in pp8
    oom = next(line for line in table if line.startswith("| pp-gpipe"))
    assert "| oom: CUDA out of memory. Tried to allocate 2.00 GiB \\| GPU 0 |" in oom  # the pipe escaped
    assert markdown_table(summary.head(1), {"model": "model", "samples_per_s": "samples/s"}).splitlines()[2] == \
        "| gpt | 100.0 |"
    with pytest.raises(ValueError, match="no column 'speed' to show"):
        markdown_table(summary, ["speed"])


def test_write_report(rows, tmp_path):
    written = write_report(rows, tmp_path / "report", command="pipebench report results/x.json")
    names = sorted(p.name for p in written.paths)
    assert names == ["micro_batches.png", "report.md", "summary.csv", "throughput.png",
                     "timeline-gpt-800m-batch-64.png"]
    for path in written.paths:
        assert path.exists() and path.stat().st_size > 0
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG_MAGIC
    assert written.notes == ["timeline for resnet101 full: not drawn, no ok pipeline case recorded a measured timeline"]
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "- gpt 800m: pp-1f1b (m=8) is fastest at 160.0 samples/s, 1.60x one GPU" in markdown
    assert "## gpt 800m, batch 64" in markdown and "## resnet101 full, batch 256" in markdown
    assert "| pp-1f1b (m=8) | 0,1 | ok | 160.0 | 1.60 |" in markdown
    assert "NVIDIA H200; torch 2.11.0+cu130; host gpu1" in markdown
    assert "Made by `pipebench report results/x.json`." in markdown
    assert "![throughput.png](throughput.png)" in markdown
    assert "timeline for resnet101 full: not drawn" in markdown
    summary_csv = (tmp_path / "report" / "summary.csv").read_text().splitlines()
    assert summary_csv[0].startswith("model,flavour,settings,batch,device_name,case,") and len(summary_csv) == 1 + 9


def test_write_report_skips_plots_without_data(tmp_path):
    rows = [make_row("single", gpus="0", samples_per_s=100.0, peak_memory_bytes=[GIB]),
            make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=150.0,
                     timeline=gantt())]
    written = write_report(rows, tmp_path)
    assert sorted(p.name for p in written.paths) == ["report.md", "summary.csv", "throughput.png",
                                                      "timeline-gpt-800m-batch-64.png"]
    assert written.notes == [
        "throughput against micro-batches: not drawn, no pipeline strategy ran ok at two or more micro-batch counts",
        "timeline for gpt 800m: pp-1f1b (m=8) has no predicted timeline; measured step drawn alone",
    ]


def test_write_report_with_no_rows(tmp_path):
    written = write_report([], tmp_path)
    assert [p.name for p in written.paths] == ["report.md", "summary.csv"]
    assert written.notes == ["no result rows: nothing to tabulate or plot"]


def test_timeline_of_several_stages_per_device(tmp_path):
    # Interleaved: stages 0 and 2 on device 0, 1 and 3 on device 1; one lane per (device, stage).
    ops = [{"stage": s, "device": s % 2, "kind": k, "micro": 0, "start_ms": float(t), "end_ms": float(t + 1)}
           for t, (s, k) in enumerate([(0, "F"), (1, "F"), (2, "F"), (3, "F"), (3, "I"), (3, "W"), (2, "B")])]
    rows = [make_row("pp-interleaved", world_size=2, micro_batches=2, virtual_stages=2, samples_per_s=9.0,
                     timeline=ops, predicted_timeline=ops)]
    written = write_report(rows, tmp_path)
    assert (tmp_path / "timeline-gpt-800m-batch-64.png").read_bytes()[:8] == PNG_MAGIC
    assert not [note for note in written.notes if note.startswith("timeline")]


def test_report_module_imports_no_torch_and_no_matplotlib():
    """`pipebench run` prints its table through report's frame, summarise, markdown_table and recommend:
    neither torch nor matplotlib may load for it (matplotlib loads only when write_report draws)."""
    code = ("import sys, pipebench.bench.report.tables; "
            "loaded = [m for m in ('torch', 'matplotlib') if m in sys.modules]; "
            "assert not loaded, f'imported: {loaded}'")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_ideal_share_is_the_schedule_bound():
    from pipebench.bench.report.tables import _ideal_share
    from pipebench.partition.planning.schedule_order import ideal_efficiency

    assert _ideal_share("pp-1f1b", 2, 8, 1) == pytest.approx(8 / 9) == ideal_efficiency(2, 8)
    assert _ideal_share("pp-interleaved", 2, 4, 2) == pytest.approx(8 / 9)  # v stages per device: v·m chunks
    assert _ideal_share("ddp", 4, 1, 1) == 1.0


# ------------------------------------------------------------------------------ cases, groups and notes

def test_rows_of_other_settings_are_not_one_case():
    """--set values make another model (its own group, its own single baseline); another memory cap is
    another case, named in the label where a group holds several."""
    rows = [make_row("single", gpus="0", samples_per_s=100.0, settings="depth=4"),
            make_row("single", gpus="0", samples_per_s=50.0, settings="depth=8"),
            make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=150.0,
                     settings="depth=8", max_memory="20;20"),
            make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=120.0,
                     settings="depth=8", max_memory="10;10")]
    summary = summarise(frame(rows))
    assert len(summary) == 4
    deep = summary[summary["settings"] == "depth=8"].set_index("case")
    assert list(deep.index) == ["single", "pp-1f1b (m=8), memory cap 20/20 GiB", "pp-1f1b (m=8), memory cap 10/10 GiB"]
    assert deep.loc["pp-1f1b (m=8), memory cap 20/20 GiB", "x_single"] == 3.0  # against depth=8's single
    assert recommend(summary)[1].startswith("gpt 800m (depth=8): pp-1f1b (m=8), memory cap 20/20 GiB is fastest")


def test_one_cap_and_strategies_that_record_none_are_not_several_caps():
    """On one GPU the planned cases record the free memory as their cap and DDP records none: that is one cap,
    and no label names it (no "single, memory cap 133 GiB is fastest")."""
    rows = [make_row("single", gpus="0", samples_per_s=100.0, max_memory="133"),
            make_row("ddp", gpus="0", samples_per_s=99.0),
            make_row("pp-1f1b", gpus="0", micro_batches=4, schedule="1f1b", samples_per_s=98.0, max_memory="133")]
    summary = summarise(frame(rows))
    assert list(summary["case"]) == ["single", "ddp", "pp-1f1b (m=4)"]
    assert recommend(summary)[0].startswith("gpt 800m: single is fastest")


def test_the_table_of_several_models_has_a_model_column(rows):
    """Printed to stdout, two models' rows could not be told apart."""
    table = markdown_table(summarise(frame(rows))).splitlines()
    assert table[0].startswith("| model | case | GPUs |")
    assert table[2].startswith("| gpt 800m | single | 0 |") and table[-1].startswith("| resnet101 full | pipeline")
    one = markdown_table(summarise(frame(rows[:3]))).splitlines()
    assert one[0].startswith("| case | GPUs |")  # one model: its heading says whose


def test_the_cpu_measures_no_peak_memory_n_a():
    rows = [make_row("single", gpus="cpu", samples_per_s=8.0, peak_memory_bytes=[0], device_name="cpu"),
            make_row("ddp", gpus="cpu", world_size=2, samples_per_s=12.0, peak_memory_bytes=[0, 0], device_name="cpu",
                     predicted_memory_bytes=[GIB, GIB])]
    summary = summarise(frame(rows))
    assert list(summary["peak_gib"]) == ["n/a", "n/a"] and summary["memory_error_pct"].isna().all()
    assert "| n/a |" in markdown_table(summary) and "| 0.0 |" not in markdown_table(summary)
    assert recommend(summary) == ["gpt 800m: ddp is fastest at 12.0 samples/s, 1.50x one CPU process"]  # CPU processes stood in for the GPUs


def test_a_report_from_a_csv_blames_the_csv_for_missing_timelines(tmp_path):
    rows = [make_row("pp-1f1b", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=150.0)]
    written = write_report(rows, tmp_path, csv_files=[Path("results/x.csv")])
    assert [n for n in written.notes if n.startswith("timeline")] == [
        "timeline for gpt 800m: not drawn, a results CSV holds no timelines (x.csv); report the .json file beside "
        "it to draw them"]


def test_each_timeline_panel_has_its_own_time_axis_and_a_whole_title(tmp_path, monkeypatch):
    """Each timeline panel has its own time axis, so a prediction 20x off does not squeeze the measured step
    into 5% of the width, and its whole title, unclipped."""
    from pipebench.bench.report import plots

    figures = {}
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path, footer: (figures.setdefault(path.name, fig),
                                                                  real_save(fig, path, footer))[1])
    measured, predicted = gantt(), gantt(stretch=20.0)
    rows = [make_row("pp-1f1b", model="my_models/a_rather_long_directory_name/transformer_variant.py:MyTransformer",
                     flavour="", world_size=2, micro_batches=8, schedule="1f1b", samples_per_s=150.0,
                     predicted_step_ms=20 * 400.0, step_ms=400.0, timeline=measured, predicted_timeline=predicted)]
    write_report(rows, tmp_path)
    (fig,) = [f for name, f in figures.items() if name.startswith("timeline")]
    top, bottom = fig.axes[:2]
    span = lambda ops: max(op["end_ms"] for op in ops) - min(op["start_ms"] for op in ops)
    assert top.get_xlim()[1] == pytest.approx(span(measured) * 1.01)
    assert bottom.get_xlim()[1] == pytest.approx(span(predicted) * 1.01)
    renderer = fig.canvas.get_renderer()
    for text in [fig._suptitle, *(ax.title for ax in fig.axes[:2])]:
        box = text.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width, text.get_text()


def test_first_losses_that_differ_are_explained_for_batch_norm_models(tmp_path):
    """ResNet's BatchNorm normalises each micro-batch with its own statistics, so its first losses differ
    between strategies (2.512 against 2.659); the README promises equal losses, so the report says why."""
    from pipebench.bench.report.tables import text_report
    from pipebench.bench.report.report_notes import loss_notes

    rows = [make_row("single", model="resnet18", flavour="tiny", gpus="0", samples_per_s=10.0, first_loss=2.512),
            make_row("pp-1f1b", model="resnet18", flavour="tiny", world_size=2, micro_batches=4, schedule="1f1b",
                     samples_per_s=15.0, first_loss=2.659),
            make_row("single", model="gpt", flavour="tiny", gpus="0", samples_per_s=10.0, first_loss=9.42918),
            make_row("pp-1f1b", model="gpt", flavour="tiny", world_size=2, micro_batches=4, schedule="1f1b",
                     samples_per_s=15.0, first_loss=9.42918)]
    summary = summarise(frame(rows))
    (note,) = loss_notes(summary)
    assert note.startswith("Note: resnet18 tiny: first losses differ between strategies (2.51200 to 2.65900), "
                           "as expected: the model has BatchNorm layers")
    assert note in text_report(summary)
    write_report(rows, tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    section = markdown.split("## resnet18 tiny")[1].split("##")[0]
    assert note in section  # under the table it explains
    assert "first losses differ" not in markdown.split("## gpt tiny")[1].split("##")[0]


def test_report_cli_names_a_missing_path_and_exits_2(capsys, tmp_path):
    from pipebench.bench.cli import main

    assert main(["report", str(tmp_path / "nonexistent")]) == 2
    err = capsys.readouterr().err
    assert err == f"pipebench: error: {tmp_path / 'nonexistent'}: no such file or folder\n"


def test_report_reads_where_run_writes_by_default(capsys, tmp_path, monkeypatch):
    from pipebench.bench.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 2
    assert capsys.readouterr().err == "pipebench: error: pipebench-results: no such file or folder\n"


def test_pairs_whose_predicted_order_was_wrong_are_flagged(tmp_path):
    """Every strategy carries a prediction; the report names the pairs it ranks wrongly (ties within 3%
    measured are not judged) and says so under the model's table."""
    from pipebench.bench.report.report_notes import misordered_pairs, order_notes

    def case(strategy, step, predicted, **kw):
        return make_row(strategy, gpus="0,1", world_size=2, samples_per_s=256 / step * 1e3, step_ms=step,
                        predicted_step_ms=predicted, **kw)

    rows = [case("single", 180.0, 178.0, ), case("ddp", 100.0, 90.0),
            case("pp-1f1b", 160.0, 190.0, micro_batches=2, schedule="1f1b"),  # ranked behind single: wrong
            case("pp-zbv", 162.0, 150.0, micro_batches=2, schedule="zbv", virtual_stages=2)]  # 1% from 1f1b: a tie
    summary = summarise(frame(rows))
    wrong = misordered_pairs(summary)
    assert [(a["strategy"], b["strategy"]) for a, b in wrong] == [("pp-1f1b", "single")]
    note, tie = order_notes(summary)
    assert note.startswith("Predicted order wrong: ") and "pp-1f1b" in note and "190.0 against 178.0 ms" in note
    assert tie.startswith("Measured a tie: ") and "pp-zbv" in tie and "1 pair(s)" in tie
    right = summarise(frame([case("single", 180.0, 178.0), case("ddp", 100.0, 90.0)]))
    assert misordered_pairs(right) == [] and "ranked right" in order_notes(right)[0]


def test_an_order_is_wrong_only_where_the_measurements_differ_by_more_than_their_noise():
    """ddp measured 10% faster than pp-1f1b but predicted slower: wrong while their steps vary little, a
    measured tie once the difference is within the sum of their standard deviations."""
    from pipebench.bench.report.report_notes import measured_ties, misordered_pairs, order_notes

    def rows(std):
        return [make_row("ddp", samples_per_s=64 / 100.0 * 1e3, step_ms=100.0, step_ms_std=std, predicted_step_ms=120.0),
                make_row("pp-1f1b", samples_per_s=64 / 110.0 * 1e3, step_ms=110.0, step_ms_std=std,
                         predicted_step_ms=115.0, micro_batches=2, schedule="1f1b")]

    steady = summarise(frame(rows(1.0)))
    assert [(a["strategy"], b["strategy"]) for a, b in misordered_pairs(steady)] == [("ddp", "pp-1f1b")]
    assert measured_ties(steady) == [] and order_notes(steady)[0].startswith("Predicted order wrong: ")
    noisy = summarise(frame(rows(6.0)))  # 10 ms apart, 6 + 6 ms of noise
    assert misordered_pairs(noisy) == [] and [(a["strategy"], b["strategy"]) for a, b in measured_ties(noisy)] == [
        ("ddp", "pp-1f1b")]
    right, tie = order_notes(noisy)
    assert "ranked right" in right and not any("wrong" in line for line in order_notes(noisy))
    assert tie == ("Measured a tie: gpt 800m: ddp 100.0 ± 6.0 and pp-1f1b (m=2) 110.0 ± 6.0 ms: apart by less than "
                   "their noise, so the predicted order of these 1 pair(s) is not judged.")


def test_drawing_the_plots_says_how_far_along_it_is(tmp_path, rows):
    """report on a large file shows progress: each plot is announced as it starts, counted to the end."""
    heard = []
    write_report(rows, tmp_path, progress=lambda done, total, what: heard.append((done, total, what)))
    assert heard[0][:2] == (0, heard[0][1]) and heard[-1] == (heard[0][1], heard[0][1], "plots drawn")
    assert [d for d, _, _ in heard] == sorted(d for d, _, _ in heard) and any("timeline" in w for _, _, w in heard)


def test_the_fastest_names_what_measured_a_tie_with_it():
    """The check of a recommendation is read off this line: pp-interleaved measured 1.11x single, but
    single's steps spread 24 ms, so single tied with it (resnet18 on the 2-vCPU VM); with steady steps
    the same means are a win."""
    def rows(std):
        return [make_row("single", gpus="cpu", samples_per_s=16 / 158.8 * 1e3, step_ms=158.8, step_ms_std=std,
                         peak_memory_bytes=[0], device_name="cpu"),
                make_row("pp-interleaved", gpus="cpu", world_size=2, samples_per_s=16 / 143.1 * 1e3, step_ms=143.1,
                         step_ms_std=10.0, peak_memory_bytes=[0, 0], device_name="cpu", micro_batches=2,
                         schedule="interleaved", virtual_stages=2)]

    noisy, steady = recommend(summarise(frame(rows(24.4)))), recommend(summarise(frame(rows(2.0))))
    assert noisy == ["gpt 800m: pp-interleaved (m=2, v=2) is fastest at 111.8 samples/s, 1.11x one CPU process; "
                     "single (158.8 ± 24.4 ms) measured a tie with it (143.1 ± 10.0 ms): apart by less than their noise, "
                     "so nothing measured faster than one CPU process"]
    assert steady == ["gpt 800m: pp-interleaved (m=2, v=2) is fastest at 111.8 samples/s, 1.11x one CPU process"]


def cpu_case(strategy, step_ms, round_ms=(), world_size=1, same_work_as="", **changes):
    """A quick-suite row on the CPU: batch 8, measured in rounds (their means in round_ms)."""
    return make_row(strategy, gpus="cpu", world_size=world_size, batch=8, samples_per_s=8 / step_ms * 1e3,
                    step_ms=step_ms, step_ms_std=0.2, round_ms=list(round_ms), same_work_as=same_work_as,
                    peak_memory_bytes=[0] * world_size, device_name="cpu", **changes)


def test_a_one_process_strategy_is_never_named_faster_than_single_on_one_device():
    """resnet101 tiny on the CPU: dataparallel, run after single, measures 1.53x it; both compute the same on
    one device, so the report names single and says how the same-work cases measured against it."""
    rows = [cpu_case("single", 60.0, [59.0, 61.0]),
            cpu_case("dataparallel", 39.2, [39.0, 39.4], same_work_as="single"),
            cpu_case("modelparallel", 45.0, [44.0, 46.0], same_work_as="single"),
            cpu_case("ddp", 80.0, [79.0, 81.0], world_size=2)]
    line = recommend(summarise(frame(rows)))[0]
    assert line.startswith("gpt 800m: single is fastest at 133.3 samples/s; ")
    assert "dataparallel, modelparallel do the same work as single on one device here: 1.33-1.53x it" in line
    assert "dataparallel is fastest" not in line


def test_a_speed_up_within_the_noise_across_rounds_is_a_tie():
    """Steady steps within each round, but the rounds moved 10%: a 6% gap is a tie, not a speed-up."""
    from pipebench.bench.report.report_notes import resolution_notes

    def rows(rounds):
        return [cpu_case("single", 50.0, [50.0 - rounds, 50.0 + rounds]),
                cpu_case("ddp", 47.0, [47.0 - rounds, 47.0 + rounds], world_size=2)]

    noisy, steady = summarise(frame(rows(2.5))), summarise(frame(rows(0.1)))
    assert recommend(noisy)[0].endswith("apart by less than their noise, so nothing measured faster than one "
                                        "CPU process")
    assert recommend(steady)[0] == "gpt 800m: ddp is fastest at 170.2 samples/s, 1.06x one CPU process"
    assert list(noisy["rounds"]) == [2, 2] and noisy["noise_ms"].round(2).tolist() == [3.54, 3.54]
    assert resolution_notes(noisy) == ["Resolution: gpt 800m: 2 interleaved round(s) per case; their means moved "
                                       "7.3% of a step (median over 2 case(s)), so cases closer than about 15% "
                                       "measured a tie."]
