"""The import graph of the pipebench package, read with ast (nothing is imported): no cycles between its
modules, the packages below the API in their order, the lower layers (the planner, the hardware probes,
the models, the Training and the errors) never importing bench/, the layer that runs and reports, and
bench/'s folders in theirs; and docs/architecture.md's table of modules, one row for each shipped module."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"pipebench": "pipebench", "pipebench.bench": "bench", "pipebench.hardware": "hardware",
            "pipebench.models": "models", "pipebench.partition": "partition"}
"""Import name -> folder, as pyproject.toml's package-dir installs them."""
NOT_SHIPPED = ("bench/benchmarks",)
LOWER = ("pipebench.partition", "pipebench.hardware", "pipebench.models", "pipebench.base", "pipebench.request", "pipebench.model_spec")
HIGHER = "pipebench.bench"


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(NOT_SHIPPED) or ".venv" in path.parts:
                continue
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            name = ".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])
            found.setdefault(name, path)  # pipebench's own folder first: it holds no subpackage's files
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at the top or inside a function alike."""
    found = modules()
    graph = {}
    for name, path in found.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names if alias.name in found}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in found:
                        edges.add(full)  # from pipebench.bench import results: the module results
                    elif node.module in found:
                        edges.add(node.module)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """A cycle of imports, as graphlib finds it (its modules, sorted), or none."""
    import graphlib

    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return [sorted(set(exc.args[1]))]
    return []


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert {"pipebench.api", "pipebench.bench.cases.run_suite", "pipebench.bench.strategies", "pipebench.partition.planning.plan"} <= graph.keys()
    assert "pipebench.partition.planning.schedule_order" in graph["pipebench.partition.planning.plan"]
    assert "pipebench.bench.store.results" in graph["pipebench.bench.cases.run_suite"]  # from pipebench.bench import results as res


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    assert cycles(import_graph()) == []


def test_lower_layers_never_import_bench():
    graph = import_graph()
    upward = {name: sorted(dep for dep in deps if dep.startswith(HIGHER))
              for name, deps in graph.items() if name.startswith(LOWER)}
    assert {name: deps for name, deps in upward.items() if deps} == {}


STEPS = ("strategies", "store", "predict", "launch", "report", "cases", "train", "cli")
"""bench/'s folders in the order of the flow: each imports only the folders before it (docs/architecture.md)."""


def bench_step(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["pipebench", "bench"] and parts[2] in STEPS else None


def backward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a bench/ folder into one at or after it in STEPS (its own folder excepted)."""
    found = []
    for name, deps in graph.items():
        step = bench_step(name)
        for dep in deps:
            other = bench_step(dep)
            if step and other and other != step and STEPS.index(other) > STEPS.index(step):
                found.append(f"{name} -> {dep}")
    return sorted(found)


def test_a_backward_import_is_found():
    graph = {"pipebench.bench.store.row": {"pipebench.bench.report.labels"},
             "pipebench.bench.report.labels": {"pipebench.bench.store.row"}}
    assert backward_imports(graph) == ["pipebench.bench.store.row -> pipebench.bench.report.labels"]


def test_bench_folders_follow_the_flow():
    graph = import_graph()
    assert {bench_step(name) for name in graph} >= set(STEPS)
    assert backward_imports(graph) == []


LAYERS = ("pipebench.base", "pipebench.base.errors", "pipebench.base.version", "pipebench.base.snapshot", "pipebench.base.text", "pipebench.base.fileio",
          "pipebench.base.training", "pipebench.base.schedules", "pipebench.base.step_stats", "pipebench.base.processes", "pipebench.base.interrupts", "pipebench.base.time_limit",
          "pipebench.hardware", "pipebench.partition.capture", "pipebench.partition.profiling", "pipebench.request", "pipebench.model_spec",
          "pipebench.models", "pipebench.partition.planning", "pipebench.partition")
"""The packages (and pipebench/'s own modules) below the API and bench/, lowest first: each imports only
those before it, its own modules aside (docs/architecture.md)."""
ABOVE = ("pipebench", "pipebench.__main__", "pipebench.api")
"""The API's modules, above every layer, beside bench/ (which has its own order, STEPS)."""


def layer_of(module: str) -> str | None:
    """The entry of LAYERS that holds `module` (the longest that names it or a package above it), or None."""
    holding = [layer for layer in LAYERS if module == layer or module.startswith(layer + ".")]
    return max(holding, key=len, default=None)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import from a module of LAYERS into a later layer, or into a module above them all."""
    found = []
    for name, deps in graph.items():
        if (layer := layer_of(name)) is None:
            continue
        for dep in deps:
            other = layer_of(dep)
            if other is None or LAYERS.index(other) > LAYERS.index(layer):
                found.append(f"{name} -> {dep}")
    return sorted(found)


def test_an_upward_import_between_layers_is_found():
    graph = {"pipebench.hardware.probes": {"pipebench.partition.planning.simulator", "pipebench.hardware.cpu"},
             "pipebench.request": {"pipebench.partition.planning.schedule_order", "pipebench.api"},
             "pipebench.partition.planning.solver": {"pipebench.request"}}
    assert upward_imports(graph) == ["pipebench.hardware.probes -> pipebench.partition.planning.simulator",
                                     "pipebench.request -> pipebench.api",
                                     "pipebench.request -> pipebench.partition.planning.schedule_order"]


def test_the_packages_below_the_api_follow_their_order():
    graph = import_graph()
    assert {layer_of(name) for name in graph} >= set(LAYERS)
    unplaced = {name for name in graph if layer_of(name) is None and name not in ABOVE
                and not name.startswith(HIGHER)}
    assert unplaced == set()  # a new package or module of pipebench/: give it its place in LAYERS
    assert upward_imports(graph) == []


ARCHITECTURE = ROOT / "docs" / "architecture.md"
TABLE_HEADER = "| step | module | what it holds |"
TABLE_STEPS = ("model", "capture", "profile", "plan", "predict", "strategy", "worker", "run", "row", "report", "train",
               "cli", "api", "hardware", "base")
"""The steps docs/architecture.md's table of modules files each module under."""


def holds_code(path: Path) -> bool:
    """Whether a module holds more than a docstring and re-exports (imports and `__all__`)."""
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, ast.Assign) and [getattr(target, "id", None) for target in node.targets] == ["__all__"]:
            continue
        return True
    return False


def mapped_modules() -> set[str]:
    """The modules the table must name, as paths from the repository root: every shipped one, bar the
    packages' `__init__.py` files that hold only a docstring or re-exports."""
    return {path.relative_to(ROOT).as_posix() for path in modules().values()
            if path.name != "__init__.py" or holds_code(path)}


def table_rows(text: str) -> list[tuple[str, str]]:
    """(step, module) of each row of the table of modules: the lines after its header and rule, up to the
    first line that is not a row."""
    lines = text.splitlines()
    rows = []
    for line in lines[lines.index(TABLE_HEADER) + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append((cells[0], cells[1].strip("`")))
    return rows


def test_the_table_and_the_code_test_are_read_as_meant():
    text = f"intro\n{TABLE_HEADER}\n|---|---|---|\n| plan | `partition/x.py` | a thing |\n| cli | y.py | z |\n\n| a | b | c |\n"
    assert table_rows(text) == [("plan", "partition/x.py"), ("cli", "y.py")]
    assert not holds_code(ROOT / "pipebench" / "__init__.py")  # docstring, imports and __all__
    assert not holds_code(ROOT / "bench" / "launch" / "__init__.py")  # a docstring alone
    assert holds_code(ROOT / "bench" / "strategies" / "__init__.py")  # the registry


def test_the_architecture_table_names_every_module_once():
    rows = table_rows(ARCHITECTURE.read_text(encoding="utf-8"))
    named = [module for _, module in rows]
    expected = mapped_modules()
    assert sorted({module for module in named if named.count(module) > 1}) == []  # a module with two rows
    assert sorted(set(named) - expected) == []  # a row for a file that is gone, or for a re-export
    assert sorted(expected - set(named)) == []  # a new module: give it its row in docs/architecture.md
    assert sorted({step for step, _ in rows} - set(TABLE_STEPS)) == []
