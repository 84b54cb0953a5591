"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> Trace.

Schema: NVIDIA's "Nsight Systems Exporter SQLite schema" (docs.nvidia.com/nsight-systems,
UserGuide "SQLite Schema Reference"): CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET
(start, end in ns, deviceId, streamId, correlationId, globalPid), CUPTI_ACTIVITY_KIND_RUNTIME
and _DRIVER (host calls; the same correlationId as the GPU work they launched), NVTX_EVENTS
(ranges; the text is `text` or, in newer exports, `textId` into StringIds), StringIds,
ThreadNames, PROCESSES, ENUM_CUDA_MEMCPY_OPER. globalTid = (pid << 24) | tid (low 24 bits
each). Every table but StringIds is optional and every optional column is found by
detection (PRAGMA table_info), never by nsys version.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from moetrace.trace.flavors.base import DEVICE_COMM_KERNEL, STEP_MARKER
from moetrace.trace.formats.sqlite import (
    columns_of,
    fetch,
    lookup,
    open_readonly,
    strings,
    table_names,
)
from moetrace.trace.formats.table import table_trace
from moetrace.trace.model import Trace, TraceFormatError

NAME = "nsys-sqlite"
I64 = pl.Int64()
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
HOST_APIS = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
NVTX = "NVTX_EVENTS"
NVTX_RANGES = (59, 60, 70, 71)
"""NVTX_EVENTS.eventType of ranges (push/pop, start/end, and their domain variants), from
ENUM_NSYS_EVENT_TYPE: NvtxPushPopRange 59, NvtxStartEndRange 60, NvtxtPushPopRange 70,
NvtxtStartEndRange 71."""
EXPORT_HINT = (
    "an Nsight Systems report is a binary file moetrace does not read: export it first with "
    "`nsys export --type sqlite -o report.sqlite report.nsys-rep` and pass the .sqlite"
)


def claims(tables: set[str]) -> bool:
    """True for an nsys export: StringIds plus a CUPTI activity or NVTX table."""
    return "StringIds" in tables and any(
        t.startswith("CUPTI_ACTIVITY_KIND_") or t == NVTX for t in tables
    )


def _gid(col: str) -> list[pl.Expr]:
    """pid and tid as text from an nsys globalTid/globalPid (low 24 bits each)."""
    g = pl.col(col)
    return [
        ((g // (1 << 24)) % (1 << 24)).cast(pl.String).alias("pid"),
        (g % (1 << 24)).cast(pl.String).alias("tid"),
    ]


def read(path: Path) -> Trace:
    """Read one nsys SQLite export (read-only); raise TraceFormatError on bad input."""
    warnings: list[str] = []
    with open_readonly(path, "an Nsight Systems SQLite export") as conn:
        tables = table_names(conn)
        if "StringIds" not in tables:
            raise TraceFormatError(path, "not an nsys export: no StringIds table")
        ids = strings(conn, "StringIds", "id", "value")
        parts = [p for p in _gpu(conn, tables, ids) if p is not None]
        parts += [p for p in (_api(conn, tables, ids, t) for t in HOST_APIS) if p is not None]
        nvtx = _nvtx(conn, tables, ids)
        if nvtx is not None:
            parts.append(nvtx)
        names = _thread_names(conn, tables, ids)
        procs = _process_names(conn, tables)
    if not parts:
        raise TraceFormatError(
            path, f"nsys export holds none of {KERNEL}, {MEMCPY}, the CUDA API or NVTX tables"
        )
    events = pl.concat(parts, how="diagonal_relaxed")
    if names is not None:
        events = (
            events.join(names, on=["pid", "tid"], how="left")
            .with_columns(pl.coalesce("thread_name", "thread_name_x").alias("thread_name"))
            .drop("thread_name_x")
        )
    if procs is not None:
        events = (
            events.join(procs, on="pid", how="left")
            .with_columns(
                pl.when(pl.col("unit") == "cpu")
                .then(pl.coalesce("process_name", "process_name_x"))
                .otherwise(pl.col("process_name_x"))
                .alias("process_name")
            )
            .drop("process_name_x")
        )
    else:
        events = events.rename({"process_name_x": "process_name"})
    if names is None:
        events = events.rename({"thread_name_x": "thread_name"})
    events = events.with_columns(
        pl.lit(None, pl.Int32).alias("rank"),
        pl.col("process_name").fill_null(pl.lit("Process ") + pl.col("pid")),
    )
    return table_trace(events, warnings, path=path, name=NAME, flavor="nsys", deps_of=_launch_deps)


def _device_cols(ids: pl.DataFrame) -> list[pl.Expr]:
    return [
        pl.col("pid_g").cast(pl.String).fill_null("gpu").alias("pid"),
        (
            pl.lit("gpu ")
            + pl.col("device").cast(pl.String)
            + pl.lit(" stream ")
            + pl.col("stream").cast(pl.String)
        ).alias("tid"),
        (pl.lit("GPU ") + pl.col("device").cast(pl.String)).alias("process_name_x"),
        (pl.lit("Stream ") + pl.col("stream").cast(pl.String)).alias("thread_name_x"),
        pl.lit("stream").alias("unit"),
        pl.col("ts"),
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.concat_str(
            [
                pl.col("pid_g").cast(pl.String).fill_null(""),
                pl.lit(":"),
                pl.col("corr").cast(pl.String),
            ]
        ).alias("dev_corr"),
    ]


def _gpu(
    conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame
) -> list[pl.DataFrame | None]:
    """Kernels (compute; NCCL kernels comm), memcpys and memsets (memory) on GPU streams."""
    base = "start, end, deviceId, streamId, correlationId, globalPid"
    bsch = {"ts": I64, "end": I64, "device": I64, "stream": I64, "corr": I64, "pid_g": I64}
    out: list[pl.DataFrame | None] = []
    if KERNEL in tables:
        cols = columns_of(conn, KERNEL)
        name = "shortName" if "shortName" in cols else "demangledName"
        full = "demangledName" if "demangledName" in cols else name
        grid = (
            "gridX, gridY, gridZ, blockX, blockY, blockZ"
            if {"gridX", "blockX"} <= cols
            else "NULL, NULL, NULL, NULL, NULL, NULL"
        )
        k = fetch(
            conn,
            f"SELECT {base}, {name}, {full}, {grid} FROM {KERNEL}",
            {
                **bsch,
                "name_id": I64,
                "full_id": I64,
                "gx": I64,
                "gy": I64,
                "gz": I64,
                "bx": I64,
                "by": I64,
                "bz": I64,
            },
        )
        kname = lookup(pl.col("name_id"), ids).fill_null("?")
        out.append(
            k.with_columns(kname.alias("name")).select(
                *_device_cols(ids),
                "name",
                pl.lit("kernel").alias("cat"),
                pl.when(pl.col("name").str.contains(DEVICE_COMM_KERNEL))
                .then(pl.lit("comm"))
                .otherwise(pl.lit("compute"))
                .alias("kind"),
                pl.struct(
                    pl.col("corr").alias("correlation"),
                    pl.col("device").alias("device"),
                    pl.col("stream").alias("stream"),
                    lookup(pl.col("full_id"), ids).alias("kernel"),
                    pl.concat_list("gx", "gy", "gz").alias("grid"),
                    pl.concat_list("bx", "by", "bz").alias("block"),
                )
                .struct.json_encode()
                .alias("args"),
            )
        )
    for table, label in ((MEMCPY, "Memcpy"), (MEMSET, "Memset")):
        if table not in tables:
            continue
        cols = columns_of(conn, table)
        kind_col = (
            "copyKind" if "copyKind" in cols else ("memKind" if "memKind" in cols else "NULL")
        )
        m = fetch(
            conn,
            f"SELECT {base}, bytes, {kind_col} FROM {table}",
            {**bsch, "bytes": I64, "copy": I64},
        )
        if table == MEMCPY and "ENUM_CUDA_MEMCPY_OPER" in tables:
            opers = fetch(
                conn,
                "SELECT id, name, label FROM ENUM_CUDA_MEMCPY_OPER",
                {"id": I64, "sym": pl.String(), "value": pl.String()},
            )
            what = lookup(pl.col("copy"), opers)
            sym = lookup(pl.col("copy"), opers.select("id", pl.col("sym").alias("value")))
        else:
            what = pl.col("copy").cast(pl.String)
            sym = pl.lit(None, pl.String)
        out.append(
            m.select(
                *_device_cols(ids),
                (pl.lit(f"{label} ") + what.fill_null("")).str.strip_chars().alias("name"),
                pl.lit(label.lower()).alias("cat"),
                pl.lit("memory").alias("kind"),
                pl.col("bytes").cast(pl.Float64).alias("bytes"),
                pl.struct(
                    pl.col("corr").alias("correlation"), sym.alias("copyKind"), pl.col("bytes")
                )
                .struct.json_encode()
                .alias("args"),
            )
        )
    return out


def _api(
    conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame, table: str
) -> pl.DataFrame | None:
    """CUDA runtime / driver calls on their host threads; correlationId links them to the
    GPU work."""
    if table not in tables or not {
        "start",
        "end",
        "globalTid",
        "correlationId",
        "nameId",
    } <= columns_of(conn, table):
        return None
    a = fetch(
        conn,
        f"SELECT start, end, globalTid, correlationId, nameId FROM {table}",
        {"ts": I64, "end": I64, "gtid": I64, "corr": I64, "name_id": I64},
    )
    cat = "cuda_runtime" if table.endswith("RUNTIME") else "cuda_driver"
    return a.select(
        *_gid("gtid"),
        pl.lit(None, pl.String).alias("process_name_x"),
        (pl.lit("Thread ") + (pl.col("gtid") % (1 << 24)).cast(pl.String)).alias("thread_name_x"),
        pl.lit("cpu").alias("unit"),
        lookup(pl.col("name_id"), ids).fill_null("?").alias("name"),
        pl.lit(cat).alias("cat"),
        pl.lit("host").alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.struct(pl.col("corr").alias("correlation")).struct.json_encode().alias("args"),
        pl.concat_str(
            [
                ((pl.col("gtid") // (1 << 24)) * (1 << 24)).cast(pl.String),
                pl.lit(":"),
                pl.col("corr").cast(pl.String),
            ]
        ).alias("host_corr"),
    )


def _nvtx(conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame) -> pl.DataFrame | None:
    """NVTX ranges (annotations, kind host) on their threads; `ProfilerStep#N`-like ranges
    are step markers. The text is `text` or `textId` (StringIds), whichever the export has."""
    if NVTX not in tables:
        return None
    cols = columns_of(conn, NVTX)
    if not {"start", "end", "globalTid", "eventType"} <= cols:
        return None
    text = "text" if "text" in cols else "NULL"
    text_id = "textId" if "textId" in cols else "NULL"
    n = fetch(
        conn,
        f"SELECT start, end, globalTid, {text}, {text_id} FROM {NVTX} WHERE end IS NOT NULL "
        f"AND eventType IN ({', '.join(map(str, NVTX_RANGES))})",
        {"ts": I64, "end": I64, "gtid": I64, "text": pl.String(), "text_id": I64},
    )
    name = pl.coalesce(pl.col("text"), lookup(pl.col("text_id"), ids)).fill_null("?")
    return n.with_columns(name.alias("name")).select(
        *_gid("gtid"),
        pl.lit(None, pl.String).alias("process_name_x"),
        (pl.lit("Thread ") + (pl.col("gtid") % (1 << 24)).cast(pl.String)).alias("thread_name_x"),
        pl.lit("cpu").alias("unit"),
        "name",
        pl.lit("nvtx").alias("cat"),
        pl.when(pl.col("name").str.contains(STEP_MARKER))
        .then(pl.lit("marker"))
        .otherwise(pl.lit("host"))
        .alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
    )


def _thread_names(
    conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame
) -> pl.DataFrame | None:
    if "ThreadNames" not in tables or not {"nameId", "globalTid"} <= columns_of(
        conn, "ThreadNames"
    ):
        return None
    t = fetch(conn, "SELECT globalTid, nameId FROM ThreadNames", {"gtid": I64, "name_id": I64})
    return t.select(*_gid("gtid"), lookup(pl.col("name_id"), ids).alias("thread_name")).unique(
        ["pid", "tid"], keep="first"
    )


def _process_names(conn: sqlite3.Connection, tables: set[str]) -> pl.DataFrame | None:
    if "PROCESSES" not in tables or not {"globalPid", "name"} <= columns_of(conn, "PROCESSES"):
        return None
    p = fetch(
        conn, "SELECT globalPid, name FROM PROCESSES", {"gpid": I64, "process_name": pl.String()}
    )
    return p.select(
        ((pl.col("gpid") // (1 << 24)) % (1 << 24)).cast(pl.String).alias("pid"), "process_name"
    ).unique("pid", keep="first")


def _launch_deps(ev: pl.DataFrame) -> pl.DataFrame:
    """`launch` edges: the CUDA API call -> the kernel/memcpy/memset with its correlationId,
    in the same process."""
    empty = pl.DataFrame(schema={"src": pl.UInt32(), "dst": pl.UInt32(), "kind": pl.String()})
    if "host_corr" not in ev.columns or "dev_corr" not in ev.columns:
        return empty
    src = ev.filter(pl.col("host_corr").is_not_null()).select(
        pl.col("id").alias("src"), pl.col("host_corr").alias("key")
    )
    dst = ev.filter(pl.col("dev_corr").is_not_null()).select(
        pl.col("id").alias("dst"), pl.col("dev_corr").alias("key")
    )
    return (
        src.join(dst, on="key")
        .select("src", "dst", pl.lit("launch").alias("kind"))
        .sort("src", "dst")
    )
