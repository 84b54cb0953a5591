"""Lane rows as Strips: the overview, the ruler, slices with names, counters, braille ranks.

`LanePainter` turns the lane model and what the timeline looks at (a `Frame`: the viewport,
the rows and their decorations) into Strips. Each lane is binned with `bin_lane`
(O(width · log n)) and cached: bins by (row, t0, t1, width, generation), Strips additionally by
overlays and the decorations that touch that row (selection, cursor, area), so moving the
cursor repaints one or two rows. numpy lives here, not in the widget: the viewer's first frame
(load progress) is drawn before numpy is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from rich.segment import Segment
from textual.cache import LRUCache
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
    IntervalIndex,
    bin_lane,
    braille_text,
    name_boxes,
    nearest_event,
    step_levels,
)
from ..format import fit_cells, fmt_ns
from ..lanes import LaneModel, Row
from ..overlays import Overlays
from .overlay_paint import apply_overlays
from .render import (
    BRAILLE_STYLE,
    CURSOR_LABEL,
    GROUP_STYLE,
    LABEL_STYLE,
    MARK_STYLE,
    cells_segments,
    cells_strip,
    label_segment,
    label_strip,
    overlay_marks,
    pending_strip,
    ruler_strip,
)
from .viewport import LaneKey, Viewport

COMM_CODE = 2  # 1 + index of "comm" in EVENT_KINDS
COUNTER_CODE = 1 + EVENT_KINDS.index("memory")  # counters drawn in the memory colour

SummaryIndex = Callable[[tuple[object, ...]], IntervalIndex | None]


class Decorations(NamedTuple):
    """What besides the data changes a row's Strip: selection, cursor and area columns."""

    selected: tuple[int, int] | None
    cursor: int | None
    area: tuple[int, int] | None
    expanded: bool
    is_cursor_row: bool
    flows: tuple[tuple[int, str], ...] = ()  # (column, ▶/◀) flow ends on this row


class Frame(NamedTuple):
    """What one repaint draws: the view, the lane columns and label gutter, the rows and
    everything layered on them."""

    view: Viewport
    width: int  # lane columns
    label_width: int  # gutter columns
    rows: list[Row]
    generation: int  # bumped when rows, notes or overlays change
    active_overlays: frozenset[str]
    overlays: Overlays | None
    row_notes: dict[tuple[object, ...], str]
    flow_ends: list[tuple[LaneKey, float, str]]


def _strip_blank(cells: list[str]) -> list[str]:
    """`cells` without the blank cells at either end (a name's centring padding)."""
    lo, hi = 0, len(cells)
    while lo < hi and cells[lo] == " ":
        lo += 1
    while hi > lo and cells[hi - 1] == " ":
        hi -= 1
    return cells[lo:hi]


def _put_cell(cells: list[str], col: int, glyph: str) -> None:
    """Put a one-cell `glyph` at `col` of a row of cells; half of a wide character left
    behind becomes a space, so the row keeps its width."""
    if cells[col] == "" and col > 0:  # the second cell of a wide character
        cells[col - 1] = " "
    elif col + 1 < len(cells) and cells[col + 1] == "":  # its first cell
        cells[col + 1] = " "
    cells[col] = glyph


def _bracket(cells: list[str], first: int, last: int) -> list[str]:
    """The selected slice's ends marked by a glyph, not only by colour: `[` on its first
    cell and `]` on its last (`◆` when it fills one cell); an end outside the view gets none."""
    width = len(cells)
    if first == last and 0 <= first < width:
        _put_cell(cells, first, "◆")
        return cells
    if 0 <= first < width:
        _put_cell(cells, first, "[")
    if 0 <= last < width:
        _put_cell(cells, last, "]")
    return cells


class LanePainter:
    """Strips for one lane model; `summary_index(key)` gives a group's summary (None while it
    is being built, drawn as a placeholder)."""

    def __init__(self, model: LaneModel, summary_index: SummaryIndex) -> None:
        self.model = model
        self.summary_index = summary_index
        self._bins: LRUCache[tuple[object, ...], Binned] = LRUCache(4096)
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(4096)

    def overview(self, f: Frame) -> Strip:
        """Row 0: the whole trace, the part in view highlighted."""
        v, width = f.view, f.width
        key = ("overview", v.t0, v.t1, width, f.generation)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        index = self.summary_index(("all",))
        if index is None:
            return Strip.join(
                [label_strip("overview", 0, f.label_width, GROUP_STYLE), pending_strip(width)]
            )
        binned = bin_lane(
            index, 0.0, self.model.span, width, scale=self.model.summary_scale(("all",))
        )
        keys = binned.keys.copy()
        cell = self.model.span / width
        c0, c1 = int(v.t0 // cell), int(np.ceil(v.t1 / cell))
        keys[max(c0, 0) : max(c1, 0)] |= VIEWPORT
        strip = Strip.join(
            [
                label_strip("overview", 0, f.label_width, GROUP_STYLE),
                cells_strip(binned.glyphs, keys, None, True),
            ]
        )
        self._strips[key] = strip
        return strip

    def ruler(self, f: Frame) -> Strip:
        """Row 1: the time ruler with the cursor ┃ and the marks ▼."""
        v = f.view
        marks = {v.column_of(v.cursor_t): "┃"}
        marks.update({v.column_of(m): "▼" for m in v.marks})
        ruler = ruler_strip(v.t0, v.t1, f.width, reserved=frozenset(marks))
        ruler = overlay_marks(ruler, marks, MARK_STYLE)
        span = f"{fmt_ns(v.t1 - v.t0)} view"
        return Strip.join([label_strip(span, 0, f.label_width, LABEL_STYLE), ruler])

    def _row_binned(self, row: Row, f: Frame) -> Binned | None:
        key = (row.key, f.view.t0, f.view.t1, f.width, f.generation)
        binned = self._bins.get(key)
        if binned is None:
            index = row.lane.index if row.lane is not None else self.summary_index(row.key)
            if index is None:
                return None
            binned = bin_lane(index, f.view.t0, f.view.t1, f.width, scale=row.scale)
            self._bins[key] = binned
        return binned

    def _decorations(self, row_index: int, row: Row, f: Frame) -> Decorations:
        v = f.view
        sel: tuple[int, int] | None = None
        if v.selected_span is not None and row.lane is not None:
            lane_key, s, e = v.selected_span
            if lane_key == (row.lane.track, row.lane.depth):
                sel = (v.column_of(s), max(v.column_of(e - 1e-9), v.column_of(s)))
        cursor = v.column_of(v.cursor_t) if row_index == v.cursor_row else None
        area: tuple[int, int] | None = None
        if v.area is not None and v.area.row0 <= row_index <= v.area.row1:
            area = (v.column_of(v.area.t0), v.column_of(v.area.t1))
        flows: tuple[tuple[int, str], ...] = ()
        if row.lane is not None and f.flow_ends:
            lane_key = (row.lane.track, row.lane.depth)
            flows = tuple((v.column_of(t), mark) for lk, t, mark in f.flow_ends if lk == lane_key)
        return Decorations(sel, cursor, area, row.expanded, row_index == v.cursor_row, flows)

    def row(self, row_index: int, f: Frame) -> Strip:
        """Lane row `row_index` of `f.rows`: label gutter plus its cells."""
        row = f.rows[row_index]
        width = f.width
        deco = self._decorations(row_index, row, f)
        key = (row.key, f.view.t0, f.view.t1, width, f.generation, f.active_overlays, deco)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        if row.kind == "braille":
            strip, complete = self._braille_strip(row, f, deco)
            if complete:
                self._strips[key] = strip
            return strip
        if row.kind == "counter":
            strip = self._counter_strip(row, f, deco)
            self._strips[key] = strip
            return strip
        binned = self._row_binned(row, f)
        if binned is None:  # summary still being built: a placeholder, not cached
            label = label_segment(
                row.label, row.indent, f.label_width, GROUP_STYLE, "▾ " if row.expanded else "▸ "
            )
            return Strip([label, *pending_strip(width)], f.label_width + width)
        glyphs, keys = binned.glyphs.copy(), binned.keys.copy()
        if f.overlays is not None and f.active_overlays:
            apply_overlays(
                f.overlays, f.active_overlays, row, glyphs, keys, f.view.t0, f.view.t1, width
            )
        text = self._slice_names(row, glyphs, keys, f)
        if deco.flows:
            chars: list[str] = text if text is not None else GLYPH_ARRAY[glyphs].tolist()
            for col, mark in deco.flows:
                if 0 <= col < width:
                    _put_cell(chars, col, mark)
                    keys[col] |= FLOW
            text = chars
        sel, cursor, area, _, is_cursor_row, _ = deco
        if sel is not None:
            keys[max(sel[0], 0) : min(sel[1] + 1, width)] |= SELECTED
            text = _bracket(text if text is not None else GLYPH_ARRAY[glyphs].tolist(), *sel)
        if area is not None:
            keys[max(area[0], 0) : min(area[1] + 1, width)] |= AREA
        if cursor is not None and 0 <= cursor < width:
            keys[cursor] |= CURSOR
        marker = ("▾ " if row.expanded else "▸ ") if row.expandable else ""
        style = (
            CURSOR_LABEL if is_cursor_row else (GROUP_STYLE if row.kind != "lane" else LABEL_STYLE)
        )
        note = f.row_notes.get(row.key, "")
        label = label_segment(
            row.label, row.indent, f.label_width, style, marker, is_cursor_row, note
        )
        strip = Strip(
            [label, *cells_segments(glyphs, keys, row.unit, row.kind != "lane", text)],
            f.label_width + width,
        )
        self._strips[key] = strip
        return strip

    def _slice_names(
        self, row: Row, glyphs: np.ndarray, keys: np.ndarray, f: Frame
    ) -> list[str] | None:
        """Write the names of slices at least 4 cells wide inside them (cut with '…'), one
        string per cell (wide characters at their width); marks their cells NAME so they draw
        as filled boxes. None when no slice is that wide."""
        if row.lane is None:
            return None
        index = row.lane.index
        if index.ids is None:
            return None
        where, first, last = name_boxes(index, f.view.t0, f.view.t1, f.width)
        if len(where) == 0:
            return None
        chars: list[str] = GLYPH_ARRAY[glyphs].tolist()
        names = self.model.names_of(index.ids[where])
        for name, a, b in zip(names, first.tolist(), last.tolist(), strict=True):
            # Overlays show in the box's padding (at least its ends): ▒ exposed, ▓ critical.
            fill = "▒" if keys[a] & EXPOSED else "▓" if keys[a] & CRITICAL else ""
            if fill:
                body = _strip_blank(fit_cells(name, b - a - 2))
                pad = (b - a - len(body)) // 2
                cells = [fill] * pad + body + [fill] * (b - a - pad - len(body))
            else:
                cells = fit_cells(name, b - a)
            chars[a:b] = cells
            keys[a:b] |= NAME
        return chars

    def _counter_strip(self, row: Row, f: Frame, deco: Decorations) -> Strip:
        """A counter as a step chart: ▁…█ the highest value in each cell, scaled from 0 (or
        its minimum) to its maximum; the label ends with that maximum."""
        track, name = row.key[1], row.key[2]
        series = next(c for c in self.model.counters[track] if c.name == name)  # type: ignore[index]
        width = f.width
        levels = step_levels(
            series.ts, series.values, f.view.t0, f.view.t1, width, series.low, series.high
        )
        glyphs = np.where(levels >= 8, FULL, BAR_BASE + np.maximum(levels, 1)).astype(np.int8)
        glyphs[levels < 0] = IDLE
        keys = np.where(levels >= 0, COUNTER_CODE, 0).astype(np.int32)
        if deco.cursor is not None and 0 <= deco.cursor < width:
            keys[deco.cursor] |= CURSOR
        style = CURSOR_LABEL if deco.is_cursor_row else LABEL_STYLE
        label = label_segment(
            f"{row.label} ≤{series.high:.4g}",
            row.indent,
            f.label_width,
            style,
            pointer=deco.is_cursor_row,
        )
        return Strip([label, *cells_segments(glyphs, keys, None, False)], f.label_width + width)

    def _braille_strip(self, row: Row, f: Frame, deco: Decorations) -> tuple[Strip, bool]:
        keys = [k for k in row.key[1:] if isinstance(k, tuple)]
        indexes = [self.summary_index(k) for k in keys]
        parts = [(index, 1.0) for index in indexes if index is not None]
        text = braille_text(parts, f.view.t0, f.view.t1, f.width)
        style = CURSOR_LABEL if deco.is_cursor_row else GROUP_STYLE
        label = label_segment(row.label, 0, f.label_width, style, "⣿ ", pointer=deco.is_cursor_row)
        strip = Strip([label, Segment(text, BRAILLE_STYLE)], f.label_width + f.width)
        return strip, len(parts) == len(keys)


def event_at(row: Row, model: LaneModel, view: Viewport) -> int | None:
    """The id of the event nearest the cursor within its cell on `row`; on a rank or unit
    row, on the first of its lanes with an event there. None if none."""
    cell = view.cell_ns
    c = view.column_of(view.cursor_t)
    lo, hi = view.t0 + c * cell, view.t0 + (c + 1) * cell
    lanes = [row.lane] if row.lane is not None else model.group_lanes(row.key)
    for lane in lanes:
        k = nearest_event(lane.index, lo, hi, view.cursor_t)
        if k is not None and lane.index.ids is not None:
            return int(lane.index.ids[k])
    return None


def event_next_to(index: IntervalIndex, here: float, direction: int, after: bool) -> int | None:
    """The id of the event on a lane starting after `here` (direction 1; at `here` counts
    unless `after`) or the last starting before it (direction -1). None if none."""
    if index.ids is None or len(index.starts) == 0:
        return None
    if direction > 0:
        k = int(np.searchsorted(index.starts, here, side="right" if after else "left"))
    else:
        k = int(np.searchsorted(index.starts, here, side="left")) - 1
    return int(index.ids[k]) if 0 <= k < len(index.starts) else None
