"""What the Chrome reader hands to the flavors: the flavor-neutral parts of a trace (`Built`)
and a flavor's way to restore stored tracks (`RestoreTracks`). Here, below both, so the
reader imports the flavors and the flavors import nothing from the formats."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl


@dataclass
class Built:
    """Flavor-neutral parts of a trace (ids assigned, tracks laid out, flows bound)."""

    events: pl.DataFrame  # id, track, name, cat, ts, dur, depth, args, kind_ext, flops, bytes, ph
    tracks: pl.DataFrame  # track, pid, tid, lane, process_name, thread_name, labels, sort_index
    flows: pl.DataFrame  # src, dst, cat, name
    counters: pl.DataFrame  # track, name, ts, value
    stored: dict[str, Any] = field(default_factory=dict)  # moetrace's own tables, if present


RestoreTracks = Callable[[pl.DataFrame, pl.DataFrame, dict[str, Any], list[str]], Built | None]
"""A flavor's rebuild of the tracks from a table stored in the file; None (with a warning)
when the table is damaged: the tracks are then laid out from the events."""
"""(slices, counters, the stored `moetrace` table, warnings) -> Built: a flavor's way to
restore tracks a file stores exactly, instead of laying them out from (pid, tid)."""
