"""Folders are layers: each folder of `diagnostics/` and `proxy/` imports only folders below it.

The import graph is read from the source with `ast` (every `streamtap` import, at the top of a
module and inside functions), so a new upward import or cycle fails here without anyone keeping a
list of edges. The one list kept by hand is the layer order below, and the few function-level
imports that are not cycle dodges, each with the reason it is lazy.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {"diagnostics": "streamtap.diagnostics", "proxy": "streamtap.proxy"}

# Bottom first. A folder may import its own tier's modules only within itself, and any folder of a
# lower tier. A module at a package's top (proxy/config.py) is a folder of its own.
LAYERS = {
    "diagnostics": (
        ("errors",),  # the StreamtapError family every layer raises
        ("trace_record",),  # the typed trace record: data only, read by the verdict and above
        ("decode",),  # bytes -> frames: SSE, NDJSON, JSON array, chunked framing
        ("redaction",),  # secrets, headers, messages: what a record may hold
        ("dialects",),  # frames -> normalized events, and the stream state they fold into
        ("verdict",),  # the state -> boundary, phase, evidence; what the client saw
        ("record",),  # the recorder and the record's schema
        ("faults",),  # the fault rule and trigger language, and the scanner that finds the cut
        ("samples",),  # content-free samples, rebuilt frames, repro cases
        ("probe",),  # the client probe's catalog (repro cases among its rows) and grades
        ("views",),  # text, HTML, HAR, stats and spans of records
    ),
    "proxy": (
        ("connection",),  # how a client connection ends: FIN, reset, stall
        ("faults",),  # injecting a fault on a live response
        ("config",),
        ("route_typos",),
        ("store",),  # trace files
        ("logs",),
        ("readout",),  # reading traces back: ls, show, stats, the live page's routes
        ("export",),  # OTLP and Prometheus
        ("serve",),  # the proxy itself
        ("replay",),  # replaying samples through a proxy, the demo
        ("testing",),  # the Python API and pytest plugin
        ("probe",),  # `streamtap probe`
        ("cli",),
    ),
}

# Function-level imports of streamtap modules that are lazy on purpose, by importing module.
# A lazy import that only dodges a cycle does not belong here: move the module instead.
LAZY_ALLOWED = {
    "streamtap.proxy.cli": "each command imports its machinery when it runs, so `streamtap "
                           "--help` and `streamtap serve` start without the readers, Jinja or "
                           "the sample tools",
    "streamtap.proxy.export.otlp": "the metrics half of OpenTelemetry (an optional extra) loads "
                                   "only when metrics are on",
    "streamtap.proxy.readout.routes": "the live page's templates (Jinja2) load on the first "
                                      "view, not when the proxy starts",
    "streamtap.proxy.testing.plugin": "a pytest plugin loads in every test run of a user's "
                                      "suite: it imports only pytest until a test uses it",
}


def module_name(package: str, path: Path) -> str:
    parts = list(path.relative_to(REPO / package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGES[package], *parts])


def source_modules() -> dict[str, Path]:
    return {module_name(package, path): path
            for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))
            # Files `streamtap repro` copies into a repro folder, run there, not imported here.
            if "repro_kit" not in path.parts}


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """`(imported module, line, inside a function)` for every streamtap import in one module."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([child.module] if child.module else []))
                for alias in child.names:
                    # `from streamtap.diagnostics import dialects` imports the subpackage
                    target = f"{base}.{alias.name}"
                    found.append((target if target in known else base, child.lineno,
                                  in_function))
            visit(child, nested)

    visit(tree, False)
    return [(target, line, lazy) for target, line, lazy in found
            if target == "streamtap" or target.startswith("streamtap.")]


def folder_of(module: str) -> tuple[str, str] | None:
    """`(package, folder)` of a module of diagnostics/ or proxy/; None for anything else."""
    for package, dotted in PACKAGES.items():
        if module.startswith(dotted + "."):
            return package, module[len(dotted) + 1:].split(".")[0]
    return None


def graph() -> list[tuple[str, str, int, bool]]:
    modules = source_modules()
    known = set(modules)
    return [(name, target, line, lazy) for name, path in modules.items()
            for target, line, lazy in imports(name, path, known)]


def tier(package: str, folder: str) -> int:
    for index, folders in enumerate(LAYERS[package]):
        if folder in folders:
            return index
    raise AssertionError(f"{package}/{folder} is in no layer: add it to LAYERS in "
                         f"tests/unit/test_layers.py, above every folder it imports")


def folder_edges() -> dict[tuple[tuple[str, str], tuple[str, str]], list[str]]:
    edges: dict = {}
    for name, target, line, _ in graph():
        source, dest = folder_of(name), folder_of(target)
        if source and dest and source != dest:
            edges.setdefault((source, dest), []).append(f"{name}:{line} imports {target}")
    return edges


def test_the_graph_is_read_from_the_source():
    """The reader itself: it sees top-level, function-level and relative imports."""
    edges = {(name, target) for name, target, _, _ in graph()}
    assert ("streamtap.diagnostics.record.recorder",
            "streamtap.diagnostics.verdict.classify") in edges
    assert ("streamtap.proxy.serve.exchange", "streamtap.proxy.faults.inject") in edges
    lazy = {(name, target) for name, target, _, is_lazy in graph() if is_lazy}
    assert ("streamtap.proxy.testing.plugin", "streamtap.proxy.testing.fixture") in lazy


def test_every_folder_has_a_layer():
    for name in source_modules():
        package, folder = folder_of(name) or (None, None)
        if package is not None:
            tier(package, folder)


def test_diagnostics_never_imports_proxy():
    upward = [why for (source, dest), whys in folder_edges().items()
              if source[0] == "diagnostics" and dest[0] == "proxy" for why in whys]
    assert not upward, "diagnostics/ is pure and imports nothing of proxy/:\n" + "\n".join(upward)


def test_no_folder_imports_upward():
    upward = []
    for (source, dest), whys in folder_edges().items():
        if source[0] != dest[0]:
            continue  # proxy -> diagnostics is allowed; the reverse is checked above
        if tier(*dest) >= tier(*source):
            upward += whys
    assert not upward, ("a folder imports a folder of its own layer or above; move the module to "
                        "the layer it belongs to:\n" + "\n".join(sorted(upward)))


def test_no_cycle_between_folders():
    """Redundant with the layer order while every folder has a tier, but it names the cycle."""
    edges: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for source, dest in folder_edges():
        edges.setdefault(source, set()).add(dest)
    cycles = []
    for start in edges:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for after in edges.get(node, ()):
                if after == start and start == min(path):  # each cycle once, from its least
                    cycles.append(" -> ".join("/".join(f) for f in [*path, start]))
                elif after not in path and len(path) < len(edges) + 1:
                    stack.append((after, [*path, after]))
    assert not cycles, "import cycles between folders:\n" + "\n".join(sorted(set(cycles)))


def test_function_level_imports_are_not_cycle_dodges():
    lazy = [f"{name}:{line} imports {target}" for name, target, line, is_lazy in graph()
            if is_lazy and not any(name == allowed or name.startswith(allowed + ".")
                                   for allowed in LAZY_ALLOWED)]
    assert not lazy, ("a function-level import of a streamtap module: import it at the top of "
                      "the module (moving modules if that makes a cycle), or, if it is lazy for "
                      "start-up speed or an optional extra, add it to LAZY_ALLOWED with the "
                      "reason:\n" + "\n".join(lazy))


@pytest.mark.parametrize("allowed", sorted(LAZY_ALLOWED))
def test_the_allowlist_names_real_modules(allowed):
    assert any(name == allowed or name.startswith(allowed + ".") for name in source_modules())


def test_every_folder_is_a_package_the_wheel_ships():
    """A folder made by a move must reach pyproject's package list, or the installed streamtap
    lacks it (setuptools ships only the packages listed)."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    folders = {".".join([PACKAGES[package], *path.parent.relative_to(REPO / package).parts])
               for package in PACKAGES for path in (REPO / package).rglob("__init__.py")}
    assert folders - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"

