"""`pipebench models`: the model zoo, with layer and parameter counts per size flavour."""
from __future__ import annotations

from pipebench.base.text.units import format_count


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("models", help="list the model zoo with sizes")
    parser.set_defaults(handler=cmd_models)


def cmd_models(args) -> int:
    import pandas as pd

    from pipebench import models

    rows = []
    for info in models.list_models():
        sizes = {f: models.get_model(info.name, f, device="meta") for f in info.flavours}  # no memory used
        default = sizes[info.default_flavour]
        rows.append({
            "model": info.name,
            "layers": len(default),
            "parameters": format_count(default.num_parameters()),
            "flavours": ", ".join(
                f"{f}{'*' if f == info.default_flavour else ''} ({format_count(m.num_parameters())})"
                for f, m in sizes.items()
            ),
            "description": info.description,
        })
    table = pd.DataFrame(rows)
    left = {c: (lambda w: lambda v: f"{v:<{w}}")(table[c].str.len().max()) for c in ("model", "flavours", "description")}
    print(table.to_string(index=False, formatters=left, justify="left"))
    print("* default flavour; layers and parameters are the default's")
    return 0
