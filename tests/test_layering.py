"""Import hygiene: scripted analysis stays light, and the floors import only downwards."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "moetrace"


def test_analysis_and_trace_import_no_ui_and_no_executor() -> None:
    code = (
        "import sys, moetrace.analysis, moetrace.trace, moetrace.trace.model;"
        "import moetrace.analysis.report;"
        "bad = [m for m in ('textual', 'rich', 'moetrace.executor', 'moetrace.tui')"
        " if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported: {out.stdout.strip()}"


def _module_name(path: Path) -> str:
    """The dotted module name of a file under moetrace/ (a package's __init__ is the package)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, package: str) -> set[str]:
    """Every moetrace module `source` (code inside `package`) imports: absolute and relative,
    top-level and lazy (inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("moetrace"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:  # from . import a, b: each name may be a module
                    found.update(f"{module}.{a.name}" for a in node.names)
                found.add(module)
            elif node.module and node.module.startswith("moetrace"):
                found.add(node.module)
    return found


def _file_imports(path: Path) -> set[str]:
    this = _module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    return imported_modules(path.read_text(), package)


def _imports(folder: str) -> set[str]:
    """Every moetrace module imported anywhere under moetrace/<folder> (static, incl. lazy)."""
    found: set[str] = set()
    for path in (PACKAGE / folder).rglob("*.py"):
        found |= _file_imports(path)
    return found


def test_relative_imports_are_resolved() -> None:
    """A relative import is seen as the absolute module it names (else it would slip past)."""
    source = "def f():\n    from ..executor import run\nfrom . import steps\nfrom .x.y import z\n"
    found = imported_modules(source, "moetrace.analysis")
    assert {"moetrace.executor", "moetrace.analysis.steps", "moetrace.analysis.x.y"} <= found
    assert "moetrace.executor.run" not in found  # `run` is a name from moetrace.executor


def test_floors_import_only_downwards() -> None:
    trace = _imports("trace")
    # moetrace.errors is a leaf (imports nothing from moetrace): every floor may use it
    assert all(m.startswith("moetrace.trace") or m == "moetrace.errors" for m in trace), sorted(
        trace
    )
    analysis = _imports("analysis")
    assert all(
        m.startswith(("moetrace.analysis", "moetrace.trace", "moetrace.errors")) for m in analysis
    ), sorted(analysis)
    executor = _imports("executor")
    assert not any(m.startswith(("moetrace.analysis", "moetrace.tui")) for m in executor), sorted(
        executor
    )
    # the analyzer never imports a UI library, even lazily inside a function
    for path in (PACKAGE / "analysis").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] in ("textual", "rich") for n in names), path


def test_whatif_sits_above_analysis_and_executor() -> None:
    """whatif/ may import analysis/, executor/ and trace/; none of those imports whatif/."""
    whatif = _imports("whatif")
    allowed: tuple[str, ...] = ("moetrace.whatif", "moetrace.analysis", "moetrace.executor")
    allowed += ("moetrace.trace",)
    allowed += ("moetrace.errors",)  # a leaf (imports nothing from moetrace)
    assert all(m.startswith(allowed) for m in whatif), sorted(whatif)
    for floor in ("trace", "analysis", "executor"):
        below = _imports(floor)
        assert not any(m.startswith("moetrace.whatif") for m in below), (floor, sorted(below))


def test_flavors_import_nothing_from_the_formats() -> None:
    """The Chrome reader (formats/) calls the flavors; the flavors take its `Built` from
    flavors/built.py, so the two folders import one way only (no back-up arrow)."""
    flavors = _imports("trace/flavors")
    assert not [m for m in flavors if m.startswith("moetrace.trace.formats")], sorted(flavors)
    assert "moetrace.trace.flavors" in _imports("trace/formats")
