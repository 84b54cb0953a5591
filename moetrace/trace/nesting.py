"""Nesting of slices on a track, and overflow lanes for the slices that do not nest.

The one home of these shared algorithms: the model's validation (`nesting_depth`), the Chrome
reader and writer, and the .pftrace writer all lay slices out through this module, so a
trace read, written and read again gets the same depths and the same overflow lanes.
Vectorised with numpy (one pass per depth level or overflow round, none per event).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import polars as pl

OVERFLOW_LANE_LABEL = "overlap"
"""An overflow lane is named "<its track's name> (overlap N)" by every reader and writer."""


MAX_OVERFLOW_LANE = 64
"""Most overflow lanes per track in Chrome JSON (reader and writer); .pftrace allows one fewer
(`formats.pftrace.layout.OVERFLOW_LEVELS`, its uuid stride)."""

BLOCK_EVENTS = 1 << 16
"""Events per block of whole tracks in the per-track algorithms (`nesting_depth`,
`overflow_lanes`, the Chrome reader's flow binding). They hold a dozen 8-byte temporaries
per event: run over blocks, these cost ~8 MB whatever the trace's size instead of ~100 MB
per 1M events, at the load's memory peak. A track is never split (one longer than this is
its own block); results do not depend on the block size."""


def track_blocks(track: np.ndarray, limit: int | None = None) -> list[np.ndarray] | None:
    """Positions of the events in blocks of whole tracks, ~`limit` (`BLOCK_EVENTS`) events
    each (a block closes at the first track starting at or after the next multiple of
    `limit`), input order kept within each track; None when everything is one block."""
    limit = BLOCK_EVENTS if limit is None else limit
    n = len(track)
    if n <= limit:
        return None
    small = int(track.min()) >= 0 and int(track.max()) < 2**16
    order = np.argsort(track.astype(np.uint16) if small else track, kind="stable")
    if small:  # where each track begins in `order`, from its count (no sorted copy)
        counts = np.bincount(track.astype(np.uint16))
        starts = np.cumsum(counts[counts > 0])[:-1]
    else:
        sorted_track = track[order]
        starts = np.flatnonzero(sorted_track[1:] != sorted_track[:-1]) + 1
        del sorted_track
    window = starts // limit
    cuts = starts[np.flatnonzero(window[1:] != window[:-1]) + 1] if len(starts) else starts
    if len(starts) and starts[0] // limit > 0:  # the first track alone passes a multiple
        cuts = np.concatenate(([starts[0]], cuts))
    if len(cuts) == 0:
        return None
    return np.split(order, cuts)


Column = np.ndarray | pl.Series
"""A per-event column: numpy, or a Polars Series that is read block by block (a many-chunk
Series as a whole numpy array would be an 8 MB copy per 1M events)."""


def block_rows(column: Column, rows: np.ndarray) -> np.ndarray:
    """The values of `column` at `rows`, as numpy."""
    if isinstance(column, pl.Series):
        return column.gather(rows).to_numpy()
    picked: np.ndarray = column[rows]
    return picked


def as_array(column: Column, dtype: type = np.int64) -> np.ndarray:
    """The whole column as numpy of `dtype` (no copy when it already is one)."""
    values = column.to_numpy() if isinstance(column, pl.Series) else column
    return np.asarray(values, dtype=dtype)


def _blockwise(
    func: Callable[..., tuple[np.ndarray, np.ndarray]],
    blocks: list[np.ndarray],
    dtypes: tuple[type, type],
    n: int,
    *columns: Column,
) -> tuple[np.ndarray, np.ndarray]:
    """`func(*columns)` (two per-event outputs) computed block by block on the blocks' rows:
    the same result for per-track functions, with temporaries bounded by a block."""
    first: np.ndarray = np.empty(n, dtype=dtypes[0])
    second: np.ndarray = np.empty(n, dtype=dtypes[1])
    for rows in blocks:
        a, b = func(*(as_array(block_rows(column, rows)) for column in columns))
        first[rows] = a
        second[rows] = b
    return first, second


def overflow_lane_name(base: str, lane: int) -> str:
    """Name of overflow lane `lane` (>= 1) of a track named `base`."""
    return f"{base} ({OVERFLOW_LANE_LABEL} {lane})"


def overflow_lane_name_expr(base: pl.Expr, lane: pl.Expr) -> pl.Expr:
    """`overflow_lane_name` as a Polars expression over columns of names and lane numbers."""
    return pl.concat_str(
        [base, pl.lit(f" ({OVERFLOW_LANE_LABEL} "), lane.cast(pl.String), pl.lit(")")]
    )


def nesting_depth(
    track: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Depth of every event on its track, and a mask of events that break nesting.

    Order per track is (ts, longest first, input order). depth(e) = number of events before e
    on its track that end after e starts; with well-nested slices those are exactly the
    slices enclosing e. An event is badly nested when its parent (the last earlier event one
    level up) does not contain it, i.e. two slices overlap partially. O(n log n), no loops per
    event (one pass per depth level for the check, each over that level's events only).
    Runs over blocks of whole tracks (`BLOCK_EVENTS`) to bound its temporaries.
    """
    n = len(ts)
    if n == 0:
        return np.zeros(0, dtype=np.uint16), np.zeros(0, dtype=bool)
    track = np.asarray(track, dtype=np.int64)
    ts = np.asarray(ts, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    blocks = track_blocks(track)
    if blocks is not None:
        return _blockwise(_nesting_depth, blocks, (np.uint16, np.bool_), n, track, ts, dur)
    return _nesting_depth(track, ts, dur)


def _nesting_depth(
    track: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`nesting_depth` of int64 columns in one pass (no blocks)."""
    n = len(ts)
    # In place and freed early: at 1M events each temporary is 8 MB, and this runs at the
    # load's memory peak.
    tk, s_rel, e_rel, width = _track_time_keys(track, ts, ts + dur)
    start_key = tk * width
    start_key += s_rel
    del s_rel
    order = _nesting_order(tk, start_key, dur)
    sk = start_key[order]
    del start_key
    end_key = tk * width
    end_key += e_rel
    del e_rel
    end_key.sort()
    # Events of my track that ended at or before my start: every end key of an earlier
    # track sorts below mine and there are exactly as many as the events before my track's
    # first one, so depth = position - (end keys <= my start key), with no per-track offset.
    d_sorted = np.arange(n, dtype=np.int64)
    d_sorted -= np.searchsorted(end_key, sk, side="right")
    del end_key
    d_s = dur[order]
    zero = d_s == 0
    if zero.any():
        # ...but a zero-length event at my start that is me or comes after me in order
        # "ended" at my start without being before me: add those back.
        zkey = sk[zero]
        zcount_at = np.searchsorted(zkey, sk, side="right") - np.searchsorted(zkey, sk, side="left")
        zpos = np.flatnonzero(zero)
        zcount_at[zpos] -= np.arange(len(zpos)) - np.searchsorted(zkey, zkey, side="left")
        d_sorted += zcount_at
    end_sorted = ts[order]
    end_sorted += d_s
    tk_sorted = tk[order]
    del tk, sk, d_s
    bad_sorted = _badly_nested(d_sorted, tk_sorted, end_sorted)
    depth = np.empty(n, dtype=np.uint16)
    depth[order] = np.minimum(d_sorted, np.iinfo(np.uint16).max)
    bad = np.empty(n, dtype=bool)
    bad[order] = bad_sorted
    return depth, bad


def _track_time_keys(
    track: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.int64]:
    """(track codes from 0, start ranks, end ranks, width) such that code * width + rank sorts
    like (track, time). Small ranges use offsets (no sort); wide ones dense ranks."""
    t_lo, t_hi = int(track.min()), int(track.max())
    if t_hi - t_lo < 2**22:
        tk = track - t_lo
    else:
        tk = np.unique(track, return_inverse=True)[1].astype(np.int64).reshape(-1)
    lo, hi = int(start.min()), int(end.max())
    if hi - lo < 2**40 and int(tk.max()) < 2**22:
        return tk, start - lo, end - lo, np.int64(2**40)
    times = np.sort(np.concatenate([start, end]))
    return (
        tk,
        np.searchsorted(times, start),
        np.searchsorted(times, end),
        np.int64(len(times) + 1),
    )


def _nesting_order(tk: np.ndarray, start_key: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Positions sorted by (track, start, longest first, input order).

    Files are mostly in time order already, so a stable sort by track alone (a radix sort
    for < 65536 tracks) often leaves starts sorted; only runs of equal (track, start) are then
    re-sorted by duration."""
    if int(tk.max()) < 2**16:
        order = np.argsort(tk.astype(np.uint16), kind="stable")
        sk = start_key[order]
        if not bool((sk[1:] >= sk[:-1]).all()):
            order = np.argsort(start_key, kind="stable")
            sk = start_key[order]
    else:
        order = np.argsort(start_key, kind="stable")
        sk = start_key[order]
    tie = sk[1:] == sk[:-1]
    if not tie.any():
        return order
    in_run = np.zeros(len(sk), dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    run_pos = np.flatnonzero(in_run)
    members = order[run_pos]
    resorted = np.lexsort((-dur[members], sk[run_pos]))  # stable: input order on full ties
    order[run_pos] = members[resorted]
    return order


def _badly_nested(d_sorted: np.ndarray, t_s: np.ndarray, e_s: np.ndarray) -> np.ndarray:
    """For events in nesting order with depths `d_sorted`: True where the parent (the last
    earlier event one level up) is missing, on another track or ends before the event."""
    n = len(d_sorted)
    bad = np.zeros(n, dtype=bool)
    max_depth = int(d_sorted.max())
    if max_depth == 0:
        return bad
    # Events grouped by depth, in order within each group (stable sort; radix when small).
    by_level = np.argsort(
        d_sorted.astype(np.uint16) if max_depth < 2**16 else d_sorted, kind="stable"
    )
    bounds = np.concatenate(([0], np.cumsum(np.bincount(d_sorted, minlength=max_depth + 1))))
    for level in range(1, max_depth + 1):
        child = by_level[bounds[level] : bounds[level + 1]]
        parents = by_level[bounds[level - 1] : bounds[level]]
        if len(child) == 0:
            continue
        if len(parents) == 0:
            bad[child] = True
            continue
        p = np.searchsorted(parents, child, side="left") - 1
        ok = p >= 0
        pp = parents[np.clip(p, 0, None)]
        ok &= t_s[pp] == t_s[child]
        ok &= e_s[pp] >= e_s[child]
        bad[child] = ~ok
    return bad


def overflow_lanes(
    track: np.ndarray, ts: Column, dur: Column, max_lane: int
) -> tuple[np.ndarray, np.ndarray]:
    """Lane per event (0 = its own track) so no lane holds partially overlapping slices, and
    the nesting depth of every event on its (track, lane).

    Like Perfetto's `thread_overlapping_slice` tracks: a slice that overlaps an earlier one
    without nesting inside it moves to lane 1, then 2... (one round per lane, at most
    `max_lane` rounds, so no lane is above `max_lane`). Each round re-nests only the tracks
    where a slice moved. Both writers and the Chrome reader use this one function. Runs
    over blocks of whole tracks (`BLOCK_EVENTS`) to bound its temporaries; `ts` and `dur`
    may be Polars Series, read block by block.
    """
    track = np.asarray(track, dtype=np.int64)
    blocks = track_blocks(track)
    if blocks is not None:
        lanes = partial(_overflow_lanes, max_lane=max_lane)
        return _blockwise(lanes, blocks, (np.int64, np.uint16), len(track), track, ts, dur)
    return _overflow_lanes(track, as_array(ts), as_array(dur), max_lane)


def _overflow_lanes(
    track: np.ndarray, ts: np.ndarray, dur: np.ndarray, max_lane: int
) -> tuple[np.ndarray, np.ndarray]:
    """`overflow_lanes` of int64 columns in one pass (no blocks)."""
    lane = np.zeros(len(ts), dtype=np.int64)
    depth = np.zeros(len(ts), dtype=np.uint16)
    if len(ts) == 0:
        return lane, depth
    if all_flat(track, ts, dur):
        return lane, depth
    # Each round re-nests only the threads where a slice moved in the previous one: the
    # others keep their lanes and depths (keys include the thread), so a few overlaps on a
    # few of 512 threads cost a pass over those threads, not over every event again.
    active: np.ndarray | None = None  # None: every event (the first round gathers nothing)
    for _ in range(max_lane):
        if active is None:
            key = track * (max_lane + 1)
            key += lane
            sub_depth, bad = _nesting_depth(key, ts, dur)
            del key
            depth[:] = sub_depth
            moved = np.flatnonzero(bad)
        else:
            key = track[active] * (max_lane + 1) + lane[active]
            sub_depth, bad = _nesting_depth(key, ts[active], dur[active])
            depth[active] = sub_depth
            moved = active[bad]
        if not bad.any():
            break
        lane[moved] += 1
        active = np.flatnonzero(np.isin(track, np.unique(track[moved])))
    return lane, depth


def all_flat(track: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> bool:
    """True when, on every track, each slice starts strictly after the previous one starts
    and no earlier than it ends: then every depth is 0 and nothing overlaps, which is what
    `nesting_depth` would compute, found with one stable sort by track instead of its
    full (track, ts, dur) sort and dense ranking (the common case of flat kernel streams)."""
    if len(ts) < 2:
        return True
    # File order kept within a track; few tracks (the usual case) sort as uint16, which
    # numpy's stable sort does by radix in O(n) (~5x faster than int64 at 1M slices).
    small = int(track.min()) >= 0 and int(track.max()) < 2**16
    order = np.argsort(track.astype(np.uint16) if small else track, kind="stable")
    t, s = track[order], ts[order]
    e = s + dur[order]
    same = t[1:] == t[:-1]
    ok = (s[1:] > s[:-1]) & (s[1:] >= e[:-1])
    return bool((ok | ~same).all())
