"""Critical path: gating predecessors over dependencies and track order, then a backward walk.

Graph: nodes are the non-marker events; edges are `Trace.deps` (plus Kineto sync edges
derived in sync_edges.py) and track order (each event to the next one at the same depth on
its track). The gating predecessor of e is the predecessor with the latest end not after e's
start (within `SKEW_TOLERANCE_NS`, reported when used; a `sync` edge may end anywhere before
e ends: e is a blocking call that returned when its predecessor finished). Gates for every
event come from one vectorised sort; only the walk back from the last event of each window is
sequential, O(path length).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from moetrace.analysis.classify import category_expr
from moetrace.analysis.steps import Prepared

SKEW_TOLERANCE_NS = 1_000
"""A predecessor may end this much after its successor starts (clock skew between tracks)."""

EDGE_TRACK, EDGE_DEP, EDGE_SYNC = 0, 1, 2


@dataclass
class Gates:
    """Gating predecessor per event row (idx): -1 when none; edge type of the gate."""

    gate: np.ndarray
    gate_edge: np.ndarray
    skew_used: int
    n_dep_edges: int
    n_cross_track: int


def edges(prep: Prepared, extra: pl.DataFrame | None = None) -> pl.DataFrame:
    """All predecessor edges as (src, dst, etype) over row positions (idx), markers excluded."""
    ev = prep.ev
    nodes = ev.filter(pl.col("kind") != "marker").select("idx", "id", "track", "depth", "ts")
    order = nodes.sort("track", "depth", "ts", "idx")
    track_edges = (
        order.with_columns(
            pl.col("idx").shift(1).alias("src"),
            (
                (pl.col("track").shift(1) == pl.col("track"))
                & (pl.col("depth").shift(1) == pl.col("depth"))
            ).alias("same"),
        )
        .filter(pl.col("same"))
        .select(pl.col("src").cast(pl.Int64), pl.col("idx").cast(pl.Int64).alias("dst"))
        .with_columns(pl.lit(EDGE_TRACK, dtype=pl.Int8).alias("etype"))
    )
    id_to_idx = nodes.select(pl.col("id"), pl.col("idx").cast(pl.Int64))
    deps = prep.deps.select("src", "dst", "kind")
    if extra is not None and extra.height:
        deps = pl.concat([deps, extra.select(deps.columns).cast(deps.schema)])
    dep_edges = (
        deps.join(id_to_idx.rename({"idx": "s"}), left_on="src", right_on="id", how="inner")
        .join(id_to_idx.rename({"idx": "d"}), left_on="dst", right_on="id", how="inner")
        .filter(pl.col("s") != pl.col("d"))
        .select(
            pl.col("s").alias("src"),
            pl.col("d").alias("dst"),
            pl.when(pl.col("kind") == "sync")
            .then(pl.lit(EDGE_SYNC, dtype=pl.Int8))
            .otherwise(pl.lit(EDGE_DEP, dtype=pl.Int8))
            .alias("etype"),
        )
    )
    return pl.concat([track_edges, dep_edges])


def gating(prep: Prepared, edge_frame: pl.DataFrame) -> Gates:
    """The gating predecessor of every event: latest-ending predecessor that ended in time.

    Ties on the end time prefer a dependency over track order (it explains the wait), then
    the lower row.
    """
    n = prep.ev.height
    ts = prep.ev["ts"].to_numpy().astype(np.int64)
    end = prep.ev["end"].to_numpy().astype(np.int64)
    gate = np.full(n, -1, dtype=np.int64)
    gate_edge = np.full(n, -1, dtype=np.int8)
    src = edge_frame["src"].to_numpy().astype(np.int64)
    dst = edge_frame["dst"].to_numpy().astype(np.int64)
    et = edge_frame["etype"].to_numpy().astype(np.int8)
    track = prep.ev["track"].to_numpy()
    n_dep = int((et != EDGE_TRACK).sum())
    n_cross = int(((et != EDGE_TRACK) & (track[src] != track[dst])).sum()) if len(src) else 0
    if len(src) == 0:
        return Gates(gate, gate_edge, 0, n_dep, n_cross)
    s_end = end[src]
    ok = (s_end <= ts[dst] + SKEW_TOLERANCE_NS) | ((et == EDGE_SYNC) & (s_end <= end[dst]))
    src, dst, et, s_end = src[ok], dst[ok], et[ok], s_end[ok]
    pref = (et == EDGE_TRACK).astype(np.int8)  # 0 = dependency first on ties
    order = np.lexsort((src, pref, -s_end, dst))
    d_sorted = dst[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = d_sorted[1:] != d_sorted[:-1]
    pick = order[first]
    gate[dst[pick]] = src[pick]
    gate_edge[dst[pick]] = et[pick]
    chosen = gate >= 0
    skew = chosen & (gate_edge != EDGE_SYNC) & (end[np.where(chosen, gate, 0)] > ts)
    return Gates(gate, gate_edge, int(skew.sum()), n_dep, n_cross)


def walk(
    gates: Gates,
    ts: list[int],
    end: list[int],
    step: list[int | None],
    start: int,
    lo: int,
    hi: int,
) -> tuple[list[tuple[int, int, int]], bool]:
    """Walk gating predecessors back from event row `start`, clipped to [lo, hi).

    The walk stays inside the step of `start` (a predecessor of another step ends it), so
    without cross-track dependencies the path covers only its own track's part of the step.
    Returns segments (row or -1 for a wait, seg_start, seg_end) latest first, contiguous, so
    their lengths sum to the span; and whether a cycle stopped the walk.
    """
    gate = gates.gate
    own_step = step[start]
    segments: list[tuple[int, int, int]] = []
    cursor = min(end[start], hi)
    node = start
    seen: set[int] = set()
    while True:
        if node in seen:
            return segments, True
        seen.add(node)
        seg_end = min(end[node], cursor)
        g = int(gate[node])
        if g >= 0 and step[g] != own_step:
            g = -1
        if g < 0:
            seg_start = max(min(ts[node], seg_end), lo)
            if seg_end > seg_start:
                segments.append((node, seg_start, seg_end))
            return segments, False
        g_end = end[g]
        seg_start = max(min(max(ts[node], g_end), seg_end), lo)
        if seg_end > seg_start:
            segments.append((node, seg_start, seg_end))
        wait_start = max(min(g_end, seg_start), lo)
        if seg_start > wait_start:
            segments.append((-1, wait_start, seg_start))
        cursor = wait_start
        if cursor <= lo:
            return segments, False
        node = g


def critical_paths(prep: Prepared, gates: Gates) -> tuple[pl.DataFrame, list[str]]:
    """Each window's critical path as segments (gid, seq, segment, event_id, times, category)."""
    warnings: list[str] = []
    ev = prep.ev
    work = ev.filter(
        pl.col("device") & pl.col("kind").is_in(["compute", "comm"]) & pl.col("gid").is_not_null()
    )
    last = work.sort("end", "idx").group_by("gid").agg(pl.col("idx").last()).sort("gid")
    lo, hi = prep.lo_hi()
    ts_l = ev["ts"].to_list()
    end_l = ev["end"].to_list()
    step_l = ev["step"].to_list()
    rows_gid: list[int] = []
    rows_seq: list[int] = []
    rows_node: list[int] = []
    rows_s: list[int] = []
    rows_e: list[int] = []
    cycles = 0
    for gid, start in zip(last["gid"].to_list(), last["idx"].to_list(), strict=True):
        segs, cycled = walk(gates, ts_l, end_l, step_l, int(start), int(lo[gid]), int(hi[gid]))
        cycles += cycled
        k = len(segs)
        for seq, (node, s, e) in enumerate(reversed(segs)):
            rows_gid.append(gid)
            rows_seq.append(seq)
            rows_node.append(node)
            rows_s.append(s)
            rows_e.append(e)
        del k
    if cycles:
        warnings.append(f"critical path: {cycles} walk(s) stopped at a gating cycle")
    seg = pl.DataFrame(
        {"gid": rows_gid, "seq": rows_seq, "node": rows_node, "start_ns": rows_s, "end_ns": rows_e},
        schema={
            "gid": pl.Int64,
            "seq": pl.Int64,
            "node": pl.Int64,
            "start_ns": pl.Int64,
            "end_ns": pl.Int64,
        },
    )
    info = ev.select(
        pl.col("idx").cast(pl.Int64).alias("node"),
        pl.col("id").alias("event_id"),
        category_expr().alias("category"),
    )
    seg = seg.join(info, on="node", how="left").with_columns(
        pl.when(pl.col("node") < 0)
        .then(pl.lit("wait"))
        .otherwise(pl.lit("event"))
        .alias("segment"),
        pl.when(pl.col("node") < 0)
        .then(pl.lit("wait"))
        .otherwise(pl.col("category"))
        .alias("category"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
    )
    seg = seg.sort("gid", "seq").select(
        "gid", "seq", "segment", "event_id", "start_ns", "end_ns", "dur_ns", "category"
    )
    if gates.skew_used:
        warnings.append(
            f"critical path: {gates.skew_used} gating edge(s) used the "
            f"{SKEW_TOLERANCE_NS} ns clock-skew tolerance"
        )
    if gates.n_cross_track == 0 and prep.ev.height:
        warnings.append(
            "no cross-track dependencies: the critical path cannot leave its track "
            "(coverage shows how much of the window it explains)"
        )
    return seg, warnings
