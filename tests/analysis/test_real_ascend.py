"""Ascend level0 traces: our per-step overlap metrics equal msprof's own figures (0.5%).

Two independent references computed by msprof itself: step_trace_time.csv (µs) and the
"Overlap Analysis" lanes inside trace_view.json (kept as markers, never counted as work).
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from moetrace.analysis import analyze

TOL = 0.005
CSV_COLUMNS = {
    "compute_ns": "Computing",
    "comm_ns": "Communication",
    "exposed_comm_ns": "Communication(Not Overlapped)",
    "overlapped_ns": "Overlapped",
    "free_ns": "Free",
    "window_ns": "Stage",
}
LANES = {
    "compute_ns": "Computing",
    "comm_ns": "Communication",
    "exposed_comm_ns": "Communication(Not Overlapped)",
    "free_ns": "Free",
}


def _load(real_traces: Path, rank: int):  # type: ignore[no-untyped-def]
    moetrace = pytest.importorskip("moetrace.trace.io")
    base = real_traces / "ascend" / f"level0__rank{rank}_ascend_pt__"
    trace = moetrace.load(str(base) + "trace_view.json")
    with open(str(base) + "step_trace_time.csv") as f:
        rows = list(csv.DictReader(f))
    return trace, rows


@pytest.mark.parametrize("rank", [0, 1])
def test_step_trace_time_csv(real_traces: Path, rank: int) -> None:
    trace, rows = _load(real_traces, rank)
    report = analyze(trace)
    assert report.ranks.height == len(rows) == 1
    got = report.ranks.row(0, named=True)
    assert got["rank"] == rank
    assert got["step"] == int(rows[0]["Step"])
    for ours, theirs in CSV_COLUMNS.items():
        want_ns = float(rows[0][theirs]) * 1000
        assert got[ours] == pytest.approx(want_ns, rel=TOL), ours


@pytest.mark.parametrize("rank", [0, 1])
def test_overlap_analysis_lanes(real_traces: Path, rank: int) -> None:
    trace, _ = _load(real_traces, rank)
    report = analyze(trace)
    got = report.ranks.row(0, named=True)
    lanes = (
        trace.events.join(trace.tracks, on="track")
        .filter(pl.col("process_name") == "Overlap Analysis")
        .group_by("thread_name")
        .agg(pl.col("dur").sum())
    )
    lane_ns = dict(zip(lanes["thread_name"], lanes["dur"], strict=True))
    assert all(
        e == "marker"
        for e in trace.events.join(trace.tracks, on="track")
        .filter(pl.col("process_name") == "Overlap Analysis")["kind"]
        .unique()
        .to_list()
    )
    for ours, lane in LANES.items():
        assert got[ours] == pytest.approx(lane_ns[lane], rel=TOL), ours


@pytest.mark.parametrize("rank", [0, 1])
def test_critical_path_runs_through_the_collectives(real_traces: Path, rank: int) -> None:
    """The compute stream's EVENT_WAIT tasks are released by the HCCL all-reduces: the path
    goes through all four of them (this step is bound by its exposed communication: 95 %)."""
    trace, _ = _load(real_traces, rank)
    report = analyze(trace)
    got = report.ranks.row(0, named=True)
    on_path = report.critical_path.filter(pl.col("category") == "comm")["event_id"].to_list()
    names = trace.events.filter(pl.col("id").is_in(on_path))["name"].to_list()
    assert sorted(names) == [f"hcom_allReduce__868_{i}_1" for i in range(4)]
    assert got["cp_comm_ns"] == got["comm_ns"]
    assert report.critical_path["dur_ns"].sum() == got["cp_span_ns"] <= got["window_ns"]
