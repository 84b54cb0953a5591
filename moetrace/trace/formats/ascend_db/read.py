"""Ascend msprof / torch_npu SQLite database -> Trace (`ascend_pytorch_profiler_N.db`,
`msprof_*.db`).

Schema: MindStudio msprof "db" export (tables TASK, COMPUTE_TASK_INFO,
COMMUNICATION_OP, COMMUNICATION_TASK_INFO, CANN_API, PYTORCH_API, CONNECTION_IDS,
STEP_TIME, RANK_DEVICE_MAP, STRING_IDS; every text column is an id into STRING_IDS; times
are ns), as documented by Ascend's msprof db guide and read by Ascend/msinsight
(test/data/pytorch/db) and msprof-analyze's cluster recipes. The tracks mirror what the
same profiler writes to trace_view.json (flavors/ascend.py): "Ascend Hardware" / "Stream N"
device queues, "HCCL" / "Group <name> Communication" lanes for the communication ops,
"Python" and "CANN" host threads, so every analysis reads both the same way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl

from moetrace.trace.flavors.ascend import ASCEND_MEMORY_TASKS, ascend_rank
from moetrace.trace.flavors.base import STEP_MARKER
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

NAME = "ascend-db"
REQUIRED = ("TASK", "STRING_IDS")
"""Without these two there is no device timeline to read."""
MARKS = ("COMPUTE_TASK_INFO", "COMMUNICATION_OP", "CANN_API", "PYTORCH_API")
"""One of these next to TASK and STRING_IDS tells msprof's schema from other programs'."""

I64 = pl.Int64()
_ONE_MORE = [*ASCEND_MEMORY_TASKS, "MEMCPY_ASYNC", "MEMCPY"]


def claims(tables: set[str]) -> bool:
    """True for msprof's schema: TASK and STRING_IDS plus one of its op/API tables."""
    upper = {t.upper() for t in tables}
    return all(t in upper for t in REQUIRED) and any(t in upper for t in MARKS)


def _has(conn: sqlite3.Connection, tables: set[str], table: str, cols: tuple[str, ...]) -> bool:
    return table in tables and set(cols) <= columns_of(conn, table)


def _enum(conn: sqlite3.Connection, tables: set[str], table: str) -> pl.DataFrame:
    """One of msprof's ENUM_* tables (id -> name) as `id`, `value`; empty when it is absent."""
    if _has(conn, tables, table, ("id", "name")):
        return strings(conn, table, "id", "name")
    return pl.DataFrame(schema={"id": I64, "value": pl.String()})


def read(path: Path) -> Trace:
    """Read one msprof database (read-only); raise TraceFormatError on bad input."""
    warnings: list[str] = []
    with open_readonly(path, "an Ascend msprof database") as conn:
        tables = table_names(conn)
        missing = [t for t in REQUIRED if t not in tables]
        if missing:
            raise TraceFormatError(
                path, f"not an msprof database: missing table(s) {', '.join(missing)}"
            )
        ids = strings(conn, "STRING_IDS", "id", "value")
        rank = _rank(conn, tables, path)
        parts = [_tasks(conn, tables, ids, path)]
        comm = _comm_ops(conn, tables, ids)
        host = _host(conn, tables, ids)
        cann = _cann(conn, tables, ids)
        conn_ids = (
            fetch(
                conn,
                "SELECT id, connectionId FROM CONNECTION_IDS",
                {"api_conn": I64, "connection": I64},
            )
            if _has(conn, tables, "CONNECTION_IDS", ("id", "connectionId"))
            else None
        )
        steps = (
            fetch(
                conn, "SELECT id, startNs, endNs FROM STEP_TIME", {"step": I64, "s": I64, "e": I64}
            )
            if _has(conn, tables, "STEP_TIME", ("id", "startNs", "endNs"))
            else None
        )
    parts += [p for p in (comm, host, cann) if p is not None]
    if steps is not None and steps.height and not _has_steps(host):
        parts.append(_step_rows(steps))
    events = pl.concat(parts, how="diagonal_relaxed").with_columns(
        pl.lit(rank, pl.Int32).alias("rank")
    )
    events = events.filter(pl.col("ts").is_not_null())
    if rank is None:
        warnings.append("no rank in RANK_DEVICE_MAP or the path")
    return table_trace(
        events,
        warnings,
        path=path,
        name=NAME,
        flavor="ascend",
        deps_of=lambda ev: _launch_deps(ev, conn_ids),
    )


def _rank(conn: sqlite3.Connection, tables: set[str], path: Path) -> int | None:
    """RANK_DEVICE_MAP's rank when it holds one (a rank of -1 is none), else the path's."""
    if _has(conn, tables, "RANK_DEVICE_MAP", ("rankId",)):
        ranks = {r[0] for r in conn.execute("SELECT rankId FROM RANK_DEVICE_MAP").fetchall()}
        if len(ranks) == 1:
            (r,) = ranks
            if isinstance(r, int) and 0 <= r < 2**31:
                return r
    return ascend_rank(path)


def _tasks(
    conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame, path: Path
) -> pl.DataFrame:
    """Device tasks: one "Stream N" queue per (device, stream). A task with a
    COMPUTE_TASK_INFO row is compute (msprof's "Computing"), named by its op; the others are
    named by their task type: memory for the DMA types, else other (HCCL's Notify Wait and
    Write Value, event records and waits)."""
    need = ("startNs", "endNs", "deviceId", "connectionId", "globalTaskId", "taskType", "streamId")
    if not set(need) <= columns_of(conn, "TASK"):
        raise TraceFormatError(
            path, "TASK table lacks columns of msprof's schema: " + ", ".join(need)
        )
    task = fetch(
        conn,
        "SELECT startNs, endNs, deviceId, connectionId, globalTaskId, globalPid, taskType, "
        "streamId, taskId FROM TASK",
        {
            "ts": I64,
            "end": I64,
            "device": I64,
            "connection": I64,
            "gtask": I64,
            "gpid": I64,
            "type_id": I64,
            "stream": I64,
            "task_id": I64,
        },
    )
    info_cols = ("globalTaskId", "name", "taskType", "opType", "blockDim", "mixBlockDim")
    if _has(conn, tables, "COMPUTE_TASK_INFO", info_cols):
        info = fetch(
            conn,
            "SELECT globalTaskId, name, taskType, opType, blockDim, mixBlockDim, inputShapes, "
            "outputShapes FROM COMPUTE_TASK_INFO"
            if {"inputShapes", "outputShapes"} <= columns_of(conn, "COMPUTE_TASK_INFO")
            else "SELECT globalTaskId, name, taskType, opType, blockDim, mixBlockDim, NULL, NULL "
            "FROM COMPUTE_TASK_INFO",
            {
                "gtask": I64,
                "op_id": I64,
                "optask_id": I64,
                "optype_id": I64,
                "block_dim": I64,
                "mix_block_dim": I64,
                "in_id": I64,
                "out_id": I64,
            },
        ).unique("gtask", keep="first")
        task = task.join(info.with_columns(pl.lit(True).alias("is_op")), on="gtask", how="left")
    else:
        task = task.with_columns(pl.lit(None, pl.Boolean).alias("is_op"))
    comm_cols = ("globalTaskId", "name", "groupName", "opId")
    if _has(conn, tables, "COMMUNICATION_TASK_INFO", comm_cols):
        cinfo = fetch(
            conn,
            "SELECT globalTaskId, name, groupName, opId FROM COMMUNICATION_TASK_INFO",
            {"gtask": I64, "hccl_op_id": I64, "group_id": I64, "hccl_op": I64},
        ).unique("gtask", keep="first")
        task = task.join(cinfo, on="gtask", how="left")
    ttype = lookup(pl.col("type_id"), ids).fill_null("UNKNOWN")

    def opt(column: str) -> pl.Expr:
        """Text of an optional STRING_IDS column (null when the table lacked it)."""
        return lookup(pl.col(column), ids) if column in task.columns else pl.lit(None, pl.String)

    def optional(column: str) -> pl.Expr:
        """An optional integer column (null when the table lacked it)."""
        return pl.col(column) if column in task.columns else pl.lit(None, I64)

    is_op = pl.col("is_op").fill_null(False)
    return task.select(
        pl.col("gpid").cast(pl.String).fill_null("device").alias("pid"),
        (
            pl.lit("device ")
            + pl.col("device").cast(pl.String)
            + pl.lit(" stream ")
            + pl.col("stream").cast(pl.String)
        ).alias("tid"),
        pl.lit("Ascend Hardware").alias("process_name"),
        (pl.lit("Stream ") + pl.col("stream").cast(pl.String)).alias("thread_name"),
        pl.lit("stream").alias("unit"),
        pl.when(is_op).then(pl.coalesce(opt("op_id"), ttype)).otherwise(ttype).alias("name"),
        pl.lit("task").alias("cat"),
        pl.when(is_op)
        .then(pl.lit("compute"))
        .when(ttype.is_in(_ONE_MORE))
        .then(pl.lit("memory"))
        .otherwise(pl.lit("other"))
        .alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.struct(
            ttype.alias("Task Type"),
            pl.col("stream").alias("Stream Id"),
            pl.col("task_id").alias("Task Id"),
            pl.col("device").alias("Device Id"),
            pl.col("connection").alias("connection_id"),
            pl.col("gtask").alias("globalTaskId"),
            opt("optype_id").alias("Op Type"),
            opt("optask_id").alias("Op Task Type"),
            optional("block_dim").alias("Block Dim"),
            optional("mix_block_dim").alias("Mix Block Dim"),
            opt("in_id").alias("Input Shapes"),
            opt("out_id").alias("Output Shapes"),
            opt("hccl_op_id").alias("hccl_op"),
            opt("group_id").alias("group"),
        )
        .struct.json_encode()
        .alias("args"),
        pl.col("connection").alias("dst_conn"),
    )


def _comm_ops(conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame) -> pl.DataFrame | None:
    """HCCL communication ops (`hcom_allReduce_...`): kind comm on the "HCCL" /
    "Group <group> Communication" lane, as trace_view.json draws them."""
    cols = ("opName", "startNs", "endNs", "connectionId", "groupName", "opId")
    if not _has(conn, tables, "COMMUNICATION_OP", cols):
        return None
    extra = {"dataType", "algType", "count", "opType"} <= columns_of(conn, "COMMUNICATION_OP")
    op = fetch(
        conn,
        "SELECT opName, startNs, endNs, connectionId, groupName, opId, "
        + ("dataType, algType, count, opType" if extra else "NULL, NULL, NULL, NULL")
        + " FROM COMMUNICATION_OP",
        {
            "name_id": I64,
            "ts": I64,
            "end": I64,
            "connection": I64,
            "group_id": I64,
            "op": I64,
            "dtype": I64,
            "alg_id": I64,
            "count": pl.Float64(),
            "optype": I64,
        },
    )
    dtypes = _enum(conn, tables, "ENUM_HCCL_DATA_TYPE")
    group = lookup(pl.col("group_id"), ids).fill_null("?")
    return op.select(
        pl.lit("HCCL").alias("pid"),
        group.alias("tid"),
        pl.lit("HCCL").alias("process_name"),
        (pl.lit("Group ") + group + pl.lit(" Communication")).alias("thread_name"),
        pl.lit("link").alias("unit"),
        lookup(pl.col("name_id"), ids).fill_null("hcom_unknown").alias("name"),
        pl.lit("communication").alias("cat"),
        pl.lit("comm").alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.struct(
            pl.col("connection").alias("connection_id"),
            pl.col("op").alias("op_id"),
            lookup(pl.col("dtype"), dtypes).alias("data_type"),
            lookup(pl.col("alg_id"), ids).alias("alg_type"),
            pl.col("count"),
            group.alias("group"),
        )
        .struct.json_encode()
        .alias("args"),
    )


def _thread_cols(gtid: pl.Expr, process: str) -> list[pl.Expr]:
    """pid, tid and names from msprof's globalTid (pid << 32 | tid)."""
    pid = (gtid // (1 << 32)).cast(pl.String)
    tid = (gtid % (1 << 32)).cast(pl.String)
    return [
        pid.alias("pid"),
        tid.alias("tid"),
        pl.lit(process).alias("process_name"),
        (pl.lit("Thread ") + tid).alias("thread_name"),
        pl.lit("cpu").alias("unit"),
    ]


def _host(conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame) -> pl.DataFrame | None:
    """The PyTorch API layer (ops, queue and Python trace rows) on "Python" host threads;
    `ProfilerStep#N` becomes a step marker. startNs/endNs are TEXT in torch_npu's schema."""
    cols = ("startNs", "endNs", "globalTid", "connectionId", "name")
    if not _has(conn, tables, "PYTORCH_API", cols):
        return None
    has = columns_of(conn, "PYTORCH_API")
    seq = "sequenceNumber" if "sequenceNumber" in has else "NULL"
    typ = "type" if "type" in has else "NULL"
    api = fetch(
        conn,
        f"SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), globalTid, connectionId, name, "
        f"{seq}, {typ} FROM PYTORCH_API",
        {
            "ts": I64,
            "end": I64,
            "gtid": I64,
            "api_conn": I64,
            "name_id": I64,
            "seq": I64,
            "type": I64,
        },
    )
    types = _enum(conn, tables, "ENUM_API_TYPE")
    name = lookup(pl.col("name_id"), ids).fill_null("?")
    return api.select(
        *_thread_cols(pl.col("gtid"), "Python"),
        name.alias("name"),
        lookup(pl.col("type"), types).fill_null("pytorch").alias("cat"),
        pl.when(name.str.contains(STEP_MARKER))
        .then(pl.lit("marker"))
        .otherwise(pl.lit("host"))
        .alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.struct(pl.col("seq").alias("Sequence number"), pl.col("api_conn").alias("connection_id"))
        .struct.json_encode()
        .alias("args"),
        "api_conn",
    )


def _cann(conn: sqlite3.Connection, tables: set[str], ids: pl.DataFrame) -> pl.DataFrame | None:
    """CANN runtime/ACL/HCCL API calls on "CANN" host threads."""
    cols = ("startNs", "endNs", "type", "globalTid", "connectionId", "name")
    if not _has(conn, tables, "CANN_API", cols):
        return None
    api = fetch(
        conn,
        "SELECT startNs, endNs, type, globalTid, connectionId, name FROM CANN_API",
        {"ts": I64, "end": I64, "type": I64, "gtid": I64, "connection": I64, "name_id": I64},
    )
    types = _enum(conn, tables, "ENUM_API_TYPE")
    return api.select(
        *_thread_cols(pl.col("gtid"), "CANN"),
        lookup(pl.col("name_id"), ids).fill_null("?").alias("name"),
        lookup(pl.col("type"), types).fill_null("cann").alias("cat"),
        pl.lit("host").alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.struct(pl.col("connection").alias("connection_id")).struct.json_encode().alias("args"),
    )


def _has_steps(host: pl.DataFrame | None) -> bool:
    return host is not None and bool((host["kind"] == "marker").any())


def _step_rows(steps: pl.DataFrame) -> pl.DataFrame:
    """STEP_TIME rows as `ProfilerStep#N` markers, when the API layer has none."""
    return steps.select(
        pl.lit("steps").alias("pid"),
        pl.lit("steps").alias("tid"),
        pl.lit("Python").alias("process_name"),
        pl.lit("Steps").alias("thread_name"),
        pl.lit("cpu").alias("unit"),
        (pl.lit("ProfilerStep#") + pl.col("step").cast(pl.String)).alias("name"),
        pl.lit("step").alias("cat"),
        pl.lit("marker").alias("kind"),
        pl.col("s").alias("ts"),
        (pl.col("e") - pl.col("s")).alias("dur"),
    )


def _launch_deps(ev: pl.DataFrame, conn_ids: pl.DataFrame | None) -> pl.DataFrame:
    """`launch` edges: a PyTorch op -> the device tasks of its connection ids
    (PYTORCH_API.connectionId -> CONNECTION_IDS.id -> .connectionId = TASK.connectionId),
    the links trace_view.json draws as torch_to_npu flows."""
    empty = pl.DataFrame(schema={"src": pl.UInt32(), "dst": pl.UInt32(), "kind": pl.String()})
    if conn_ids is None or "api_conn" not in ev.columns or "dst_conn" not in ev.columns:
        return empty
    src = ev.filter(pl.col("api_conn").is_not_null()).select(pl.col("id").alias("src"), "api_conn")
    dst = ev.filter(pl.col("dst_conn").is_not_null()).select(
        pl.col("id").alias("dst"), pl.col("dst_conn").alias("connection")
    )
    edges = src.join(conn_ids, on="api_conn").join(dst, on="connection")
    return edges.select("src", "dst", pl.lit("launch").alias("kind")).unique().sort("src", "dst")
