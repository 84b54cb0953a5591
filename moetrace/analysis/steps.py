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

import numpy as np
import polars as pl

from moetrace.analysis.classify import (
    CPU_COMM_PATTERN,
    DEVICE_UNITS,
    DEVICE_WAIT_PATTERN,
    annotation_expr,
    comm_name_expr,
)
from moetrace.analysis.labels import (
    join_labels,
    labelled_collective_expr,
    role_expr,
    rule_kind_expr,
)
from moetrace.analysis.launch_edges import drop_miscorrelated_launches, kineto_launch_edges
from moetrace.analysis.moe_rules import Rules, default_rules
from moetrace.analysis.prepared import NO_RANK, Prepared
from moetrace.analysis.windows import (
    WINDOW_SPANS,
    annotation_spans,
    parse_window,
    partition_windows,
    step_markers,
    step_of,
    with_windows,
)
from moetrace.trace.flavors import KINETO, flavor_of
from moetrace.trace.model import Kind, Trace, Unit

__all__ = ["LAUNCH_SKEW_NS", "NO_RANK", "Prepared", "prepare", "prepare_steps", "with_windows"]
"""NO_RANK, Prepared (prepared.py) and with_windows (windows.py) are re-exported: callers
that prepare a trace get what they need from here."""

LAUNCH_SKEW_NS = 1_000
"""A launch call may start this much after its kernel (clock skew); later ones are ignored."""


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


def _mark_annotations(ev: pl.DataFrame) -> pl.DataFrame:
    """Annotations (classify.annotation_expr) become `marker`: never work, never nodes."""
    return ev.with_columns(
        pl.when(annotation_expr())
        .then(pl.lit("marker", Kind))
        .otherwise(pl.col("kind"))
        .alias("kind")
    )


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
    rules: Rules | None = None,
) -> Prepared:
    """The part of `prepare` that does not depend on the time range (cacheable): classify,
    assign steps, full windows. `gid` is not assigned yet. `window` and `window_span`: see
    `parse_window` and `WINDOW_SPANS`; `rules`: the name rules (default: the packaged ones)."""
    mode, ann_name, ann_instance = parse_window(window)
    if window_span not in WINDOW_SPANS:
        raise ValueError(f"window span {window_span!r}: expected one of {', '.join(WINDOW_SPANS)}")
    warnings: list[str] = []
    tracks = _queues(trace.tracks)
    if ranks is not None:
        tracks = tracks.filter(pl.col("rank").is_in(list(ranks)))
    cpu_mode = tracks.filter(pl.col("unit").is_in(DEVICE_UNITS)).height == 0
    if cpu_mode:
        warnings.append("no device tracks: host threads are the units (CPU-only analysis)")
    device_units = ("cpu",) if cpu_mode else DEVICE_UNITS
    ev = _classify(_with_tracks(trace.events, tracks, device_units), cpu_mode, comm_patterns, rules)
    rank_list = sorted(tracks["rank"].unique().to_list())
    if mode == "trace":
        markers = step_markers(ev.clear(), rank_list)
    elif mode == "annotation":
        full = window[len("annotation:") :]
        if ann_instance is not None and not (ev["name"] == ann_name).any():
            ann_name, ann_instance = full, None  # '#' is part of the name (ProfilerStep#3)
        markers = annotation_spans(ev, rank_list, ann_name, ann_instance)
        if markers.height == 0:
            warnings.append(
                f"no annotation named {ann_name!r}"
                + (f" with instance #{ann_instance}" if ann_instance is not None else "")
            )
    else:
        markers = step_markers(ev, rank_list)
    # the step of each event: by containment of its start in a marker span ...
    step_by_time = step_of(
        ev["rank"].to_numpy().astype(np.int64), ev["ts"].to_numpy().astype(np.int64), markers
    )
    ev = ev.with_columns(step_by_time.alias("step"))
    # ... but a device event takes the step of the host call that launched it
    deps = _launch_deps(trace, ev, warnings)
    if markers.height:
        ev = _step_of_launch(ev, deps)
    has_markers = set(markers["rank"].unique().to_list()) if markers.height else set()
    if mode == "annotation":  # only the annotated spans are windows
        has_markers = set(rank_list)
    windows = _step_windows(ev, has_markers, window_span, mode, warnings)
    # the analysis reports queues (a thread or stream), never the viewer's overflow lanes
    device_tracks = tracks.filter(
        pl.col("unit").is_in(device_units) & (pl.col("track") == pl.col("queue"))
    ).select("track", "rank", "unit")
    return Prepared(ev, windows, device_tracks, deps, cpu_mode, warnings)


def _with_tracks(
    events: pl.DataFrame, tracks: pl.DataFrame, device_units: Sequence[str]
) -> pl.DataFrame:
    """The analysed columns of `events` (end = ts + dur, ns) with the rank, unit and queue of
    each event's track and `device` (its unit is analysed); events of other tracks go."""
    ev = events.select(
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
    return ev.with_columns(pl.col("unit").is_in(device_units).alias("device"))


def _classify(
    ev: pl.DataFrame, cpu_mode: bool, comm_patterns: Sequence[str], rules: Rules | None = None
) -> pl.DataFrame:
    """Kinds as the analysis sees them (the name rules' roles first, comm widened by the
    default patterns, annotations `marker`, CPU-only traces: host spans that contain no comm
    are compute), `work` (what makes a track busy: never an annotation, never a device wait,
    at any depth) and the labels.py columns (role, rule_stage, comm_family, collective,
    short_name, rule); `idx` numbers the rows."""
    ev = join_labels(ev, rules if rules is not None else default_rules())
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
        ev = ev.with_columns(
            rule_kind_expr(pl.col("device"), comm_patterns).cast(Kind).alias("kind")
        )
        ev = _mark_annotations(ev)
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
    ev = ev.with_columns(
        role_expr(DEVICE_WAIT_PATTERN).alias("role"),
        labelled_collective_expr().alias("collective"),
    ).drop("rule_role", "rule_collective")
    return ev.with_row_index("idx")


def _launch_deps(trace: Trace, ev: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """The trace's dependencies without self edges and launch edges whose call starts after
    the work it launched (a flow bound to the wrong slice); Kineto: miscorrelated launch
    flows relinked by correlation id, missing launch edges added."""
    deps = trace.deps.filter(pl.col("src") != pl.col("dst"))
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
    return deps


def _step_of_launch(ev: pl.DataFrame, deps: pl.DataFrame) -> pl.DataFrame:
    """A device event launched by a host call takes that call's step (the earliest, when
    several launch it)."""
    launch = deps.filter(pl.col("kind") == "launch").select("src", "dst")
    if not launch.height:
        return ev
    src_step = ev.select(pl.col("id").alias("src"), pl.col("step").alias("launch_step"))
    by_launch = (
        launch.join(src_step, on="src", how="inner")
        .drop_nulls("launch_step")
        .group_by("dst")
        .agg(pl.col("launch_step").min())
    )
    return (
        ev.join(by_launch, left_on="id", right_on="dst", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("device") & pl.col("launch_step").is_not_null())
            .then(pl.col("launch_step"))
            .otherwise(pl.col("step"))
            .alias("step")
        )
        .drop("launch_step")
    )


def _step_windows(
    ev: pl.DataFrame, has_markers: set[int], window_span: str, mode: str, warnings: list[str]
) -> pl.DataFrame:
    """The disjoint window [lo, hi) ns of every (rank, step) from its device work (ranks
    without markers: one window, step null), with warnings for what falls outside."""
    work = pl.col("device") & pl.col("kind").is_in(["compute", "comm"])
    spans = pl.col("work") if window_span == "work" else work
    windows = (
        ev.filter(spans & (pl.col("step").is_not_null() | ~pl.col("rank").is_in(list(has_markers))))
        .group_by("rank", "step")
        .agg(pl.col("ts").min().alias("lo"), pl.col("end").max().alias("hi"))
    )
    windows, clipped, clipped_ns = partition_windows(windows)
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
    return windows
