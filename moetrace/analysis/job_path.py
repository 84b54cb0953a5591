"""The job's critical path across ranks, joined by collective edges.

A collective completes on every rank only after its last rank arrives, so the last arrival
gates every rank's completion. Walking backwards from the rank that finishes last: the path
runs on that rank back to the end of its latest collective (a `work` segment), then over the
collective's transfer [last arrival, end on this rank] (a `comm` segment), then jumps to the
rank that arrived last and continues there from its arrival; it ends at that rank's window
start. Segments are contiguous, so they sum to the path's span. Times are on one clock
(clocks.py). One hop per collective on the path: a plain loop over hops with binary searches
on per-rank sorted numpy arrays (never a loop over events).
"""

from __future__ import annotations

import numpy as np
import polars as pl

JOB_PATH_SCHEMA: dict[str, pl.DataType] = {
    "seq": pl.Int64(),  # position on the path, 0 = earliest
    "rank": pl.Int64(),  # work: the rank working; comm: the rank whose completion it gates
    "category": pl.String(),  # work (on one rank) or comm (a collective's transfer)
    "group": pl.String(),
    "instance": pl.Int64(),  # the collective's seq in its group (comm segments)
    "start_ns": pl.Int64(),
    "end_ns": pl.Int64(),
    "dur_ns": pl.Int64(),
}


def job_critical_path(waited: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """Segments of the cross-rank critical path (`JOB_PATH_SCHEMA`), earliest first.

    waited: aligned ops with last_arrival_ns / last_rank (stragglers.waits).
    windows: per rank `lo`, `hi` of its work on the same clock."""
    if windows.height == 0:
        return pl.DataFrame(schema=JOB_PATH_SCHEMA)
    win = windows.sort("rank")
    w_rank = win["rank"].to_numpy().astype(np.int64)
    w_lo = win["lo"].to_numpy().astype(np.int64)
    w_hi = win["hi"].to_numpy().astype(np.int64)
    ops = waited.filter(pl.col("end_ns").is_not_null()).sort("rank", "end_ns", "arrival_ns")
    o_rank = ops["rank"].to_numpy().astype(np.int64)
    o_end = ops["end_ns"].to_numpy().astype(np.int64)
    o_arr = ops["arrival_ns"].to_numpy().astype(np.int64)
    o_last = ops["last_arrival_ns"].to_numpy().astype(np.int64)
    o_last_rank = ops["last_rank"].to_numpy().astype(np.int64)
    o_group = ops["group"].to_list()
    o_seq = ops["seq"].to_numpy().astype(np.int64)
    rank_lo = np.searchsorted(o_rank, w_rank, side="left")
    rank_hi = np.searchsorted(o_rank, w_rank, side="right")
    where = {int(r): i for i, r in enumerate(w_rank)}

    i = int(np.argmax(w_hi))
    rank, t = int(w_rank[i]), int(w_hi[i])
    rows: list[tuple[int, str, str | None, int | None, int, int]] = []
    for _hop in range(len(o_end) + 1):
        wi = where.get(rank)
        if wi is None:
            break
        lo, hi = rank_lo[wi], rank_hi[wi]
        # the rank's latest collective that ended by t and that it entered before t
        cand = lo + np.searchsorted(o_end[lo:hi], t, side="right") - 1
        while cand >= lo and not o_arr[cand] < t:
            cand -= 1
        if cand < lo or o_end[cand] <= w_lo[wi]:
            break
        end = int(o_end[cand])
        rows.append((rank, "work", None, None, end, t))
        gate = min(int(o_last[cand]), end)
        rows.append((rank, "comm", o_group[cand], int(o_seq[cand]), gate, end))
        rank, t = int(o_last_rank[cand]), gate
    wi = where.get(rank)
    start = int(w_lo[wi]) if wi is not None else t
    rows.append((rank, "work", None, None, min(start, t), t))
    rows.reverse()
    frame = pl.DataFrame(
        rows,
        schema={
            "rank": pl.Int64,
            "category": pl.String,
            "group": pl.String,
            "instance": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
        },
        orient="row",
    )
    return (
        frame.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
        .filter(pl.col("dur_ns") > 0)
        .with_row_index("seq")
        .select([pl.col(k).cast(v) for k, v in JOB_PATH_SCHEMA.items()])
    )
