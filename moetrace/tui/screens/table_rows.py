"""The rows of every viewer table (`table_registry.TABLES` names the builder of each).

Each builder takes (trace, report, origin ns) and gives the column titles and (target,
cells) rows, formatting only: the numbers are the analyzer's frames, the ones the CLI prints
(`metrics`, `moe`). A row's target is what Enter goes to (an event, a step's window, the next
of several events).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.text import Text

from moetrace.analysis.names import events_by_name, path_by_name
from moetrace.text import human_bytes
from moetrace.trace.model import Trace

from ..format import fmt_ns, fmt_pct
from ..lanes import safe_text
from ..table_targets import Rows, Target, Window

if TYPE_CHECKING:
    from moetrace.analysis.report import Report

MAX_ROWS = 50_000  # DataTable draws only the visible rows; the title says when rows were cut
Table = tuple[list[str], Rows, int]
"""Column titles, (target, cells) rows (at most MAX_ROWS) and how many rows there are."""


def _names(trace: Trace) -> pl.DataFrame:
    return trace.events.select(pl.col("id").alias("event_id"), "name")


def _rel(ns: Any, origin: int) -> Text:
    return Text(fmt_ns(None if ns is None else int(ns) - origin), justify="right")


def _pct(ratio: Any) -> Text:
    return Text(fmt_pct(ratio), justify="right")


def _frame(report: Report | None, attr: str) -> pl.DataFrame:
    data = getattr(report, attr, None)
    return data if isinstance(data, pl.DataFrame) else pl.DataFrame()


def _lane_labels(trace: Trace) -> pl.DataFrame:
    return trace.tracks.select("track", pl.coalesce("thread_name", "tid").alias("lane"))


Cell = Callable[[dict[str, Any]], Text]
"""One column's cell of a row (the frame's row as a dict)."""


def text(col: str, blank: str | None = None) -> Cell:
    """The column as plain text (names are data: never markup); `blank` for a null."""
    return lambda r: Text(
        safe_text(blank if r.get(col) is None and blank is not None else str(r.get(col)))
    )


def count(col: str) -> Cell:
    """A whole number, right-aligned."""
    return lambda r: Text(str(r[col]), justify="right")


def ns(col: str, digits: int = 3) -> Cell:
    """A duration (ns) with its unit, to `digits` significant digits."""
    return lambda r: Text(fmt_ns(r[col], digits), justify="right")


def at(col: str, origin: int) -> Cell:
    """A time (absolute ns) from the trace start."""
    return lambda r: _rel(r[col], origin)


def ratio(col: str) -> Cell:
    """A ratio as a percentage."""
    return lambda r: _pct(r[col])


def _table(
    frame: pl.DataFrame,
    columns: list[tuple[str, Cell]],
    total: int,
    target: Callable[[dict[str, Any]], Target] = lambda r: None,
) -> Table:
    """Titles and (target, cells) rows of `frame` (already sorted and cut)."""
    rows: Rows = [
        (target(r), [cell(r) for _, cell in columns]) for r in frame.iter_rows(named=True)
    ]
    return [title for title, _ in columns], rows, total


def _top(frame: pl.DataFrame, by: list[str], descending: list[bool]) -> pl.DataFrame:
    """`frame` sorted (nulls last) and cut at MAX_ROWS; an empty frame as it is."""
    if frame.height == 0:
        return frame
    return frame.sort(by, descending=descending, nulls_last=True).head(MAX_ROWS)


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


def _to_step(report: Report | None) -> Callable[[dict[str, Any]], Target]:
    windows = _step_windows(report)
    return lambda r: windows.get((r["rank"], r["step"]))


def critical_segments(trace: Trace, report: Report | None, origin: int) -> Table:
    """The critical path's segments in path order (rank, step, seq)."""
    path = _frame(report, "critical_path")
    cp = path.sort([c for c in ("rank", "step", "seq") if c in path.columns])
    cp = cp.head(MAX_ROWS).join(_names(trace), on="event_id", how="left")
    columns = [
        ("#", text("seq")), ("rank", text("rank")), ("segment", text("segment")),
        ("category", text("category", "")), ("start", at("start_ns", origin)),
        ("dur", ns("dur_ns")), ("event", text("name", "")),
    ]  # fmt: skip
    return _table(cp, columns, path.height, lambda r: r["event_id"])


def idle_gaps(trace: Trace, report: Report | None, origin: int) -> Table:
    """The longest idle gaps with their cause and the event after them."""
    gaps = _frame(report, "gaps")
    top = gaps.sort("dur_ns", descending=True).head(MAX_ROWS)
    after = _names(trace).rename({"event_id": "after_id", "name": "after"})
    top = top.join(after, on="after_id", how="left")
    top = top.join(_lane_labels(trace), on="track", how="left")
    top = top.with_columns(pl.coalesce(pl.col("lane"), pl.col("track").cast(pl.String)))
    columns = [
        ("rank", text("rank")), ("lane", text("lane")), ("start", at("start_ns", origin)),
        ("idle", ns("dur_ns")), ("cause", text("cause", "")), ("event after", text("after", "")),
    ]  # fmt: skip
    return _table(
        top,
        columns,
        gaps.height,
        lambda r: r["after_id"] if r["after_id"] is not None else r.get("before_id"),
    )


def comm_events(trace: Trace, report: Report | None, origin: int) -> Table:
    """Communication events, most exposed first."""
    comm = _frame(report, "comm")
    top = comm.sort(["exposed_ns", "dur_ns"], descending=True).head(MAX_ROWS)
    top = top.join(_names(trace), on="event_id", how="left")
    columns = [
        ("rank", text("rank")), ("collective", text("collective", "")),
        ("start", at("ts_ns", origin)), ("dur", ns("dur_ns")), ("exposed", ns("exposed_ns")),
        ("event", text("name", "")),
    ]  # fmt: skip
    return _table(top, columns, comm.height, lambda r: r["event_id"])


def idle_per_track(trace: Trace, report: Report | None, origin: int) -> Table:
    """Busy, idle and utilisation of every lane per rank·step, the rank's idle beside it."""
    tracks = _frame(report, "tracks")
    top = tracks.sort(["idle_ns", "rank", "track"], descending=[True, False, False])
    top = top.head(MAX_ROWS).join(_lane_labels(trace), on="track", how="left")
    top = top.with_columns(pl.coalesce(pl.col("lane"), pl.col("track").cast(pl.String)))
    ranks = _frame(report, "ranks").select("rank", "step", pl.col("idle_ns").alias("rank_idle"))
    top = top.join(ranks, on=["rank", "step"], how="left", nulls_equal=True)
    columns = [
        ("rank", text("rank")), ("step", text("step")), ("lane", text("lane")),
        ("unit", text("unit")), ("busy", ns("busy_ns")), ("idle", ns("idle_ns")),
        ("util", ratio("util")), ("rank idle", ns("rank_idle")),
    ]  # fmt: skip
    return _table(top, columns, tracks.height)


def events_by_name_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Events by name (the short form of C++ names, labels.short_name_expr): count, total,
    mean and max duration; Enter goes to the longest."""
    by_name = events_by_name(trace)
    top = by_name.head(MAX_ROWS).with_columns(pl.coalesce("short_name", "name").alias("label"))
    columns = [
        ("name", text("label")), ("count", count("count")), ("total", ns("total_ns")),
        ("mean", ns("mean_ns")), ("max", ns("max_ns")),
    ]  # fmt: skip
    return _table(top, columns, by_name.height, lambda r: r["longest_id"])


def collectives_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Collectives matched across ranks, most skewed first (no rows for one rank)."""
    frame = _frame(report, "collectives")

    def busbw(r: dict[str, Any]) -> Text:
        gbps = r["busbw_gbps"]
        return Text("-" if gbps is None else f"{gbps:.3g}", justify="right")

    columns = [
        ("group", text("group")), ("seq", text("seq")), ("collective", text("collective")),
        ("step", text("step")),
        ("bytes", lambda r: Text(human_bytes(r["bytes"]), justify="right")),
        ("ranks", lambda r: Text(str(len(r["ranks"] or [])))),
        ("last rank", text("last_rank")), ("skew", ns("skew_ns")),
        ("transfer", ns("transfer_ns")), ("busbw GB/s", busbw),
    ]  # fmt: skip
    return _table(_top(frame, ["skew_ns", "seq"], [True, False]), columns, frame.height)


def stragglers_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Stragglers per rank·step: who made the others wait longest first."""
    frame = _frame(report, "stragglers")
    columns = [
        ("rank", text("rank")), ("step", text("step")), ("caused wait", ns("caused_wait_ns")),
        ("late", count("late_count")), ("waited", ns("wait_ns")),
        ("exposed: wait", ns("exposed_wait_ns")), ("transfer", ns("exposed_transfer_ns")),
    ]  # fmt: skip
    top = _top(frame, ["caused_wait_ns", "rank", "step"], [True, False, False])
    return _table(top, columns, frame.height)


def moe_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """The MoE view (`moe`'s categories, per micro-batch when the trace names them: its
    `micro_batches`): time, exposed time and share per rank, step, layer, micro-batch and
    category (the MoE stage), longest first; Enter zooms to the rank's step."""
    view = getattr(report, "moe_view", None)
    frame = getattr(view, "micro_batches", None)
    if not isinstance(frame, pl.DataFrame) or frame.height == 0:
        frame = _frame(report, "moe").with_columns(pl.lit(None, pl.Int64).alias("micro_batch"))
    columns = [
        ("rank", text("rank")), ("step", text("step")), ("layer", text("layer", "-")),
        ("micro_batch", text("micro_batch", "-")), ("category", text("category")),
        ("time", ns("time_ns")), ("exposed", ns("exposed_ns")), ("share", ratio("share")),
    ]  # fmt: skip
    top = _top(frame, ["time_ns", "rank", "step"], [True, False, False])
    return _table(top, columns, frame.height, _to_step(report))


STEP_COLUMNS = ("window", "compute", "exposed_comm", "free", "idle")
"""The steps table's durations, named as `metrics` names them (window_ns, compute_ns, …)."""
STEP_DIGITS = 4  # 312.7 ms for metrics' 312.729: the slowest of steps ~1% apart stands out


def steps_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """One row per rank·step (`metrics`' rank-step rows): the window (the step's duration),
    compute, exposed comm, free and idle time and the share of comm on the critical path;
    slowest first; Enter zooms to the step's window on that rank."""
    frame = _frame(report, "ranks")
    columns = [
        ("rank", text("rank")), ("step", text("step")), ("start", at("window_start_ns", origin)),
        *((c, ns(f"{c}_ns", STEP_DIGITS)) for c in STEP_COLUMNS),
        ("cp_comm_ratio", ratio("cp_comm_ratio")),
    ]  # fmt: skip
    top = _top(frame, ["window_ns", "rank", "step"], [True, False, False])
    return _table(top, columns, frame.height, _to_step(report))


def path_kernel_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """Critical-path time per kernel short name (analysis.names.path_by_name): time on the
    path, share, count; Enter selects the kernel's next instance on the path."""
    frame = path_by_name(_frame(report, "critical_path"), trace)
    columns = [
        ("kernel", text("short_name")), ("time on path", ns("time_ns")),
        ("share", ratio("share")), ("count", count("count")),
    ]  # fmt: skip
    return _table(
        frame.head(MAX_ROWS),
        columns,
        frame.height,
        lambda r: tuple(int(i) for i in r["event_ids"]) or None,
    )


def expert_rows(trace: Trace, report: Report | None, origin: int) -> Table:
    """The MoE view's time per expert (`moe` experts: from expert annotations' names, else
    an `expert` arg on expert GEMMs) per rank and step, most time first; Enter zooms to the
    rank's step."""
    view = getattr(report, "moe_view", None)
    frame = getattr(view, "experts", None)
    if not isinstance(frame, pl.DataFrame):
        frame = pl.DataFrame()
    columns = [
        ("expert", text("expert")), ("rank", text("rank")), ("step", text("step")),
        ("time", ns("time_ns")), ("events", count("events")),
    ]  # fmt: skip
    top = _top(frame, ["time_ns", "expert", "rank", "step"], [True, False, False, False])
    return _table(top, columns, frame.height, _to_step(report))
