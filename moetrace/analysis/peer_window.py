"""The peers' per-rank window beside moetrace's: first to last device activity, copies included.

HTA's temporal breakdown (hta/analyzers/breakdown_analysis.py, `_get_idle_time_for_kernels`:
"kernel time = end of the last kernel - start of the first kernel" over every GPU event with a
stream, memcpy/memset included) and TraceLens's `gpu_timeline` (TraceLens/TreePerf/
gpu_event_analyser.py, `compute_metrics_dict`: total_time = last end - first start of all
`kernel`/`gpu_memcpy`/`gpu_memset` events, busy = their union, idle = total - busy) span one
window per rank. moetrace's default windows are per step and spanned by compute and comm
only, so `metrics` states the difference on every run (docs/metrics.md, "Peer windows").
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.prepared import NO_RANK, Prepared

PEER_DEFINITION = (
    "first to last device activity of the rank, copies and sets included "
    "(HTA get_temporal_breakdown, TraceLens gpu_timeline)"
)
"""What the peer window is, as `metrics --json` states it."""

PEER_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "start_ns": pl.Int64(),  # first device activity of the rank
    "end_ns": pl.Int64(),  # last device activity of the rank
    "total_ns": pl.Int64(),  # end_ns - start_ns
    "busy_ns": pl.Int64(),  # union of the rank's device work, every track
    "idle_ns": pl.Int64(),  # total_ns - busy_ns
    "moetrace_window_ns": pl.Int64(),  # Σ of moetrace's windows of the rank
    "moetrace_idle_ns": pl.Int64(),  # Σ of their idle_ns
    "diff_ns": pl.Int64(),  # moetrace_window_ns - total_ns
    "diff_pct": pl.Float64(),  # diff_ns / total_ns * 100
}


def peer_windows(prep: Prepared, ranks: pl.DataFrame) -> pl.DataFrame:
    """Per rank (`PEER_SCHEMA`): the peer window from the rank's device work (`work` rows on
    device tracks, copies included) and the sums of moetrace's windows (`ranks`: the report's
    rows with rank, window_ns, idle_ns). Empty on CPU-only traces (the peers read GPUs)."""
    if prep.cpu_mode:
        return pl.DataFrame(schema=PEER_SCHEMA)
    work = prep.ev.filter(pl.col("device") & pl.col("work")).select("rank", "ts", "end")
    if work.height == 0:
        return pl.DataFrame(schema=PEER_SCHEMA)
    rank = work["rank"].fill_null(NO_RANK).to_numpy().astype(np.int64)
    names, group = np.unique(rank, return_inverse=True)
    ts = work["ts"].to_numpy().astype(np.int64)
    end = work["end"].to_numpy().astype(np.int64)
    busy = iv.lengths_by_group(iv.union(iv.make(group, ts, end)), len(names))
    start = np.full(len(names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(start, group, ts)
    stop = np.full(len(names), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(stop, group, end)
    ours = (
        ranks.select(pl.col("rank").fill_null(NO_RANK), "window_ns", "idle_ns")
        .group_by("rank")
        .agg(
            pl.col("window_ns").sum().alias("moetrace_window_ns"),
            pl.col("idle_ns").sum().alias("moetrace_idle_ns"),
        )
    )
    frame = pl.DataFrame(
        {"rank": names, "start_ns": start, "end_ns": stop, "busy_ns": busy.astype(np.int64)}
    ).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("total_ns"))
    return (
        frame.with_columns((pl.col("total_ns") - pl.col("busy_ns")).alias("idle_ns"))
        .join(ours, on="rank", how="left")
        .with_columns(pl.col("moetrace_window_ns", "moetrace_idle_ns").fill_null(0))
        .with_columns((pl.col("moetrace_window_ns") - pl.col("total_ns")).alias("diff_ns"))
        .with_columns(
            pl.when(pl.col("total_ns") > 0)
            .then(pl.col("diff_ns") / pl.col("total_ns") * 100.0)
            .otherwise(None)
            .alias("diff_pct"),
            pl.when(pl.col("rank") == NO_RANK).then(None).otherwise(pl.col("rank")).alias("rank"),
        )
        .sort("rank", nulls_last=True)
        .select([pl.col(k).cast(v) for k, v in PEER_SCHEMA.items()])
    )


def peer_note(peer: pl.DataFrame) -> str | None:
    """The one `note:` line `metrics` prints on every run: the peer window summed over the
    ranks (total, idle) and how far moetrace's windows are from it (ns, %); None when empty."""
    if peer.height == 0:
        return None
    total = int(peer["total_ns"].sum())
    idle = int(peer["idle_ns"].sum())
    ours = int(peer["moetrace_window_ns"].sum())
    ours_idle = int(peer["moetrace_idle_ns"].sum())
    diff = ours - total
    pct = diff / total * 100.0 if total else 0.0
    ranks = f" over {peer.height} ranks" if peer.height > 1 else ""
    same = "equal to it" if diff == 0 else f"{diff:+d} ns ({pct:+.2f}%)"
    return (
        f"note: peer window{ranks} (HTA temporal breakdown, TraceLens gpu_timeline: first to "
        f"last device activity, copies included) total {total / 1e6:.3f} ms, idle "
        f"{idle / 1e6:.3f} ms; moetrace's windows total {ours / 1e6:.3f} ms, idle "
        f"{ours_idle / 1e6:.3f} ms: {same} (`--window trace --window-span work` is the peer "
        "window; per rank: peer_window in --json)"
    )


def peer_dict(peer: pl.DataFrame) -> dict[str, Any]:
    """The `peer_window` object of `metrics --json`: the definition and one row per rank."""
    return {"definition": PEER_DEFINITION, "ranks": peer.to_dicts()}
