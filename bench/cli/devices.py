"""`pipebench devices`: the visible GPUs through NVML, and the bandwidth between each pair of those chosen."""
from __future__ import annotations

from pipebench.base.errors import UserError


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "devices", help="the GPUs, what is free on them, and the links between them",
        description="List every visible GPU through NVML (memory, utilisation, other processes) and time a "
        "copy between each pair of the chosen GPUs.")
    parser.add_argument("--gpus", help="GPUs whose links to time, e.g. 0,1 or auto:2 (default: all visible)")
    parser.add_argument("--no-links", action="store_true", help="skip the link bandwidth probe")
    parser.set_defaults(handler=cmd_devices)


def cmd_devices(args) -> int:
    from pipebench.hardware.gpus import format_gpus, parse_gpu_choice, query_gpus
    from pipebench.base.errors import DeviceError
    from pipebench.base.text.parse import parse_gpus

    if args.gpus is not None:
        parse_gpus(args.gpus)  # the text first: '--gpus a,b' is wrong whether or not there are GPUs
    infos = query_gpus()
    if not infos:
        if args.gpus is not None:
            raise DeviceError(f"--gpus {args.gpus}: no NVIDIA GPU is visible here (NVML found none)")
        print("no NVIDIA GPU visible here (NVML found none); pipebench runs on the CPU with gloo processes")
        return 0
    print(format_gpus(infos))
    chosen = parse_gpu_choice(args.gpus)[0] if args.gpus is not None else [g.index for g in infos]
    missing = [i for i in chosen if i >= len(infos)]
    if missing:
        raise UserError(f"GPU {missing[0]} does not exist: {len(infos)} visible")
    if args.no_links or len(chosen) < 2:
        return 0
    import pandas as pd

    from pipebench.hardware.gpu_probes import measure_link_gbps

    print("\nlink bandwidth (GB/s, timed device-to-device copy of 256 MB; row sends to column):")
    table = {f"GPU {a}": {f"GPU {b}": ("-" if a == b else f"{measure_link_gbps(f'cuda:{a}', f'cuda:{b}'):.0f}")
                          for b in chosen} for a in chosen}
    print(pd.DataFrame(table).T.to_string())
    return 0
