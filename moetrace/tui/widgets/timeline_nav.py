"""Navigation of the timeline: zoom/pan, lanes, events, focus, selections.

A mixin of `TimelineView` (kept apart to keep each module small). Time is a viewport
[t0, t1) in ns from the trace origin. Keyboard zoom anchors, as in Perfetto, at the selected
event when it is in view, else at the centre of the view (the mouse zooms at the pointer);
the anchor keeps its column. Held zoom keys are rate-limited to MAX_ZOOM_PER_S. The time
cursor never leaves the trace [0, span).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..lanes import LaneModel, Row
    from .timeline import Area

MIN_CELL_NS = 0.05  # deepest zoom: 1/20 ns per cell
ZOOM_STEP = 0.8
PAN_STEP = 0.1
MAX_ZOOM_PER_S = 16.0  # held zoom keys: at most ×16 (or ÷16) of view width per second


class TimelineNavigation:
    """Actions bound to keys; expects the attributes set by `TimelineView.__init__`."""

    model: LaneModel | None
    rows: list[Row]
    collapsed: set[tuple[object, ...]]
    t0: float
    t1: float
    cursor_t: float
    cursor_row: int
    selected: int | None
    selected_span: tuple[tuple[int, int], float, float] | None
    dense: bool
    area: Area | None
    area_anchor: tuple[float, int] | None
    marks: list[float]
    flow_ends: list[tuple[tuple[int, int], float, str]]
    _zoom_log: list[tuple[float, float]]
    clock = staticmethod(time.monotonic)  # seconds; the zoom rate limit's clock (tests fix it)

    if TYPE_CHECKING:

        @property
        def lanes_width(self) -> int: ...
        @property
        def visible_lane_rows(self) -> int: ...
        @property
        def cell_ns(self) -> float: ...
        @property
        def scroll_offset(self) -> Any: ...

        def refresh(self, *args: Any, **kwargs: Any) -> Any: ...
        def post_message(self, message: Any) -> bool: ...
        def scroll_to(self, *args: Any, **kwargs: Any) -> Any: ...
        def accelerate(self, action: str) -> float: ...
        def rebuild_rows(self) -> None: ...
        def select_at_cursor(self) -> bool: ...
        def column_of(self, t: float) -> int: ...

    # ------------------------------------------------------------ viewport
    def set_view(self, t0: float, t1: float) -> None:
        """Show [t0, t1) (ns from the origin), clamped to the trace plus a margin."""
        if self.model is None:
            return
        span = self.model.span
        width = max(t1 - t0, MIN_CELL_NS * self.lanes_width)
        width = min(width, span * 1.5)
        margin = span * 0.25
        t0 = min(max(t0, -margin), span + margin - width)
        self.t0, self.t1 = float(t0), float(t0 + width)
        self.clamp_cursor()
        self.refresh()

    def clamp_cursor(self) -> None:
        """Keep the time cursor inside the trace [0, span) and in view: a cursor the view
        left behind moves to the view's centre."""
        if self.model is None:
            return
        cell = (self.t1 - self.t0) / max(self.lanes_width, 1)
        if not self.t0 <= self.cursor_t < self.t1:
            self.cursor_t = (self.t0 + self.t1) / 2
        lo = max(self.t0, 0.0)
        hi = min(self.t1, self.model.span) - min(cell / 2, self.model.span / 2)
        self.cursor_t = float(min(max(self.cursor_t, lo), max(hi, lo)))

    def zoom_anchor(self) -> float:
        """Where keyboard zoom anchors: the selected event's middle when it is in view,
        else the centre of the view."""
        if self.selected_span is not None:
            _, start, end = self.selected_span
            if end > self.t0 and start < self.t1:
                return (max(start, self.t0) + min(end, self.t1)) / 2
        return (self.t0 + self.t1) / 2

    def limited_zoom(self, factor: float) -> float:
        """`factor` cut so that the net key zoom within the last second stays within
        ×/÷ MAX_ZOOM_PER_S (a held key cannot overshoot; w then s is never held back)."""
        now = self.clock()
        self._zoom_log = [(t, z) for t, z in self._zoom_log if now - t < 1.0]
        used = sum(z for _, z in self._zoom_log)  # signed log of the zoom so far
        limit = math.log(MAX_ZOOM_PER_S)
        step = min(max(math.log(factor), -limit - used), limit - used)
        if step == 0.0:
            return 1.0
        self._zoom_log.append((now, step))
        return math.exp(step)

    def zoom_by(self, factor: float, around: float) -> None:
        """Scale the view width by `factor` keeping time `around` at the same column."""
        frac = (around - self.t0) / (self.t1 - self.t0)
        width = (self.t1 - self.t0) * factor
        self.set_view(around - frac * width, around - frac * width + width)

    def pan_by(self, fraction: float) -> None:
        """Move the view by `fraction` of its width; the cursor stays inside the view."""
        shift = (self.t1 - self.t0) * fraction
        self.set_view(self.t0 + shift, self.t1 + shift)

    def action_zoom(self, direction: int) -> None:
        steps = self.accelerate(f"zoom{direction}")
        factor = ZOOM_STEP**steps if direction > 0 else (1 / ZOOM_STEP) ** steps
        factor = self.limited_zoom(factor)
        if factor != 1.0:
            self.zoom_by(factor, self.zoom_anchor())

    def action_pan(self, amount: int) -> None:
        steps = self.accelerate(f"pan{amount}") if abs(amount) == 1 else 1.0
        self.pan_by(amount * PAN_STEP * steps if abs(amount) == 1 else np.sign(amount) * 0.9)

    def action_cursor(self, direction: int) -> None:
        steps = round(self.accelerate(f"cursor{direction}"))
        span = self.model.span if self.model is not None else 1.0
        self.cursor_t = min(max(self.cursor_t + direction * steps * self.cell_ns, 0.0), span)
        if self.cursor_t < self.t0 or self.cursor_t >= self.t1:
            shift = self.cursor_t - (self.t0 + self.t1) / 2
            self.set_view(self.t0 + shift, self.t1 + shift)
        self.clamp_cursor()
        self.refresh()

    def action_reset_view(self) -> None:
        if self.model is not None:
            self.set_view(0.0, self.model.span)

    # --------------------------------------------------------------- lanes
    def ensure_row_visible(self) -> None:
        """Scroll so the cursor's row is on screen (pinned rows always are)."""
        pinned = getattr(self, "pinned_count", 0)
        if self.cursor_row < pinned:
            return
        position = self.cursor_row - pinned  # among the scrolled rows
        top = int(self.scroll_offset.y)
        rows = self.visible_lane_rows
        if position < top:
            self.scroll_to(y=position, animate=False, immediate=True)
        elif position >= top + rows:
            self.scroll_to(y=position - rows + 1, animate=False, immediate=True)

    def action_lane(self, delta: int) -> None:
        if not self.rows:
            return
        self.cursor_row = min(max(self.cursor_row + delta, 0), len(self.rows) - 1)
        self.ensure_row_visible()
        self.refresh()

    def action_dense(self) -> None:
        """b: pack collapsed ranks 4 per row in braille (or back to one row per rank)."""
        self.dense = not self.dense
        self.rebuild_rows()

    def action_toggle_group(self) -> None:
        """Expand or collapse the group (rank, unit, nested track) under the cursor;
        on a braille row, expand its first rank."""
        if not self.rows:
            return
        row = self.rows[self.cursor_row]
        if row.kind == "braille":
            self.collapsed.discard(row.key[1])
            self.rebuild_rows()
            return
        if not row.expandable:
            return
        key: tuple[object, ...] = row.key if row.kind != "lane" else ("track", row.key[1])
        self.collapsed.symmetric_difference_update({key})
        self.rebuild_rows()

    def reveal_lane(self, lane_key: tuple[int, int]) -> None:
        """Expand the groups hiding a lane and put the cursor on it."""
        if self.model is None:
            return
        lane = self.model.lanes[lane_key]
        hidden = [k for k in self.model.ancestors(lane) if k in self.collapsed]
        if hidden:
            self.collapsed.difference_update(hidden)
            self.rebuild_rows()
        for i, row in enumerate(self.rows):
            if row.key == ("lane", *lane_key):
                self.cursor_row = i
                self.ensure_row_visible()
                return

    # -------------------------------------------------------------- events
    def select_event(self, event_id: int | None, *, move_view: bool = True) -> bool:
        """Select an event: reveal its lane, move the cursor to it, pan if off screen."""
        if event_id is None or self.model is None:
            self.selected, self.selected_span = None, None
            self.flow_ends = []
            self.post_message(self._selected_message(None))
            self.refresh()
            return False
        found = self.model.locate(int(event_id))
        if found is None:
            return False
        lane, start, end = found
        self.selected = int(event_id)
        self.selected_span = ((lane.track, lane.depth), start, end)
        self.flow_ends = self.model.flow_ends(int(event_id))
        self.reveal_lane((lane.track, lane.depth))
        if move_view:
            self.cursor_t = start
            if end < self.t0 or start >= self.t1:
                half = (self.t1 - self.t0) / 2
                self.set_view((start + end) / 2 - half, (start + end) / 2 + half)
        self.post_message(self._selected_message(self.selected))
        self.refresh()
        return True

    def _selected_message(self, event_id: int | None) -> Any:
        from .timeline import TimelineView

        return TimelineView.Selected(event_id)

    def action_step_event(self, direction: int) -> None:
        """Select the next (1) or previous (-1) event on the cursor lane."""
        if not self.rows:
            return
        row = self.rows[self.cursor_row]
        if row.lane is None:  # a summary: step on the first lane of the group
            if not row.expanded:
                self.action_toggle_group()
            below = [
                i
                for i in range(self.cursor_row + 1, len(self.rows))
                if self.rows[i].lane is not None
            ]
            if not below:
                return
            self.cursor_row = below[0]
            self.ensure_row_visible()
            row = self.rows[self.cursor_row]
        if row.lane is None or row.lane.index.ids is None or len(row.lane.index.starts) == 0:
            return
        index = row.lane.index
        here, from_selection = self.cursor_t, False
        if self.selected_span is not None and self.selected_span[0] == (
            row.lane.track,
            row.lane.depth,
        ):
            here, from_selection = self.selected_span[1], True
        if direction > 0:
            # From the selection: the one after it; from the cursor: an event at it counts.
            k = int(np.searchsorted(index.starts, here, side="right" if from_selection else "left"))
        else:
            k = int(np.searchsorted(index.starts, here, side="left")) - 1
        if 0 <= k < len(index.starts) and index.ids is not None:
            self.select_event(int(index.ids[k]))

    def action_focus_selection(self) -> None:
        """Centre the selection; pressed again (already centred) fit the view to it."""
        if self.area is not None and self.selected is None:
            pad = (self.area.t1 - self.area.t0) * 0.05
            self.set_view(self.area.t0 - pad, self.area.t1 + pad)
            return
        if self.selected_span is None:
            return
        _, start, end = self.selected_span
        mid, half = (start + end) / 2, (self.t1 - self.t0) / 2
        if abs((self.t0 + self.t1) / 2 - mid) > self.cell_ns:
            self.set_view(mid - half, mid + half)
        else:
            pad = (end - start) * 0.1 if end > start else self.cell_ns * 5
            self.set_view(start - pad, end + pad)
        self.cursor_t = start

    # ---------------------------------------------------- area and marks
    def set_area(self, area: Area | None) -> None:
        from .timeline import TimelineView

        self.area = area
        self.refresh()
        if area is None or self.model is None:
            self.post_message(TimelineView.AreaSelected(None, None))
            return
        ranks = sorted({r.rank for r in self.rows[area.row0 : area.row1 + 1] if r.rank is not None})
        origin = self.model.origin
        self.post_message(
            TimelineView.AreaSelected(
                (origin + int(area.t0), origin + int(np.ceil(area.t1))), ranks or None
            )
        )

    def action_area_select(self) -> None:
        """First press anchors at the cursor, second press selects anchor..cursor."""
        from .timeline import Area

        if self.area_anchor is None:
            self.area_anchor = (self.cursor_t, self.cursor_row)
            self.set_area(None)
            return
        (ta, ra), self.area_anchor = self.area_anchor, None
        tb, rb = self.cursor_t, self.cursor_row
        self.set_area(Area(min(ta, tb), max(ta, tb) + self.cell_ns, min(ra, rb), max(ra, rb)))

    def action_mark(self) -> None:
        t = self.selected_span[1] if self.selected_span is not None else self.cursor_t
        if t in self.marks:
            self.marks.remove(t)
        else:
            self.marks.append(t)
        self.refresh()

    def action_clear_selection(self) -> None:
        self.area_anchor = None
        if self.area is not None:
            self.set_area(None)
        self.select_event(None)
