"""Mouse on the timeline, Perfetto's way: the wheel scrolls lanes, Ctrl+wheel zooms around the
pointer, Shift+wheel (or a horizontal wheel) pans; click selects, drag selects an area, a click
on the overview jumps there, on a group label expands/collapses it; hovering a label shows
it in full.

A mixin of `TimelineView`, kept apart to keep each module small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import events

from .layout import FIXED_ROWS

if TYPE_CHECKING:
    from ..lanes import LaneModel, Row


class TimelineMouse:
    """Mouse handlers; expects the attributes and actions of `TimelineView`."""

    model: LaneModel | None
    rows: list[Row]
    t0: float
    t1: float
    cursor_t: float
    cursor_row: int
    _drag_from: tuple[float, int] | None

    if TYPE_CHECKING:

        @property
        def cell_ns(self) -> float: ...
        @property
        def label_width(self) -> int: ...
        def row_at(self, y: int) -> int: ...

        tooltip: Any

        @property
        def lanes_width(self) -> int: ...
        @property
        def scroll_offset(self) -> Any: ...
        def refresh(self, *args: Any, **kwargs: Any) -> Any: ...
        def zoom_by(self, factor: float, around: float) -> None: ...
        def pan_by(self, fraction: float) -> None: ...
        def set_view(self, t0: float, t1: float) -> None: ...
        def set_area(self, area: Any) -> None: ...
        def column_of(self, t: float) -> int: ...
        def action_toggle_group(self) -> None: ...
        def select_at_cursor(self) -> bool: ...

    def _time_at(self, x: int) -> float:
        return self.t0 + (x - self.label_width + 0.5) * self.cell_ns

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 1)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, -1)

    def on_mouse_scroll_right(self, event: events.MouseScrollRight) -> None:
        event.prevent_default()
        event.stop()
        self.pan_by(0.1)

    def on_mouse_scroll_left(self, event: events.MouseScrollLeft) -> None:
        event.prevent_default()
        event.stop()
        self.pan_by(-0.1)

    def _wheel(self, event: events.MouseEvent, direction: int) -> None:
        """Ctrl: zoom around the pointer (down = out); Shift: pan; plain: let the view
        scroll its lanes (ScrollView's own handling)."""
        if event.ctrl:
            event.prevent_default()
            event.stop()
            self.zoom_by(0.8 ** (-direction), self._time_at(max(event.x, self.label_width)))
        elif event.shift:
            event.prevent_default()
            event.stop()
            self.pan_by(0.1 * direction)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """Over the label gutter: the row's full label (rank, unit, lane) as a tooltip."""
        row_index = self.row_at(event.y)
        if event.x < self.label_width and event.y >= FIXED_ROWS and row_index < len(self.rows):
            self.tooltip = full_label(self.rows[row_index])
        else:
            self.tooltip = None

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.y >= FIXED_ROWS and event.x >= self.label_width:
            self._drag_from = (
                self._time_at(event.x),
                self.row_at(event.y),
            )

    def on_mouse_up(self, event: events.MouseUp) -> None:
        from .timeline import Area

        start, self._drag_from = self._drag_from, None
        if start is None or event.x < self.label_width:
            return
        row = min(max(self.row_at(event.y), 0), max(len(self.rows) - 1, 0))
        t = self._time_at(event.x)
        if abs(self.column_of(t) - self.column_of(start[0])) >= 2:
            self.set_area(
                Area(min(start[0], t), max(start[0], t), min(start[1], row), max(start[1], row))
            )

    def on_click(self, event: events.Click) -> None:
        if self.model is None:
            return
        if event.y == 0 and event.x >= self.label_width:
            centre = (event.x - self.label_width + 0.5) * self.model.span / self.lanes_width
            half = (self.t1 - self.t0) / 2
            self.set_view(centre - half, centre + half)
            return
        row_index = self.row_at(event.y)
        if event.y < FIXED_ROWS or row_index >= len(self.rows):
            return
        self.cursor_row = row_index
        if event.x < self.label_width:
            self.action_toggle_group()
            return
        self.cursor_t = self._time_at(event.x)
        self.select_at_cursor()
        self.refresh()


def full_label(row: Row) -> str:
    """Rank, unit and lane of a row in words (the gutter may have cut the label)."""
    parts = [f"rank {row.rank}" if row.rank is not None else "no rank"]
    if row.unit is not None and row.kind != "rank":
        parts.append(row.unit)
    if row.kind == "lane":
        parts.append(row.label)
    return " · ".join(parts)
