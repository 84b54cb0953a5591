"""The table screen: one of the registry's tables (`table_registry.TABLES`).

Rows come from the analyzer's frames (`table_rows`, formatting only); each row has a target,
and Enter dismisses the screen with it (an event id or a window) so the app shows it on the
timeline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import polars as pl
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from moetrace.trace.model import Trace

from ..lanes import LaneModel
from ..table_registry import BY_NAME
from ..table_targets import Rows, Target, Window

if TYPE_CHECKING:
    from moetrace.analysis.report import Report

THREAD_EVENTS = 100_000  # above this many events a table's rows are built in a thread


def sort_value(cell: Text) -> tuple[int, float, str]:
    """Sort key of a cell: numbers and durations ('1.5 ms') by value, then text."""
    from ..format import parse_time

    text = cell.plain.strip().rstrip("%")
    value = parse_time(text)
    if value is None:
        return (1, 0.0, text.lower())
    return (0, value, "")


class TableScreen(Screen[int | Window | None]):
    """One table of the registry; Enter goes to the row's target (an event, a step's window,
    the next instance after the selected event), Escape/q goes back."""

    # The title (its row count) stays on screen: the table scrolls, not the screen.
    DEFAULT_CSS = """
    TableScreen { overflow: hidden hidden; }
    TableScreen #table-title { height: auto; }
    TableScreen DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "back", "Back", id="table.back"),
        Binding("enter", "jump", "Jump to event", id="table.jump"),
    ]

    def __init__(
        self,
        name: str,
        trace: Trace,
        report: Report | None,
        model: LaneModel | None,
        selected: int | None = None,
    ) -> None:
        super().__init__()
        self.spec = BY_NAME[name]
        self.table_name = name
        self.trace, self.report = trace, report
        self.origin = model.origin if model is not None else 0
        self.selected = selected  # the timeline's selected event (for "next instance")
        self.row_targets: list[Target] = []
        self.rows: Rows = []
        self.sorted_by: tuple[int, bool] | None = None  # (column, descending)
        self.note = ""  # what the last jump went to, for the status line

    def compose(self) -> ComposeResult:
        yield Static(Text(self.spec.title, style="bold"), id="table-title")
        yield DataTable(id="table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        """Build the rows: at once for small traces, in a thread above THREAD_EVENTS events
        (the MoE view of a big trace takes seconds; keys keep working meanwhile)."""
        if self.trace.events.height < THREAD_EVENTS:
            self._show(self._build())
            return
        self.query_one("#table-title", Static).update(Text(f"{self.spec.title} · building…"))
        self.run_worker(self._build_in_thread, thread=True, exclusive=True)

    def _build(self) -> tuple[list[str], Rows, int] | str:
        """The spec's columns, rows and row count, or why the table is unavailable."""
        try:
            return self.spec.build(self.trace, self.report, self.origin)
        except (AttributeError, ValueError, pl.exceptions.PolarsError) as exc:
            return f"table unavailable: {exc}"

    def _build_in_thread(self) -> None:
        built = self._build()
        self.app.call_from_thread(self._show, built)

    def _show(self, built: tuple[list[str], Rows, int] | str) -> None:
        """Fill the table and say how many rows it has (or why it has none)."""
        if not self.is_attached:  # closed while its rows were being built
            return
        title_widget = self.query_one("#table-title", Static)
        if isinstance(built, str):
            title_widget.update(Text(built, style="red"))
            return
        cols, rows, total = built
        table = self.query_one(DataTable)
        table.add_columns(*cols)
        self.rows = rows
        self._fill(rows)
        shown = f"{len(rows)} rows" if total <= len(rows) else f"first {len(rows)} of {total} rows"
        title = f"{self.spec.title} · {shown} · click a column to sort · Enter jumps"
        title_widget.update(Text(title, style="bold"))
        table.focus()

    def _fill(self, rows: Rows) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.row_targets = []
        for target, cells in rows:
            table.add_row(*cells)
            self.row_targets.append(target)

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

    def resolve(self, target: Target) -> int | Window | None:
        """The event or window Enter goes to: of several events, the one after the selected
        event (the first when the selection is none of them), and `note` says which."""
        if not isinstance(target, tuple) or isinstance(target, Window):
            self.note = target.label if isinstance(target, Window) else ""
            return target
        k = target.index(self.selected) + 1 if self.selected in target else 0
        k %= len(target)
        self.note = f"instance {k + 1} of {len(target)}"
        return target[k]

    def action_jump(self) -> None:
        table = self.query_one(DataTable)
        if self.row_targets and 0 <= table.cursor_row < len(self.row_targets):
            self.dismiss(self.resolve(self.row_targets[table.cursor_row]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_jump()
