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


def path_by_name(critical_path: pl.DataFrame, trace: Trace) -> pl.DataFrame:
    """Critical-path time per event short name (labels.short_name_expr), over every rank's
    and step's path: time_ns (Σ of its segments' dur_ns), share (÷ Σ dur_ns of all
    segments: the CLI's Σ critical_path.span_ns), count (segments) and event_ids (in path
    order: rank, step, seq); most time first, then by name. Segments with no event (waits)
    are named by their segment kind in brackets (`[wait]`)."""
    schema: dict[str, pl.DataType] = {
        "short_name": pl.String(),
        "time_ns": pl.Int64(),
        "share": pl.Float64(),
        "count": pl.UInt32(),
        "event_ids": pl.List(pl.Int64()),
    }
    if critical_path.height == 0:
        return pl.DataFrame(schema=schema)
    names = trace.events.select(pl.col("id").cast(pl.Int64).alias("event_id"), "name")
    path = (
        critical_path.sort("rank", "step", "seq")
        .with_columns(pl.col("event_id").cast(pl.Int64))
        .join(names, on="event_id", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce(short_name_expr(), pl.format("[{}]", "segment")).alias("short_name")
        )
    )
    total = path["dur_ns"].sum()
    return (
        path.group_by("short_name", maintain_order=True)
        .agg(
            pl.col("dur_ns").sum().alias("time_ns"),
            pl.len().alias("count"),
            pl.col("event_id").drop_nulls().alias("event_ids"),
        )
        .with_columns((pl.col("time_ns") / total if total else pl.lit(None)).alias("share"))
        .sort(["time_ns", "short_name"], descending=[True, False])
        .select([pl.col(k).cast(v) for k, v in schema.items()])
    )
