"""rocprofv3 JSON output (`rocprofv3 --output-format json`, rocprofiler-sdk's tool: one
top-level key "rocprofiler-sdk-tool"): GPU kernel dispatches on their agent's queues.

Schema: ROCm/rocprofiler-sdk's JSON output (source/lib/rocprofiler-sdk-tool, as read by
AMD-AGI/TraceLens `generate_perf_report_rocprof`): `agents` (id.handle, type 2 = GPU,
logical_node_type_id = GPU index), `kernel_symbols` (kernel_id -> kernel_name),
`buffer_records.kernel_dispatch` (start_timestamp / end_timestamp in ns, thread_id,
correlation_id.internal, dispatch_info.agent_id / queue_id / kernel_id / grid and workgroup
sizes). Read: kernel dispatches and memory copies when present; not read: host API records
(hip_api, hsa_api, marker_api), counters, PC samples. Read only (no writer).
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from moetrace.trace.flavors.base import DEVICE_COMM_KERNEL
from moetrace.trace.formats.table import table_trace
from moetrace.trace.model import Trace, TraceFormatError

NAME = "rocprofv3-json"
KEY = b'"rocprofiler-sdk-tool"'


def looks_like(path: Path, head: bytes) -> bool:
    """True when the (possibly gzip'd) JSON starts with rocprofiler-sdk's top-level key."""
    if head[:2] == b"\x1f\x8b":
        try:
            with open(path, "rb") as fh:
                raw = fh.read(4096)
            text = zlib.decompressobj(wbits=31).decompress(raw, 256)
        except (OSError, zlib.error):
            return False
    else:
        text = head
    return text.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{" and KEY in text[:64]


def _load_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        top = json.loads(raw)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TraceFormatError(path, f"cannot read rocprofv3 JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"bad JSON: {exc.msg}", f"byte {exc.pos}") from None
    tool = top.get("rocprofiler-sdk-tool") if isinstance(top, dict) else None
    if not isinstance(tool, list) or not tool or not isinstance(tool[0], dict):
        raise TraceFormatError(path, '"rocprofiler-sdk-tool" is not a list of run objects')
    return tool[0]


def read(path: Path) -> Trace:
    """Read rocprofv3 JSON: one track per (GPU, queue), kernels compute (RCCL kernels comm)."""
    run = _load_json(path)
    warnings: list[str] = []
    try:
        dispatch = (run.get("buffer_records") or {}).get("kernel_dispatch") or []
        if not dispatch:
            raise TraceFormatError(path, "rocprofv3 JSON holds no kernel dispatches")
        kd = pl.from_dicts(dispatch, infer_schema_length=None).select(
            pl.col("start_timestamp").cast(pl.Int64).alias("ts"),
            pl.col("end_timestamp").cast(pl.Int64).alias("end"),
            pl.col("thread_id").cast(pl.Int64).alias("thread"),
            pl.col("correlation_id").struct.field("internal").cast(pl.Int64).alias("corr"),
            pl.col("dispatch_info").struct.field("agent_id").struct.field("handle").alias("agent"),
            pl.col("dispatch_info").struct.field("queue_id").struct.field("handle").alias("queue"),
            pl.col("dispatch_info").struct.field("kernel_id").alias("kernel_id"),
            pl.col("dispatch_info").struct.field("grid_size").alias("grid"),
            pl.col("dispatch_info").struct.field("workgroup_size").alias("workgroup"),
        )
        symbols = pl.from_dicts(run.get("kernel_symbols") or [], infer_schema_length=None)
        agents = pl.from_dicts(run.get("agents") or [], infer_schema_length=None).select(
            pl.col("id").struct.field("handle").alias("agent"),
            pl.col("logical_node_type_id").alias("gpu"),
            pl.col("type"),
        )
    except (pl.exceptions.PolarsError, AttributeError, TypeError) as exc:
        raise TraceFormatError(path, f"rocprofv3 JSON of an unexpected shape: {exc}") from None
    names = lookup_frame(symbols, "kernel_id", "kernel_name")
    gpu = agents.filter(pl.col("type") == 2)
    kd = kd.join(gpu.select("agent", "gpu"), on="agent", how="left")
    name = (
        pl.col("kernel_id")
        .replace_strict(names["key"], names["value"], default=None, return_dtype=pl.String)
        .fill_null("?")
    )
    events = kd.with_columns(name.alias("name")).select(
        pl.col("agent").cast(pl.String).alias("pid"),
        pl.col("queue").cast(pl.String).alias("tid"),
        (pl.lit("GPU ") + pl.coalesce(pl.col("gpu"), pl.col("agent")).cast(pl.String)).alias(
            "process_name"
        ),
        (pl.lit("Queue ") + pl.col("queue").cast(pl.String)).alias("thread_name"),
        pl.lit("stream").alias("unit"),
        pl.lit(None, pl.Int32).alias("rank"),
        "name",
        pl.lit("kernel").alias("cat"),
        pl.when(pl.col("name").str.contains(DEVICE_COMM_KERNEL))
        .then(pl.lit("comm"))
        .otherwise(pl.lit("compute"))
        .alias("kind"),
        "ts",
        (pl.col("end") - pl.col("ts")).alias("dur"),
        pl.struct(
            pl.col("corr").alias("correlation"),
            pl.col("thread").alias("thread"),
            "grid",
            "workgroup",
        )
        .struct.json_encode()
        .alias("args"),
    )
    return table_trace(events, warnings, path=path, name=NAME, flavor="rocprof")


def lookup_frame(frame: pl.DataFrame, key: str, value: str) -> pl.DataFrame:
    """(key, value) pairs of `frame` as columns `key`, `value` (empty when absent)."""
    if frame.height == 0 or key not in frame.columns or value not in frame.columns:
        return pl.DataFrame(schema={"key": pl.Int64(), "value": pl.String()})
    return frame.select(
        pl.col(key).cast(pl.Int64).alias("key"), pl.col(value).cast(pl.String).alias("value")
    ).unique("key", keep="first")


class RocprofFormat:
    """rocprofv3 JSON as a registry `Format` (reading only; chosen by `looks_like`)."""

    name = NAME
    extensions: tuple[str, ...] = ()

    def sniff(self, head: bytes) -> bool:
        """False: the registry asks `looks_like(path, head)` (the key may be in gzip)."""
        return False

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        """Read the file (its flavor is always rocprof)."""
        return read(path)

    def write(self, trace: Trace, out: Path | BinaryIO, *, force: bool) -> None:
        """Not written."""
        raise TraceFormatError(
            out if isinstance(out, Path) else None, "rocprofv3 JSON is read, not written"
        )


ROCPROF = RocprofFormat()
