"""Overlay painting: restyle a lane's binned cells for the critical path, idle gaps and
exposed communication (intervals from the analyzer's Report, indexed in `overlays.py`)."""

from __future__ import annotations

import numpy as np

from ..binning import (
    CRITICAL,
    CRITICAL_FULL,
    EXPOSED,
    EXPOSED_FULL,
    FULL,
    GAP,
    GAP_DOT,
    IDLE,
    KIND_MASK,
    WAIT_LINE,
    IntervalIndex,
    overlay_cells,
)
from ..lanes import Row
from ..overlays import Overlays

COMM_CODE = 2  # 1 + index of "comm" in EVENT_KINDS


def apply_overlays(
    data: Overlays,
    active: frozenset[str],
    row: Row,
    glyphs: np.ndarray,
    keys: np.ndarray,
    t0: float,
    t1: float,
    width: int,
) -> None:
    """Or overlay flags into `keys` in place, and change glyphs so each overlay reads
    without colour: critical ▓ (waits ═), exposed comm ▒, idle gaps ·."""
    lane_key = (row.lane.track, row.lane.depth) if row.lane is not None else None

    def cells(index: IntervalIndex | None) -> np.ndarray:
        return overlay_cells(index, t0, t1, width)

    if "critical" in active and lane_key is None:
        hit = cells(data.critical_groups.get(row.key)) & (glyphs != IDLE)
        keys[hit] |= CRITICAL
    if "critical" in active and lane_key is not None:
        hit = cells(data.critical.get(lane_key)) & (glyphs != IDLE)
        keys[hit] |= CRITICAL
        glyphs[hit & (glyphs == FULL)] = CRITICAL_FULL
        wait = cells(data.waits.get(lane_key)) & (glyphs == IDLE)
        glyphs[wait] = WAIT_LINE
        keys[wait] |= CRITICAL
    if "gaps" in active and row.lane is not None and row.lane.depth == 0:
        gap = cells(data.gaps.get(row.lane.track)) & (glyphs == IDLE)
        glyphs[gap] = GAP_DOT
        keys[gap] |= GAP
    if "exposed" in active and row.kind != "unit":
        exp = cells(data.exposed.get(row.rank))
        if row.lane is not None:
            exp &= (keys & KIND_MASK) == COMM_CODE
        else:
            exp &= glyphs != IDLE
        keys[exp] |= EXPOSED
        glyphs[exp & ((glyphs == FULL) | (glyphs == CRITICAL_FULL))] = EXPOSED_FULL
