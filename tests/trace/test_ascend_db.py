"""The msprof / torch_npu database reader on the real level0 export: `metrics` equals
msprof's own analysis.db StepTraceTime (µs, read here with sqlite3, an independent
reference) within 0.5% on both ranks, and the lanes look like the text export's."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from moetrace.analysis import analyze
from moetrace.trace.io import find_traces, load
from moetrace.trace.model import Trace

TOL = 0.005
COLUMNS = {
    "compute_ns": "computing",
    "comm_ns": "communication",
    "overlapped_ns": "overlapped",
    "exposed_comm_ns": "communication_not_overlapped",
    "free_ns": "free",
    "window_ns": "stage",
}


def _out(real_traces: Path, rank: int) -> Path:
    return real_traces / "ascend_db" / "level0" / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def _step_trace_time(db: Path) -> dict[str, float]:
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        cur = conn.execute("SELECT * FROM StepTraceTime")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    finally:
        conn.close()
    assert len(rows) == 1
    return dict(zip(names, rows[0], strict=True))


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("rank", [0, 1])
def test_metrics_equal_analysis_db(real_traces: Path, rank: int) -> None:
    out = _out(real_traces, rank)
    before = _digest(out)
    trace = load(out / f"ascend_pytorch_profiler_{rank}.db", cache=False)
    want = _step_trace_time(out / "analysis.db")
    got = analyze(trace).ranks.row(0, named=True)
    assert got["rank"] == rank
    assert got["step"] == int(want["step"])
    for ours, theirs in COLUMNS.items():
        assert got[ours] == pytest.approx(float(want[theirs]) * 1000, rel=TOL), ours
    assert _digest(out) == before  # read-only: nothing written beside the database
    assert not list(out.glob("*-wal")) and not list(out.glob("*-shm"))


def test_folder_with_only_db_is_found(real_traces: Path) -> None:
    found = find_traces(real_traces / "ascend_db" / "level0")
    assert [p.name for p in found] == [
        "ascend_pytorch_profiler_0.db",
        "ascend_pytorch_profiler_1.db",
    ]
    trace = load(real_traces / "ascend_db" / "level0", cache=False)
    assert sorted(trace.ranks) == [0, 1]
    assert trace.meta["format"] == "ascend-db" and trace.meta["flavor"] == "ascend"


def test_lanes_like_the_text_export(real_traces: Path) -> None:
    """Same processes, units and kinds per lane family as trace_view.json of the same job."""
    db = load(_out(real_traces, 0) / "ascend_pytorch_profiler_0.db", cache=False)
    text = load(real_traces / "ascend" / "level0__rank0_ascend_pt__trace_view.json", cache=False)

    def shape(t: Trace) -> set[tuple[Any, ...]]:
        j = t.events.join(t.tracks, on="track").filter(
            pl.col("process_name").is_in(["Ascend Hardware", "HCCL"])
        )
        return set(
            j.select("process_name", pl.col("unit").cast(pl.String), pl.col("kind").cast(pl.String))
            .unique()
            .rows()
        )

    assert shape(db) == shape(text)
    streams = db.tracks.filter(pl.col("process_name") == "Ascend Hardware")["thread_name"]
    assert {"Stream 2", "Stream 4"} <= set(streams.to_list())
    markers = db.events.filter(pl.col("kind") == "marker")["name"].to_list()
    assert markers == ["ProfilerStep#50"]
    assert db.problems() == []


def test_launch_edges_follow_connection_ids(real_traces: Path) -> None:
    """Every launch edge links a PyTorch API row to a device task whose connection id is one
    of that row's CONNECTION_IDS (counted here with SQL, an independent join)."""
    path = _out(real_traces, 0) / "ascend_pytorch_profiler_0.db"
    trace = load(path, cache=False)
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        (want,) = conn.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT p.rowid, t.rowid FROM PYTORCH_API p "
            "JOIN CONNECTION_IDS c ON c.id = p.connectionId "
            "JOIN TASK t ON t.connectionId = c.connectionId)"
        ).fetchone()
    finally:
        conn.close()
    launch = trace.deps.filter(pl.col("kind") == "launch")
    assert launch.height == want > 0
    ev = trace.events.join(trace.tracks, on="track")
    src = launch.join(ev.select(pl.col("id").alias("src"), "process_name"), on="src")
    dst = launch.join(ev.select(pl.col("id").alias("dst"), "process_name"), on="dst")
    assert set(src["process_name"]) == {"Python"}
    assert set(dst["process_name"]) == {"Ascend Hardware"}
