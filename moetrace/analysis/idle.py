"""Idle cores: per-track busy/idle/util, per-unit utilisation and attributed idle gaps.

busy(t) = |∪ work on t| inside the window W (work at every nesting depth and on the
reader's overflow lanes of t; annotations and device waits are never work),
idle = |W| - busy, util = busy / |W|;
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
from moetrace.analysis.classify import wait_cause
from moetrace.analysis.critical_path import Gates, _rows_of_ids
from moetrace.analysis.prepared import Prepared
from moetrace.analysis.windows import spread
from moetrace.trace.model import EVENT_KINDS, UNITS

HTA_KERNEL_WAIT_NS = 30_000
"""HTA's consecutive_kernel_delay: a stream gap under 30 µs is kernel_wait."""

GAP_COLUMNS = (
    "track",
    "start_ns",
    "end_ns",
    "dur_ns",
    "before_id",
    "after_id",
    "cause",
    "hta_cause",
)
"""Columns of an idle gap as the report shows them (after rank and step)."""


def _pair_index(pairs: pl.DataFrame, gid: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Row of (gid, track) in `pairs` (sorted by gid, track) for each event; -1 if none."""
    pg = pairs["gid"].to_numpy().astype(np.int64)
    pt = pairs["track"].to_numpy().astype(np.int64)
    if len(pg) == 0:
        return np.full(len(gid), -1, dtype=np.int64)
    (pkey, qkey) = iv.pack_pairs((pg, pt), (gid, track))
    pos = np.clip(np.searchsorted(pkey, qkey), 0, len(pkey) - 1)
    return np.where(pkey[pos] == qkey, pos, -1)


def _last_at(
    key_group: np.ndarray,
    key_time: np.ndarray,
    ids: np.ndarray,
    q_group: np.ndarray,
    q_time: np.ndarray,
) -> np.ndarray:
    """For each query, the largest id among rows with exactly (group, time); -1 if none."""
    out = np.full(len(q_group), -1, dtype=np.int64)
    if len(key_group) == 0 or len(q_group) == 0:
        return out
    k, q = iv.pack_pairs((key_group, key_time), (q_group, q_time))
    # nested or overlapping work can share an end (or start): on a tie the largest id wins
    order = np.lexsort((ids, k))
    ks = k[order]
    pos = np.searchsorted(ks, q, side="right") - 1
    hit = (pos >= 0) & (ks[np.clip(pos, 0, None)] == q)
    out[hit] = ids[order][pos[hit]]
    return out


def idle(
    prep: Prepared, gates: Gates
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(tracks frame, units frame, gaps frame, device frame), keyed by gid (window id). The
    device frame has busy_ns: the union of all the rank's device work in the window (every
    unit, every queue)."""
    windows = prep.windows.select("gid", "rank", "lo", "hi")
    pairs = (
        prep.device_tracks.with_columns(pl.col("unit").cast(pl.String))
        .join(windows, on="rank", how="inner")
        .sort("gid", "track")
    )
    n_pairs = pairs.height
    p_lo = pairs["lo"].to_numpy().astype(np.int64)
    p_hi = pairs["hi"].to_numpy().astype(np.int64)
    top = prep.ev.filter(pl.col("work") & pl.col("gid").is_not_null()).select(
        "idx", "id", "gid", "queue", "ts", "end"
    )
    t_gid, t_ts, t_end, t_queue, t_ids = spread(
        prep,
        top["gid"].to_numpy().astype(np.int64),
        top["ts"].to_numpy().astype(np.int64),
        top["end"].to_numpy().astype(np.int64),
        top["queue"].to_numpy().astype(np.int64),
        top["id"].to_numpy().astype(np.int64),
    )
    pair = _pair_index(pairs, t_gid, t_queue)
    keep = pair >= 0
    pair = pair[keep]
    ts = t_ts[keep]
    end = t_end[keep]
    ids = t_ids[keep]
    cs = np.maximum(ts, p_lo[pair]) if len(pair) else ts
    ce = np.minimum(end, p_hi[pair]) if len(pair) else end
    real = ce > cs
    pair, cs, ce, ids = pair[real], cs[real], ce[real], ids[real]
    busy = iv.union(iv.Intervals(pair, cs, ce))
    busy_ns = iv.lengths_by_group(busy, n_pairs)
    pair_gid = pairs["gid"].to_numpy().astype(np.int64)
    device_busy = iv.lengths_by_group(
        iv.union(iv.Intervals(pair_gid[pair] if len(pair) else pair, cs, ce)), prep.n_windows
    )
    device = pl.DataFrame(
        {"gid": np.arange(prep.n_windows, dtype=np.int64), "busy_ns": device_busy},
        schema={"gid": pl.Int64, "busy_ns": pl.Int64},
    )
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
    gaps_iv = iv.complement(busy, p_lo, p_hi)
    # the event ending where a gap starts and the one starting where it ends (max id on ties)
    before_id = _last_at(pair, ce, ids, gaps_iv.group, gaps_iv.start)
    after_id = _last_at(pair, cs, ids, gaps_iv.group, gaps_iv.end)
    after_row = np.where(after_id >= 0, _id_to_row(prep, after_id), -1)
    before_end = np.where(before_id >= 0, _id_to_end(prep, before_id), 0)
    gaps = pl.DataFrame(
        {
            "pair": gaps_iv.group,
            "start_ns": gaps_iv.start,
            "end_ns": gaps_iv.end,
            "before_id": before_id,
            "after_id": after_id,
            "after_idx": after_row,
            "before_end": before_end,
        },
        schema={
            "pair": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
            "before_id": pl.Int64,
            "after_id": pl.Int64,
            "after_idx": pl.Int64,
            "before_end": pl.Int64,
        },
    ).with_columns(pl.col("before_id", "after_id").replace(-1, None).cast(pl.UInt32))
    at = pl.Series(gaps_iv.group, dtype=pl.Int64)
    gaps = gaps.with_columns(
        pairs["gid"].gather(at), pairs["track"].gather(at), pairs["unit"].gather(at)
    )
    gaps = _attribute(prep, gates, gaps)
    gaps = gaps.with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns")).select(
        "gid", "unit", *GAP_COLUMNS
    )  # already ordered by (gid, track, start): pairs are sorted, so is the complement
    return tracks, units, gaps, device


def _id_to_row(prep: Prepared, ids: np.ndarray) -> np.ndarray:
    """Row positions (idx) of event ids (which exist)."""
    return _rows_of_ids(prep.ev["id"].to_numpy().astype(np.int64), ids)


def _id_to_end(prep: Prepared, ids: np.ndarray) -> np.ndarray:
    """Unclipped end (ns) of event ids."""
    return np.asarray(prep.ev["end"].to_numpy()[_id_to_row(prep, ids)])


def _attribute(prep: Prepared, gates: Gates, gaps: pl.DataFrame) -> pl.DataFrame:
    """Add `cause` (from the gating predecessor of the event after the gap) and `hta_cause`."""
    ev = prep.ev
    after_idx = gaps["after_idx"].to_numpy().astype(np.int64)
    has_after = after_idx >= 0
    a = np.where(has_after, after_idx, 0)
    g = np.where(has_after, gates.gate[a] if len(a) else a, -1)
    track = ev["queue"].to_numpy().astype(np.int64)
    gc = np.clip(g, 0, None)
    cross = (g >= 0) & (track[gc] != track[a])
    # cause label by table lookup on the (kind, unit) codes of the gate: no string work per gap
    kind_code = ev["kind"].to_physical().to_numpy().astype(np.int64)
    unit_code = ev["unit"].to_physical().to_numpy().astype(np.int64)
    labels = [wait_cause(k, u) for k in EVENT_KINDS for u in UNITS] + ["no-dependency"]
    code = np.where(
        cross, kind_code[gc] * len(UNITS) + unit_code[gc] if len(gc) else gc, len(labels) - 1
    )
    gaps = gaps.with_columns(pl.Series(labels, dtype=pl.String).gather(code).alias("cause"))
    # HTA's stream-gap classes: gaps between two kernels only
    launch_deps = prep.deps.filter(pl.col("kind") == "launch")
    if launch_deps.height == 0:
        return gaps.with_columns(pl.lit(None, dtype=pl.String).alias("hta_cause"))
    launch = (
        launch_deps.join(
            ev.select(pl.col("id").alias("src"), pl.col("ts").alias("launch_ts")), on="src"
        )
        .group_by("dst")
        .agg(pl.col("launch_ts").min())
    )
    gaps = gaps.join(
        launch, left_on="after_id", right_on="dst", how="left", maintain_order="left"
    ).with_columns(
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
