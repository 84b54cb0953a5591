"""The public API: every name is listed, lazily importable, and its docstring example runs."""

from __future__ import annotations

import doctest
import subprocess
import sys

import moetrace


def test_dir_lists_every_public_name() -> None:
    listed = dir(moetrace)
    for name in ("load", "analyze", "simulate", "export", "Trace", "Report", "TraceFormatError"):
        assert name in listed
        assert name in moetrace.__all__


def test_public_names_resolve_to_their_implementations() -> None:
    from moetrace.analysis.report import Report, analyze
    from moetrace.trace.io import load, write_trace

    assert moetrace.load is load
    assert moetrace.export is write_trace
    assert moetrace.analyze is analyze
    assert moetrace.Report is Report


def test_import_stays_light() -> None:
    code = "import sys, moetrace; print(sorted(m for m in sys.modules if m.startswith('moetrace')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['moetrace']"


def test_docstring_example_runs() -> None:
    result = doctest.testmod(moetrace, raise_on_error=False)
    assert result.attempted >= 4
    assert result.failed == 0
