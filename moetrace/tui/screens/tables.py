"""Table screens: critical-path segments, top idle gaps, comm events, events by name.

Rows come from the analyzer's frames (formatting only); each row is keyed by an event id,
and Enter dismisses the screen with it so the app selects that event on the timeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from moetrace.analysis.names import events_by_name
from moetrace.text import human_bytes
from moetrace.trace.model import Trace

from ..format import fmt_ns, fmt_pct
from ..lanes import LaneModel, safe_text

if TYPE_CHECKING:
    from moetrace.analysis.report import Report

MAX_ROWS = 50_000  # DataTable draws only the visible rows; the title says when rows were cut
TITLES = {
    "critical": "critical path segments (in path order)",
    "gaps": "top idle gaps (longest first)",
    "comm": "communication events (most exposed first)",
    "names": "events by name (total time, longest first)",
    "idle": "idle per rank and core (per rank·step; most idle first)",
    "collectives": "collectives matched across ranks (most skewed first; aligned clocks)",
    "stragglers": "stragglers per rank·step (who made the others wait longest first)",
    "moe": "MoE view: time per rank·step·category (longest first)",
}
# table -> the Report frame it lists (for the row count in the title)
FRAMES = {
    "critical": "critical_path",
    "gaps": "gaps",
    "comm": "comm",
    "idle": "tracks",
    "collectives": "collectives",
    "stragglers": "stragglers",
    "moe": "moe",
}


def _names(trace: Trace) -> pl.DataFrame:
    return trace.events.select(pl.col("id").alias("event_id"), "name")


def _rel(ns: Any, origin: int) -> Text:
    return Text(fmt_ns(None if ns is None else int(ns) - origin), justify="right")


def _dur(ns: Any) -> Text:
    return Text(fmt_ns(ns), justify="right")


def table_rows(
    name: str, trace: Trace, report: Report | None, origin: int
) -> tuple[list[str], list[tuple[int | None, list[Text]]]]:
    """Column titles and (event id, cells) rows of one table (all but `names` need the
    report)."""
    if name == "names":
        return _names_table(trace)
    if report is None:
        raise ValueError(f"the {name} table needs the analysis report")
    names = _names(trace)
    rows: list[tuple[int | None, list[Text]]] = []
    if name == "critical":
        cp = report.critical_path.sort(
            [c for c in ("rank", "step", "seq") if c in report.critical_path.columns]
        )
        cp = cp.head(MAX_ROWS).join(names, on="event_id", how="left")
        cols = ["#", "rank", "segment", "category", "start", "dur", "event"]
        for r in cp.iter_rows(named=True):
            rows.append(
                (
                    r["event_id"],
                    [
                        Text(str(r["seq"])),
                        Text(str(r.get("rank"))),
                        Text(str(r["segment"])),
                        Text(str(r.get("category") or "")),
                        _rel(r["start_ns"], origin),
                        _dur(r["dur_ns"]),
                        Text(safe_text(r.get("name") or "")),
                    ],
                )
            )
        return cols, rows
    if name == "gaps":
        gaps = report.gaps.sort("dur_ns", descending=True).head(MAX_ROWS)
        gaps = gaps.join(
            names.rename({"event_id": "after_id", "name": "after"}), on="after_id", how="left"
        )
        labels = trace.tracks.select("track", pl.coalesce("thread_name", "tid").alias("lane"))
        gaps = gaps.join(labels, on="track", how="left")
        cols = ["rank", "lane", "start", "idle", "cause", "event after"]
        for r in gaps.iter_rows(named=True):
            target = r["after_id"] if r["after_id"] is not None else r.get("before_id")
            rows.append(
                (
                    target,
                    [
                        Text(str(r["rank"])),
                        Text(safe_text(r.get("lane") or r["track"])),
                        _rel(r["start_ns"], origin),
                        _dur(r["dur_ns"]),
                        Text(str(r.get("cause") or "")),
                        Text(safe_text(r.get("after") or "")),
                    ],
                )
            )
        return cols, rows
    if name == "comm":
        comm = report.comm.sort(["exposed_ns", "dur_ns"], descending=True).head(MAX_ROWS)
        comm = comm.join(names, on="event_id", how="left")
        cols = ["rank", "collective", "start", "dur", "exposed", "event"]
        for r in comm.iter_rows(named=True):
            rows.append(
                (
                    r["event_id"],
                    [
                        Text(str(r["rank"])),
                        Text(safe_text(r.get("collective") or "")),
                        _rel(r["ts_ns"], origin),
                        _dur(r["dur_ns"]),
                        _dur(r["exposed_ns"]),
                        Text(safe_text(r.get("name") or "")),
                    ],
                )
            )
        return cols, rows
    if name == "idle":
        per_track = report.tracks.sort(
            ["idle_ns", "rank", "track"], descending=[True, False, False]
        )
        labels = trace.tracks.select("track", pl.coalesce("thread_name", "tid").alias("lane"))
        per_track = per_track.head(MAX_ROWS).join(labels, on="track", how="left")
        free = report.ranks.select("rank", "step", pl.col("free_ns").alias("rank_free"))
        per_track = per_track.join(free, on=["rank", "step"], how="left", nulls_equal=True)
        cols = ["rank", "step", "lane", "unit", "busy", "idle", "util", "rank free"]
        for r in per_track.iter_rows(named=True):
            rows.append(
                (
                    None,
                    [
                        Text(str(r["rank"])),
                        Text(str(r["step"])),
                        Text(safe_text(r.get("lane") or r["track"])),
                        Text(str(r["unit"])),
                        _dur(r["busy_ns"]),
                        _dur(r["idle_ns"]),
                        Text(fmt_pct(r["util"]), justify="right"),
                        _dur(r["rank_free"]),
                    ],
                )
            )
        return cols, rows
    return _job_table(name, report)


def _names_table(trace: Trace) -> tuple[list[str], list[tuple[int | None, list[Text]]]]:
    """Events by name (the short form of C++ names, labels.short_name_expr): count, total,
    mean and max duration."""
    rows: list[tuple[int | None, list[Text]]] = []
    by_name = events_by_name(trace).head(MAX_ROWS)
    cols = ["name", "count", "total", "mean", "max"]
    for r in by_name.iter_rows(named=True):
        rows.append(
            (
                r["longest_id"],
                [
                    Text(safe_text(r["short_name"] or r["name"])),
                    Text(str(r["count"]), justify="right"),
                    _dur(r["total_ns"]),
                    _dur(r["mean_ns"]),
                    _dur(r["max_ns"]),
                ],
            )
        )
    return cols, rows


def _frame(report: Report, attr: str) -> pl.DataFrame:
    data = getattr(report, attr, None)
    return data if isinstance(data, pl.DataFrame) else pl.DataFrame()


def _job_table(name: str, report: Report) -> tuple[list[str], list[tuple[int | None, list[Text]]]]:
    """The job tables (several ranks): collectives, stragglers and the MoE view. Rows have no
    single event to jump to; an empty frame gives no rows (one rank, or no collectives)."""
    rows: list[tuple[int | None, list[Text]]] = []
    if name == "collectives":
        frame = _frame(report, "collectives")
        cols = ["group", "seq", "collective", "step", "bytes", "ranks", "last rank"]
        cols += ["skew", "transfer", "busbw GB/s"]
        if frame.height:
            frame = frame.sort(["skew_ns", "seq"], descending=[True, False]).head(MAX_ROWS)
        for r in frame.iter_rows(named=True):
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
                Text("-" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:.3g}", justify="right"),
            ]
            rows.append((None, cells))
        return cols, rows
    if name == "stragglers":
        frame = _frame(report, "stragglers")
        cols = ["rank", "step", "caused wait", "late", "waited", "exposed: wait", "transfer"]
        if frame.height:
            frame = frame.sort(
                ["caused_wait_ns", "rank", "step"], descending=[True, False, False]
            ).head(MAX_ROWS)
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
        return cols, rows
    frame = _frame(report, "moe")
    cols = ["rank", "step", "layer", "category", "time", "exposed", "share"]
    if frame.height:
        frame = frame.sort(
            ["time_ns", "rank", "step"], descending=[True, False, False], nulls_last=True
        ).head(MAX_ROWS)
    for r in frame.iter_rows(named=True):
        cells = [
            Text(str(r["rank"])),
            Text(str(r["step"])),
            Text(safe_text(str(r["layer"] if r["layer"] is not None else "-"))),
            Text(str(r["category"])),
            _dur(r["time_ns"]),
            _dur(r["exposed_ns"]),
            Text(fmt_pct(r["share"]), justify="right"),
        ]
        rows.append((None, cells))
    return cols, rows


def sort_value(cell: Text) -> tuple[int, float, str]:
    """Sort key of a cell: numbers and durations ('1.5 ms') by value, then text."""
    from ..format import parse_time

    text = cell.plain.strip().rstrip("%")
    value = parse_time(text)
    if value is None:
        return (1, 0.0, text.lower())
    return (0, value, "")


class TableScreen(Screen[int | None]):
    """One table; Enter jumps to the row's event, Escape/q goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "back", "Back", id="table.back"),
        Binding("enter", "jump", "Jump to event", id="table.jump"),
    ]

    def __init__(
        self, name: str, trace: Trace, report: Report | None, model: LaneModel | None
    ) -> None:
        super().__init__()
        self.table_name = name
        self.trace, self.report = trace, report
        self.origin = model.origin if model is not None else 0
        self.row_events: list[int | None] = []
        self.rows: list[tuple[int | None, list[Text]]] = []
        self.sorted_by: tuple[int, bool] | None = None  # (column, descending)

    def compose(self) -> ComposeResult:
        yield Static(Text(TITLES[self.table_name], style="bold"), id="table-title")
        yield DataTable(id="table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        try:
            cols, rows = table_rows(self.table_name, self.trace, self.report, self.origin)
        except (AttributeError, pl.exceptions.PolarsError) as exc:
            self.query_one("#table-title", Static).update(
                Text(f"table unavailable: {exc}", style="red")
            )
            return
        table.add_columns(*cols)
        self.rows = rows
        self._fill(rows)
        total = self._total_rows()
        shown = f"{len(rows)} rows" if total <= len(rows) else f"first {len(rows)} of {total} rows"
        title = f"{TITLES[self.table_name]} · {shown} · click a column to sort · Enter jumps"
        self.query_one("#table-title", Static).update(Text(title, style="bold"))
        table.focus()

    def _total_rows(self) -> int:
        """Rows the table would have without the MAX_ROWS cut."""
        frame = FRAMES.get(self.table_name)
        if frame is None:
            return int(self.trace.events["name"].n_unique()) if self.trace.events.height else 0
        data = getattr(self.report, frame, None)
        return data.height if isinstance(data, pl.DataFrame) else 0

    def _fill(self, rows: list[tuple[int | None, list[Text]]]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.row_events = []
        for event_id, cells in rows:
            table.add_row(*cells)
            self.row_events.append(event_id)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """Sort by the clicked column (numbers and durations by value); again: reversed."""
        event.stop()
        column = event.column_index
        descending = self.sorted_by == (column, False)
        self.sorted_by = (column, descending)
        self._fill(
            sorted(self.rows, key=lambda row: sort_value(row[1][column]), reverse=descending)
        )

    def action_back(self) -> None:
        self.dismiss(None)

    def action_jump(self) -> None:
        table = self.query_one(DataTable)
        if self.row_events and 0 <= table.cursor_row < len(self.row_events):
            self.dismiss(self.row_events[table.cursor_row])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_jump()
