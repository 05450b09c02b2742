"""`pipebench report`: tables, recommendations and plots from results files."""
from __future__ import annotations

from pathlib import Path

from pipebench.bench.cli.output import answer, note
from pipebench.bench.store.results import DEFAULT_OUT
from pipebench.base.errors import UserError, printable


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="tables and plots from results files",
        description="Summarise results files (speed-ups, efficiency, predicted against measured) into "
        "report.md, summary.csv and PNG plots; train's --csv logs (given, or in a folder given) are drawn as "
        "loss curves beside their throughput (train.png).")
    parser.add_argument("files", nargs="*", help=f"results .json/.csv files, train --csv logs, or folders of them (default: {DEFAULT_OUT}, where run writes)")
    parser.add_argument("--out", help="folder for the report (default: <first file>-report)")
    parser.set_defaults(handler=cmd_report)


def cmd_report(args) -> int:
    from pipebench.bench.report.tables import frame, summarise, text_report, write_report
    from pipebench.bench.store.results import files as results_files, load
    from pipebench.bench.train.curves import draw_logs, is_train_log, read_log, summary_line
    from pipebench.base.fileio.files import creatable_folder, writable_folder
    from pipebench.base.text.progress import ProgressBar

    files = args.files or [DEFAULT_OUT]
    if args.out is not None:  # checked, not created: a refused input leaves no folder behind
        creatable_folder(args.out, "--out")
    found = results_files(files)  # folders expanded; a path that is not there: "no such file or folder"
    _check_report_folder(Path(args.out or default_report_dir(Path(files[0]))), files, found)
    logs = [f for f in found if is_train_log(f)]
    rows = load([f for f in found if f not in logs]) if len(logs) < len(found) else []
    if not rows and not logs:
        raise UserError(f"no results rows or train logs in {', '.join(files)}")
    out = writable_folder(args.out or default_report_dir(Path(files[0])), "--out")
    command = " ".join(["pipebench", "report", *args.files])
    paths, notes = [], []
    if rows:
        note(f"{len(rows)} row(s) read; summarising and drawing")
        answer(text_report(summarise(frame(rows))))
        csv_files = [f for f in found if f.suffix == ".csv" and f not in logs]  # they hold no timelines
        with ProgressBar(unit="plot") as progress:
            written = write_report(rows, out, command=command, csv_files=csv_files, progress=progress)
        paths, notes = list(written.paths), list(written.notes)
    if logs:
        train_logs = [read_log(f) for f in logs]
        if rows:
            answer()
        for log in train_logs:
            answer(summary_line(log))
        paths.append(draw_logs(train_logs, out / "train.png", f"made by: {command}", notes))
    for line in notes:
        note(line)
    answer("\nwrote " + ", ".join(printable(str(p)) for p in paths))
    return 0


REPORT_FILES = ("report.md", "summary.csv")
"""What a report writes beside its plots, by name, into its folder."""


def _check_report_folder(out: Path, given: list[str], found: list[Path]) -> None:
    """Refuse a report folder whose report.md or summary.csv would replace an input; a folder read, or the
    folder of a file read, whose summary.csv the next report of that folder would read as results; one where
    a file the report writes is not a regular file (a FIFO would wait for ever, a folder would be a traceback
    after the table is printed); or a file there that is not an earlier report's: a report.md is one when it
    starts as a report does, and its summary.csv with it."""
    from pipebench.base.fileio.files import not_another_file, not_regular, starts_with

    where = printable(str(out))
    written = {(out / name).resolve(): name for name in REPORT_FILES}
    for path in found:
        if (name := written.get(Path(path).resolve())) is not None:
            raise UserError(f"--out {where}: the report's {name} would replace {printable(str(path))}, "
                            "which it reads; give the report a folder of its own")
    for path in map(Path, given):
        if path.is_dir() and path.resolve() == out.resolve():
            raise UserError(f"--out {where} is a folder read: its summary.csv would be read as results next "
                            "time; give the report a folder of its own (default: <folder>/report)")
        if not path.is_dir() and path.parent.resolve() == out.resolve():
            raise UserError(f"--out {where} is the folder of {printable(str(path))}: its summary.csv would be read "
                            f"as results with it next time; give the report a folder of its own (default: "
                            f"{printable(str(default_report_dir(path)))})")
    for path in [out / name for name in REPORT_FILES] + sorted(out.glob("*.png")):
        if (kind := not_regular(path)) is not None:
            raise UserError(f"--out {where}: {path.name} is {kind}, where the report writes a file; give the "
                            "report a folder of its own")
    markdown = out / "report.md"
    ours = not markdown.exists() or starts_with(b"# pipebench report")(str(markdown))
    not_another_file(markdown, "--out", lambda _: ours, "a pipebench report (report.md)")
    not_another_file(out / "summary.csv", "--out", lambda _: ours and markdown.exists(),
                     "a pipebench report's summary.csv (beside its report.md)")


def default_report_dir(first: Path) -> Path:
    """Beside the first results file (x.json -> x-report), or inside the first folder (results/report)."""
    if first.is_dir():
        return first / "report"
    return first.with_name(first.stem + "-report")
