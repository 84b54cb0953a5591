"""Analysis: pure functions from a `Trace` to Polars frames (never imports textual or rich).

`analyze(trace) -> Report` computes exposed communication, idle cores and the critical path
per rank and step (definitions: docs/metrics.md).
"""

from __future__ import annotations

from moetrace.analysis.report import Report, analyze, compare

__all__ = ["Report", "analyze", "compare"]
