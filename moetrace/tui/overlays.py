"""Overlay interval indexes built from an analysis `Report` (re-indexing only, no metrics).

critical path: per lane, the events on the path and the waits before them;
idle gaps: per track, the report's gap intervals;
exposed comm: per rank, the report's exposed intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from .binning import IntervalIndex
from .lanes import LaneModel

if TYPE_CHECKING:
    from moetrace.analysis.report import Report

LaneKey = tuple[int, int]


@dataclass
class Overlays:
    """Interval indexes per lane/rank for the c / i / x overlays."""

    critical: dict[LaneKey, IntervalIndex] = field(default_factory=dict)
    # the same events by group, for collapsed rank/unit rows: ("rank", r) / ("unit", r, unit)
    critical_groups: dict[tuple[object, ...], IntervalIndex] = field(default_factory=dict)
    waits: dict[LaneKey, IntervalIndex] = field(default_factory=dict)
    gaps: dict[int, IntervalIndex] = field(default_factory=dict)  # by track
    exposed: dict[int | None, IntervalIndex] = field(default_factory=dict)  # by rank
    cp_events: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # path order
    cp_paths: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))  # path number

    def cp_position(self, event_id: int) -> tuple[int, int, int] | None:
        """(index into cp_events, position on its path, path length) of an event, or None."""
        hits = np.flatnonzero(self.cp_events == event_id)
        if len(hits) == 0:
            return None
        k = int(hits[0])
        same = np.flatnonzero(self.cp_paths == self.cp_paths[k])
        return k, k - int(same[0]), len(same)


def _frame(report: Report, name: str) -> pl.DataFrame | None:
    frame = getattr(report, name, None)
    return frame if isinstance(frame, pl.DataFrame) and frame.height else None


def _by_group(frame: pl.DataFrame, group_cols: list[str], origin: int) -> dict[Any, IntervalIndex]:
    out: dict[Any, IntervalIndex] = {}
    frame = frame.sort([*group_cols, "start_ns"])
    for key, part in frame.group_by(group_cols, maintain_order=True):
        starts = (part["start_ns"].to_numpy() - origin).astype(np.float64)
        ends = (part["end_ns"].to_numpy() - origin).astype(np.float64)
        out[key if len(group_cols) > 1 else key[0]] = IntervalIndex(starts, ends, disjoint=False)
    return out


def _group_critical(out: Overlays, model: LaneModel) -> None:
    groups: dict[tuple[object, ...], list[IntervalIndex]] = {}
    for (track, depth), index in out.critical.items():
        lane = model.lanes.get((int(track), int(depth)))
        if lane is None:
            continue
        groups.setdefault(("rank", lane.rank), []).append(index)
        groups.setdefault(("unit", lane.rank, lane.unit), []).append(index)
    out.critical_groups = {key: IntervalIndex.merged(parts) for key, parts in groups.items()}


def build_overlays(report: Report, model: LaneModel) -> Overlays:
    """Index the report's critical path, gaps and exposed intervals for drawing."""
    out = Overlays()
    origin = model.origin
    cp = _frame(report, "critical_path")
    if cp is not None:
        cp = cp.sort(["rank", "step", "seq"]) if "rank" in cp.columns else cp.sort("seq")
        ev = cp.filter((pl.col("segment") == "event") & pl.col("event_id").is_not_null())
        out.cp_events = ev["event_id"].to_numpy().astype(np.int64)
        keys = [c for c in ("rank", "step") if c in ev.columns]
        if keys:
            out.cp_paths = (
                ev.select(pl.struct(keys).rank("dense")).to_series().to_numpy().astype(np.int64)
            )
        else:
            out.cp_paths = np.zeros(len(out.cp_events), dtype=np.int64)
        lanes = model.lanes_of(out.cp_events)
        for kind, part in (("event", ev), ("wait", cp.filter(pl.col("segment") == "wait"))):
            if part.height == 0:
                continue
            ids = part["event_id"].to_numpy()
            where = (
                model.lanes_of(np.nan_to_num(ids.astype(np.float64), nan=-1).astype(np.int64))
                if kind == "wait"
                else lanes
            )
            frame = (
                part.select("start_ns", "end_ns")
                .with_columns(pl.Series("lt", where[:, 0]), pl.Series("ld", where[:, 1]))
                .filter(pl.col("lt") >= 0)
            )
            target = out.critical if kind == "event" else out.waits
            target.update(_by_group(frame, ["lt", "ld"], origin))
    if out.critical:
        _group_critical(out, model)
    gaps = _frame(report, "gaps")
    if gaps is not None:
        out.gaps = _by_group(gaps.select("track", "start_ns", "end_ns"), ["track"], origin)
    exposed = _frame(report, "exposed")
    if exposed is not None:
        out.exposed = _by_group(exposed.select("rank", "start_ns", "end_ns"), ["rank"], origin)
    return out
