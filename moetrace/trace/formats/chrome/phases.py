"""Chrome phase semantics, vectorised: B/E and b/e matching, overflow lanes, flow binding.

Every function works on whole columns (Polars / numpy); none loops per event in Python.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from moetrace.trace.nesting import Column, as_array, block_rows, track_blocks


def match_begin_end(
    rows: pl.DataFrame, key: str
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Pair begin rows (`is_begin`) with end rows per `key` column, innermost first.

    `rows` needs `key`, `is_begin` (bool), `ts` and `idx` (file position). Order per key is
    (ts, file position). An end with nothing open is unmatched; so is a begin never closed.
    The stack walk is vectorised: with S the running sum of +1/-1, an end is unmatched exactly
    when S drops below its running minimum (a reflected walk), and after dropping those, the
    begin pushed to level L pairs with the next end popping level L.
    Returns (pairs with begin_idx/end_idx, unmatched ends, unmatched begins).
    """
    r = rows.sort([key, "ts", "idx"]).with_columns(
        pl.when(pl.col("is_begin")).then(1).otherwise(-1).alias("step")
    )
    r = r.with_columns(pl.col("step").cum_sum().over(key).alias("S"))
    r = r.with_columns(
        pl.min_horizontal(pl.col("S").cum_min().shift(1, fill_value=0).over(key), pl.lit(0)).alias(
            "floor"
        )
    )
    bad_end = (~pl.col("is_begin")) & (pl.col("S") < pl.col("floor"))
    unmatched_end = r.filter(bad_end)
    r = r.filter(~bad_end).with_columns(pl.col("step").cum_sum().over(key).alias("S"))
    r = r.with_columns(
        pl.when(pl.col("is_begin")).then(pl.col("S")).otherwise(pl.col("S") + 1).alias("level")
    )
    r = r.with_columns(pl.int_range(pl.len()).over([key, "level"]).alias("k"))
    begins = r.filter(pl.col("is_begin")).with_columns((pl.col("k") // 2).alias("pair"))
    ends = r.filter(~pl.col("is_begin")).with_columns((pl.col("k") // 2).alias("pair"))
    pairs = begins.join(
        ends.select(
            key, "level", "pair", pl.col("idx").alias("end_idx"), pl.col("ts").alias("end_ts")
        ),
        on=[key, "level", "pair"],
        how="left",
    )
    unmatched_begin = pairs.filter(pl.col("end_idx").is_null())
    pairs = pairs.filter(pl.col("end_idx").is_not_null())
    return pairs, unmatched_end, unmatched_begin


def _dense_keys(track: np.ndarray, times: list[np.ndarray]) -> tuple[list[np.ndarray], np.int64]:
    """Ranks of times such that (track * width + rank) sorts like (track, time).

    When the time span fits in 40 bits (18 minutes of ns) the offset from the earliest time is
    its own rank (no sort); otherwise times are ranked by a sort of all of them."""
    lo = min((int(t.min()) for t in times if len(t)), default=0)
    hi = max((int(t.max()) for t in times if len(t)), default=0)
    if hi - lo < 2**40 and (len(track) == 0 or int(track.max()) < 2**22):
        return [t - lo for t in times], np.int64(2**40)
    allt = np.sort(np.concatenate(times))  # equal times get equal ranks; no need to dedupe
    width = np.int64(len(allt) + 1)
    return [np.searchsorted(allt, t) for t in times], width


def enclosing_slice(
    s_track: np.ndarray,
    s_ts: np.ndarray,
    s_dur: np.ndarray,
    s_depth: np.ndarray,
    s_id: np.ndarray,
    q_track: np.ndarray,
    q_ts: np.ndarray,
) -> np.ndarray:
    """For each query (track, ts): id of the deepest slice on that track with start <= ts <= end,
    or -1. Slices at one depth of a track never overlap, so one searchsorted per depth level."""
    out = np.full(len(q_ts), -1, dtype=np.int64)
    if len(s_ts) == 0 or len(q_ts) == 0:
        return out
    s_end = s_ts + s_dur
    (r_start, r_end, r_q), width = _dense_keys(s_track, [s_ts, s_end, q_ts])
    del s_end
    # In place: each 1M-slice temporary is 8 MB, and this runs at the load's memory peak.
    s_key = s_track.astype(np.int64)
    s_key *= width
    s_key += r_start
    del r_start
    q_key = q_track.astype(np.int64) * width + r_q
    levels = np.unique(s_depth)
    for level in levels:
        if len(levels) == 1:  # all slices at one depth (flat tracks): no selection copies
            order = np.argsort(s_key, kind="stable")
        else:
            sel = np.flatnonzero(s_depth == level)
            order = sel[np.argsort(s_key[sel], kind="stable")]
        keys = s_key[order]
        pos = np.searchsorted(keys, q_key, side="right") - 1
        ok = pos >= 0
        cand = order[np.clip(pos, 0, None)]
        ok &= (s_track[cand] == q_track) & (r_end[cand] >= r_q)
        out[ok] = s_id[cand[ok]]
    return out


def next_slice(
    s_track: np.ndarray,
    s_ts: np.ndarray,
    s_dur: np.ndarray,
    s_id: np.ndarray,
    q_track: np.ndarray,
    q_ts: np.ndarray,
) -> np.ndarray:
    """For each query: id of the first slice beginning on its track at or after ts (outermost
    first at equal starts), or -1. This is where a flow `f` without `bp: "e"` binds."""
    out = np.full(len(q_ts), -1, dtype=np.int64)
    if len(s_ts) == 0 or len(q_ts) == 0:
        return out
    (r_start, r_q), width = _dense_keys(s_track, [s_ts, q_ts])
    s_key = s_track.astype(np.int64) * width + r_start
    q_key = q_track.astype(np.int64) * width + r_q
    order = np.lexsort((-s_dur, s_key))
    keys = s_key[order]
    pos = np.searchsorted(keys, q_key, side="left")
    ok = pos < len(keys)
    cand = order[np.clip(pos, 0, len(keys) - 1)]
    ok &= s_track[cand] == q_track
    out[ok] = s_id[cand[ok]]
    return out


def chain_edges(points: pl.DataFrame, key: str) -> pl.DataFrame:
    """Flow edges: within each `key` ordered by (ts, idx), an edge from the previous point to
    this one when the previous opens (`out`) and this one closes (`in`) a hop; both = a step.
    Points need `key`, `ts`, `idx`, `out`, `in`, `event` (bound event id, -1 if unbound)."""
    p = points.filter(pl.col("out") | pl.col("in")).sort([key, "ts", "idx"])
    # Sorted by key: the previous row is in the same chain iff it has the same key (one
    # global shift; `.over(key)` is slow when most chains are single points).
    same = (pl.col(key).shift(1) == pl.col(key)).fill_null(False)
    p = p.with_columns(
        pl.when(same).then(pl.col("event").shift(1)).alias("prev_event"),
        (same & pl.col("out").shift(1, fill_value=False)).alias("prev_out"),
    )
    edges = p.filter(
        pl.col("in") & pl.col("prev_out") & (pl.col("prev_event") >= 0) & (pl.col("event") >= 0)
    )
    return edges.select(
        pl.col("prev_event").alias("src"),
        pl.col("event").alias("dst"),
        pl.col("cat"),
        pl.col("name"),
    )


def _by_track_blocks(
    find: Callable[..., np.ndarray],
    blocks: list[np.ndarray] | None,
    s_track: np.ndarray,
    slice_columns: list[Column],
    q_track: np.ndarray,
    q_ts: np.ndarray,
) -> np.ndarray:
    """`find(s_track, *slice_columns, q_track, q_ts)` (one slice id per query, -1 for none,
    looking only at slices of the query's track) computed per block of whole tracks
    (`nesting.track_blocks`): the same ids, with temporaries bounded by a block's size.
    Slice columns are numpy or Polars Series (read a block at a time), as int64."""
    if blocks is None:
        columns = [as_array(c) for c in slice_columns]
        return find(as_array(s_track), *columns, q_track, q_ts)
    out = np.full(len(q_ts), -1, dtype=np.int64)
    q_order = np.argsort(q_track, kind="stable")
    q_sorted = q_track[q_order]
    for rows in blocks:
        b_track = as_array(s_track[rows])
        # A block holds every track between its smallest and largest (tracks sorted).
        lo = np.searchsorted(q_sorted, b_track.min(), side="left")
        hi = np.searchsorted(q_sorted, b_track.max(), side="right")
        if lo == hi:
            continue
        q_rows = q_order[lo:hi]
        columns = [as_array(block_rows(c, rows)) for c in slice_columns]
        out[q_rows] = find(b_track, *columns, q_track[q_rows], q_ts[q_rows])
    return out


def bind_flows(points: pl.DataFrame, slices: pl.DataFrame, tracks: pl.DataFrame) -> pl.DataFrame:
    """Flow edges (src, dst event ids, cat, name) from v1 s/t/f points and v2 bind_ids."""
    empty = pl.DataFrame(
        schema={"src": pl.Int64, "dst": pl.Int64, "cat": pl.String, "name": pl.String}
    )
    pts = points
    edges = [empty]
    if pts.height and slices.height:
        # Per-slice columns stay as they are (uint32 track and id: views of the frame's
        # buffers; ts and dur: Series, many chunks) and each block reads and converts its
        # share (see _by_track_blocks): no whole-column int64 copies.
        s_track = slices["track"].to_numpy()
        s_ts, s_dur = slices["ts"], slices["dur"]
        s_depth, s_id = slices["depth"].to_numpy(), slices["id"].to_numpy()
        blocks = track_blocks(s_track)
        lane_tracks = tracks.select("pid", "tid", "lane", "track")
        event = np.full(pts.height, -1, dtype=np.int64)
        enclosing = ((pts["ph"] != "f") | (pts["bp"] == "e").fill_null(False)).to_numpy()
        q_ts = pts["ts"].to_numpy()
        for lane in range(int(tracks["lane"].max() or 0) + 1):  # type: ignore[arg-type]
            q = (
                pts.select("pid", "tid")
                .with_columns(pl.lit(lane, pl.Int64).alias("lane"))
                .join(lane_tracks, on=["pid", "tid", "lane"], how="left", maintain_order="left")
            )
            q_track = q["track"].fill_null(2**31).to_numpy().astype(np.int64)
            todo = event < 0
            # Each binding rule costs a sort of every slice: run it only if some point uses it.
            no_hit = np.full(len(q_ts), -1, dtype=np.int64)
            enc = (
                _by_track_blocks(
                    enclosing_slice, blocks, s_track, [s_ts, s_dur, s_depth, s_id], q_track, q_ts
                )
                if enclosing.any()
                else no_hit
            )
            nxt = (
                _by_track_blocks(next_slice, blocks, s_track, [s_ts, s_dur, s_id], q_track, q_ts)
                if not enclosing.all()
                else no_hit
            )
            found = np.where(enclosing, enc, nxt)
            event = np.where(todo, found, event)
        del s_track, s_ts, s_dur, s_depth, s_id, blocks
        points = pts.with_columns(
            pl.Series("event", event),
            pl.concat_str(
                [
                    pl.col("cat").fill_null(""),
                    pl.col("name").fill_null(""),
                    pl.col("id").fill_null(""),
                ],
                separator="\x00",
            ).alias("fkey"),
            pl.col("ph").is_in(["s", "t"]).alias("out"),
            pl.col("ph").is_in(["t", "f"]).alias("in"),
        )
        edges.append(chain_edges(points, "fkey"))
    has_v2 = slices["bind_id"].null_count() < slices.height
    # Filter only the needed columns, and only when some slice has a bind_id: a filter of
    # the whole frame materialises every column (~100 MB at 1M events) even when empty.
    v2_cols = ["bind_id", "ts", "idx", "flow_out", "flow_in", "id", "cat", "name"]
    v2 = slices.select(v2_cols).filter(pl.col("bind_id").is_not_null()) if has_v2 else None
    if v2 is not None and v2.height:
        points = v2.select(
            pl.col("bind_id"),
            "ts",
            "idx",
            pl.col("flow_out").alias("out"),
            pl.col("flow_in").alias("in"),
            pl.col("id").cast(pl.Int64).alias("event"),
            "cat",
            "name",
        )
        edges.append(chain_edges(points, "bind_id"))
    return pl.concat(
        [
            e.select(pl.col("src").cast(pl.Int64), pl.col("dst").cast(pl.Int64), "cat", "name")
            for e in edges
        ]
    )
