"""Analysis state is passed explicitly: a session's reused graphs give the same reports as
fresh analyses, and a graph of another trace or other settings is never used."""

from __future__ import annotations

import json

from moetrace.analysis.report import analyze, graph_key, prepare_graph
from moetrace.analysis.session import AnalysisSession
from moetrace.testing.builders import random_trace


def _doc(report: object) -> str:
    return json.dumps(report.to_dict(), sort_keys=True)  # type: ignore[attr-defined]


def test_session_reports_equal_fresh_analyses_for_every_range() -> None:
    trace = random_trace(7, n_ranks=3)
    session = AnalysisSession(trace)
    lo, hi = int(trace.events["ts"].min()), int(trace.events["ts"].max())  # type: ignore[arg-type]
    ranges = [None, (lo, (lo + hi) // 2), ((lo + hi) // 2, hi + 1)]
    for time_range in [*ranges, *ranges]:  # the second round reuses the kept graph
        got = session.analyze(time_range=time_range)
        assert _doc(got) == _doc(analyze(trace, time_range=time_range))
    assert session.graph() is session.graph()  # kept, not prepared again
    assert session.graph(ranks=[0]) is not session.graph()


def test_a_graph_of_another_trace_or_other_settings_is_not_used() -> None:
    a, b = random_trace(1), random_trace(2)
    assert _doc(analyze(a)) != _doc(analyze(b))  # else the check below could not fail
    graph_a = prepare_graph(a, graph_key((), None))
    assert _doc(analyze(b, graph=graph_a)) == _doc(analyze(b))
    other = prepare_graph(a, graph_key((), [0]))
    assert _doc(analyze(a, ranks=[0])) != _doc(analyze(a))
    assert _doc(analyze(a, graph=other)) == _doc(analyze(a))
