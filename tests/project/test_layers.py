"""The package's layers, read from the source: which package may import which (module-level,
function-level and type-only imports alike), no import cycle (lazy and type-only ones
included), no module over 500 lines. docs/architecture.md draws the same layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "beamtok"

# Lowest first. A module may import its own layer and the layers below it, never above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("beamtok._src.base",)),
    ("core", ("beamtok._src.engines", "beamtok._src.transforms", "beamtok._src.sources", "beamtok._src.core")),
    ("shards", ("beamtok._src.shards",)),
    ("production", ("beamtok._src.production",)),
    ("stream", ("beamtok._src.stream",)),
    ("cache", ("beamtok._src.cache",)),
    ("beam", ("beamtok._src.beam",)),
    ("dataset", ("beamtok._src.dataset",)),
    (
        "top",
        (
            "beamtok",
            "beamtok.__main__",
            "beamtok.training",
            "beamtok.cache",
            "beamtok.beam",
            "beamtok.extend",
            "beamtok._src.cli",
            "beamtok._src.trainer",
            "beamtok._src.attention",
            "beamtok.testing",
            "beamtok._src.distributed",
            "beamtok._src.grain_source",
        ),
    ),
]
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    best = (-1, -1)  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or (
                prefix != "beamtok" and module.startswith(prefix + ".")
            )  # the package itself: its __init__ only
            if inside and len(prefix) > best[0]:
                best = (len(prefix), index)
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md)"
    return best[1]


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking(node: ast.If) -> bool:
    """``if TYPE_CHECKING:``, or a lazy namespace's block that never runs (``_NAMES_FOR_TOOLS``)."""
    test = node.test
    return (isinstance(test, ast.Name) and test.id in ("TYPE_CHECKING", "_NAMES_FOR_TOOLS")) or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(module: str, named: bool = False) -> list[tuple[str, int, bool]]:
    """Every beamtok module ``module`` imports: (target, line, runtime), wherever the import
    stands (module level, in a function, under ``if TYPE_CHECKING``: runtime False). With
    ``named``, also every module it names in a string (``-m beamtok.x``, ``import_module``):
    a dependency for the layers, though not an import cycle (it runs in another process or
    later)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, runtime: bool) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.body:
                visit(child, False)
            for child in node.orelse:
                visit(child, runtime)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        if (
            named
            and isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "." in node.value
            and node.value in MODULES
        ):
            names = [node.value]  # a module named in a string: started with -m, or import_module()
        for name in names:
            target = _resolve(name) if name.startswith("beamtok") else None
            if target is not None and target != module:
                found.append((target, node.lineno, runtime))
                break  # the most specific name of one import statement is enough
        for child in ast.iter_child_nodes(node):
            visit(child, runtime)

    visit(ast.parse(path.read_text(encoding="utf-8")), True)
    return found


def test_a_module_named_in_a_string_counts_as_an_import():
    """``python -m beamtok.x`` or ``import_module("beamtok.x")`` depends on ``beamtok.x`` as an
    import does; the layer test must see it (the worker server starts the fork server so)."""
    server = "beamtok._src.beam.worker_server"
    assert ("beamtok._src.beam.fork_server", True) in {(t, runtime) for t, _, runtime in imports_of(server, named=True)}


def test_no_module_imports_a_layer_above_its_own():
    wrong = []
    for module in MODULES:
        for target, line, _ in imports_of(module, named=True):
            if layer_of(target) > layer_of(module):
                wrong.append(
                    f"{module}:{line} imports {target} ({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})"
                )
    assert not wrong, "\n".join(wrong)


def test_the_readers_know_no_spec():
    """sources/ reads records; what a spec is (core/) is built on it, never the other way."""
    wrong = [
        f"{module}:{line} imports {target}"
        for module in MODULES
        if module.startswith("beamtok._src.sources")
        for target, line, _ in imports_of(module, named=True)
        if target.startswith("beamtok._src.core")
    ]
    assert not wrong, "\n".join(wrong)


def test_cache_never_imports_stream_or_beam():
    wrong = [
        f"{module}:{line} imports {target}"
        for module in MODULES
        if module.startswith("beamtok._src.cache")
        for target, line, _ in imports_of(module)
        if target.startswith(("beamtok._src.stream", "beamtok._src.beam"))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_cache_is_format_then_read_then_build():
    """cache/format says what a cache is on disk; cache/read reads it; cache/build writes it
    (caching as the data streams reads what is cached): each imports only those before it."""
    order = ["format", "read", "build"]
    wrong = [
        f"{module}:{line} imports {target}"
        for module in MODULES
        if module.startswith("beamtok._src.cache.") and module.count(".") >= 4
        for target, line, _ in imports_of(module)
        if target.startswith("beamtok._src.cache.")
        and target.count(".") >= 4
        and order.index(target.split(".")[3]) > order.index(module.split(".")[3])
    ]
    assert not wrong, "\n".join(wrong)
    assert sorted(p.name for p in (PACKAGE / "_src" / "cache").glob("*.py")) == ["__init__.py"]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph``, as the modules along it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def import_graph() -> dict[str, set[str]]:
    """Who imports whom: module-level, in functions and under ``if TYPE_CHECKING`` alike (a
    type-only cycle is still two modules that cannot be understood apart). Importing
    ``a.b.c`` runs the package ``a.b`` first, so it counts as importing that package too."""
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        targets = set()
        for target, _, _ in imports_of(module):
            targets.add(target)
            package = target.rpartition(".")[0]
            while package and package != "beamtok":
                if package in MODULES and package != module and not module.startswith(package + "."):
                    targets.add(package)
                package = package.rpartition(".")[0]
        graph[module] = targets
    return graph


def test_no_import_cycles_lazy_or_type_only_ones_included():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = import_graph()
    graph["beamtok._src.stream.node"].add("beamtok._src.dataset.dataset")  # the facade is built on nodes
    assert find_cycle(graph) is not None
    # the stream stands on the backends alone; the cache and Beam beside it; the facade over all
    assert (
        layer_of("beamtok._src.production.protocol")
        < layer_of("beamtok._src.stream.node")
        < layer_of("beamtok._src.cache.read.reader")
        < layer_of("beamtok._src.dataset.dataset")
        < layer_of("beamtok._src.cli")
    )


def test_no_reference_to_a_design_document_outside_the_repository():
    root = PACKAGE.parent
    cited = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("beamtok", "tests", "benchmarks", "examples", "pipelines")
        for path in sorted((root / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "DESIGN" + " §" in line or "DESIGN" + ".md" in line
    ]
    assert not cited, cited


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_over_500_lines(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module}: {lines} lines; split it by job"


def test_the_package_root_holds_only_its_public_modules():
    """Private modules live under ``_src`` in a package named for their layer; at the root stay
    the package and its public namespaces."""
    loose = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__", "__main__", "beam", "cache", "extend", "testing", "training"], loose
    inside = sorted(p.stem for p in (PACKAGE / "_src").glob("*.py"))
    assert inside == ["__init__", "attention", "grain_source", "trainer"], inside
