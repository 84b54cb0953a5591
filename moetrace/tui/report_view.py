"""What the viewer takes from the analysis Report besides the metrics pane: the steps' time
windows (g/G) and the idle notes on lane labels. Computed in the metrics worker, not in the
interface."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from moetrace.analysis.report import Report


def step_windows(report: Report) -> list[tuple[int, int, int]]:
    """(step, start ns, end ns) spanning the analyzer's per-rank windows of each step."""
    ranks = getattr(report, "ranks", None)
    if not isinstance(ranks, pl.DataFrame) or ranks.height == 0 or "step" not in ranks.columns:
        return []
    spans = (
        ranks.drop_nulls("step")
        .group_by("step")
        .agg(pl.col("window_start_ns").min(), pl.col("window_end_ns").max())
        .sort("step")
    )
    return [(int(a), int(b), int(c)) for a, b, c in spans.iter_rows()]


def idle_notes(report: Report) -> dict[tuple[object, ...], str]:
    """' free N%' for each rank row (its free_ns ÷ its windows over its steps, named as in
    `moetrace metrics`) and ' idle N%' for each
    top-level lane of a device track (idle ÷ busy + idle), from the analyzer's frames; the
    job's top straggler (the rank that made the others wait longest) gets ' ◆straggler'."""
    notes: dict[tuple[object, ...], str] = {}
    ranks = getattr(report, "ranks", None)
    if isinstance(ranks, pl.DataFrame) and ranks.height:
        per_rank = ranks.group_by("rank").agg(pl.col("free_ns").sum(), pl.col("window_ns").sum())
        for rank, free, window in per_rank.iter_rows():
            if window:
                notes[("rank", rank)] = f" free {100 * free / window:.0f}%"
    job = getattr(report, "job", None)
    top = (job or {}).get("stragglers") or []
    if top and top[0].get("caused_wait_ns", 0) > 0:  # the rank that held the job back
        rank = top[0]["rank"]
        notes[("rank", rank)] = " ◆straggler" + notes.get(("rank", rank), "")
    tracks = getattr(report, "tracks", None)
    if isinstance(tracks, pl.DataFrame) and tracks.height:
        per_track = tracks.group_by("track").agg(pl.col("busy_ns").sum(), pl.col("idle_ns").sum())
        for track, busy, idle in per_track.iter_rows():
            if busy + idle:
                notes[("lane", int(track), 0)] = f" idle {100 * idle / (busy + idle):.0f}%"
    return notes
