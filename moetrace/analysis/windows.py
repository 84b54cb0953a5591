"""Steps and windows: which step an event belongs to (step markers or named annotations), the
window of each (rank, step), windows made disjoint per rank and clipped to a time range.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.classify import STEP_PATTERN
from moetrace.analysis.prepared import NO_RANK, Prepared

WINDOW_SPANS = ("compute-comm", "work")
"""What spans a window: `compute-comm` (first start to last end of compute and comm events,
msprof's Stage, the default) or `work` (all device work, copies and sets included: the span
TraceLens's gpu_timeline and HTA's temporal breakdown use)."""


def parse_window(window: str) -> tuple[str, str | None, int | None]:
    """`step`, `trace` or `annotation:NAME[#K]` -> (mode, NAME, K). Raises ValueError."""
    if window in ("step", "trace"):
        return window, None, None
    if window.startswith("annotation:") and len(window) > len("annotation:"):
        name = window[len("annotation:") :]
        head, sep, tail = name.rpartition("#")
        if sep and head and tail.isdigit():
            return "annotation", head, int(tail)
        return "annotation", name, None
    raise ValueError(f"window {window!r}: expected step, trace or annotation:NAME[#K]")


def annotation_spans(
    ev: pl.DataFrame, ranks: list[int], name: str | None, instance: int | None
) -> pl.DataFrame:
    """Like `step_markers`, for the slices named exactly `name`: instance k (0-based, by start,
    per rank) is window `step` k; with `instance`, only that one. A host range and its GPU
    mirror (same name, same position) form one span."""
    hits = ev.filter(pl.col("name") == name).select(
        "rank", "unit", pl.col("ts").alias("m_lo"), pl.col("end").alias("m_hi")
    )
    # number the instances on the host (or, without host ranges, on the device) side
    hits = hits.with_columns((pl.col("unit") == "cpu").alias("host"))
    side = hits.group_by("rank").agg(pl.col("host").any().alias("any_host"))
    hits = hits.join(side, on="rank").filter(pl.col("host") | ~pl.col("any_host"))
    shared = hits.filter(pl.col("rank") == NO_RANK)
    if shared.height and ranks:
        hits = pl.concat(
            [
                hits.filter(pl.col("rank") != NO_RANK),
                shared.drop("rank")
                .join(pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int64}), how="cross")
                .select(hits.columns),
            ]
        )
    out = (
        hits.sort("rank", "m_lo")
        .with_columns(pl.int_range(pl.len()).over("rank").cast(pl.Int64).alias("step"))
        .select("rank", "step", "m_lo", "m_hi")
    )
    if instance is not None:
        out = out.filter(pl.col("step") == instance)
    return out


def partition_windows(windows: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """Make the windows of each rank disjoint: in start order, a window that runs past the
    next one's start ends there (the device lagged the host). Returns (windows, how many
    were clipped, ns clipped in all)."""
    w = windows.sort("rank", "lo", "step", nulls_last=False).with_columns(
        pl.col("lo").shift(-1).over("rank").alias("next_lo")
    )
    cut = (pl.col("next_lo").is_not_null() & (pl.col("hi") > pl.col("next_lo"))).alias("cut")
    w = w.with_columns(cut)
    clipped = int(w["cut"].sum())
    clipped_ns = int(w.filter("cut").select((pl.col("hi") - pl.col("next_lo")).sum()).item())
    w = w.with_columns(
        pl.when("cut").then(pl.col("next_lo")).otherwise(pl.col("hi")).alias("hi")
    ).select("rank", "step", "lo", "hi")
    return w, clipped, clipped_ns


def step_markers(ev: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
    """Step marker spans per rank: rank, step, m_lo, m_hi (null-rank markers apply to all)."""
    mk = ev.filter((pl.col("kind") == "marker") & pl.col("name").str.contains(STEP_PATTERN))
    mk = mk.select(
        pl.col("rank"),
        pl.col("name").str.extract(STEP_PATTERN, 1).cast(pl.Int64).alias("step"),
        pl.col("ts").alias("m_lo"),
        pl.col("end").alias("m_hi"),
    )
    own = mk.filter(pl.col("rank") != NO_RANK)
    shared = mk.filter(pl.col("rank") == NO_RANK).drop("rank")
    if shared.height and ranks:
        own = pl.concat(
            [
                own,
                shared.join(
                    pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int64}), how="cross"
                ).select(own.columns),
            ]
        )
    return (
        own.group_by("rank", "step")
        .agg(pl.col("m_lo").min(), pl.col("m_hi").max())
        .sort("rank", "m_lo")
    )


def step_of(rank: np.ndarray, t: np.ndarray, markers: pl.DataFrame) -> pl.Series:
    """Step whose marker span contains each (rank, t); null when none does.

    Markers are few: one binary search per point over (rank, start) keys, no sort of points.
    The latest-starting marker at or before t wins; t must lie before its end (or at its
    start, for an instant marker).
    """
    n = len(t)
    if markers.height == 0 or n == 0:
        return pl.Series("step", [None] * n, dtype=pl.Int64)
    m_rank = markers["rank"].to_numpy().astype(np.int64)
    m_lo = markers["m_lo"].to_numpy().astype(np.int64)
    m_hi = markers["m_hi"].to_numpy().astype(np.int64)
    m_step = markers["step"].to_numpy().astype(np.int64)
    mkey, qkey = iv.pack_pairs((m_rank, m_lo), (rank, t))
    order = np.argsort(mkey, kind="stable")
    pos = np.searchsorted(mkey[order], qkey, side="right") - 1
    hit = pos >= 0
    m = order[np.clip(pos, 0, None)]
    hit &= m_rank[m] == rank
    hit &= (t < m_hi[m]) | (t == m_lo[m])
    frame = pl.DataFrame({"s": np.where(hit, m_step[m], 0), "h": hit})
    return frame.select(pl.when("h").then("s").alias("step")).to_series()


def _first_window(
    windows: pl.DataFrame, rank: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """gid of the first window of each event's rank that the event overlaps (an instant: that
    holds its time), -1 for none. The windows of a rank are disjoint and sorted by (rank, lo),
    so their ends are sorted too: one binary search per event."""
    out = np.full(len(ts), -1, dtype=np.int64)
    if windows.height == 0 or len(ts) == 0:
        return out
    w_rank = windows["rank"].to_numpy().astype(np.int64)
    w_lo = windows["lo"].to_numpy().astype(np.int64)
    w_hi = windows["hi"].to_numpy().astype(np.int64)
    hi_key, ts_key = iv.pack_pairs((w_rank, w_hi), (rank, ts))
    g = np.searchsorted(hi_key, ts_key, side="right")  # first window with hi > ts
    gc = np.clip(g, 0, len(w_hi) - 1)
    hit = (g < len(w_hi)) & (w_rank[gc] == rank)
    hit &= (end > w_lo[gc]) | ((end == ts) & (ts >= w_lo[gc]))
    out[hit] = gc[hit]
    return out


def spread(
    prep: Prepared, gid: np.ndarray, ts: np.ndarray, end: np.ndarray, *extra: np.ndarray
) -> tuple[np.ndarray, ...]:
    """(gid, ts, end, *extra) with one more row for every later window of the same rank an
    event also overlaps (work that runs past a step boundary counts in each window it runs
    in; the caller clips to the window). Few events cross a boundary: one pass per extra
    window crossed."""
    lo, _ = prep.lo_hi()
    w_rank = prep.windows["rank"].to_numpy().astype(np.int64)
    parts = [(gid, ts, end, *extra)]
    cur = np.asarray(gid, dtype=np.int64)
    idx = np.arange(len(cur))
    n = len(lo)
    for _ in range(n):
        nxt = cur + 1
        ok = (nxt < n) & (cur >= 0)
        nc = np.clip(nxt, 0, max(n - 1, 0))
        ok &= (w_rank[nc] == w_rank[np.clip(cur, 0, max(n - 1, 0))]) & (lo[nc] < end[idx])
        if not ok.any():
            break
        idx, cur = idx[ok], nxt[ok]
        parts.append((cur, ts[idx], end[idx], *(x[idx] for x in extra)))
    return tuple(np.concatenate(cols) for cols in zip(*parts, strict=True))


def with_windows(base: Prepared, time_range: tuple[int, int] | None) -> Prepared:
    """Clip the windows to `time_range` ([t0, t1) ns), number them (gid, in (rank, start)
    order) and tag each event with the first window it overlaps in time (its rank's windows
    are disjoint); events outside every window get none."""
    windows = base.windows
    ev = base.ev
    if time_range is not None:
        t0, t1 = int(time_range[0]), int(time_range[1])
        windows = windows.with_columns(
            pl.max_horizontal("lo", pl.lit(t0)).alias("lo"),
            pl.min_horizontal("hi", pl.lit(t1)).alias("hi"),
        )
    windows = (
        windows.filter(pl.col("hi") > pl.col("lo"))
        .sort("rank", "lo", "step", nulls_last=False)
        .with_row_index("gid")
        .with_columns(pl.col("gid").cast(pl.Int64))
    )
    ev = ev.with_columns(
        pl.Series(
            "gid",
            _first_window(
                windows,
                ev["rank"].to_numpy().astype(np.int64),
                ev["ts"].to_numpy().astype(np.int64),
                ev["end"].to_numpy().astype(np.int64),
            ),
            dtype=pl.Int64,
        )
    ).with_columns(pl.col("gid").replace(-1, None))
    warnings = list(base.warnings)
    if windows.height == 0 and base.windows.height:
        warnings.append(
            "the time range holds no device work"
            if time_range is not None
            else "device work spans no time (every window is empty)"
        )
    elif (
        windows.height == 0
        and ev.filter(pl.col("device") & pl.col("kind").is_in(["compute", "comm"])).height
    ):
        warnings.append("device work spans no time (every window is empty)")
    return Prepared(ev, windows, base.device_tracks, base.deps, base.cpu_mode, warnings)
