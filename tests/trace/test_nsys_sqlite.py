"""The Nsight Systems SQLite reader on the real CloverLeaf export: kernels and memcpys equal
the GPU-trace CSV pipit's authors exported from the same run (count and Σ duration, exact
ns), CUDA API calls equal the API CSV, every kernel has its launch edge; a synthetic export
covers NVTX (`text` and `textId`), memsets and NCCL kernels."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

from moetrace.analysis import analyze
from moetrace.trace.io import load


def _folder(real_traces: Path) -> Path:
    return real_traces / "nsys" / "cloverleaf"


def _csv_intervals(csv: Path, key: str) -> pl.DataFrame:
    """Enter/Leave rows paired by _matching_event (the CSV's own pairing): key, dur (ns)."""
    rows = pl.read_csv(csv, infer_schema_length=0).with_row_index("row")
    enter = rows.filter(pl.col("Event Type") == "Enter")
    return enter.select(
        pl.col(key).alias("key"),
        (
            pl.col("_matching_timestamp").cast(pl.Int64) - pl.col("Timestamp (ns)").cast(pl.Int64)
        ).alias("dur"),
    )


def _load(real_traces: Path):  # type: ignore[no-untyped-def]
    return load(_folder(real_traces) / "perlmutter-cloverleaf-cuda.sqlite", cache=False)


def test_gpu_work_equals_the_csv(real_traces: Path) -> None:
    trace = _load(real_traces)
    csv = _csv_intervals(_folder(real_traces) / "cloverleaf_gpu_trace.csv", "type")
    ev = trace.events
    kernels = ev.filter(pl.col("cat") == "kernel")
    copies = ev.filter(pl.col("cat") == "memcpy")
    want_k = csv.filter(pl.col("key") == "kernel")
    want_m = csv.filter(pl.col("key").str.starts_with("CUDA_MEMCPY"))
    assert kernels.height == want_k.height == 1312
    assert int(kernels["dur"].sum()) == int(want_k["dur"].sum())
    assert copies.height == want_m.height
    assert int(copies["dur"].sum()) == int(want_m["dur"].sum())
    # per copy kind too (the CSV's type is nsys's ENUM_CUDA_MEMCPY_OPER symbol)
    kinds = (
        copies.select(pl.col("args").str.json_path_match("$.copyKind").alias("key"), "dur")
        .group_by("key")
        .agg(pl.len(), pl.col("dur").sum())
        .sort("key")
    )
    assert (
        kinds.rows() == want_m.group_by("key").agg(pl.len(), pl.col("dur").sum()).sort("key").rows()
    )


def test_cuda_api_equals_the_api_csv(real_traces: Path) -> None:
    trace = _load(real_traces)
    csv = _csv_intervals(_folder(real_traces) / "cloverleaf-cuda_api_trace.csv", "Name")
    api = trace.events.filter(pl.col("cat") == "cuda_runtime")
    assert api.height == csv.height == 3048
    assert int(api["dur"].sum()) == int(csv["dur"].sum())
    ours = api.group_by("name").agg(pl.len(), pl.col("dur").sum()).sort("name")
    theirs = csv.group_by("key").agg(pl.len(), pl.col("dur").sum()).sort("key")
    assert ours.rows() == theirs.rows()


def test_every_kernel_has_its_launch_edge(real_traces: Path) -> None:
    trace = _load(real_traces)
    ev = trace.events
    kernels = ev.filter(pl.col("cat") == "kernel")
    launch = trace.deps.filter(pl.col("kind") == "launch")
    assert set(kernels["id"].to_list()) <= set(launch["dst"].to_list())
    pairs = launch.join(
        ev.select(pl.col("id").alias("src"), pl.col("args").alias("a")), on="src"
    ).join(ev.select(pl.col("id").alias("dst"), pl.col("args").alias("b")), on="dst")

    def corr(c: str) -> pl.Expr:
        return pl.col(c).str.json_path_match("$.correlation")

    assert pairs.filter(corr("a") != corr("b")).height == 0
    assert trace.problems() == []
    report = analyze(trace)
    assert report.ranks.height >= 1 and int(report.ranks["compute_ns"].sum()) > 0


def _synthetic(path: Path, *, text_id: bool) -> None:
    """A minimal nsys-shaped export: one process, one thread, one GPU stream."""
    conn = sqlite3.connect(path)
    g = (42 << 24) | 42  # globalTid of pid 42, tid 42
    gp = 42 << 24
    conn.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT, streamId INT,"
        " correlationId INT, globalPid INT, shortName INT, demangledName INT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INT, end INT, deviceId INT, streamId INT,"
        " correlationId INT, globalPid INT, bytes INT, memKind INT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,"
        " correlationId INT, nameId INT);"
        + (
            "CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, globalTid INT,"
            " text TEXT, textId INT);"
            if text_id
            else "CREATE TABLE NVTX_EVENTS (start INT, end INT, eventType INT, globalTid INT,"
            " text TEXT);"
        )
    )
    conn.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [
            (1, "gemm"),
            (2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            (3, "cudaLaunchKernel"),
            (4, "ProfilerStep#3"),
        ],
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, ?, ?, ?)",
        [(100, 200, 1, gp, 1, 1), (150, 400, 2, gp, 2, 2)],
    )
    conn.execute(
        "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (410, 420, 0, 7, 3, ?, 64, 1)", (gp,)
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, 3)",
        [(10, 20, g, 1), (30, 40, g, 2), (50, 60, g, 3)],
    )
    if text_id:
        conn.execute("INSERT INTO NVTX_EVENTS VALUES (0, 500, 59, ?, NULL, 4)", (g,))
    else:
        conn.execute("INSERT INTO NVTX_EVENTS VALUES (0, 500, 59, ?, 'ProfilerStep#3')", (g,))
    conn.execute(
        "INSERT INTO NVTX_EVENTS VALUES (5, 5, 34, ?, 'mark')"
        if not text_id
        else "INSERT INTO NVTX_EVENTS VALUES (5, 5, 34, ?, 'mark', NULL)",
        (g,),
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("text_id", [False, True])
def test_synthetic_export(tmp_path: Path, text_id: bool) -> None:
    path = tmp_path / "run.sqlite"
    _synthetic(path, text_id=text_id)
    trace = load(path, cache=False)
    ev = trace.events.join(trace.tracks, on="track")
    kinds = dict(ev.select("name", pl.col("kind").cast(pl.String)).rows())
    assert kinds["gemm"] == "compute"
    assert kinds["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] == "comm"
    assert kinds["ProfilerStep#3"] == "marker"  # the NVTX range, by text or textId
    assert "mark" not in kinds  # an NVTX mark (eventType 34) is no range
    memset = ev.filter(pl.col("cat") == "memset")
    assert memset["kind"].to_list() == ["memory"] and memset["bytes"].to_list() == [64.0]
    assert trace.deps.filter(pl.col("kind") == "launch").height == 3
    host = ev.filter(pl.col("unit") == "cpu")
    assert set(host["pid"]) == {"42"} and set(host["tid"]) == {"42"}
    assert trace.problems() == []
    report = analyze(trace)
    assert report.ranks["step"].to_list() == [3]
