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


def _imports(folder: str) -> set[str]:
    """Every moetrace module imported anywhere under moetrace/<folder> (static, incl. lazy)."""
    found: set[str] = set()
    for path in (PACKAGE / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("moetrace"))
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.level == 0
                and node.module.startswith("moetrace")
            ):
                found.add(node.module)
    return found


def test_floors_import_only_downwards() -> None:
    trace = _imports("trace")
    assert all(m.startswith("moetrace.trace") for m in trace), sorted(trace)
    analysis = _imports("analysis")
    assert all(m.startswith(("moetrace.analysis", "moetrace.trace")) for m in analysis), sorted(
        analysis
    )
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
