"""Idle cores: per-track busy/idle/util, per-unit utilisation and attributed idle gaps.

busy(t) = |∪ depth-0 events on t| inside the window W, idle = |W| - busy, util = busy / |W|;
util(unit) = Σ busy / (tracks of that unit × |W|). Every maximal idle interval of a track
inside W is a gap, attributed to what the event after it waited for: the kind/unit of its
gating predecessor (wait:comm, wait:aic, wait:aiv, wait:host, wait:memory, ...) or
no-dependency. Each gap has one cause, so per unit the causes sum to the idle time. On GPU
streams gaps also get HTA's classes (host_wait, kernel_wait under 30 µs, other).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.classify import wait_cause_expr
from moetrace.analysis.critical_path import Gates
from moetrace.analysis.steps import Prepared

HTA_KERNEL_WAIT_NS = 30_000
"""HTA's consecutive_kernel_delay: a stream gap under 30 µs is kernel_wait."""


def idle(prep: Prepared, gates: Gates) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(tracks frame, units frame, gaps frame), keyed by gid (window id)."""
    windows = prep.windows.select("gid", "rank", "lo", "hi")
    pairs = (
        prep.device_tracks.join(windows, on="rank", how="inner")
        .sort("gid", "track")
        .with_row_index("pair")
        .with_columns(pl.col("pair").cast(pl.Int64))
    )
    n_pairs = pairs.height
    p_lo = pairs["lo"].to_numpy().astype(np.int64)
    p_hi = pairs["hi"].to_numpy().astype(np.int64)
    top = prep.ev.filter(
        pl.col("device")
        & (pl.col("depth") == 0)
        & (pl.col("kind") != "marker")
        & pl.col("gid").is_not_null()
    ).select("idx", "id", "gid", "track", "ts", "end")
    top = top.join(pairs.select("pair", "gid", "track"), on=["gid", "track"], how="inner")
    raw = iv.make(top["pair"].to_numpy(), top["ts"].to_numpy(), top["end"].to_numpy())
    busy = iv.union(iv.clip(raw, p_lo, p_hi))
    busy_ns = iv.lengths_by_group(busy, n_pairs)
    win_ns = p_hi - p_lo
    tracks = pairs.select("gid", "track", "unit").with_columns(
        pl.Series("busy_ns", busy_ns, dtype=pl.Int64),
        pl.Series("idle_ns", win_ns - busy_ns, dtype=pl.Int64),
        pl.Series("util", busy_ns / np.maximum(win_ns, 1), dtype=pl.Float64),
    )
    units = (
        tracks.group_by("gid", "unit")
        .agg(pl.len().alias("tracks"), pl.col("busy_ns").sum())
        .join(windows.select("gid", (pl.col("hi") - pl.col("lo")).alias("w")), on="gid")
        .with_columns((pl.col("busy_ns") / (pl.col("tracks") * pl.col("w"))).alias("util"))
        .select("gid", "unit", pl.col("tracks").cast(pl.Int64), "busy_ns", "util")
        .sort("gid", "unit")
    )
    gaps_iv = iv.difference(iv.windows(p_lo, p_hi), busy)
    gaps = pl.DataFrame(
        {"pair": gaps_iv.group, "start_ns": gaps_iv.start, "end_ns": gaps_iv.end},
        schema={"pair": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    clipped = (
        top.select("pair", "idx", "id", "ts", "end")
        .join(pairs.select("pair", "lo", "hi"), on="pair")
        .with_columns(
            pl.max_horizontal("ts", "lo").alias("cs"), pl.min_horizontal("end", "hi").alias("ce")
        )
        .filter(pl.col("ce") > pl.col("cs"))
    )
    # the event ending where a gap starts and the one starting where it ends (max id on ties)
    before = (
        clipped.sort("id")
        .group_by("pair", "ce")
        .agg(pl.col("id").last().alias("before_id"), pl.col("end").last().alias("before_end"))
    )
    after = (
        clipped.sort("id")
        .group_by("pair", "cs")
        .agg(pl.col("id").last().alias("after_id"), pl.col("idx").last().alias("after_idx"))
    )
    gaps = (
        gaps.join(before, left_on=["pair", "start_ns"], right_on=["pair", "ce"], how="left")
        .join(after, left_on=["pair", "end_ns"], right_on=["pair", "cs"], how="left")
        .join(pairs.select("pair", "gid", "track", "unit"), on="pair", how="left")
    )
    gaps = _attribute(prep, gates, gaps)
    gaps = (
        gaps.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"))
        .select(
            "gid",
            "track",
            "unit",
            "start_ns",
            "end_ns",
            "dur_ns",
            "before_id",
            "after_id",
            "cause",
            "hta_cause",
        )
        .sort("gid", "track", "start_ns")
    )
    return tracks, units, gaps


def _attribute(prep: Prepared, gates: Gates, gaps: pl.DataFrame) -> pl.DataFrame:
    """Add `cause` (from the gating predecessor of the event after the gap) and `hta_cause`."""
    ev = prep.ev
    after_idx = gaps["after_idx"].to_numpy()
    has_after = ~np.isnan(after_idx.astype(np.float64)) if len(after_idx) else np.zeros(0, bool)
    a = np.where(has_after, np.nan_to_num(after_idx.astype(np.float64)), 0).astype(np.int64)
    g = np.where(has_after, gates.gate[a] if len(a) else a, -1)
    track = ev["track"].to_numpy().astype(np.int64)
    gc = np.clip(g, 0, None)
    cross = (g >= 0) & (track[gc] != track[a])
    g_info = ev.select(
        pl.col("kind").alias("g_kind"),
        pl.col("unit").alias("g_unit"),
    )
    g_rows = g_info[gc.tolist()] if len(gc) else g_info.clear()
    gaps = gaps.with_columns(
        pl.Series("cross", cross), g_rows["g_kind"], g_rows["g_unit"]
    ).with_columns(
        pl.when(pl.col("cross"))
        .then(wait_cause_expr())
        .otherwise(pl.lit("no-dependency"))
        .alias("cause")
    )
    # HTA's stream-gap classes: gaps between two kernels only
    launch = (
        prep.deps.filter(pl.col("kind") == "launch")
        .join(ev.select(pl.col("id").alias("src"), pl.col("ts").alias("launch_ts")), on="src")
        .group_by("dst")
        .agg(pl.col("launch_ts").min())
    )
    gaps = gaps.join(launch, left_on="after_id", right_on="dst", how="left").with_columns(
        pl.when(
            (pl.col("unit") != "stream")
            | pl.col("before_id").is_null()
            | pl.col("after_id").is_null()
        )
        .then(None)
        .when(pl.col("launch_ts") > pl.col("before_end"))
        .then(pl.lit("host_wait"))
        .when((pl.col("end_ns") - pl.col("start_ns")) < HTA_KERNEL_WAIT_NS)
        .then(pl.lit("kernel_wait"))
        .otherwise(pl.lit("other"))
        .alias("hta_cause")
    )
    return gaps
