"""Mouse on the timeline: click selects, wheel pans (Ctrl/Shift+wheel zooms), drag selects
an area, a click on the overview jumps there and on a group label expands/collapses it.

A mixin of `TimelineView`, kept apart to keep each module small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import events

from .layout import FIXED_ROWS, LABEL_WIDTH

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
        def select_at_cursor(self) -> None: ...

    def _time_at(self, x: int) -> float:
        return self.t0 + (x - LABEL_WIDTH + 0.5) * self.cell_ns

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.prevent_default()
        event.stop()
        if event.ctrl or event.shift:
            self.zoom_by(1 / 0.8, self._time_at(event.x))
        else:
            self.pan_by(0.1)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.prevent_default()
        event.stop()
        if event.ctrl or event.shift:
            self.zoom_by(0.8, self._time_at(event.x))
        else:
            self.pan_by(-0.1)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if event.y >= FIXED_ROWS and event.x >= LABEL_WIDTH:
            self._drag_from = (
                self._time_at(event.x),
                event.y - FIXED_ROWS + int(self.scroll_offset.y),
            )

    def on_mouse_up(self, event: events.MouseUp) -> None:
        from .timeline import Area

        start, self._drag_from = self._drag_from, None
        if start is None or event.x < LABEL_WIDTH:
            return
        row = min(
            max(event.y - FIXED_ROWS + int(self.scroll_offset.y), 0), max(len(self.rows) - 1, 0)
        )
        t = self._time_at(event.x)
        if abs(self.column_of(t) - self.column_of(start[0])) >= 2:
            self.set_area(
                Area(min(start[0], t), max(start[0], t), min(start[1], row), max(start[1], row))
            )

    def on_click(self, event: events.Click) -> None:
        if self.model is None:
            return
        if event.y == 0 and event.x >= LABEL_WIDTH:
            centre = (event.x - LABEL_WIDTH + 0.5) * self.model.span / self.lanes_width
            half = (self.t1 - self.t0) / 2
            self.set_view(centre - half, centre + half)
            return
        row_index = event.y - FIXED_ROWS + int(self.scroll_offset.y)
        if event.y < FIXED_ROWS or row_index >= len(self.rows):
            return
        self.cursor_row = row_index
        if event.x < LABEL_WIDTH:
            self.action_toggle_group()
            return
        self.cursor_t = self._time_at(event.x)
        self.select_at_cursor()
        self.refresh()
