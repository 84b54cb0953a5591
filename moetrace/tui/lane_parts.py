"""The pieces of the lane tree: a lane (a slice of sorted event arrays), a track, a row.

Also `safe_text`, which every label and name goes through: names are data, control
characters are shown as \\xNN and never reach the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from moetrace.text import visible
from moetrace.trace.model import EVENT_KINDS

from .binning import IntervalIndex

MARKER_CODE = EVENT_KINDS.index("marker")


def safe_text(text: object) -> str:
    """A name as data (control characters, ESC, bidi overrides shown as escapes)."""
    return visible(text)


@dataclass
class LaneEvents:
    """All events sorted by (track, depth, ts): a lane is a slice of these arrays."""

    start: np.ndarray  # ns from the origin, float64
    end: np.ndarray
    ids: np.ndarray
    kinds: np.ndarray  # int8 index into EVENT_KINDS


class Lane:
    """Events of one track at one nesting depth (disjoint intervals, ns from the origin).

    Its `IntervalIndex` is built on first use, so a 256-rank trace with collapsed ranks
    never pays for the ~20k lanes it does not draw.
    """

    __slots__ = ("_index", "bounds", "depth", "events", "label", "rank", "track", "unit")

    def __init__(
        self,
        track: int,
        depth: int,
        rank: int | None,
        unit: str,
        label: str,
        events: LaneEvents | None,
        bounds: tuple[int, int] = (0, 0),
    ) -> None:
        self.track, self.depth, self.rank, self.unit, self.label = track, depth, rank, unit, label
        self.events, self.bounds = events, bounds
        self._index: IntervalIndex | None = None

    @property
    def index(self) -> IntervalIndex:
        if self._index is None:
            a, b = self.bounds
            ev = self.events
            if ev is None:
                self._index = IntervalIndex(
                    np.empty(0), np.empty(0), np.empty(0, np.uint32), np.empty(0, np.int8)
                )
            else:
                self._index = IntervalIndex(ev.start[a:b], ev.end[a:b], ev.ids[a:b], ev.kinds[a:b])
        return self._index

    def busy_parts(self) -> tuple[np.ndarray, np.ndarray]:
        """Starts and ends of its non-marker events (for summaries), without an index."""
        a, b = self.bounds
        ev = self.events
        if ev is None or a == b:
            return np.empty(0), np.empty(0)
        keep = ev.kinds[a:b] != MARKER_CODE
        return ev.start[a:b][keep], ev.end[a:b][keep]


@dataclass
class CounterSeries:
    """The samples of one counter (e.g. 'AI Core Freq MHz'): a value holds until the next."""

    track: int
    name: str
    ts: np.ndarray  # ns from the origin, sorted
    values: np.ndarray

    @property
    def low(self) -> float:
        """Bottom of the chart: 0, or the smallest value when it goes below 0."""
        return float(min(self.values.min(), 0.0)) if len(self.values) else 0.0

    @property
    def high(self) -> float:
        return float(self.values.max()) if len(self.values) else 1.0


@dataclass
class TrackInfo:
    """A track and its lanes by depth."""

    track: int
    rank: int | None
    unit: str
    label: str
    lanes: list[Lane] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    """One visible timeline row: a rank or unit summary, or a lane."""

    key: tuple[object, ...]
    kind: str  # "rank" | "unit" | "lane" | "braille" | "counter"
    label: str
    indent: int
    rank: int | None
    unit: str | None
    lane: Lane | None
    scale: int  # lanes a summary stands for (divides its busy fraction)
    expandable: bool
    expanded: bool
