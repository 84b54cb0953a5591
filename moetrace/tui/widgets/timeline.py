"""The timeline widget: a Line-API ScrollView drawing only the visible lanes.

Rows 0 and 1 are fixed (whole-trace overview, time ruler); the rest are lanes scrolled by
`scroll_y`. What the timeline looks at is a plain `Viewport` (time window, cursor, selection,
area, marks; the zoom/pan/clamp rules live there, testable without Textual); the Strips come
from a `LanePainter` (numpy, imported when the first trace arrives, so the load progress is on
screen before numpy is imported). This widget binds keys and the mouse, Perfetto's way: the
wheel scrolls lanes, Ctrl+wheel zooms around the pointer, Shift+wheel (or a horizontal wheel)
pans; click selects, drag selects an area, a click on the overview jumps there, on a group
label expands/collapses it; hovering a label shows it in full.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, overload

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from .layout import FIXED_ROWS, LABEL_WIDTH, PENDING_STYLE, label_width_for
from .timeline_summaries import GroupKey, SummaryBuilder
from .viewport import (
    PAN_STEP,
    ZOOM_STEP,
    Area,
    LaneKey,
    Viewport,
    held_key_steps,
    scroll_to_show,
)

if TYPE_CHECKING:
    from ..binning import IntervalIndex
    from ..lanes import LaneModel, Row
    from ..overlays import Overlays
    from .lane_painter import Frame, LanePainter

BLANK_STYLE = Style()  # not None: Textual's NO_COLOR filter needs a style on every segment
T = TypeVar("T")
KEY_REPEAT_S = 0.15  # a key pressed again within this many seconds is held: bigger steps

__all__ = ["Area", "TimelineView"]


class ViewField(Generic[T]):
    """A widget attribute that is the field of the same name of the widget's `view`."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, widget: None, owner: type) -> ViewField[T]: ...
    @overload
    def __get__(self, widget: TimelineView, owner: type) -> T: ...
    def __get__(self, widget: TimelineView | None, owner: type) -> T | ViewField[T]:
        if widget is None:
            return self
        value: T = getattr(widget.view, self.name)
        return value

    def __set__(self, widget: TimelineView, value: T) -> None:
        setattr(widget.view, self.name, value)


class TimelineView(ScrollView, can_focus=True):
    """Lanes grouped rank -> unit -> track; keys, mouse and overlays (c/i/x)."""

    DEFAULT_CSS = """
    TimelineView { overflow-x: hidden; scrollbar-size-vertical: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w,plus", "zoom(1)", "Zoom+", key_display="w", id="timeline.zoom_in"),
        Binding("s,minus", "zoom(-1)", "Zoom-", key_display="s", id="timeline.zoom_out"),
        Binding("a", "pan(-1)", "Pan←", id="timeline.pan_left"),
        Binding("d", "pan(1)", "Pan→", id="timeline.pan_right"),
        Binding("A", "pan(-10)", "Page left", show=False, id="timeline.page_left"),
        Binding("D", "pan(10)", "Page right", show=False, id="timeline.page_right"),
        Binding("left,h", "cursor(-1)", "Cursor left", show=False, id="timeline.cursor_left"),
        Binding("right,l", "cursor(1)", "Cursor right", show=False, id="timeline.cursor_right"),
        Binding("up,k", "lane(-1)", "Lane up", show=False, id="timeline.lane_up"),
        Binding("down,j", "lane(1)", "Lane down", show=False, id="timeline.lane_down"),
        Binding("pageup", "lane(-10)", "Page up", show=False, id="timeline.page_up"),
        Binding("pagedown", "lane(10)", "Page down", show=False, id="timeline.page_down"),
        Binding("full_stop", "step_event(1)", "Next", id="timeline.next_event"),
        Binding("comma", "step_event(-1)", "Prev", id="timeline.prev_event"),
        Binding("f", "focus_selection", "Focus", show=False, id="timeline.focus"),
        Binding("0,z", "reset_view", "Reset", show=False, id="timeline.reset"),
        Binding("space", "toggle_group", "Expand/collapse", show=False, id="timeline.toggle_group"),
        Binding("v", "area_select", "Area", show=False, id="timeline.area"),
        Binding("b", "dense", "Braille ranks", show=False, id="timeline.dense"),
        Binding("m", "mark", "Mark", show=False, id="timeline.mark"),
        Binding("escape", "clear_selection", "Clear", show=False, id="timeline.clear"),
        Binding("t", "pin", "Pin to top", show=False, id="timeline.pin"),
    ]

    class Selected(Message):
        """The selected event changed (None: nothing selected)."""

        def __init__(self, event_id: int | None) -> None:
            self.event_id = event_id
            super().__init__()

    class AreaSelected(Message):
        """The area selection changed: time range in absolute ns and the ranks it covers."""

        def __init__(self, time_range: tuple[int, int] | None, ranks: list[int] | None) -> None:
            self.time_range = time_range
            self.ranks = ranks
            super().__init__()

    clock = staticmethod(time.monotonic)  # seconds; held keys and the zoom limit (tests fix it)

    def __init__(self, model: LaneModel | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view = Viewport()
        self.model: LaneModel | None = None
        self.painter: LanePainter | None = None
        self.summaries: SummaryBuilder | None = None
        self.rows: list[Row] = []
        self.collapsed: set[tuple[object, ...]] = set()
        self.lane_filter = ""
        self.dense = False  # pack collapsed ranks 4 per row in braille
        self.pinned: set[tuple[object, ...]] = set()  # row keys shown at the top (t)
        self.pinned_count = 0  # rows[:pinned_count] are pinned: drawn below the ruler, fixed
        self.row_notes: dict[tuple[object, ...], str] = {}  # label suffixes (idle shares)
        self.generation = 0
        self.overlay_data: Overlays | None = None
        self.active_overlays: frozenset[str] = frozenset()
        # Flow ends of the selected event: (lane key, time ns, ▶ the source's end / ◀ the
        # destination's start), and the time of each so `]`/`[` and the details pane can jump.
        self.flow_ends: list[tuple[LaneKey, float, str]] = []
        self.placeholder = ""  # shown instead of lanes while there is no trace (load progress)
        self.lane_paints = 0  # lane rows drawn so far (the benchmark waits on it)
        self.last_paint = 0.0  # perf_counter() of the last lane row drawn
        self._last_key: tuple[str, float] = ("", 0.0)
        self._repeat = 0
        self._drag_from: tuple[float, int] | None = None
        self._width_for: object = None
        self._lanes_width = 1
        self._label_width = LABEL_WIDTH
        self._label_need = LABEL_WIDTH
        self._first_paint_callbacks: list[Callable[[], object]] = []
        if model is not None:
            self.set_model(model)

    # The widget's names for the viewport's state (tests and the app read and set them).
    t0 = ViewField[float]()
    t1 = ViewField[float]()
    cursor_t = ViewField[float]()
    cursor_row = ViewField[int]()
    selected = ViewField["int | None"]()
    selected_span = ViewField["tuple[LaneKey, float, float] | None"]()
    area = ViewField["Area | None"]()
    marks = ViewField["list[float]"]()

    # ------------------------------------------------------------------ state
    def set_model(self, model: LaneModel, *, keep_view: bool = False) -> None:
        """Show a (new) trace: default collapse state, whole trace in view. With `keep_view`
        (the same job with more ranks loaded): keep the collapse state, the window, the
        cursor and the selection; groups new to this model get their default state."""
        from .lane_painter import LanePainter

        old = self.model
        self.model = model
        self.summaries = SummaryBuilder(model, self._start_summary, self._summary_ready)
        self.painter = LanePainter(model, self.summaries.index)
        defaults = model.default_collapsed()
        if keep_view and old is not None:
            # The new model's defaults, with the user's own expansions and collapses kept.
            was = old.default_collapsed()
            self.collapsed = (defaults | (self.collapsed - was)) - (was - self.collapsed)
            self.view.grow(model.span, float(old.origin - model.origin))
        else:
            self.collapsed = defaults
            self.view.reset(model.span)
        self.rebuild_rows()

    def rebuild_rows(self) -> None:
        """Recompute the visible rows after a collapse or filter change (new generation)."""
        if self.model is None:
            return
        current = (
            self.rows[self.cursor_row].key
            if self.rows and self.cursor_row < len(self.rows)
            else None
        )
        rows = self.model.rows(self.collapsed, self.lane_filter, self.dense)
        pinned = [replace(r, label=f"⚑ {r.label}", indent=0) for r in rows if r.key in self.pinned]
        self.rows = pinned + [r for r in rows if r.key not in self.pinned]
        self.pinned_count = len(pinned)
        keys = [r.key for r in self.rows]
        self.cursor_row = (
            keys.index(current) if current in keys else min(self.cursor_row, max(len(keys) - 1, 0))
        )
        self._label_need = max(
            (len(r.label) + 2 * r.indent + 3 for r in self.rows), default=LABEL_WIDTH
        )
        self._width_for = None
        self.generation += 1
        self.virtual_size = Size(0, len(self.rows) + FIXED_ROWS)
        self.refresh()

    def _start_summary(self, job: Callable[[], None]) -> None:
        self.run_worker(
            job, thread=True, group="summaries", name="summaries", description="Summary lanes"
        )

    def _summary_ready(self, key: GroupKey) -> None:
        """From a summaries worker: hand over to the interface's thread and repaint."""
        self.app.call_from_thread(self._summary_built, key)

    def _summary_built(self, key: GroupKey) -> None:
        if self.summaries is not None:
            self.summaries.built(key)
        self.refresh()

    def summary_index(self, key: GroupKey) -> IntervalIndex | None:
        """A group's summary index (None while a worker builds it)."""
        return self.summaries.index(key) if self.summaries is not None else None

    def after_first_paint(self, callback: Callable[[], object]) -> None:
        """Run `callback` once the first lane row has been drawn (now if nothing to draw)."""
        if self.lane_paints or not self.rows:
            self.call_later(callback)
        else:
            self._first_paint_callbacks.append(callback)

    def set_row_notes(self, notes: dict[tuple[object, ...], str]) -> None:
        """Suffixes for row labels (e.g. ' idle 12%' on ranks and lanes), redrawn at once."""
        self.row_notes = notes
        self.generation += 1
        self.refresh()

    def set_overlays(self, overlays: Overlays | None) -> None:
        self.overlay_data = overlays
        self.generation += 1
        self.refresh()

    # ------------------------------------------------------------- geometry
    @property
    def lanes_width(self) -> int:
        """Cells available for time (the gutter and scrollbar excluded), cached per size."""
        self._fit_widths()
        return self._lanes_width

    @property
    def label_width(self) -> int:
        """Cells of the lane-label gutter: wide enough for the labels, ≤ 30% of the view."""
        self._fit_widths()
        return self._label_width

    def _fit_widths(self) -> None:
        size = (self.size, self.show_vertical_scrollbar)
        if size != self._width_for:
            self._width_for = size
            content = self.scrollable_content_region.width
            self._label_width = label_width_for(content, self._label_need)
            self._lanes_width = max(content - self._label_width, 1)
        self.view.cells = self._lanes_width

    @property
    def cell_ns(self) -> float:
        self._fit_widths()
        return self.view.cell_ns

    @property
    def visible_lane_rows(self) -> int:
        """Rows of scrolled (not pinned) lanes that fit on screen."""
        return max(self.scrollable_content_region.height - FIXED_ROWS - self.pinned_count, 1)

    def row_at(self, y: int) -> int:
        """Index into `rows` of screen line y (≥ FIXED_ROWS): pinned rows first, fixed; the
        others scrolled by scroll_offset.y."""
        k = y - FIXED_ROWS
        return k if k < self.pinned_count else k + int(self.scroll_offset.y)

    def row_y(self, index: int) -> int:
        """Screen line of rows[index] (it may be off screen)."""
        if index < self.pinned_count:
            return FIXED_ROWS + index
        return FIXED_ROWS + index - int(self.scroll_offset.y)

    def column_of(self, t: float) -> int:
        self._fit_widths()
        return self.view.column_of(t)

    def _time_at(self, x: int) -> float:
        """The time under screen column x."""
        self._fit_widths()
        return self.view.time_at(x - self._label_width)

    def accelerate(self, action: str) -> float:
        """Step multiplier for held keys: repeats within 150 ms grow the step (up to 8×)."""
        now = self.clock()
        if self._last_key[0] == action and now - self._last_key[1] < KEY_REPEAT_S:
            self._repeat += 1
        else:
            self._repeat = 0
        self._last_key = (action, now)
        return held_key_steps(self._repeat)

    # -------------------------------------------------------------- rendering
    def _frame(self) -> Frame:
        from .lane_painter import Frame

        self._fit_widths()
        return Frame(
            self.view,
            self._lanes_width,
            self._label_width,
            self.rows,
            self.generation,
            self.active_overlays,
            self.overlay_data,
            self.row_notes,
            self.flow_ends,
        )

    def render_line(self, y: int) -> Strip:
        if self.painter is None:
            if y == FIXED_ROWS and self.placeholder:
                text = self.placeholder[: self.size.width].ljust(self.size.width)
                return Strip([Segment(text, PENDING_STYLE)], self.size.width)
            return Strip.blank(self.size.width, BLANK_STYLE)
        frame = self._frame()
        if y == 0:
            return self.painter.overview(frame)
        if y == 1:
            return self.painter.ruler(frame)
        row_index = self.row_at(y)
        if row_index >= len(self.rows):
            return Strip.blank(frame.label_width + frame.width, BLANK_STYLE)
        strip = self.painter.row(row_index, frame)
        if self.lane_paints == 0 and self._first_paint_callbacks:
            for callback in self._first_paint_callbacks:
                self.call_later(callback)
            self._first_paint_callbacks.clear()
        self.lane_paints += 1
        self.last_paint = time.perf_counter()
        return strip

    # ------------------------------------------------------------ viewport
    def set_view(self, t0: float, t1: float) -> None:
        """Show [t0, t1) (ns from the origin), clamped to the trace plus a margin."""
        if self.model is None:
            return
        self._fit_widths()
        self.view.set_view(t0, t1)
        self.refresh()

    def clamp_cursor(self) -> None:
        """Keep the time cursor inside the trace and in view."""
        if self.model is not None:
            self._fit_widths()
            self.view.clamp_cursor()

    def zoom_by(self, factor: float, around: float) -> None:
        """Scale the view width by `factor` keeping time `around` at the same column."""
        if self.model is not None:
            self._fit_widths()
            self.view.zoom_by(factor, around)
            self.refresh()

    def pan_by(self, fraction: float) -> None:
        """Move the view by `fraction` of its width; the cursor stays inside the view."""
        if self.model is not None:
            self._fit_widths()
            self.view.pan_by(fraction)
            self.refresh()

    def action_zoom(self, direction: int) -> None:
        steps = self.accelerate(f"zoom{direction}")
        factor = ZOOM_STEP**steps if direction > 0 else (1 / ZOOM_STEP) ** steps
        factor = self.view.limited_zoom(factor, self.clock())
        if factor != 1.0:
            self.zoom_by(factor, self.view.zoom_anchor())

    def action_pan(self, amount: int) -> None:
        if abs(amount) == 1:
            self.pan_by(amount * PAN_STEP * self.accelerate(f"pan{amount}"))
        else:
            self.pan_by(0.9 if amount > 0 else -0.9)

    def action_cursor(self, direction: int) -> None:
        steps = round(self.accelerate(f"cursor{direction}"))
        if self.model is None:
            return
        self._fit_widths()
        self.view.move_cursor(direction * steps)
        self.refresh()

    def action_reset_view(self) -> None:
        if self.model is not None:
            self.set_view(0.0, self.model.span)

    # --------------------------------------------------------------- lanes
    def ensure_row_visible(self) -> None:
        """Scroll so the cursor's row is on screen (pinned rows always are)."""
        top = scroll_to_show(
            self.cursor_row, self.pinned_count, int(self.scroll_offset.y), self.visible_lane_rows
        )
        if top is not None:
            self.scroll_to(y=top, animate=False, immediate=True)

    def action_lane(self, delta: int) -> None:
        if not self.rows:
            return
        self.cursor_row = min(max(self.cursor_row + delta, 0), len(self.rows) - 1)
        self.ensure_row_visible()
        self.refresh()

    def action_pin(self) -> None:
        """t: pin the row under the cursor to the top of the lanes (again: unpin it)."""
        if not self.rows:
            return
        key = self.rows[self.cursor_row].key
        self.pinned.symmetric_difference_update({key})
        self.rebuild_rows()
        self.cursor_row = next(i for i, r in enumerate(self.rows) if r.key == key)
        self.ensure_row_visible()

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

    def reveal_lane(self, lane_key: LaneKey) -> None:
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
        view = self.view
        if event_id is None or self.model is None:
            view.selected, view.selected_span = None, None
            self.flow_ends = []
            self.post_message(self.Selected(None))
            self.refresh()
            return False
        found = self.model.locate(int(event_id))
        if found is None:
            return False
        lane, start, end = found
        view.selected = int(event_id)
        view.selected_span = ((lane.track, lane.depth), start, end)
        self.flow_ends = self.model.flow_ends(int(event_id))
        self.reveal_lane((lane.track, lane.depth))
        if move_view:
            view.cursor_t = start
            self._fit_widths()
            view.show_span(start, end)
        self.post_message(self.Selected(view.selected))
        self.refresh()
        return True

    def select_at_cursor(self) -> bool:
        """Select the event nearest the cursor within its cell on the cursor row; on a rank
        or unit row, on the first of its lanes with an event there. False if none."""
        from .lane_painter import event_at

        if not self.rows or self.model is None:
            return False
        self._fit_widths()
        found = event_at(self.rows[self.cursor_row], self.model, self.view)
        return found is not None and self.select_event(found, move_view=False)

    def action_step_event(self, direction: int) -> None:
        """Select the next (1) or previous (-1) event on the cursor lane."""
        from .lane_painter import event_next_to

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
        if row.lane is None:
            return
        # From the selection: the one after it; from the cursor: an event at it counts.
        here, from_selection = self.cursor_t, False
        span = self.selected_span
        if span is not None and span[0] == (row.lane.track, row.lane.depth):
            here, from_selection = span[1], True
        found = event_next_to(row.lane.index, here, direction, from_selection)
        if found is not None:
            self.select_event(found)

    def action_focus_selection(self) -> None:
        """Centre the selection; pressed again (already centred) fit the view to it."""
        view = self.view
        self._fit_widths()
        if view.area is not None and view.selected is None:
            pad = (view.area.t1 - view.area.t0) * 0.05
            self.set_view(view.area.t0 - pad, view.area.t1 + pad)
            return
        if view.selected_span is None or self.model is None:
            return
        _, start, end = view.selected_span
        view.focus(start, end)
        view.cursor_t = start
        self.refresh()

    # ---------------------------------------------------- area and marks
    def set_area(self, area: Area | None) -> None:
        self.view.area = area
        self.refresh()
        if area is None or self.model is None:
            self.post_message(self.AreaSelected(None, None))
            return
        ranks = sorted({r.rank for r in self.rows[area.row0 : area.row1 + 1] if r.rank is not None})
        origin = self.model.origin
        end = origin + math.ceil(area.t1)
        self.post_message(self.AreaSelected((origin + int(area.t0), end), ranks or None))

    def action_area_select(self) -> None:
        """First press anchors at the cursor, second press selects anchor..cursor."""
        self._fit_widths()
        area = self.view.area_step()
        self.set_area(area)

    def action_mark(self) -> None:
        self.view.toggle_mark()
        self.refresh()

    def action_clear_selection(self) -> None:
        self.view.area_anchor = None
        if self.view.area is not None:
            self.set_area(None)
        self.select_event(None)

    # -------------------------------------------------------------- mouse
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
            self._drag_from = (self._time_at(event.x), self.row_at(event.y))

    def on_mouse_up(self, event: events.MouseUp) -> None:
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
