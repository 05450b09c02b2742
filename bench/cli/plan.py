"""`pipebench plan`: profile a model (or load a saved profile) and print a balanced pipeline plan."""
from __future__ import annotations

from pipebench.bench.cli.output import answer
from pipebench.base.errors import printable
from pipebench.request import BALANCES
from pipebench.base.schedules import DEFAULT_SCHEDULE, SCHEDULES as SIMULATED_SCHEDULES
from pipebench.bench.cli.plan_inputs import add_source_options, check_plan_outputs, load_or_profile
from pipebench.partition.planning.plan import FORMAT as PLAN_FORMAT


def add_parser(subparsers) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="profile a model and print a balanced pipeline plan",
        description="Profile each layer at the micro-batch sizes considered, cut the model into balanced "
        "contiguous stages with the exact solver, simulate the schedule and print the plan beside the "
        "parameter-balanced baseline.",
    )
    add_source_options(plan, "plan", where="GPU ids, one stage each, e.g. 0,1, or auto:N for the N freest GPUs now",
                       stages="number of stages, all on --device")
    plan.add_argument("--micro-batches", "--chunks", dest="micro_batches", default="auto", metavar="auto|M",
                      help="micro-batch count, or auto to pick the fastest predicted (default: auto; a few sizes "
                      "are measured, the others interpolated, and those predicted within 5%% of the best measured)")
    plan.add_argument("--schedule", default=DEFAULT_SCHEDULE,
                      help=f"pipeline schedule to plan for: {', '.join(SIMULATED_SCHEDULES)} (default: {DEFAULT_SCHEDULE})")
    plan.add_argument("--virtual-stages", default=None, metavar="V",
                      help="stages per device for interleaved, zb-interleaved and zbv (default: 2; 1 otherwise)")
    plan.add_argument("--balance", default="time", choices=BALANCES,
                      help="what to balance: profiled time (default), parameter counts or layer counts")
    plan.add_argument("--export", nargs=2, metavar=("ENGINE", "FILE"),
                      help="also write the plan in an engine's own terms as JSON: torchtitan, deepspeed, megatron "
                      "or device-map (see docs/engines.md)")
    plan.set_defaults(handler=cmd_plan)


def cmd_plan(args) -> int:
    import pipebench
    from pipebench.base.schedules import get_schedule

    get_schedule(args.schedule)  # a typo: one line and exit 2, before anything is measured
    from pipebench.bench.predict.pipeline_gain import plan_verdict
    from pipebench.base.fileio.files import write_json
    from pipebench.partition.planning.engines import check_engine, summary
    from pipebench.api import plan_profiles
    from pipebench.bench.report.plan_text import format_plan
    from pipebench.base.text.parse import parse_micro_batches

    micro_batches = parse_micro_batches(args.micro_batches, single=True)[0]
    check_plan_outputs(args, PLAN_FORMAT, "a plan")
    if args.export:
        check_engine(args.export[0])
    profiles, request = load_or_profile(args, plan_profiles, schedule=args.schedule,
                                        virtual_stages=args.virtual_stages, balance=args.balance,
                                        micro_batches=micro_batches)
    plan = pipebench.plan(profiles=profiles, request=request)
    # The parameter-balanced split at the plan's micro-batch count, priced on the same devices, speeds and
    # caps, so that the comparison is like for like; format_plan says when it breaks the caps.
    baseline = pipebench.plan(profiles=profiles, request=request.with_(balance="params", micro_batches=plan.micro_batches))
    answer(format_plan(plan, baseline, request.max_memory))
    if verdict := plan_verdict(plan, profiles, request):  # no pipeline pays here, and why
        answer(verdict)
    if args.json:
        plan.save(args.json)
        answer(f"plan written to {printable(str(args.json))}")
    if args.export:
        (engine, path), exported = args.export, plan.export(args.export[0], profiles)
        write_json(path, exported)
        answer(f"{summary(exported)}; {engine} export written to {printable(str(path))}")
    return 0
