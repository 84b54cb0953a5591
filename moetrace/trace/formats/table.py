"""The last stage every table-shaped reader shares (msprof database, nsys export, rocprofv3
JSON): events keyed by (pid, tid) become tracks with Perfetto-style overflow lanes, rows that
end before they start are dropped with a warning, and the `Trace` is built with its meta.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from moetrace.trace.model import Trace
from moetrace.trace.nesting import MAX_OVERFLOW_LANE, overflow_lane_name_expr, overflow_lanes


def table_trace(
    events: pl.DataFrame,
    warnings: list[str],
    *,
    path: Path,
    name: str,
    flavor: str,
    deps_of: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
) -> Trace:
    """The `Trace` of a reader's `events` (pid, tid, process_name, thread_name, unit, rank,
    name, cat, kind, ts, dur in ns, args): negative durations dropped with a warning, tracks
    by `layout`, deps from `deps_of(events with ids)`, meta naming the format and source."""
    bad = events.filter(pl.col("dur") < 0).height
    if bad:
        warnings.append(f"{bad} row(s) end before they start: dropped")
        events = events.filter(pl.col("dur") >= 0)
    ev, tracks = layout(events, warnings)
    deps = deps_of(ev) if deps_of is not None else None
    meta: dict[str, Any] = {
        "format": name,
        "flavor": flavor,
        "source": [str(path)],
        "warnings": warnings,
    }
    return Trace.from_frames(ev, tracks, deps, None, meta)


def layout(events: pl.DataFrame, warnings: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tracks for events keyed by `pid`, `tid` (text) with `process_name`, `thread_name`,
    `unit` and `rank`: one track per (pid, tid), overflow lanes (as the Chrome reader and
    Perfetto do) for slices that overlap without nesting. Returns (events with `track`,
    `depth` and `id` in time order, tracks)."""
    keys = ["pid", "tid"]
    threads = (
        events.group_by(keys, maintain_order=True)
        .agg(pl.col("process_name", "thread_name", "unit", "rank").first())
        .sort(["rank", "process_name", "pid", "tid"], nulls_last=True)
        .with_row_index("base")
    )
    ev = events.join(threads.select(*keys, "base"), on=keys, how="left").sort(
        ["base", "ts", "dur"], descending=[False, False, True]
    )
    base = ev["base"].to_numpy().astype(np.int64)
    lane, depth = overflow_lanes(base, ev["ts"], ev["dur"], MAX_OVERFLOW_LANE)
    moved = int((lane > 0).sum())
    if moved:
        warnings.append(
            f"{moved} slice(s) overlap an earlier slice on their thread without nesting: "
            "moved to overflow tracks (as Perfetto does)"
        )
    ev = ev.with_columns(
        pl.Series("lane", lane, dtype=pl.Int64), pl.Series("depth", depth, dtype=pl.UInt16)
    )
    lanes = (
        ev.select("base", "lane")
        .unique()
        .sort("base", "lane")
        .with_row_index("track")
        .join(threads, on="base", how="left")
    )
    tracks = lanes.select(
        "track",
        "rank",
        "pid",
        "tid",
        "process_name",
        pl.when(pl.col("lane") == 0)
        .then(pl.col("thread_name"))
        .otherwise(overflow_lane_name_expr(pl.col("thread_name"), pl.col("lane")))
        .alias("thread_name"),
        "unit",
        pl.col("track").cast(pl.Int32).alias("sort_index"),
    )
    ev = (
        ev.join(lanes.select("base", "lane", "track"), on=["base", "lane"], how="left")
        .sort(["ts", "track", "dur"], descending=[False, False, True], maintain_order=True)
        .with_row_index("id")
        .drop("base", "lane")
    )
    return ev, tracks
