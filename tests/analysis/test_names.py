"""Events by name and the critical-path breakdown equal plain-Python sums."""

from __future__ import annotations

from collections import defaultdict

import polars as pl

from moetrace.analysis.names import events_by_name
from moetrace.analysis.report import analyze
from moetrace.trace.model import Trace


def _trace() -> Trace:
    return Trace.from_frames(
        events={
            "id": [0, 1, 2, 3, 4, 5],
            "track": [0, 0, 0, 1, 1, 2],
            "name": ["gemm", "gemm", "swiglu", "a2a", "gemm", "step 0"],
            "kind": ["compute", "compute", "compute", "comm", "compute", "marker"],
            "ts": [0, 100, 300, 0, 250, 0],
            "dur": [100, 150, 50, 400, 10, 400],
        },
        tracks={
            "track": [0, 1, 2],
            "rank": [0, 0, 0],
            "pid": ["0"] * 3,
            "tid": ["a", "b", "c"],
            "unit": ["aic", "link", "other"],
        },
        compute_depth=True,
    )


def test_events_by_name_equals_python_sums() -> None:
    trace = _trace()
    got = events_by_name(trace)
    totals: dict[str, list[int]] = defaultdict(list)
    ev = trace.events
    for name, dur, kind in zip(ev["name"], ev["dur"], ev["kind"], strict=True):
        if kind != "marker":
            totals[name].append(dur)
    assert got["name"].to_list() == ["a2a", "gemm", "swiglu"]  # 400, 260, 50 ns
    for row in got.iter_rows(named=True):
        durs = totals[row["name"]]
        assert (row["count"], row["total_ns"], row["max_ns"]) == (len(durs), sum(durs), max(durs))
        assert row["mean_ns"] == sum(durs) / len(durs)
    assert got.filter(name="gemm")["longest_id"].item() == 1
    assert events_by_name(trace, kinds=("marker",))["name"].to_list() == ["step 0"]


def test_cp_breakdown_sums_the_segments() -> None:
    report = analyze(_trace())
    cp = report.critical_path
    by = report.cp_breakdown
    assert by["dur_ns"].sum() == cp["dur_ns"].sum()
    for row in by.iter_rows(named=True):
        assert row["dur_ns"] == cp.filter(category=row["category"])["dur_ns"].sum()
    assert abs(float(by.select(pl.col("share").sum()).item()) - 1.0) < 1e-12
    assert by["dur_ns"].to_list() == sorted(by["dur_ns"].to_list(), reverse=True)
