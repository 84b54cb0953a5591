"""Many analyses of one trace (the viewer's area selections): the time-range-free part once.

The caller holds an `AnalysisSession` for as long as it works on a trace; it keeps the last
few prepared graphs (steps, gating predecessors) of that trace, so each new time range only
redoes the windowed passes. Safe to use from several threads.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from moetrace.analysis.report import Graph, Report, analyze, graph_key, prepare_graph
from moetrace.trace.model import Trace


class AnalysisSession:
    """`analyze` for one trace, reusing the graphs of earlier calls with the same settings."""

    KEEP = 2
    """Graphs kept (most recent first): the whole-trace settings and one other."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._graphs: list[Graph] = []
        self._lock = threading.Lock()

    def graph(
        self,
        comm_patterns: Sequence[str] = (),
        ranks: Sequence[int] | None = None,
        window: str = "step",
        window_span: str = "compute-comm",
    ) -> Graph:
        """The prepared graph for these settings: a kept one, else prepared now and kept."""
        key = graph_key(comm_patterns, ranks, window, window_span)
        with self._lock:
            for kept in self._graphs:
                if kept.key == key:
                    return kept
        graph = prepare_graph(self.trace, key)  # outside the lock: may take seconds
        with self._lock:
            self._graphs = [graph, *(g for g in self._graphs if g.key != key)][: self.KEEP]
        return graph

    def analyze(
        self,
        *,
        peak_tflops: float | None = None,
        comm_patterns: Sequence[str] = (),
        time_range: tuple[int, int] | None = None,
        ranks: Sequence[int] | None = None,
        window: str = "step",
        window_span: str = "compute-comm",
    ) -> Report:
        """`moetrace.analysis.report.analyze(self.trace, ...)` with a kept graph."""
        return analyze(
            self.trace,
            peak_tflops=peak_tflops,
            comm_patterns=comm_patterns,
            time_range=time_range,
            ranks=ranks,
            window=window,
            window_span=window_span,
            graph=self.graph(comm_patterns, ranks, window, window_span),
        )
