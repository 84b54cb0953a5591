"""The timeline: a Line-API ScrollView drawing only the visible lanes, time as a viewport.

Rows 0 and 1 are fixed (whole-trace overview, time ruler); the rest are lanes scrolled by
`scroll_y`. Each lane is binned with `bin_lane` (O(width · log n)) and cached: bins by
(row, t0, t1, width, generation), Strips additionally by overlays and the decorations that
touch that row (selection, cursor, area), so moving the cursor repaints one or two rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, NamedTuple

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from moetrace.trace.model import EVENT_KINDS

from ..binning import (
    AREA,
    BAR_BASE,
    CRITICAL,
    CURSOR,
    EXPOSED,
    FLOW,
    FULL,
    GLYPH_ARRAY,
    IDLE,
    NAME,
    SELECTED,
    VIEWPORT,
    Binned,
    bin_lane,
    braille_text,
    fit_name,
    name_boxes,
    nearest_event,
    step_levels,
)
from ..format import fmt_ns
from ..lanes import LaneModel, Row
from ..overlays import Overlays
from .layout import FIXED_ROWS, LABEL_WIDTH, label_width_for
from .overlay_paint import apply_overlays
from .render import (
    BRAILLE_STYLE,
    CURSOR_LABEL,
    GROUP_STYLE,
    LABEL_STYLE,
    MARK_STYLE,
    PENDING_STYLE,
    cells_segments,
    cells_strip,
    label_segment,
    label_strip,
    overlay_marks,
    ruler_strip,
)
from .timeline_mouse import TimelineMouse
from .timeline_nav import TimelineNavigation
from .timeline_summaries import TimelineSummaries

COMM_CODE = 2  # 1 + index of "comm" in EVENT_KINDS
COUNTER_CODE = 1 + EVENT_KINDS.index("memory")  # counters drawn in the memory colour
BLANK_STYLE = Style()  # not None: Textual's NO_COLOR filter needs a style on every segment


def _pending(width: int) -> Strip:
    return Strip([Segment("…".ljust(width), PENDING_STYLE)], width)


class Decorations(NamedTuple):
    """What besides the data changes a row's Strip: selection, cursor and area columns."""

    selected: tuple[int, int] | None
    cursor: int | None
    area: tuple[int, int] | None
    expanded: bool
    is_cursor_row: bool
    flows: tuple[tuple[int, str], ...] = ()  # (column, ▶/◀) flow ends on this row


@dataclass(frozen=True)
class Area:
    """An area selection: a time range (ns from the origin) over a range of rows."""

    t0: float
    t1: float
    row0: int
    row1: int


class TimelineView(
    TimelineSummaries, TimelineMouse, TimelineNavigation, ScrollView, can_focus=True
):
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

    def __init__(self, model: LaneModel | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model: LaneModel | None = None
        self.rows: list[Row] = []
        self.collapsed: set[tuple[object, ...]] = set()
        self.lane_filter = ""
        self.dense = False  # pack collapsed ranks 4 per row in braille
        self.pinned: set[tuple[object, ...]] = set()  # row keys shown at the top (t)
        self.pinned_count = 0  # rows[:pinned_count] are pinned: drawn below the ruler, fixed
        self.row_notes: dict[tuple[object, ...], str] = {}  # label suffixes (idle shares)
        self.generation = 0
        self.t0, self.t1 = 0.0, 1.0
        self.cursor_t = 0.0
        self.cursor_row = 0
        self.selected: int | None = None
        self.selected_span: tuple[tuple[int, int], float, float] | None = None
        self.overlay_data: Overlays | None = None
        self.active_overlays: frozenset[str] = frozenset()
        self.area: Area | None = None
        self.area_anchor: tuple[float, int] | None = None
        self.marks: list[float] = []
        self._bins: LRUCache[tuple[object, ...], Binned] = LRUCache(4096)
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(4096)
        self._last_key: tuple[str, float] = ("", 0.0)
        self._repeat = 0
        self._drag_from: tuple[float, int] | None = None
        self._width_for: object = None
        self._lanes_width = 1
        self._pending_summaries: set[tuple[object, ...]] = set()
        self._first_paint_callbacks: list[Callable[[], object]] = []
        # Flow ends of the selected event: (lane key, time ns, ▶ the source's end / ◀ the
        # destination's start), and the time of each so `]`/`[` and the details pane can jump.
        self.flow_ends: list[tuple[tuple[int, int], float, str]] = []
        self.placeholder = ""  # shown instead of lanes while there is no trace (load progress)
        self._label_need = LABEL_WIDTH
        self._zoom_log: list[tuple[float, float]] = []  # (time, |log zoom|) of recent key zooms
        self.lane_paints = 0  # lane rows drawn so far (the benchmark waits on it)
        self.last_paint = 0.0  # perf_counter() of the last lane row drawn
        if model is not None:
            self.set_model(model)

    # ------------------------------------------------------------------ state
    def set_model(self, model: LaneModel) -> None:
        """Show a (new) trace: default collapse state, whole trace in view."""
        self.model = model
        self.collapsed = model.default_collapsed()
        self.t0, self.t1 = 0.0, model.span
        self.cursor_t = 0.0
        self.cursor_row = 0
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

    def action_pin(self) -> None:
        """t: pin the row under the cursor to the top of the lanes (again: unpin it)."""
        if not self.rows:
            return
        key = self.rows[self.cursor_row].key
        self.pinned.symmetric_difference_update({key})
        self.rebuild_rows()
        self.cursor_row = next(i for i, r in enumerate(self.rows) if r.key == key)
        self.ensure_row_visible()

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

    @property
    def cell_ns(self) -> float:
        return (self.t1 - self.t0) / self.lanes_width

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
        return int(np.floor((t - self.t0) / self.cell_ns))

    def accelerate(self, action: str) -> float:
        """Step multiplier for held keys: repeats within 150 ms grow the step (up to 8×)."""
        now = self.clock()
        if self._last_key[0] == action and now - self._last_key[1] < 0.15:
            self._repeat += 1
        else:
            self._repeat = 0
        self._last_key = (action, now)
        return min(1.0 + 0.5 * self._repeat, 8.0)

    # -------------------------------------------------------------- rendering
    def render_line(self, y: int) -> Strip:
        width = self.lanes_width
        if self.model is None:
            if y == FIXED_ROWS and self.placeholder:
                text = self.placeholder[: self.size.width].ljust(self.size.width)
                return Strip([Segment(text, PENDING_STYLE)], self.size.width)
            return Strip.blank(self.size.width, BLANK_STYLE)
        if y == 0:
            return self._overview_strip(width)
        if y == 1:
            return self._ruler_strip(width)
        row_index = self.row_at(y)
        if row_index >= len(self.rows):
            return Strip.blank(self.label_width + width, BLANK_STYLE)
        strip = self._row_strip(row_index, width)
        if self.lane_paints == 0 and self._first_paint_callbacks:
            for callback in self._first_paint_callbacks:
                self.call_later(callback)
            self._first_paint_callbacks.clear()
        self.lane_paints += 1
        self.last_paint = time.perf_counter()
        return strip

    def _overview_strip(self, width: int) -> Strip:
        assert self.model is not None
        key = ("overview", self.t0, self.t1, width, self.generation)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        index = self.summary_index(("all",))
        if index is None:
            return Strip.join(
                [label_strip("overview", 0, self.label_width, GROUP_STYLE), _pending(width)]
            )
        binned = bin_lane(
            index, 0.0, self.model.span, width, scale=self.model.summary_scale(("all",))
        )
        keys = binned.keys.copy()
        cell = self.model.span / width
        c0, c1 = int(self.t0 // cell), int(np.ceil(self.t1 / cell))
        keys[max(c0, 0) : max(c1, 0)] |= VIEWPORT
        strip = Strip.join(
            [
                label_strip("overview", 0, self.label_width, GROUP_STYLE),
                cells_strip(binned.glyphs, keys, None, True),
            ]
        )
        self._strips[key] = strip
        return strip

    def _ruler_strip(self, width: int) -> Strip:
        ruler = ruler_strip(self.t0, self.t1, width)
        marks = {self.column_of(self.cursor_t): "┃"}
        marks.update({self.column_of(m): "▼" for m in self.marks})
        ruler = overlay_marks(ruler, marks, MARK_STYLE)
        span = f"{fmt_ns(self.t1 - self.t0)} view"
        return Strip.join([label_strip(span, 0, self.label_width, LABEL_STYLE), ruler])

    def _row_binned(self, row: Row, width: int) -> Binned | None:
        assert self.model is not None
        key = (row.key, self.t0, self.t1, width, self.generation)
        binned = self._bins.get(key)
        if binned is None:
            index = row.lane.index if row.lane is not None else self.summary_index(row.key)
            if index is None:
                return None
            binned = bin_lane(index, self.t0, self.t1, width, scale=row.scale)
            self._bins[key] = binned
        return binned

    def _decorations(self, row_index: int, row: Row, width: int) -> Decorations:
        sel: tuple[int, int] | None = None
        if self.selected_span is not None and row.lane is not None:
            lane_key, s, e = self.selected_span
            if lane_key == (row.lane.track, row.lane.depth):
                sel = (self.column_of(s), max(self.column_of(e - 1e-9), self.column_of(s)))
        cursor = self.column_of(self.cursor_t) if row_index == self.cursor_row else None
        area: tuple[int, int] | None = None
        if self.area is not None and self.area.row0 <= row_index <= self.area.row1:
            area = (self.column_of(self.area.t0), self.column_of(self.area.t1))
        flows: tuple[tuple[int, str], ...] = ()
        if row.lane is not None and self.flow_ends:
            lane_key = (row.lane.track, row.lane.depth)
            flows = tuple(
                (self.column_of(t), mark) for lk, t, mark in self.flow_ends if lk == lane_key
            )
        return Decorations(sel, cursor, area, row.expanded, row_index == self.cursor_row, flows)

    def _row_strip(self, row_index: int, width: int) -> Strip:
        row = self.rows[row_index]
        deco = self._decorations(row_index, row, width)
        key = (row.key, self.t0, self.t1, width, self.generation, self.active_overlays, deco)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        if row.kind == "braille":
            strip, complete = self._braille_strip(row, width, deco)
            if complete:
                self._strips[key] = strip
            return strip
        if row.kind == "counter":
            strip = self._counter_strip(row, width, deco)
            self._strips[key] = strip
            return strip
        binned = self._row_binned(row, width)
        if binned is None:  # summary still being built: a placeholder, not cached
            label = label_segment(
                row.label, row.indent, self.label_width, GROUP_STYLE, "▾ " if row.expanded else "▸ "
            )
            return Strip([label, *_pending(width)], self.label_width + width)
        glyphs, keys = binned.glyphs.copy(), binned.keys.copy()
        self._apply_overlays(row, glyphs, keys, width)
        text = self._slice_names(row, glyphs, keys, width)
        if deco.flows:
            chars = list(text) if text is not None else GLYPH_ARRAY[glyphs].tolist()
            for col, mark in deco.flows:
                if 0 <= col < width:
                    chars[col] = mark
                    keys[col] |= FLOW
            text = "".join(chars)
        sel, cursor, area, _, is_cursor_row, _ = deco
        if sel is not None:
            keys[max(sel[0], 0) : min(sel[1] + 1, width)] |= SELECTED
        if area is not None:
            keys[max(area[0], 0) : min(area[1] + 1, width)] |= AREA
        if cursor is not None and 0 <= cursor < width:
            keys[cursor] |= CURSOR
        marker = ("▾ " if row.expanded else "▸ ") if row.expandable else ""
        style = (
            CURSOR_LABEL if is_cursor_row else (GROUP_STYLE if row.kind != "lane" else LABEL_STYLE)
        )
        note = self.row_notes.get(row.key, "")
        label = label_segment(row.label + note, row.indent, self.label_width, style, marker)
        strip = Strip(
            [label, *cells_segments(glyphs, keys, row.unit, row.kind != "lane", text)],
            self.label_width + width,
        )
        self._strips[key] = strip
        return strip

    def _slice_names(
        self, row: Row, glyphs: np.ndarray, keys: np.ndarray, width: int
    ) -> str | None:
        """Write the names of slices at least 4 cells wide inside them (cut with '…'); marks
        their cells NAME so they draw as filled boxes. None when no slice is that wide."""
        if row.lane is None or self.model is None:
            return None
        index = row.lane.index
        if index.ids is None:
            return None
        where, first, last = name_boxes(index, self.t0, self.t1, width)
        if len(where) == 0:
            return None
        chars = GLYPH_ARRAY[glyphs].tolist()
        names = self.model.names_of(index.ids[where])
        for name, a, b in zip(names, first.tolist(), last.tolist(), strict=True):
            # Overlays show in the box's padding (at least its ends): ▒ exposed, ▓ critical.
            fill = "▒" if keys[a] & EXPOSED else "▓" if keys[a] & CRITICAL else ""
            if fill:
                body = fit_name(name, b - a - 2).strip(" ")
                pad = (b - a - len(body)) // 2
                text = fill * pad + body + fill * (b - a - pad - len(body))
            else:
                text = fit_name(name, b - a)
            chars[a:b] = list(text)
            keys[a:b] |= NAME
        return "".join(chars)

    def _counter_strip(self, row: Row, width: int, deco: Decorations) -> Strip:
        """A counter as a step chart: ▁…█ the highest value in each cell, scaled from 0 (or
        its minimum) to its maximum; the label ends with that maximum."""
        assert self.model is not None
        track, name = row.key[1], row.key[2]
        series = next(c for c in self.model.counters[track] if c.name == name)  # type: ignore[index]
        levels = step_levels(
            series.ts, series.values, self.t0, self.t1, width, series.low, series.high
        )
        glyphs = np.where(levels >= 8, FULL, BAR_BASE + np.maximum(levels, 1)).astype(np.int8)
        glyphs[levels < 0] = IDLE
        keys = np.where(levels >= 0, COUNTER_CODE, 0).astype(np.int32)
        if deco.cursor is not None and 0 <= deco.cursor < width:
            keys[deco.cursor] |= CURSOR
        style = CURSOR_LABEL if deco.is_cursor_row else LABEL_STYLE
        label = label_segment(
            f"{row.label} ≤{series.high:.4g}", row.indent, self.label_width, style
        )
        return Strip([label, *cells_segments(glyphs, keys, None, False)], self.label_width + width)

    def _braille_strip(self, row: Row, width: int, deco: Decorations) -> tuple[Strip, bool]:
        assert self.model is not None
        keys = [k for k in row.key[1:] if isinstance(k, tuple)]
        indexes = [self.summary_index(k) for k in keys]
        parts = [(index, 1.0) for index in indexes if index is not None]
        text = braille_text(parts, self.t0, self.t1, width)
        style = CURSOR_LABEL if deco.is_cursor_row else GROUP_STYLE
        label = label_segment(row.label, 0, self.label_width, style, "⣿ ")
        strip = Strip([label, Segment(text, BRAILLE_STYLE)], self.label_width + width)
        return strip, len(parts) == len(keys)

    def _apply_overlays(self, row: Row, glyphs: np.ndarray, keys: np.ndarray, width: int) -> None:
        if self.overlay_data is not None and self.active_overlays:
            apply_overlays(
                self.overlay_data, self.active_overlays, row, glyphs, keys, self.t0, self.t1, width
            )

    def select_at_cursor(self) -> bool:
        """Select the event nearest the cursor within its cell on the cursor row; on a rank
        or unit row, on the first of its lanes with an event there. False if none."""
        row = self.rows[self.cursor_row] if self.rows else None
        if row is None or self.model is None:
            return False
        cell = self.cell_ns
        c = self.column_of(self.cursor_t)
        lo, hi = self.t0 + c * cell, self.t0 + (c + 1) * cell
        lanes = [row.lane] if row.lane is not None else self.model.group_lanes(row.key)
        for lane in lanes:
            k = nearest_event(lane.index, lo, hi, self.cursor_t)
            if k is not None and lane.index.ids is not None:
                return self.select_event(int(lane.index.ids[k]), move_view=False)
        return False
