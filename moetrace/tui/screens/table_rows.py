"""The rows of every viewer table (`table_registry.TABLES` names the builder of each).

Each builder takes (trace, report, origin ns) and gives the column titles and (target,
cells) rows, formatting only: the numbers are the analyzer's frames, the ones the CLI prints
(`metrics`, `moe`). A row's target is what Enter goes to (an event, a step's window, the next
of several events).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
from rich.text import Text

from moetrace.analysis.names import events_by_name, path_by_name
from moetrace.text import human_bytes
from moetrace.trace.model import Trace

from ..format import fmt_ns, fmt_pct
from ..lanes import safe_text
from ..table_targets import Rows, Window

if TYPE_CHECKING:
    from moetrace.analysis.report import Report

MAX_ROWS = 50_000  # DataTable draws only the visible rows; the title says when rows were cut
Table = tuple[list[str], Rows, int]
"""Column titles, (target, cells) rows (at most MAX_ROWS) and how many rows there are."""


def _names(trace: Trace) -> pl.DataFrame:
    return trace.events.select(pl.col("id").alias("event_id"), "name")


def _rel(ns: Any, origin: int) -> Text:
    return Text(fmt_ns(None if ns is None else int(ns) - origin), justify="right")


def _dur(ns: Any) -> Text:
    return Text(fmt_ns(ns), justify="right")


def _pct(ratio: Any) -> Text:
    return Text(fmt_pct(ratio), justify="right")


def _frame(report: Report | None, attr: str) -> pl.DataFrame:
    data = getattr(report, attr, None)
    return data if isinstance(data, pl.DataFrame) else pl.DataFrame()


def _lane_labels(trace: Trace) -> pl.DataFrame:
    return trace.tracks.select("track", pl.coalesce("thread_name", "tid").alias("lane"))


def critical_segments(trace: Trace, report: Report | None, origin: int) -> Table:
    """The critical path's segments in path order (rank, step, seq)."""
    path = _frame(report, "critical_path")
    total = path.height
    cp = path.sort([c for c in ("rank", "step", "seq") if c in path.columns])
    cp = cp.head(MAX_ROWS).join(_names(trace), on="event_id", how="left")
    cols = ["#", "rank", "segment", "category", "start", "dur", "event"]
    rows: Rows = []
    for r in cp.iter_rows(named=True):
        cells = [
            Text(str(r["seq"])),
            Text(str(r.get("rank"))),
            Text(str(r["segment"])),
            Text(str(r.get("category") or "")),
            _rel(r["start_ns"], origin),
            _dur(r["dur_ns"]),
            Text(safe_text(r.get("name") or "")),
        ]
        rows.append((r["event_id"], cells))
    return cols, rows, total


def idle_gaps(trace: Trace, report: Report | None, origin: int) -> Table:
    """The longest idle gaps with their cause and the event after them."""
    gaps = _frame(report, "gaps")
    total = gaps.height
    gaps = gaps.sort("dur_ns", descending=True).head(MAX_ROWS)
    after = _names(trace).rename({"event_id": "after_id", "name": "after"})
    gaps = gaps.join(after, on="after_id", how="left")
    gaps = gaps.join(_lane_labels(trace), on="track", how="left")
    cols = ["rank", "lane", "start", "idle", "cause", "event after"]
    rows: Rows = []
    for r in gaps.iter_rows(named=True):
        target = r["after_id"] if r["after_id"] is not None else r.get("before_id")
        cells = [
            Text(str(r["rank"])),
            Text(safe_text(r.get("lane") or r["track"])),
            _rel(r["start_ns"], origin),
            _dur(r["dur_ns"]),
            Text(str(r.get("cause") or "")),
            Text(safe_text(r.get("after") or "")),
        ]
        rows.append((target, cells))
    return cols, rows, total


def comm_events(trace: Trace, report: Report | None, origin: int) -> Table:
    """Communication events, most exposed first."""
    comm = _frame(report, "comm")
    total = comm.height
    comm = comm.sort(["exposed_ns", "dur_ns"], descending=True)
    comm = comm.head(MAX_ROWS).join(_names(trace), on="event_id", how="left")
    cols = ["rank", "collective", "start", "dur", "exposed", "event"]
    rows: Rows = []
    for r in comm.iter_rows(named=True):
        cells = [
            Text(str(r["rank"])),
            Text(safe_text(r.get("collective") or "")),
            _rel(r["ts_ns"], origin),
            _dur(r["dur_ns"]),
            _dur(r["exposed_ns"]),
            Text(safe_text(r.get("name") or "")),
        ]
        rows.append((r["event_id"], cells))
    return cols, rows, total


def idle_per_track(trace: Trace, report: Report | None, origin: int) -> Table:
    """Busy, idle and utilisation of every lane per rank·step, the rank's idle beside it."""
    per_track = _frame(report, "tracks")
    total = per_track.height
    per_track = per_track.sort(["idle_ns", "rank", "track"], descending=[True, False, False])
    per_track = per_track.head(MAX_ROWS).join(_lane_labels(trace), on="track", how="left")
    ranks = _frame(report, "ranks").select("rank", "step", pl.col("idle_ns").alias("rank_idle"))
    per_track = per_track.join(ranks, on=["rank", "step"], how="left", nulls_equal=True)
    cols = ["rank", "step", "lane", "unit", "busy", "idle", "util", "rank idle"]
    rows: Rows = []
    for r in per_track.iter_rows(named=True):
        cells = [
            Text(str(r["rank"])),
            Text(str(r["step"])),
            Text(safe_text(r.get("lane") or r["track"])),
            Text(str(r["unit"])),
            _dur(r["busy_ns"]),
            _dur(r["idle_ns"]),
            _pct(r["util"]),
            _dur(r["rank_idle"]),
        ]
        rows.append((None, cells))
    return cols, rows, total


def events_by_name_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Events by name (the short form of C++ names, labels.short_name_expr): count, total,
    mean and max duration; Enter goes to the longest."""
    by_name = events_by_name(trace)
    total = by_name.height
    by_name = by_name.head(MAX_ROWS)
    cols = ["name", "count", "total", "mean", "max"]
    rows: Rows = []
    for r in by_name.iter_rows(named=True):
        cells = [
            Text(safe_text(r["short_name"] or r["name"])),
            Text(str(r["count"]), justify="right"),
            _dur(r["total_ns"]),
            _dur(r["mean_ns"]),
            _dur(r["max_ns"]),
        ]
        rows.append((r["longest_id"], cells))
    return cols, rows, total


def collectives_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Collectives matched across ranks, most skewed first (no rows for one rank)."""
    frame = _frame(report, "collectives")
    cols = ["group", "seq", "collective", "step", "bytes", "ranks", "last rank"]
    cols += ["skew", "transfer", "busbw GB/s"]
    total = frame.height
    if frame.height:
        frame = frame.sort(["skew_ns", "seq"], descending=[True, False]).head(MAX_ROWS)
    rows: Rows = []
    for r in frame.iter_rows(named=True):
        busbw = "-" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:.3g}"
        cells = [
            Text(safe_text(str(r["group"]))),
            Text(str(r["seq"])),
            Text(safe_text(str(r["collective"]))),
            Text(str(r["step"])),
            Text(human_bytes(r["bytes"]), justify="right"),
            Text(str(len(r["ranks"] or []))),
            Text(str(r["last_rank"])),
            _dur(r["skew_ns"]),
            _dur(r["transfer_ns"]),
            Text(busbw, justify="right"),
        ]
        rows.append((None, cells))
    return cols, rows, total


def stragglers_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Stragglers per rank·step: who made the others wait longest first."""
    frame = _frame(report, "stragglers")
    cols = ["rank", "step", "caused wait", "late", "waited", "exposed: wait", "transfer"]
    total = frame.height
    if frame.height:
        frame = frame.sort(
            ["caused_wait_ns", "rank", "step"], descending=[True, False, False]
        ).head(MAX_ROWS)
    rows: Rows = []
    for r in frame.iter_rows(named=True):
        cells = [
            Text(str(r["rank"])),
            Text(str(r["step"])),
            _dur(r["caused_wait_ns"]),
            Text(str(r["late_count"]), justify="right"),
            _dur(r["wait_ns"]),
            _dur(r["exposed_wait_ns"]),
            _dur(r["exposed_transfer_ns"]),
        ]
        rows.append((None, cells))
    return cols, rows, total


def _step_windows(report: Report | None) -> dict[tuple[Any, Any], Window]:
    """The analyzer's window of each (rank, step), to zoom to."""
    ranks = _frame(report, "ranks")
    if ranks.height == 0:
        return {}
    cols = ranks.select("rank", "step", "window_start_ns", "window_end_ns").drop_nulls()
    return {
        (rank, step): Window(int(a), int(b), f"rank {rank} step {step}")
        for rank, step, a, b in cols.iter_rows()
    }


def moe_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """The MoE view (`moe`'s categories, per micro-batch when the trace names them: its
    `micro_batches`): time, exposed time and share per rank, step, layer, micro-batch and
    category (the MoE stage), longest first; Enter zooms to the rank's step."""
    view = getattr(report, "moe_view", None)
    frame = getattr(view, "micro_batches", None)
    if not isinstance(frame, pl.DataFrame) or frame.height == 0:
        frame = _frame(report, "moe").with_columns(pl.lit(None, pl.Int64).alias("micro_batch"))
    cols = ["rank", "step", "layer", "micro_batch", "category", "time", "exposed", "share"]
    total = frame.height
    if frame.height:
        frame = frame.sort(
            ["time_ns", "rank", "step"], descending=[True, False, False], nulls_last=True
        ).head(MAX_ROWS)
    windows = _step_windows(report)
    rows: Rows = []
    for r in frame.iter_rows(named=True):
        cells = [
            Text(str(r["rank"])),
            Text(str(r["step"])),
            Text("-" if r["layer"] is None else str(r["layer"])),
            Text("-" if r["micro_batch"] is None else str(r["micro_batch"])),
            Text(str(r["category"])),
            _dur(r["time_ns"]),
            _dur(r["exposed_ns"]),
            _pct(r["share"]),
        ]
        rows.append((windows.get((r["rank"], r["step"])), cells))
    return cols, rows, total


STEP_COLUMNS = ("window", "compute", "exposed_comm", "free", "idle", "cp_comm_ratio")
"""The steps table's figures, named as `metrics` names them (window_ns, compute_ns, …)."""


def steps_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """One row per rank·step (`metrics`' rank-step rows): the window (the step's duration),
    compute, exposed comm, free and idle time and the share of comm on the critical path;
    slowest first; Enter zooms to the step's window on that rank."""
    frame = _frame(report, "ranks")
    cols = ["rank", "step", "start", *STEP_COLUMNS]
    total = frame.height
    if frame.height:
        frame = frame.sort(
            ["window_ns", "rank", "step"], descending=[True, False, False], nulls_last=True
        ).head(MAX_ROWS)
    rows: Rows = []
    for r in frame.iter_rows(named=True):
        cells = [
            Text(str(r["rank"])),
            Text(str(r["step"])),
            _rel(r["window_start_ns"], origin),
            *(_dur(r[f"{c}_ns"]) for c in STEP_COLUMNS[:-1]),
            _pct(r["cp_comm_ratio"]),
        ]
        target = Window(
            int(r["window_start_ns"]), int(r["window_end_ns"]), f"rank {r['rank']} step {r['step']}"
        )
        rows.append((target, cells))
    return cols, rows, total


def path_kernel_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Critical-path time per kernel short name (analysis.names.path_by_name): time on the
    path, share, count; Enter selects the kernel's next instance on the path."""
    frame = path_by_name(_frame(report, "critical_path"), trace)
    total = frame.height
    frame = frame.head(MAX_ROWS)
    cols = ["kernel", "time on path", "share", "count"]
    rows: Rows = []
    for r in frame.iter_rows(named=True):
        cells = [
            Text(safe_text(r["short_name"])),
            _dur(r["time_ns"]),
            _pct(r["share"]),
            Text(str(r["count"]), justify="right"),
        ]
        rows.append((tuple(int(i) for i in r["event_ids"]) or None, cells))
    return cols, rows, total


def expert_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """The MoE view's time per expert (`moe` experts: from expert annotations' names, else
    an `expert` arg on expert GEMMs) per rank and step, most time first; Enter zooms to the
    rank's step."""
    view = getattr(report, "moe_view", None)
    frame = getattr(view, "experts", None)
    if not isinstance(frame, pl.DataFrame):
        frame = pl.DataFrame()
    cols = ["expert", "rank", "step", "time", "events"]
    total = frame.height
    if frame.height:
        frame = frame.sort(
            ["time_ns", "expert", "rank", "step"], descending=[True, False, False, False]
        ).head(MAX_ROWS)
    windows = _step_windows(report)
    rows: Rows = []
    for r in frame.iter_rows(named=True):
        cells = [
            Text(str(r["expert"])),
            Text(str(r["rank"])),
            Text(str(r["step"])),
            _dur(r["time_ns"]),
            Text(str(r["events"]), justify="right"),
        ]
        rows.append((windows.get((r["rank"], r["step"])), cells))
    return cols, rows, total
