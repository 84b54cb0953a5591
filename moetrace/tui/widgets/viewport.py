"""What the timeline looks at, as plain state: the time window, the cursor, the selection, the
area and marks, with the pure rules for zoom, pan and clamping (Perfetto's habits).

No Textual and no numpy here, so every rule is unit-testable on its own and importing it costs
nothing. Times are ns from the trace origin; `cells` is the number of lane columns the window
is drawn on (the widget keeps it current). Keyboard zoom anchors at the selected event when it
is in view, else at the centre of the view (the mouse zooms at the pointer); the anchor keeps
its column. Held zoom keys are rate-limited to MAX_ZOOM_PER_S. The time cursor never leaves
the trace [0, span).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MIN_CELL_NS = 0.05  # deepest zoom: 1/20 ns per cell
ZOOM_STEP = 0.8  # one zoom key: the view width × 0.8 (in) or ÷ 0.8 (out)
PAN_STEP = 0.1  # one pan key: a tenth of the view width
MAX_ZOOM_PER_S = 16.0  # held zoom keys: at most ×16 (or ÷16) of view width per second
MAX_VIEW_SPAN = 1.5  # the view is at most this many spans wide (then it runs past the end)


@dataclass(frozen=True)
class Area:
    """An area selection: a time range (ns from the origin) over a range of rows."""

    t0: float
    t1: float
    row0: int
    row1: int


LaneKey = tuple[int, int]  # (track, depth) of a lane


@dataclass
class Viewport:
    """The timeline's view state; every method keeps the cursor inside the trace and view."""

    span: float = 1.0  # trace length, ns
    cells: int = 1  # lane columns the window is drawn on
    t0: float = 0.0
    t1: float = 1.0
    cursor_t: float = 0.0
    cursor_row: int = 0
    selected: int | None = None  # event id
    selected_span: tuple[LaneKey, float, float] | None = None  # (lane, start, end) of it
    area: Area | None = None
    area_anchor: tuple[float, int] | None = None  # (time, row) of a half-made area (v)
    marks: list[float] = field(default_factory=list)
    zoom_log: list[tuple[float, float]] = field(default_factory=list)  # (time s, log zoom)

    # ------------------------------------------------------------ geometry
    @property
    def cell_ns(self) -> float:
        """ns per lane column."""
        return (self.t1 - self.t0) / max(self.cells, 1)

    def column_of(self, t: float) -> int:
        """The lane column time `t` falls in (may be off screen: < 0 or ≥ cells)."""
        return math.floor((t - self.t0) / self.cell_ns)

    def time_at(self, column: int) -> float:
        """The time at the middle of lane column `column`."""
        return self.t0 + (column + 0.5) * self.cell_ns

    # ------------------------------------------------------------ window
    def reset(self, span: float) -> None:
        """A new trace of `span` ns: the whole of it in view, the cursor at its start."""
        self.span = span
        self.t0, self.t1 = 0.0, span
        self.cursor_t = 0.0
        self.cursor_row = 0

    def set_view(self, t0: float, t1: float) -> None:
        """Show [t0, t1), clamped: no narrower than MIN_CELL_NS per cell, no wider than
        MAX_VIEW_SPAN spans, and inside the trace: never before its start, and past its end
        only when the view is wider than the trace (panning stops at either end)."""
        width = max(t1 - t0, MIN_CELL_NS * self.cells)
        width = min(width, self.span * MAX_VIEW_SPAN)
        t0 = max(min(t0, self.span - width), 0.0)
        self.t0, self.t1 = float(t0), float(t0 + width)
        self.clamp_cursor()

    def clamp_cursor(self) -> None:
        """Keep the time cursor inside the trace [0, span) and in view: a cursor the view
        left behind moves to the view's centre."""
        cell = (self.t1 - self.t0) / max(self.cells, 1)
        if not self.t0 <= self.cursor_t < self.t1:
            self.cursor_t = (self.t0 + self.t1) / 2
        lo = max(self.t0, 0.0)
        hi = min(self.t1, self.span) - min(cell / 2, self.span / 2)
        self.cursor_t = float(min(max(self.cursor_t, lo), max(hi, lo)))

    def centre_on(self, t: float) -> None:
        """Keep the view width; put time `t` in the middle."""
        half = (self.t1 - self.t0) / 2
        self.set_view(t - half, t + half)

    def zoom_anchor(self) -> float:
        """Where keyboard zoom anchors: the selected event's middle when it is in view,
        else the centre of the view."""
        if self.selected_span is not None:
            _, start, end = self.selected_span
            if end > self.t0 and start < self.t1:
                return (max(start, self.t0) + min(end, self.t1)) / 2
        return (self.t0 + self.t1) / 2

    def limited_zoom(self, factor: float, now: float) -> float:
        """`factor` cut so that the net key zoom within the second before `now` (s) stays
        within ×/÷ MAX_ZOOM_PER_S (a held key cannot overshoot; w then s is never held back)."""
        self.zoom_log = [(t, z) for t, z in self.zoom_log if now - t < 1.0]
        used = sum(z for _, z in self.zoom_log)  # signed log of the zoom so far
        limit = math.log(MAX_ZOOM_PER_S)
        step = min(max(math.log(factor), -limit - used), limit - used)
        if step == 0.0:
            return 1.0
        self.zoom_log.append((now, step))
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

    def move_cursor(self, cells: int) -> None:
        """Move the time cursor by `cells` columns (within the trace); the view follows it."""
        self.cursor_t = min(max(self.cursor_t + cells * self.cell_ns, 0.0), self.span)
        if self.cursor_t < self.t0 or self.cursor_t >= self.t1:
            self.centre_on(self.cursor_t)
        self.clamp_cursor()

    def show_span(self, start: float, end: float) -> None:
        """Make sure [start, end] is in view: centre it (same width) if it is off screen."""
        if end < self.t0 or start >= self.t1:
            self.centre_on((start + end) / 2)

    def focus(self, start: float, end: float) -> None:
        """Centre [start, end]; when it already is, or the clamp to the trace keeps the view
        from moving to centre it, fit the view to it (10% padding)."""
        mid = (start + end) / 2
        before = (self.t0, self.t1)
        if abs((self.t0 + self.t1) / 2 - mid) > self.cell_ns:
            self.centre_on(mid)
        if (self.t0, self.t1) == before:
            pad = (end - start) * 0.1 if end > start else self.cell_ns * 5
            self.set_view(start - pad, end + pad)

    def grow(self, span: float, shift: float) -> None:
        """The trace grew (more ranks arrived) to `span` ns, its origin `shift` ns earlier:
        a view of the whole trace stays the whole trace; a zoomed view, the cursor, the
        selection, the area and the marks stay on the same absolute times."""
        whole = self.t0 <= 0.0 and self.t1 >= self.span
        self.span = span
        self.t0, self.t1, self.cursor_t = self.t0 + shift, self.t1 + shift, self.cursor_t + shift
        if self.selected_span is not None:
            lane, start, end = self.selected_span
            self.selected_span = (lane, start + shift, end + shift)
        if self.area is not None:
            a = self.area
            self.area = Area(a.t0 + shift, a.t1 + shift, a.row0, a.row1)
        self.marks = [m + shift for m in self.marks]
        if whole:
            self.t0, self.t1 = 0.0, span
        self.clamp_cursor()

    # ------------------------------------------------------------ marks, areas
    def toggle_mark(self) -> None:
        """m: a mark at the selected event's start (else the cursor); again: remove it."""
        t = self.selected_span[1] if self.selected_span is not None else self.cursor_t
        if t in self.marks:
            self.marks.remove(t)
        else:
            self.marks.append(t)

    def area_step(self) -> Area | None:
        """v: the first press anchors at the cursor (returns None), the second returns the
        area anchor..cursor (one cell past the cursor, so it is never empty)."""
        if self.area_anchor is None:
            self.area_anchor = (self.cursor_t, self.cursor_row)
            return None
        (ta, ra), self.area_anchor = self.area_anchor, None
        tb, rb = self.cursor_t, self.cursor_row
        return Area(min(ta, tb), max(ta, tb) + self.cell_ns, min(ra, rb), max(ra, rb))


def scroll_to_show(row: int, pinned: int, top: int, visible: int) -> int | None:
    """The lane scroll (first scrolled row on screen) that shows `row`, or None when it is
    already on screen. Rows below `pinned` are pinned (always on screen); `visible` scrolled
    rows fit under them."""
    if row < pinned:
        return None
    position = row - pinned  # among the scrolled rows
    if position < top:
        return position
    if position >= top + visible:
        return position - visible + 1
    return None


def held_key_steps(repeats: int) -> float:
    """Step multiplier for a held key after `repeats` quick repeats: grows 0.5 per repeat,
    up to 8×."""
    return min(1.0 + 0.5 * repeats, 8.0)
