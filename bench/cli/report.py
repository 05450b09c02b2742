"""`pipebench report`: tables, recommendations and plots from results files."""
from __future__ import annotations

from pathlib import Path

from pipebench.bench.cli.common import note
from pipebench.bench.cli.run import DEFAULT_OUT
from pipebench.errors import UserError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "report", help="tables and plots from results files",
        description="Summarise results files (speed-ups, efficiency, predicted against measured) into "
        "report.md, summary.csv and PNG plots.")
    parser.add_argument("files", nargs="*", help=f"results .json/.csv files or folders (default: {DEFAULT_OUT}, where run writes)")
    parser.add_argument("--out", help="folder for the report (default: <first file>-report)")
    parser.set_defaults(handler=cmd_report)


def cmd_report(args) -> int:
    from pipebench.bench.report import frame, summarise, text_report, write_report
    from pipebench.bench.results import files as results_files, load
    from pipebench.files import writable_folder
    from pipebench.progress import ProgressBar

    files = args.files or [DEFAULT_OUT]
    if args.out is not None:
        writable_folder(args.out, "--out")
    rows = load(files)  # a path that is not there: "no such file or folder"
    if not rows:
        raise UserError(f"no results rows in {', '.join(files)}")
    note(f"{len(rows)} row(s) read; summarising and drawing")
    out = writable_folder(args.out or default_report_dir(Path(files[0])), "--out")
    print(text_report(summarise(frame(rows))))
    csv_files = [f for f in results_files(files) if f.suffix == ".csv"]  # they hold no timelines
    with ProgressBar(unit="plot") as progress:
        written = write_report(rows, out, command=" ".join(["pipebench", "report", *args.files]), csv_files=csv_files,
                               progress=progress)
    for line in written.notes:
        note(line)
    print("\nwrote " + ", ".join(str(p) for p in written.paths))
    return 0


def default_report_dir(first: Path) -> Path:
    """Beside the first results file (x.json -> x-report), or inside the first folder (results/report)."""
    if first.is_dir():
        return first / "report"
    return first.with_name(first.stem + "-report")
