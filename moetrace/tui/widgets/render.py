"""Turn binned lanes into Strips: the colour palette, cell styles, ruler and labels.

Colour = what the event does (kind) and where it runs (unit): cube (AIC) blue, vector (AIV)
green, comm orange, memory purple, host grey. Overlay flags restyle cells: critical path gold,
idle gaps red dots, exposed comm a red background, the selected event white.
"""

from __future__ import annotations

import functools

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from moetrace.trace.model import EVENT_KINDS

from ..binning import (
    AREA,
    CRITICAL,
    CURSOR,
    EXPOSED,
    FLOW,
    GAP,
    GLYPH_ARRAY,
    KIND_MASK,
    NAME,
    SELECTED,
    VIEWPORT,
    runs,
)
from ..format import fit_label, nice_step, tick_label
from .layout import PENDING_STYLE

COMPUTE_BY_UNIT = {"aic": "#4e9bd6", "aiv": "#5fbf6f", "stream": "#4e9bd6", "cpu": "#8fb8c8"}
KIND_COLOURS = {
    "compute": "#4e9bd6",
    "comm": "#f28e2b",
    "memory": "#b07aa1",
    "host": "#9aa5b1",
    "marker": "#a0826d",
    "other": "#8a8a8a",
}
SUMMARY_COLOUR = "#b8b8b8"
CRITICAL_COLOUR = "#ffd700"
GAP_COLOUR = "#e05050"
EXPOSED_BG = "#8a1010"
EXPOSED_COLOUR = "#ff3030"
AREA_BG = "#1f3550"
FLOW_COLOUR = "#ff66ff"  # the ends of the selected event's flows (▶ into it, ◀ out of it)
VIEWPORT_BG = "#3a3a3a"
LABEL_STYLE = Style(color="#c8c8c8")
GROUP_STYLE = Style(color="#ffffff", bold=True)
CURSOR_LABEL = Style(color="#000000", bgcolor="#c8c8c8", bold=True)
BRAILLE_STYLE = Style(color="#c0c0c0")
RULER_STYLE = Style(color="#909090")
MARK_STYLE = Style(color="#ffd700", bold=True)

_style_cache: dict[tuple[str | None, bool, int], Style] = {}


def cell_style(unit: str | None, summary: bool, key: int) -> Style:
    """The Style of a cell with style `key` (kind code | flags) on a lane of `unit`."""
    cache_key = (unit, summary, key)
    style = _style_cache.get(cache_key)
    if style is not None:
        return style
    kind_code = key & KIND_MASK
    colour: str | None = None
    if kind_code:
        if summary:
            colour = COMPUTE_BY_UNIT.get(unit or "", SUMMARY_COLOUR) if unit else SUMMARY_COLOUR
        else:
            kind = EVENT_KINDS[kind_code - 1]
            colour = (
                COMPUTE_BY_UNIT.get(unit or "", KIND_COLOURS["compute"])
                if kind == "compute"
                else KIND_COLOURS[kind]
            )
    bg: str | None = None
    bold = False
    if key & CRITICAL:
        colour, bold = CRITICAL_COLOUR, True
    if key & GAP:
        colour = GAP_COLOUR
    if key & AREA:
        bg = AREA_BG
    if key & VIEWPORT:
        bg = VIEWPORT_BG
    if key & EXPOSED:
        # Exposed comm: a red background (gold on red when also on the critical path).
        bg = EXPOSED_BG
        if not key & CRITICAL:
            colour = EXPOSED_COLOUR
    if key & SELECTED:
        colour, bold = "#ffffff", True
    if key & FLOW:
        colour, bold = FLOW_COLOUR, True
    underline = False
    if key & NAME and colour is not None and not key & FLOW:
        # A slice carrying its name: a filled box in its colour, the name in black on it;
        # on the critical path also underlined (tells it apart without colour).
        colour, bg, underline = "#000000", colour, bool(key & CRITICAL)
    style = Style(
        color=colour, bgcolor=bg, bold=bold, underline=underline, reverse=bool(key & CURSOR)
    )
    _style_cache[cache_key] = style
    return style


def cells_segments(
    glyphs: np.ndarray,
    keys: np.ndarray,
    unit: str | None,
    summary: bool,
    text: list[str] | None = None,
) -> list[Segment]:
    """One Segment per run of equal style: the cells of a lane (`text`: one string per cell,
    when slice names were written over the glyphs; a wide character's second cell is "")."""
    if text is None:
        plain = "".join(GLYPH_ARRAY[glyphs].tolist())
        return [Segment(plain[a:b], cell_style(unit, summary, key)) for a, b, key in runs(keys)]
    return [Segment("".join(text[a:b]), cell_style(unit, summary, key)) for a, b, key in runs(keys)]


def cells_strip(glyphs: np.ndarray, keys: np.ndarray, unit: str | None, summary: bool) -> Strip:
    """The cells of a lane as a Strip."""
    return Strip(cells_segments(glyphs, keys, unit, summary), len(glyphs))


@functools.lru_cache(maxsize=4096)
def pending_strip(width: int) -> Strip:
    """A lane whose data is still being built: '…' in grey."""
    return Strip([Segment("…".ljust(width), PENDING_STYLE)], width)


CURSOR_POINTER = "◂"
"""Drawn in the gutter's last column of the cursor row: the row is marked by a glyph, not
only by the label's colour (NO_COLOR, plain captures)."""


def label_segment(
    text: str,
    indent: int,
    width: int,
    style: Style,
    marker: str = "",
    pointer: bool = False,
    note: str = "",
) -> Segment:
    """The gutter label of a row and its note as one Segment of exactly `width` cells
    (`pointer`: the cursor row, whose gap column shows CURSOR_POINTER)."""
    body = fit_label("  " * indent + marker + text, width, note)
    if pointer and body:
        body = body[:-1] + CURSOR_POINTER
    return Segment(body, style)


def label_strip(text: str, indent: int, width: int, style: Style, marker: str = "") -> Strip:
    """The fixed gutter label of a row, padded or cut to `width` cells."""
    return Strip([label_segment(text, indent, width, style, marker)], width)


def ruler_strip(
    t0: float, t1: float, width: int, origin_label: str = "", reserved: frozenset[int] = frozenset()
) -> Strip:
    """Time ruler: a tick every 1/2/5×10^k ns with its time from the trace start. A label is
    drawn only where it fits whole: before the next tick and clear of the `reserved` columns
    (where the cursor and marks go), so no glyph ever overwrites a digit."""
    chars = [" "] * width
    if width > 0 and t1 > t0:
        step = nice_step(t1 - t0, width)
        first = np.ceil(t0 / step) * step
        cell = (t1 - t0) / width
        cols = [(int((tick - t0) / cell), float(tick)) for tick in np.arange(first, t1, step)]
        cols = [(col, tick) for col, tick in cols if 0 <= col < width]
        for i, (col, tick) in enumerate(cols):
            chars[col] = "╵"
            label = tick_label(tick, step)
            end = col + 1 + len(label)  # one past the label's last column
            limit = cols[i + 1][0] if i + 1 < len(cols) else width + 1
            if end < limit and end <= width and not any(c in reserved for c in range(col + 1, end)):
                chars[col + 1 : end] = list(label)
    return Strip([Segment("".join(chars), RULER_STYLE)], width)


def overlay_marks(strip: Strip, marks: dict[int, str], style: Style) -> Strip:
    """The ruler with a character put at some columns (cursor ┃, marks ▼) in `style`."""
    width = strip.cell_length
    cols = sorted(c for c in marks if 0 <= c < width)
    if not cols:
        return strip
    text = strip.text.ljust(width)
    segments: list[Segment] = []
    prev = 0
    for col in cols:
        if col > prev:
            segments.append(Segment(text[prev:col], RULER_STYLE))
        segments.append(Segment(marks[col], style))
        prev = col + 1
    if prev < width:
        segments.append(Segment(text[prev:], RULER_STYLE))
    return Strip(segments, width)
