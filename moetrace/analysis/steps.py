"""Prepare a trace for analysis: classify events, assign them to steps, build the windows.

Steps come from step markers (Kineto/Ascend `ProfilerStep#N`, executor `step N`); a device
event belongs to the step of the host call that launched it (a `launch` dependency), else to
the step whose marker span contains its start (device work of step N often runs after the host
has moved on, so clipping device events to host spans would be wrong). A rank without markers
is one step (step null). The window of a (rank, step) is [first start, last end] of its
compute and comm events on device tracks (or all device work, `window_span="work"`); the
windows of a rank are made disjoint (a lagging step ends where the next begins) and every
event counts in the window it runs in; then they are clipped to the requested time range.
`window="trace"` makes one window per rank, `annotation:NAME[#K]` one per annotation
instance. Annotations are marked `marker` here (classify.annotation_expr), overflow lanes
are joined into their queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.classify import (
    CPU_COMM_PATTERN,
    DEFAULT_DEVICE_COMM_PATTERNS,
    DEVICE_UNITS,
    DEVICE_WAIT_PATTERN,
    STEP_PATTERN,
    annotation_expr,
    comm_name_expr,
)
from moetrace.analysis.launch_edges import drop_miscorrelated_launches, kineto_launch_edges
from moetrace.trace.flavors import KINETO, flavor_of
from moetrace.trace.model import Kind, Trace, Unit

LAUNCH_SKEW_NS = 1_000
"""A launch call may start this much after its kernel (clock skew); later ones are ignored."""

NO_RANK = -1
"""Internal stand-in for a null rank (restored to null in the report)."""


@dataclass
class Prepared:
    """A trace ready for the metric passes.

    `ev`: one row per event in row order with idx (0..n-1), id, track, queue (the track that
    stands for its thread/stream, overflow lanes joined), name, cat, kind (annotations are
    `marker`), ts, end, depth, rank, unit (str), device (bool: counts as a device track
    here), work (bool: makes its queue busy), step, gid (window id or null), flops, args.
    `windows`: gid, rank, step, lo, hi (ns). `device_tracks`: track, rank, unit of the
    queues whose busy/idle is reported.
    """

    ev: pl.DataFrame
    windows: pl.DataFrame
    device_tracks: pl.DataFrame
    deps: pl.DataFrame
    cpu_mode: bool
    warnings: list[str] = field(default_factory=list)

    @property
    def n_windows(self) -> int:
        """Number of (rank, step) windows."""
        return self.windows.height

    def lo_hi(self) -> tuple[np.ndarray, np.ndarray]:
        """Window bounds per gid as int64 arrays."""
        return (
            self.windows["lo"].to_numpy().astype(np.int64),
            self.windows["hi"].to_numpy().astype(np.int64),
        )


def _contains_comm(ev: pl.DataFrame) -> pl.Series:
    """True for events whose span on their track contains the start of a comm event."""
    track = ev["queue"].to_numpy().astype(np.int64)
    ts = ev["ts"].to_numpy()
    end = ev["end"].to_numpy()
    is_comm = (ev["kind"] == "comm").to_numpy()
    if not is_comm.any():
        return pl.Series("contains_comm", np.zeros(len(ts), dtype=bool))
    # pack (track, time) with dense time ranks: exact for any ns values
    times = np.unique(np.concatenate([ts, end]))
    width = np.int64(len(times) + 1)
    ck = np.sort(track[is_comm] * width + np.searchsorted(times, ts[is_comm]))
    lo = track * width + np.searchsorted(times, ts)
    hi = track * width + np.searchsorted(times, end)
    n_inside = np.searchsorted(ck, hi, side="left") - np.searchsorted(ck, lo, side="left")
    n_inside = n_inside - (is_comm & (end > ts))  # a comm event contains its own start
    return pl.Series("contains_comm", (n_inside > 0) & (end > ts))


def _queues(tracks: pl.DataFrame) -> pl.DataFrame:
    """track, rank, unit, queue: `queue` is the track that stands for the source's thread or
    stream: readers move slices that overlap without nesting (programmatic dependent launch,
    overlapping copies) to overflow lanes with the same (pid, tid); the analysis joins them
    back, so overlapping work stays on its stream and no track is invented. The queue's own
    unit applies to all its lanes."""
    t = tracks.select(
        pl.col("track").cast(pl.Int64),
        pl.col("rank").cast(pl.Int64).fill_null(NO_RANK),
        pl.col("unit").fill_null("other"),
        "pid",
        "tid",
    )
    keyed = pl.col("pid").is_not_null() & pl.col("tid").is_not_null()
    t = t.with_columns(
        pl.when(keyed)
        .then(pl.col("track").min().over("rank", "pid", "tid"))
        .otherwise(pl.col("track"))
        .alias("queue")
    )
    unit_of_queue = t.filter(pl.col("track") == pl.col("queue")).select(
        "queue", pl.col("unit").alias("q_unit")
    )
    return (
        t.join(unit_of_queue, on="queue", how="left", maintain_order="left")
        .with_columns(pl.coalesce("q_unit", "unit").alias("unit"))
        .select(pl.col("track").cast(pl.UInt32), "rank", "unit", "queue")
    )


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


def _annotation_spans(
    ev: pl.DataFrame, ranks: list[int], name: str | None, instance: int | None
) -> pl.DataFrame:
    """Like `_markers`, for the slices named exactly `name`: instance k (0-based, by start,
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


def _partition(windows: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
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


def _mark_annotations(ev: pl.DataFrame) -> pl.DataFrame:
    """Annotations (classify.annotation_expr) become `marker`: never work, never nodes."""
    return ev.with_columns(
        pl.when(annotation_expr())
        .then(pl.lit("marker", Kind))
        .otherwise(pl.col("kind"))
        .alias("kind")
    )


def _markers(ev: pl.DataFrame, ranks: list[int]) -> pl.DataFrame:
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


def _step_of(rank: np.ndarray, t: np.ndarray, markers: pl.DataFrame) -> pl.Series:
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


def prepare(
    trace: Trace,
    *,
    comm_patterns: Sequence[str] = (),
    time_range: tuple[int, int] | None = None,
    ranks: Sequence[int] | None = None,
) -> Prepared:
    """Classify, assign steps and compute the windows of every (rank, step)."""
    return with_windows(prepare_steps(trace, comm_patterns=comm_patterns, ranks=ranks), time_range)


def prepare_steps(
    trace: Trace,
    *,
    comm_patterns: Sequence[str] = (),
    ranks: Sequence[int] | None = None,
    window: str = "step",
    window_span: str = "compute-comm",
) -> Prepared:
    """The part of `prepare` that does not depend on the time range (cacheable): classify,
    assign steps, full windows. `gid` is not assigned yet. `window` and `window_span`: see
    `parse_window` and `WINDOW_SPANS`."""
    mode, ann_name, ann_instance = parse_window(window)
    if window_span not in WINDOW_SPANS:
        raise ValueError(f"window span {window_span!r}: expected one of {', '.join(WINDOW_SPANS)}")
    warnings: list[str] = []
    tracks = _queues(trace.tracks)
    if ranks is not None:
        tracks = tracks.filter(pl.col("rank").is_in(list(ranks)))
    has_device = tracks.filter(pl.col("unit").is_in(DEVICE_UNITS)).height > 0
    cpu_mode = not has_device
    if cpu_mode:
        warnings.append("no device tracks: host threads are the units (CPU-only analysis)")
    device_units = ("cpu",) if cpu_mode else DEVICE_UNITS
    ev = trace.events.select(
        "id",
        "track",
        "name",
        "cat",
        "kind",
        "ts",
        (pl.col("ts") + pl.col("dur")).alias("end"),
        "depth",
        "flops",
        "args",
    )
    # rank and unit of each event's track: a binary search in the small tracks table (a join
    # would copy every name and args string)
    t_ids = tracks["track"].to_numpy().astype(np.int64)
    order = np.argsort(t_ids, kind="stable")
    ev_track = ev["track"].to_numpy().astype(np.int64)
    pos = np.clip(np.searchsorted(t_ids[order], ev_track), 0, max(len(t_ids) - 1, 0))
    found = (t_ids[order][pos] == ev_track) if len(t_ids) else np.zeros(len(ev_track), bool)
    row = pl.Series(order[pos] if len(t_ids) else pos, dtype=pl.Int64)
    ev = ev.with_columns(
        tracks["rank"].gather(row).alias("rank")
        if len(t_ids)
        else pl.lit(NO_RANK, pl.Int64).alias("rank"),
        tracks["unit"].gather(row).alias("unit")
        if len(t_ids)
        else pl.lit("other", Unit).alias("unit"),
        tracks["queue"].gather(row).alias("queue")
        if len(t_ids)
        else pl.col("track").cast(pl.Int64).alias("queue"),
    )
    if not found.all():
        ev = ev.filter(pl.Series(found))
    ev = ev.with_columns(pl.col("unit").is_in(device_units).alias("device"))
    # comm by name: readers set kind, the analyzer widens it with the METRICS.md patterns
    if cpu_mode:
        comm_by_name = comm_name_expr([CPU_COMM_PATTERN, *comm_patterns])
        ev = ev.with_columns(
            pl.when(pl.col("device") & (pl.col("kind") != "marker") & comm_by_name)
            .then(pl.lit("comm", Kind))
            .otherwise(pl.col("kind"))
            .alias("kind")
        )
        ev = _mark_annotations(ev)
        inner = _contains_comm(ev)
        ev = ev.with_columns(
            pl.when(
                pl.col("device")
                & pl.col("kind").is_in(["host", "compute", "other"])
                & ~pl.Series(inner)
                & (pl.col("end") > pl.col("ts"))
            )
            .then(pl.lit("compute", Kind))
            .otherwise(pl.col("kind"))
            .alias("kind")
        )
    else:
        comm_by_name = comm_name_expr([*DEFAULT_DEVICE_COMM_PATTERNS, *comm_patterns])
        ev = ev.with_columns(
            pl.when(pl.col("device") & pl.col("kind").is_in(["compute", "other"]) & comm_by_name)
            .then(pl.lit("comm", Kind))
            .otherwise(pl.col("kind"))
            .alias("kind")
        )
        ev = _mark_annotations(ev)
    # work: what makes a track busy (never an annotation, never a device wait), at any depth
    ev = ev.with_columns(
        (
            pl.col("device")
            & (pl.col("kind") != "marker")
            & (pl.col("end") > pl.col("ts"))
            & ~(
                (pl.col("kind") == "other")
                & (pl.col("unit") != "cpu")
                & pl.col("name").str.contains(DEVICE_WAIT_PATTERN).fill_null(False)
            )
        ).alias("work")
    )
    ev = ev.with_row_index("idx")
    rank_list = sorted(tracks["rank"].unique().to_list())
    if mode == "trace":
        markers = _markers(ev.clear(), rank_list)
    elif mode == "annotation":
        full = window[len("annotation:") :]
        if ann_instance is not None and not (ev["name"] == ann_name).any():
            ann_name, ann_instance = full, None  # '#' is part of the name (ProfilerStep#3)
        markers = _annotation_spans(ev, rank_list, ann_name, ann_instance)
        if markers.height == 0:
            warnings.append(
                f"no annotation named {ann_name!r}"
                + (f" with instance #{ann_instance}" if ann_instance is not None else "")
            )
    else:
        markers = _markers(ev, rank_list)
    # the step of each event: by containment of its start in a marker span ...
    step_by_time = _step_of(
        ev["rank"].to_numpy().astype(np.int64), ev["ts"].to_numpy().astype(np.int64), markers
    )
    ev = ev.with_columns(step_by_time.alias("step"))
    # ... but a device event takes the step of the host call that launched it
    deps = trace.deps.filter(pl.col("src") != pl.col("dst"))
    # a launch call cannot start after the work it launched (a flow bound to the wrong slice)
    if deps.height and (deps["kind"] == "launch").any():
        start = ev.select(pl.col("id"), pl.col("ts"))
        late = (
            deps.with_row_index("_row")
            .filter(pl.col("kind") == "launch")
            .join(start.rename({"id": "src", "ts": "s_ts"}), on="src")
            .join(start.rename({"id": "dst", "ts": "d_ts"}), on="dst")
            .filter(pl.col("s_ts") > pl.col("d_ts") + LAUNCH_SKEW_NS)
        )
        if late.height:
            deps = (
                deps.with_row_index("_row")
                .filter(~pl.col("_row").is_in(late["_row"].implode()))
                .drop("_row")
            )
            warnings.append(
                f"{late.height} launch edge(s) start after the work they launch: ignored"
            )
    if flavor_of(trace) is KINETO:
        deps, miscorrelated = drop_miscorrelated_launches(ev, deps)
        if miscorrelated:
            warnings.append(
                f"{miscorrelated} launch flow(s) bound to a device event of another correlation "
                "id (an overlapping kernel's flow ends on its neighbour): relinked by correlation"
            )
        extra = kineto_launch_edges(ev, deps)
        if extra is not None:
            deps = pl.concat([deps, extra.cast(deps.schema)])
    launch = deps.filter(pl.col("kind") == "launch").select("src", "dst")
    if launch.height and markers.height:
        src_step = ev.select(pl.col("id").alias("src"), pl.col("step").alias("launch_step"))
        by_launch = (
            launch.join(src_step, on="src", how="inner")
            .drop_nulls("launch_step")
            .group_by("dst")
            .agg(pl.col("launch_step").min())
        )
        ev = (
            ev.join(by_launch, left_on="id", right_on="dst", how="left", maintain_order="left")
            .with_columns(
                pl.when(pl.col("device") & pl.col("launch_step").is_not_null())
                .then(pl.col("launch_step"))
                .otherwise(pl.col("step"))
                .alias("step")
            )
            .drop("launch_step")
        )
    has_markers = set(markers["rank"].unique().to_list()) if markers.height else set()
    if mode == "annotation":  # only the annotated spans are windows
        has_markers = set(rank_list)
    work = pl.col("device") & pl.col("kind").is_in(["compute", "comm"])
    spans = pl.col("work") if window_span == "work" else work
    windows = (
        ev.filter(spans & (pl.col("step").is_not_null() | ~pl.col("rank").is_in(list(has_markers))))
        .group_by("rank", "step")
        .agg(pl.col("ts").min().alias("lo"), pl.col("end").max().alias("hi"))
    )
    windows, clipped, clipped_ns = _partition(windows)
    if clipped:
        warnings.append(
            f"{clipped} step window(s) ran past the start of the next step's device work "
            f"(device lagging the host, {clipped_ns / 1e6:.3f} ms in all): each ends where "
            "the next begins, and work is counted in the window it runs in"
        )
    outside = ev.filter(work & pl.col("step").is_null() & pl.col("rank").is_in(list(has_markers)))
    if outside.height and mode == "step":
        warnings.append(
            f"{outside.height} device work events fall outside every step marker (not counted)"
        )
    if ev.filter(work).height == 0:
        warnings.append("no compute or communication events on device tracks")
    elif ev.filter(pl.col("device") & (pl.col("kind") == "comm")).height == 0:
        warnings.append("no communication events: comm, overlap and exposed ratios are empty")
    # the analysis reports queues (a thread or stream), never the viewer's overflow lanes
    device_tracks = tracks.filter(
        pl.col("unit").is_in(device_units) & (pl.col("track") == pl.col("queue"))
    ).select("track", "rank", "unit")
    return Prepared(ev, windows, device_tracks, deps, cpu_mode, warnings)


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
