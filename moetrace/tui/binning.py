"""Screen binning of a lane's intervals in O(width · log n), independent of events in view.

A lane is a set of intervals (ns, relative to the trace origin, as float64). Its index keeps
starts and ends sorted independently with their prefix sums, so the busy time below any t is
`B(t) = Σ_{s<t}(t − s) − Σ_{e<t}(t − e)` (valid even when intervals overlap, e.g. for a
rank's summary lane) and the number of intervals meeting [a, b) is `#(s < b) − #(e ≤ a)`.
Binning a screen evaluates those at the 2·W+1 half-cell edges with `searchsorted`: no loop
over events. Pure numpy; the widget turns the glyph/style codes into Strips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Glyph codes -> characters. Bars ▁…▇ (and █) show the busy fraction of merged cells;
# half blocks ▌▐ show sub-cell edges of a single event; slivers ▏▕ events thinner than half.
# Overlays change glyphs as well as colours, so they read without colour (NO_COLOR):
# critical path ▓ (its waits ═), exposed comm ▒, idle gaps ·.
GLYPHS = " ▏▕▌▐█▁▂▃▄▅▆▇│·═▓▒"
IDLE, SLIVER_L, SLIVER_R, HALF_L, HALF_R, FULL = 0, 1, 2, 3, 4, 5
BAR_BASE = 5  # BAR_BASE + level for level 1..7 -> ▁…▇; level 8 -> █ (FULL)
INSTANT, GAP_DOT, WAIT_LINE, CRITICAL_FULL, EXPOSED_FULL = 13, 14, 15, 16, 17
GLYPH_ARRAY = np.array(list(GLYPHS), dtype="<U1")

# Style flag bits or-ed onto a cell's base kind code (0 = idle, 1 + kind index otherwise).
KIND_MASK = 0x0F
MERGED = 0x10
CRITICAL = 0x20
GAP = 0x40
EXPOSED = 0x80
SELECTED = 0x100
CURSOR = 0x200
AREA = 0x400
VIEWPORT = 0x800
NAME = 0x1000  # the body of a slice wide enough to carry its name: drawn as a filled box
FLOW = 0x2000  # an end of a flow (dependency) of the selected event


def _take(values: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    return values if order is None else values[order]


class IntervalIndex:
    """Sorted starts/ends with prefix sums: busy time and counts over any cells in O(log n).

    `ids`/`kinds` are kept (in start order) only for disjoint lanes, where the k-th start and
    the k-th end belong to the same event; summary lanes of overlapping intervals omit them.
    Zero-length events are kept apart as instants so they neither add busy time nor make
    neighbouring cells look merged.
    """

    __slots__ = (
        "cum_dur",
        "cum_ends",
        "cum_starts",
        "disjoint",
        "ends",
        "ids",
        "instants",
        "kinds",
        "starts",
    )

    def __init__(
        self,
        starts: np.ndarray,
        ends: np.ndarray,
        ids: np.ndarray | None = None,
        kinds: np.ndarray | None = None,
        *,
        disjoint: bool = True,
    ) -> None:
        starts = np.asarray(starts, dtype=np.float64)
        ends = np.asarray(ends, dtype=np.float64)
        positive = ends > starts
        self.instants = np.sort(starts[~positive])
        self.disjoint = disjoint
        if disjoint:
            s_pos = starts[positive]
            order = None if np.all(s_pos[1:] >= s_pos[:-1]) else np.argsort(s_pos, kind="stable")
            self.starts = s_pos if order is None else s_pos[order]
            # Badly nested sources may overlap partially: clip each end at the next start so
            # the k-th start and k-th end stay one event and both arrays stay sorted.
            e_pos = ends[positive] if order is None else ends[positive][order]
            self.ends = np.minimum(e_pos, np.append(self.starts[1:], np.inf))
            self.ids = None if ids is None else _take(np.asarray(ids)[positive], order)
            self.kinds = None if kinds is None else _take(np.asarray(kinds)[positive], order)
        else:
            # Stable sort = timsort/radix: fast on concatenations of already sorted lanes.
            self.starts = np.sort(starts[positive], kind="stable")
            self.ends = np.sort(ends[positive], kind="stable")
            self.ids = None
            self.kinds = None
        self.cum_starts = np.concatenate([[0.0], np.cumsum(self.starts)])
        self.cum_ends = np.concatenate([[0.0], np.cumsum(self.ends)])
        self.cum_dur = np.concatenate([[0.0], np.cumsum(self.ends - self.starts)])

    def __len__(self) -> int:
        return len(self.starts) + len(self.instants)

    @classmethod
    def merged(cls, parts: list[IntervalIndex]) -> IntervalIndex:
        """A summary index over several lanes (their intervals may overlap each other)."""
        if not parts:
            return cls(np.empty(0), np.empty(0), disjoint=False)
        starts = np.concatenate([p.starts for p in parts] + [p.instants for p in parts])
        ends = np.concatenate([p.ends for p in parts] + [p.instants for p in parts])
        # Starts and ends are sorted independently, which is all B(t) and counts need.
        return cls(starts, ends, disjoint=False)

    def busy_below(self, t: np.ndarray) -> np.ndarray:
        """B(t): total busy time (ns, summed over intervals) in (-inf, t), for each t."""
        k_start = np.searchsorted(self.starts, t, side="left")
        if self.disjoint and len(self.starts):
            # Numerically gentler form for disjoint lanes: whole intervals below + the open one.
            durations_cum = self.cum_dur
            prev = np.maximum(k_start - 1, 0)
            open_part = np.where(
                k_start > 0,
                np.minimum(t - self.starts[prev], self.ends[prev] - self.starts[prev]),
                0.0,
            )
            return durations_cum[prev] * (k_start > 0) + open_part
        k_end = np.searchsorted(self.ends, t, side="left")
        busy: np.ndarray = (t * k_start - self.cum_starts[k_start]) - (
            t * k_end - self.cum_ends[k_end]
        )
        return busy

    def count_meeting(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Number of positive-length intervals meeting [lo, hi) (start < hi and end > lo)."""
        return np.searchsorted(self.starts, hi, side="left") - np.searchsorted(
            self.ends, lo, side="right"
        )

    def instants_in(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Number of zero-length events in [lo, hi)."""
        return np.searchsorted(self.instants, hi, side="left") - np.searchsorted(
            self.instants, lo, side="left"
        )

    def occupancy(self, t0: float, t1: float, width: int) -> np.ndarray:
        """Busy fraction of each of `width` cells spanning [t0, t1) (may exceed 1 on summaries)."""
        edges = np.linspace(t0, t1, width + 1)
        cell = (t1 - t0) / width if width else 1.0
        return np.diff(self.busy_below(edges)) / cell


@dataclass(frozen=True)
class Binned:
    """One lane binned to `width` cells: glyph codes and style keys (kind code | flags)."""

    glyphs: np.ndarray  # int8 codes into GLYPHS
    keys: np.ndarray  # int32: 0 idle, 1 + kind index, | MERGED


# Single-event glyph by (left half busy ≥ ½, right half busy ≥ ½, left ≥ right).
_SINGLE = np.array([SLIVER_R, SLIVER_L, HALF_R, HALF_R, HALF_L, HALF_L, FULL, FULL], dtype=np.int8)
_BARS = np.array(
    [BAR_BASE + 1, *range(BAR_BASE + 1, BAR_BASE + 8), FULL], dtype=np.int8
)  # level 0..8
_UNIT = np.arange(0, 4097, dtype=np.float64)


def _edges(t0: float, t1: float, count: int) -> np.ndarray:
    """`count` evenly spaced times from t0 to t1 inclusive (cheaper than linspace)."""
    if count <= len(_UNIT):
        return t0 + (t1 - t0) / (count - 1) * _UNIT[:count]
    return np.linspace(t0, t1, count)


def bin_lane(
    index: IntervalIndex, t0: float, t1: float, width: int, *, scale: float = 1.0
) -> Binned:
    """Bin `index` to `width` cells over [t0, t1) ns.

    Cells with one event use half blocks for its edges; cells where several events meet are
    drawn as a ▁…█ bar of their busy fraction (divided by `scale`, the number of lanes a
    summary stands for); idle cells are blank; instants alone show as │.
    """
    if width <= 0 or not t1 > t0:
        return Binned(np.zeros(max(width, 0), np.int8), np.zeros(max(width, 0), np.int32))
    edges = _edges(t0, t1, 2 * width + 1)
    half = (t1 - t0) / (2 * width)
    halves = np.diff(index.busy_below(edges)) * (1.0 / (half * scale))
    left, right = halves[0::2], halves[1::2]
    lo, hi = edges[0:-1:2], edges[2::2]
    count = index.count_meeting(lo, hi)
    level = np.clip(np.ceil((left + right) * 4.0 - 1e-9), 1, 8).astype(np.intp)
    bars = _BARS[level]
    if index.disjoint:
        single = _SINGLE[(left >= 0.5) * 4 + (right >= 0.5) * 2 + (left >= right)]
        glyphs = np.where(count == 1, single, bars)
        merged = count >= 2
    else:
        glyphs = bars  # summary lanes always draw the bar of their mean busy fraction
        merged = count >= 1
    glyphs[count == 0] = IDLE
    keys = np.zeros(width, dtype=np.int32)
    if index.kinds is not None and len(index.starts):
        first = np.minimum(np.searchsorted(index.ends, lo, side="right"), len(index.starts) - 1)
        keys = index.kinds[first].astype(np.int32) + 1
        keys[count == 0] = 0
    else:
        keys[count > 0] = 1
    if len(index.instants):
        lonely = (count == 0) & (index.instants_in(lo, hi) > 0)
        glyphs[lonely] = INSTANT
        keys[lonely] = 1
    keys[merged] |= MERGED
    return Binned(glyphs.astype(np.int8, copy=False), keys)


def name_boxes(
    index: IntervalIndex, t0: float, t1: float, width: int, min_cells: int = 4
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Slices of a disjoint lane whose whole cells in [t0, t1) number ≥ `min_cells`:
    (positions in start order, first whole column, end column exclusive). Vectorised over
    the slices in view; the caller writes each one's name inside its box."""
    empty = np.empty(0, dtype=np.int64)
    if width <= 0 or not t1 > t0 or len(index.starts) == 0:
        return empty, empty, empty
    a = int(np.searchsorted(index.ends, t0, side="right"))
    b = int(np.searchsorted(index.starts, t1, side="left"))
    if b <= a:
        return empty, empty, empty
    cell = (t1 - t0) / width
    first = np.ceil((index.starts[a:b] - t0) / cell - 1e-9).clip(0, width).astype(np.int64)
    last = np.floor((index.ends[a:b] - t0) / cell + 1e-9).clip(0, width).astype(np.int64)
    fit = last - first >= min_cells
    return np.flatnonzero(fit) + a, first[fit], last[fit]


def step_levels(
    ts: np.ndarray, values: np.ndarray, t0: float, t1: float, width: int, lo: float, hi: float
) -> np.ndarray:
    """A counter as a step chart: per cell the highest value it takes there (the value held
    from the sample before the cell, or any sample inside), scaled to 0..8 between lo and hi;
    -1 before the first sample. `ts` sorted (ns from the origin). Vectorised."""
    out = np.full(max(width, 0), -1, dtype=np.int64)
    if width <= 0 or not t1 > t0 or len(ts) == 0:
        return out
    edges = _edges(t0, t1, width + 1)
    held = np.searchsorted(ts, edges[:-1], side="right") - 1  # sample in force at cell start
    start = np.maximum(held + 1, 0)  # samples strictly inside each cell: [start, end)
    end = np.searchsorted(ts, edges[1:], side="left")
    best = np.where(held >= 0, values[np.maximum(held, 0)], -np.inf)
    inside = end > start
    if inside.any():
        cut = int(end[inside][-1])
        maxima = np.maximum.reduceat(values[:cut], start[inside])
        best[inside] = np.maximum(best[inside], maxima)
    known = np.isfinite(best)
    span = hi - lo if hi > lo else 1.0
    out[known] = np.clip(np.ceil((best[known] - lo) / span * 8 - 1e-9), 0, 8).astype(np.int64)
    return out


def overlay_cells(index: IntervalIndex | None, t0: float, t1: float, width: int) -> np.ndarray:
    """Cells of [t0, t1) that any interval of `index` touches (bool per cell)."""
    if index is None or width <= 0 or not t1 > t0 or len(index) == 0:
        return np.zeros(max(width, 0), dtype=bool)
    edges = np.linspace(t0, t1, width + 1)
    hit = index.count_meeting(edges[:-1], edges[1:]) > 0
    if len(index.instants):
        hit |= index.instants_in(edges[:-1], edges[1:]) > 0
    return hit


def runs(keys: np.ndarray) -> list[tuple[int, int, int]]:
    """Run-length encode style keys: [(start, end, key)] with end exclusive."""
    n = len(keys)
    if n == 0:
        return []
    cuts = np.flatnonzero(np.diff(keys)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [n]])
    return list(zip(starts.tolist(), ends.tolist(), keys[starts].tolist(), strict=True))


def glyph_text(glyphs: np.ndarray) -> str:
    """The characters of a glyph code array, as one string."""
    return "".join(GLYPH_ARRAY[glyphs].tolist())


def event_at(index: IntervalIndex, t: float) -> int | None:
    """Position (in start order) of the event of a disjoint lane covering time t, else None."""
    k = int(np.searchsorted(index.starts, t, side="right")) - 1
    if k >= 0 and index.ends[k] > t:
        return k
    return None


def nearest_event(index: IntervalIndex, lo: float, hi: float, t: float) -> int | None:
    """Position of the event meeting [lo, hi) whose centre is nearest t, else None."""
    a = int(np.searchsorted(index.ends, lo, side="right"))
    b = int(np.searchsorted(index.starts, hi, side="left"))
    if b <= a:
        return None
    mids = (index.starts[a:b] + index.ends[a:b]) / 2
    return a + int(np.argmin(np.abs(mids - t)))


# Braille dots (U+2800 + bits): row i of the 2x4 cell -> (left column bit, right column bit).
BRAILLE_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))


def braille_text(parts: list[tuple[IntervalIndex, float]], t0: float, t1: float, width: int) -> str:
    """Up to 4 summary lanes packed in one row: lane i lights dot row i, two dots per cell
    (the cell's left and right halves) wherever that lane is busy. For 256-rank overviews."""
    if width <= 0 or not t1 > t0:
        return " " * max(width, 0)
    edges = _edges(t0, t1, 2 * width + 1)
    code = np.zeros(width, dtype=np.int32)
    for row, (index, _scale) in enumerate(parts[:4]):
        busy = np.diff(index.busy_below(edges)) > 0
        if len(index.instants):
            busy |= index.instants_in(edges[:-1], edges[1:]) > 0
        left_bit, right_bit = BRAILLE_BITS[row]
        code |= np.where(busy[0::2], left_bit, 0) | np.where(busy[1::2], right_bit, 0)
    return "".join(map(chr, (0x2800 + code).tolist()))
