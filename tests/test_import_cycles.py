"""No import loops anywhere in moetrace: function-level and relative imports count too.

A loop hidden in a function still ties the modules together (neither can be understood, tested
or moved without the other); the fix is to move the shared piece down into its own module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parent.parent / "moetrace"


def package_modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file for every module under `package` (a package is its __init__)."""
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_edges(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `source` (the code of `module`) imports, anywhere in the file.

    `from pkg import name` is an edge to `pkg.name` when that is a module, else to `pkg`; an
    import of a module that is not in `known` falls back to its nearest known parent package.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in known else origin
                for alias in node.names
            ]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


def import_graph(package: Path) -> nx.DiGraph:
    """Module -> imported module, for every import in every file of `package`."""
    modules = package_modules(package)
    known = set(modules)
    graph: nx.DiGraph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in import_edges(path.read_text(), name, path.name == "__init__.py", known):
            graph.add_edge(name, target)
    return graph


def import_cycles(package: Path) -> list[list[str]]:
    """Each import loop (strongly connected set of modules), its modules sorted."""
    graph = import_graph(package)
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_moetrace_has_no_import_cycles() -> None:
    cycles = import_cycles(PACKAGE)
    assert cycles == [], "import loops:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_function_level_relative_and_submodule_imports_are_edges() -> None:
    known = {"p", "p.a", "p.b", "p.sub", "p.sub.c", "p.sub.d"}
    source = (
        "def f():\n    from . import b\n"  # function-level, relative, names a submodule
        "from .sub import c\n"  # relative into a subpackage
        "import p.sub.d.inner\n"  # not a module: its nearest known parent
        "from p.sub import not_a_module\n"  # a name from p.sub: the package itself
    )
    assert import_edges(source, "p.a", False, known) == {"p.b", "p.sub.c", "p.sub.d", "p.sub"}
    # inside a package's __init__, `.` is the package itself
    assert import_edges("from . import a\n", "p", True, known) == {"p.a"}


def test_a_loop_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "loopy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from loopy import b\n")
    (pkg / "b.py").write_text("def later():\n    from .a import thing\n")
    (pkg / "c.py").write_text("from loopy.a import x\n")  # imports into the loop, not part of it
    assert import_cycles(pkg) == [["loopy.a", "loopy.b"]]
