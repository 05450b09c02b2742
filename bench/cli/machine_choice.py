"""Where a command works: the GPUs --gpus names (`chosen_gpus`, auto:N the freest now), CPU processes
(--device cpu: `asks_cpu`, and the line said there: `cpu_notice`) and each device's speed (--speeds:
`speeds`)."""
from __future__ import annotations

from pipebench.base.errors import UserError
from pipebench.bench.cli.output import note


def speeds(text: str | None, devices: list[str], *, probe: bool = True) -> list[float] | None:
    """--speeds: None (equal), 'auto' (probe each GPU now: only on GPUs, and only where `probe`, i.e. not
    with a saved profile, which touches no GPU), or one factor per device."""
    from pipebench.bench.cases.machine import check_speed_probe, speed_probe_line
    from pipebench.base.text.parse import parse_speeds

    factors = parse_speeds(text, len(devices))
    if factors != "auto":
        return factors
    check_speed_probe(devices[0].startswith("cuda"))
    if not probe:
        raise UserError("--speeds auto probes the GPUs; with --profile give the factors, e.g. --speeds 1,0.5")
    from pipebench.hardware.gpu_probes import measure_speeds

    distinct = list(dict.fromkeys(devices))
    factors = measure_speeds(distinct)
    note(speed_probe_line(distinct, factors))
    return factors


def chosen_gpus(text: str | None, *, now: bool = True) -> tuple[list[int] | None, list | None]:
    """--gpus, read the same way by plan, advise, run and train: (the GPU ids, what NVML says of them, for
    the default memory caps; None where it cannot tell), or (None, None) when not given. auto:N takes the
    N freest GPUs now and says which it took, and why. `now` False (a saved profile, which touches no
    GPU): the ids as named, and auto:N refused."""
    from pipebench.base.text.parse import parse_gpus

    if text is None:
        return None, None
    if not now:
        if text.startswith("auto"):
            raise UserError("--gpus auto:N looks at the GPUs now; with --profile name them, e.g. --gpus 0,1")
        return parse_gpus(text), None
    from pipebench.hardware.gpus import describe_choice, parse_gpu_choice

    ids, infos = parse_gpu_choice(text)
    if text.startswith("auto"):
        note(describe_choice(infos))
    return ids, infos or None


def cpu_notice(machine, on_cpu: bool, doing: str, nodes: int = 1) -> str | None:
    """The line run and train say first on CPU processes: why the CPU (--device cpu, or no GPU visible) and
    how many processes stand in for devices; None on GPUs, where nothing needs saying."""
    if machine.gpus is not None:
        return None
    why = "--device cpu" if on_cpu else "no CUDA GPU visible"
    return (f"{why}: {doing} on the CPU, {machine.devices * nodes} processes standing in for devices (gloo)"
            + (f" over {nodes} nodes" if nodes > 1 else ""))


def asks_cpu(args) -> bool:
    """Whether --device asks for CPU processes (where GPUs are visible too); one line for any other value.
    What it cannot combine with (--gpus; --cpu-processes with --gpus) is detect_machine's to refuse."""
    if args.device is None:
        return False
    if args.device != "cpu":
        raise UserError(f"--device {args.device}: {args.command} takes --device cpu (CPU processes); name GPUs with --gpus")
    return True
