import sys, traceback
from pipebench.base import interrupts
orig = interrupts._interrupt
def spy(signum, frame):
    print("SIGNAL ARRIVED HERE:", file=sys.stderr); traceback.print_stack(frame, limit=12, file=sys.stderr)
    return orig(signum, frame)
interrupts._interrupt = spy
from pipebench.bench.cli import main
sys.argv[0] = "pipebench"; sys.exit(main())
