"""Kineto synchronisation edges, derived the way Holistic Trace Analysis does.

(Launch edges rebuilt from correlation ids live in launch_edges.py.)

PyTorch's profiler (with `enable_cuda_sync_events`) records a `cuda_sync` slice for each CUDA
synchronisation, linked by `correlation` to the runtime call that caused it. Kernels are
ordered per stream by the start of their launch call (HTA's rule). Edges, all of kind `sync`:

- Context Sync (cudaDeviceSynchronize): the last kernel of every stream launched before the
  call → the call (it returns when they are done).
- Stream Sync (cudaStreamSynchronize): the last kernel of that stream → the call.
- Event Sync (cudaEventSynchronize / Query): the last kernel launched on the recorded stream
  before the matching cudaEventRecord → the call.
- Stream Wait Event (cudaStreamWaitEvent): that same kernel → the next kernel launched on the
  waiting stream after the call (GPU → GPU).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from moetrace.analysis.launch_edges import arg_int
from moetrace.analysis.steps import Prepared
from moetrace.trace.flavors import ASCEND, KINETO, Flavor, flavor_of
from moetrace.trace.model import Trace

SYNC_NAMES = ("Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event")
RECORD_CALLS = ("cudaEventRecord", "hipEventRecord", "cudaEventRecordWithFlags")


def kineto_sync_edges(prep: Prepared) -> pl.DataFrame | None:
    """Extra dependency edges (src, dst, kind="sync") by event id; None when not applicable."""
    ev = prep.ev
    sync = ev.filter(pl.col("name").is_in(SYNC_NAMES) & pl.col("args").is_not_null())
    if sync.height == 0:
        return None
    sync = sync.select(
        "rank",
        pl.col("name").alias("sync_kind"),
        arg_int("correlation").alias("corr"),
        arg_int("stream").alias("stream"),
        arg_int("wait_on_stream").alias("wait_stream"),
        arg_int("wait_on_cuda_event_record_corr_id").alias("record_corr"),
    )
    host = (
        ev.filter((pl.col("unit") == "cpu") & pl.col("args").is_not_null())
        .select("rank", "id", "ts", "end", pl.col("name"), arg_int("correlation").alias("corr"))
        .drop_nulls("corr")
    )
    calls = sync.join(
        host.rename({"id": "call", "ts": "call_ts"}).drop("end", "name"),
        on=["rank", "corr"],
        how="inner",
    )
    records = host.filter(pl.col("name").is_in(RECORD_CALLS)).select(
        "rank", pl.col("corr").alias("record_corr"), pl.col("ts").alias("record_ts")
    )
    launch = (
        prep.deps.filter(pl.col("kind") == "launch")
        .join(ev.select(pl.col("id").alias("src"), pl.col("ts").alias("launch_ts")), on="src")
        .group_by("dst")
        .agg(pl.col("launch_ts").min())
    )
    kernels = (
        ev.filter(
            (pl.col("unit") == "stream")
            & pl.col("kind").is_in(["compute", "comm", "memory"])
            & pl.col("args").is_not_null()
        )
        .select("rank", "id", "ts", arg_int("stream").alias("stream"))
        .drop_nulls("stream")
        .join(launch, left_on="id", right_on="dst", how="left")
        .with_columns(pl.coalesce("launch_ts", "ts").alias("launch_ts"))
        .select("rank", "stream", "id", "launch_ts")
        .sort("launch_ts")
    )
    if kernels.height == 0 or calls.height == 0:
        return None
    out: list[pl.DataFrame] = []

    def last_before(frame: pl.DataFrame, time_col: str, stream_col: str) -> pl.DataFrame:
        """Add `kernel`: the last kernel on `stream_col` launched before `time_col`."""
        return (
            frame.sort(time_col)
            .join_asof(
                kernels.rename({"id": "kernel", "stream": stream_col}),
                left_on=time_col,
                right_on="launch_ts",
                by=["rank", stream_col],
                strategy="backward",
                allow_exact_matches=False,
                check_sortedness=False,
            )
            .drop_nulls("kernel")
        )

    # Context Sync: every stream of the rank
    ctx = (
        calls.filter(pl.col("sync_kind") == "Context Sync")
        .drop("stream")
        .join(kernels.select("rank", "stream").unique(), on="rank")
    )
    stream_sync = calls.filter(pl.col("sync_kind") == "Stream Sync")
    for frame in (ctx, stream_sync):
        if frame.height:
            hit = last_before(frame, "call_ts", "stream")
            out.append(hit.select(pl.col("kernel").alias("src"), pl.col("call").alias("dst")))
    waits = calls.filter(pl.col("sync_kind").is_in(["Event Sync", "Stream Wait Event"])).join(
        records, on=["rank", "record_corr"], how="inner"
    )
    if waits.height:
        hit = last_before(
            waits.with_columns(pl.col("wait_stream").alias("kstream")), "record_ts", "kstream"
        )
        event_sync = hit.filter(pl.col("sync_kind") == "Event Sync")
        out.append(event_sync.select(pl.col("kernel").alias("src"), pl.col("call").alias("dst")))
        swe = hit.filter(pl.col("sync_kind") == "Stream Wait Event").select(
            "rank", "stream", "call_ts", pl.col("kernel").alias("src")
        )
        if swe.height:
            nxt = (
                swe.sort("call_ts")
                .join_asof(
                    kernels.rename({"id": "dst"}),
                    left_on="call_ts",
                    right_on="launch_ts",
                    by=["rank", "stream"],
                    strategy="forward",
                    allow_exact_matches=False,
                    check_sortedness=False,
                )
                .drop_nulls("dst")
            )
            out.append(nxt.select("src", "dst"))
    if not out:
        return None
    edges = pl.concat(
        [o.select(pl.col("src").cast(pl.UInt32), pl.col("dst").cast(pl.UInt32)) for o in out]
    ).unique()
    return edges.with_columns(pl.lit("sync").alias("kind"))


ASCEND_WAIT_NAMES = ("EVENT_WAIT", "Notify Wait")
"""Ascend stream tasks that block the stream until another stream (usually HCCL's) signals."""


def ascend_wait_edges(prep: Prepared, tolerance_ns: int = 1_000) -> pl.DataFrame | None:
    """`sync` edges from a collective to the stream wait task it released (Ascend).

    msprof records the compute stream's EVENT_WAIT (and HCCL's Notify Wait) as a task that
    spans the wait but not what it waited for. The collective of the same rank that was
    running during the wait and ended last by the wait's end (within `tolerance_ns`) is taken
    as what released it; the critical path then passes through the communication.
    """
    ev = prep.ev
    waits = ev.filter(
        (pl.col("unit") == "stream") & pl.col("name").is_in(ASCEND_WAIT_NAMES)
    ).select("rank", pl.col("id").alias("dst"), pl.col("ts").alias("w_ts"), "end")
    comm = (
        ev.filter(pl.col("device") & (pl.col("kind") == "comm"))
        .select("rank", pl.col("id").alias("src"), pl.col("end").alias("c_end"))
        .sort("c_end")
    )
    if waits.height == 0 or comm.height == 0:
        return None
    hit = (
        waits.with_columns((pl.col("end") + tolerance_ns).alias("limit"))
        .sort("limit")
        .join_asof(
            comm,
            left_on="limit",
            right_on="c_end",
            by="rank",
            strategy="backward",
            check_sortedness=False,
        )
        .filter(pl.col("src").is_not_null() & (pl.col("c_end") > pl.col("w_ts")))
    )
    if hit.height == 0:
        return None
    return hit.select(
        pl.col("src").cast(pl.UInt32), pl.col("dst").cast(pl.UInt32), pl.lit("sync").alias("kind")
    )


SYNC_EDGES: dict[Flavor, Callable[[Prepared], pl.DataFrame | None]] = {
    KINETO: kineto_sync_edges,
    ASCEND: ascend_wait_edges,
}
"""The producer-specific gating edges, keyed by the flavor registry's producers."""


def producer_sync_edges(trace: Trace, prep: Prepared) -> pl.DataFrame | None:
    """The sync edges of the producer `trace` was read as, or None when it has no rule."""
    flavor = flavor_of(trace)
    return SYNC_EDGES[flavor](prep) if flavor in SYNC_EDGES else None
