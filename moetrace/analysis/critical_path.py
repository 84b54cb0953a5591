"""Critical path: gating predecessors over dependencies and track order, then a backward walk.

Graph: nodes are the events that are not annotations; edges are `Trace.deps` (plus Kineto
sync edges derived in sync_edges.py) and track order: on each queue (a thread or stream,
overflow lanes joined), each event's predecessor is the event with the latest end not after
its start, whatever the depth of either (consecutive work is joined across nesting
levels). The gating predecessor of e is the predecessor with the latest end not after e's
start (within `SKEW_TOLERANCE_NS`, reported when used); a `sync` or `data` edge may end
anywhere before e ends (a blocking call returns when its predecessor finished; a pipelined
receive ends after the send's last byte). Gates for every event come from two vectorised
scatter passes; only the walk back from the last event of each window is sequential,
O(path length).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.classify import category_expr
from moetrace.analysis.prepared import Prepared

SKEW_TOLERANCE_NS = 1_000
"""A predecessor may end this much after its successor starts (clock skew between tracks)."""

EDGE_TRACK, EDGE_DEP, EDGE_SYNC = 0, 1, 2
"""Edge types: track order; start-gating deps (launch, flow); end-gating deps (data, sync)."""

END_GATING_KINDS = ("data", "sync")
"""Dependency kinds whose predecessor may end while the successor runs: a blocking call
returns when what it waited for ends (sync), a pipelined transfer's receive ends after the
send's last byte (data). Such a predecessor gates the successor's end: the successor's
path segment starts when the predecessor ends. Launch and flow edges gate the start."""


@dataclass
class Gates:
    """Gating predecessor per event row (idx): -1 when none; edge type of the gate."""

    gate: np.ndarray
    gate_edge: np.ndarray
    skew_used: int
    n_dep_edges: int
    n_cross_track: int


class Edges(NamedTuple):
    """Predecessor edges over row positions (idx): src -> dst, etype (track/dep/sync)."""

    src: np.ndarray
    dst: np.ndarray
    etype: np.ndarray

    @property
    def height(self) -> int:
        """Number of edges."""
        return len(self.src)


def _rows_of_ids(ids: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Row position of each queried event id; -1 when the id does not exist."""
    n = len(ids)
    if n == 0:  # no events (e.g. every one dropped as damaged): no id exists
        return np.full(len(query), -1, dtype=np.int64)
    if bool((ids == np.arange(n)).all()):  # the usual case: id == row
        return np.where((query >= 0) & (query < n), query, -1)
    order = np.argsort(ids, kind="stable")
    pos = np.clip(np.searchsorted(ids[order], query), 0, n - 1)
    return np.where(ids[order][pos] == query, order[pos], -1)


def track_predecessors(
    queue: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Track-order edges (src, dst positions): each event's predecessor on its queue is the
    event there with the latest end not after its start (lowest position on ties), whatever
    the nesting depth of either. Zero-length events (instants) take no part: with them two
    events could precede each other. Every edge goes forward in time, so track order alone
    never makes a cycle. One edge per event at most; O(n log n)."""
    pos = np.flatnonzero(end > ts).astype(np.int64)
    if len(pos) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    q, s, e = queue[pos], ts[pos], end[pos]
    # sorted by queue, then end; on equal ends the highest position first, the lowest last
    order = np.lexsort((-pos, e, q))
    end_key, start_key = iv.pack_pairs((q[order], e[order]), (q, s))
    at = np.searchsorted(end_key, start_key, side="right") - 1
    src = order[np.clip(at, 0, None)]
    ok = (at >= 0) & (q[src] == q)
    return pos[src[ok]], pos[ok]


def edges(prep: Prepared, extra: pl.DataFrame | None = None) -> Edges:
    """All predecessor edges over row positions (idx), annotations excluded: track order
    (`track_predecessors` on each queue) plus deps (and derived sync edges)."""
    ev = prep.ev
    node = (ev["kind"] != "marker").to_numpy()
    rows = np.flatnonzero(node).astype(np.int64)
    t_src, t_dst = track_predecessors(
        ev["queue"].to_numpy().astype(np.int64)[rows],
        ev["ts"].to_numpy().astype(np.int64)[rows],
        ev["end"].to_numpy().astype(np.int64)[rows],
    )
    t_src, t_dst = rows[t_src], rows[t_dst]
    deps = prep.deps.select("src", "dst", "kind")
    if extra is not None and extra.height:
        deps = pl.concat([deps, extra.select(deps.columns).cast(deps.schema)])
    ids = ev["id"].to_numpy().astype(np.int64)
    d_src = _rows_of_ids(ids, deps["src"].to_numpy().astype(np.int64))
    d_dst = _rows_of_ids(ids, deps["dst"].to_numpy().astype(np.int64))
    is_sync = deps["kind"].is_in(END_GATING_KINDS).to_numpy()
    ok = (d_src >= 0) & (d_dst >= 0)
    ok[ok] &= node[d_src[ok]] & node[d_dst[ok]] & (d_src[ok] != d_dst[ok])
    d_type = np.where(is_sync, EDGE_SYNC, EDGE_DEP).astype(np.int8)
    return Edges(
        np.concatenate([t_src, d_src[ok]]),
        np.concatenate([t_dst, d_dst[ok]]),
        np.concatenate([np.full(len(t_src), EDGE_TRACK, np.int8), d_type[ok]]),
    )


def gating(prep: Prepared, edge_set: Edges) -> Gates:
    """The gating predecessor of every event: latest-ending predecessor that ended in time
    (before the start, or for data/sync edges before the end).

    Ties on the end time prefer a dependency over track order (it explains the wait), then
    the lower row. Two scatter passes (max end, then min tie key) instead of a sort.
    """
    n = prep.ev.height
    ts = prep.ev["ts"].to_numpy().astype(np.int64)
    end = prep.ev["end"].to_numpy().astype(np.int64)
    gate = np.full(n, -1, dtype=np.int64)
    gate_edge = np.full(n, -1, dtype=np.int8)
    src, dst, et = edge_set.src, edge_set.dst, edge_set.etype
    track = prep.ev["queue"].to_numpy()
    n_dep = int((et != EDGE_TRACK).sum())
    n_cross = int(((et != EDGE_TRACK) & (track[src] != track[dst])).sum()) if len(src) else 0
    if len(src) == 0:
        return Gates(gate, gate_edge, 0, n_dep, n_cross)
    s_end = end[src]
    ok = (s_end <= ts[dst] + SKEW_TOLERANCE_NS) | ((et == EDGE_SYNC) & (s_end <= end[dst]))
    src, dst, et, s_end = src[ok], dst[ok], et[ok], s_end[ok]
    best = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(best, dst, s_end)
    top = s_end == best[dst]
    src, dst, et = src[top], dst[top], et[top]
    # among equal ends: dependency (0) before track order (1), then the lowest row
    tie = (et == EDGE_TRACK).astype(np.int64) * (n + 1) + src
    low = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(low, dst, tie)
    win = tie == low[dst]
    gate[dst[win]] = src[win]
    gate_edge[dst[win]] = et[win]
    chosen = gate >= 0
    skew = chosen & (gate_edge != EDGE_SYNC) & (end[np.where(chosen, gate, 0)] > ts)
    return Gates(gate, gate_edge, int(skew.sum()), n_dep, n_cross)


def path_nodes(
    gate: list[int], end: list[int], step: list[int], start: int, lo: int, limit: int
) -> tuple[list[int], int, bool]:
    """Rows on the path back from `start`, following `gate` until an event has no gate, or
    its gate ends at or before `lo` (the path has left the window) and belongs to another
    step (within the step the walk goes on, so the unclipped path shows where it began,
    e.g. at the launch of the first kernel). Returns (rows, the last row's gate or -1,
    cycle seen).

    The only sequential part of the analyzer: one list lookup per path node.
    """
    path = [start]
    cur = start
    while True:
        g = gate[cur]
        if g < 0 or (end[g] <= lo and step[g] != step[cur]):
            return path, g, False
        path.append(g)
        cur = g
        if len(path) > limit:  # longer than the trace has events: a gating cycle
            seen: set[int] = set()
            for j, node in enumerate(path):
                if node in seen:
                    return path[:j], node, True
                seen.add(node)
            return path, -1, True


def segments(
    path: list[int], last_gate: int, ts: np.ndarray, end: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segments of a path (rows given latest first), clipped to [lo, hi).

    Each node contributes its event piece [start, end) and the wait before it; a node's
    piece ends where the next (later) piece begins (a running minimum), so the pieces are
    contiguous and their lengths sum to the span. Returns (row or -1 for a wait, start, end)
    earliest first, empty pieces dropped.
    """
    p = np.asarray(path, dtype=np.int64)
    e = end[p]
    t = ts[p]
    none = np.iinfo(np.int64).min
    ge = np.empty(len(p), dtype=np.int64)
    ge[:-1] = e[1:]
    ge[-1] = end[last_gate] if last_gate >= 0 else none
    v = np.minimum(np.maximum(t, ge), e)
    v[0] = min(v[0], hi)
    a = np.minimum.accumulate(v)
    seg_end = np.empty(len(p), dtype=np.int64)
    seg_end[0] = min(e[0], hi)
    seg_end[1:] = np.minimum(e[1:], a[:-1])
    ev_s, ev_e = np.maximum(a, lo), np.maximum(seg_end, lo)
    w_s = np.maximum(np.minimum(ge, a), lo)
    w_e = np.maximum(a, lo)
    if last_gate < 0:  # the first event of the path waited for nothing
        w_e[-1] = w_s[-1]
    node = np.stack([p, np.full(len(p), -1, np.int64)], axis=1).ravel()
    start = np.stack([ev_s, w_s], axis=1).ravel()
    stop = np.stack([ev_e, w_e], axis=1).ravel()
    keep = stop > start
    return node[keep][::-1], start[keep][::-1], stop[keep][::-1]


def critical_paths(prep: Prepared, gates: Gates) -> tuple[pl.DataFrame, np.ndarray, list[str]]:
    """Each window's critical path as segments (gid, seq, segment, event_id, times, category),
    clipped to the window; plus, per gid, where the unclipped path begins (ns; int64 min when
    the window has no path): e.g. the launch call before the first kernel."""
    warnings: list[str] = []
    ev = prep.ev
    ts = ev["ts"].to_numpy().astype(np.int64)
    end = ev["end"].to_numpy().astype(np.int64)
    gid = ev["gid"].fill_null(-1).to_numpy().astype(np.int64)
    step = ev["step"].fill_null(np.iinfo(np.int64).min).to_numpy().astype(np.int64)
    work = ev["device"].to_numpy() & ev["kind"].is_in(["compute", "comm"]).to_numpy() & (gid >= 0)
    rows = np.flatnonzero(work)
    lo, hi = prep.lo_hi()
    starts: list[tuple[int, int]] = []
    if len(rows):
        (key,) = iv.pack_pairs((gid[rows], end[rows]))
        order = rows[np.argsort(key, kind="stable")]  # ties: the later row last
        g_sorted = gid[order]
        last = np.ones(len(order), dtype=bool)
        last[:-1] = g_sorted[1:] != g_sorted[:-1]
        starts = list(zip(g_sorted[last].tolist(), order[last].tolist(), strict=True))
    gate_l = gates.gate.tolist() if starts else []
    end_l = end.tolist() if starts else []
    step_l = step.tolist() if starts else []
    parts: list[tuple[np.ndarray, ...]] = []
    cycles = 0
    path_start = np.full(prep.n_windows, np.iinfo(np.int64).min, dtype=np.int64)
    for g, start in starts:
        nodes, last_gate, cycled = path_nodes(gate_l, end_l, step_l, start, int(lo[g]), len(ts))
        cycles += cycled
        path_start[g] = ts[nodes[-1]]
        node, s0, s1 = segments(nodes, last_gate, ts, end, int(lo[g]), int(hi[g]))
        parts.append((np.full(len(node), g, np.int64), np.arange(len(node)), node, s0, s1))
    if cycles:
        warnings.append(f"critical path: {cycles} walk(s) stopped at a gating cycle")
    cols = [np.concatenate(c) if parts else np.zeros(0, np.int64) for c in zip(*parts, strict=True)]
    if not parts:
        cols = [np.zeros(0, np.int64)] * 5
    node = cols[2]
    pick = pl.Series(np.clip(node, 0, None), dtype=pl.Int64)
    info = ev.select(
        pl.col("id").gather(pick).alias("event_id"),
        pl.col("kind").gather(pick),
        pl.col("unit").gather(pick),
    ).select("event_id", category_expr().alias("category"))
    is_wait = pl.Series(node < 0)
    seg = pl.DataFrame(
        {"gid": cols[0], "seq": cols[1], "start_ns": cols[3], "end_ns": cols[4]},
        schema={"gid": pl.Int64, "seq": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    ).with_columns(
        pl.when(is_wait).then(pl.lit("wait")).otherwise(pl.lit("event")).alias("segment"),
        pl.when(is_wait).then(None).otherwise(info["event_id"]).alias("event_id"),
        pl.when(is_wait).then(pl.lit("wait")).otherwise(info["category"]).alias("category"),
        (pl.col("end_ns") - pl.col("start_ns")).alias("dur_ns"),
    )
    seg = seg.select(
        "gid", "seq", "segment", "event_id", "start_ns", "end_ns", "dur_ns", "category"
    )
    if gates.skew_used:
        warnings.append(
            f"critical path: {gates.skew_used} gating edge(s) used the "
            f"{SKEW_TOLERANCE_NS} ns clock-skew tolerance"
        )
    if gates.n_cross_track == 0 and prep.windows.height:
        warnings.append(
            "no cross-track dependencies: the critical path cannot leave its track "
            "(coverage shows how much of the window it explains)"
        )
    return seg, path_start, warnings
