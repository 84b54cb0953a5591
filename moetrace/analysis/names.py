"""Events aggregated by name: where the time goes, operator by operator."""

from __future__ import annotations

import polars as pl

from moetrace.analysis.labels import short_name_expr
from moetrace.trace.model import Trace


def events_by_name(trace: Trace, *, kinds: tuple[str, ...] | None = None) -> pl.DataFrame:
    """One row per event name: count, total_ns, mean_ns, max_ns, the id of the longest
    event (longest_id, for jumping to it) and short_name (labels.short_name_expr: a C++
    name without template arguments and parameters); by total time, longest first, then by
    name.

    Markers (step spans, msprof's Overlap Analysis lanes) are left out unless `kinds` asks.
    """
    events = trace.events
    events = events.filter(
        pl.col("kind").is_in(list(kinds)) if kinds is not None else pl.col("kind") != "marker"
    )
    return (
        events.group_by("name")
        .agg(
            pl.len().alias("count"),
            pl.col("dur").sum().alias("total_ns"),
            pl.col("dur").mean().alias("mean_ns"),
            pl.col("dur").max().alias("max_ns"),
            pl.col("id").sort_by("dur").last().alias("longest_id"),
        )
        .with_columns(short_name_expr().alias("short_name"))
        .sort(["total_ns", "name"], descending=[True, False])
    )
