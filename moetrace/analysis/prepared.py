"""What every metric pass works on: a trace classified, assigned to steps and cut into windows."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

NO_RANK = -1
"""Internal stand-in for a null rank (restored to null in the report)."""


@dataclass
class Prepared:
    """A trace ready for the metric passes.

    `ev`: one row per event in row order with idx (0..n-1), id, track, queue (the track that
    stands for its thread/stream, overflow lanes joined), name, cat, kind (annotations are
    `marker`), ts, end, depth, rank, unit (str), device (bool: counts as a device track
    here), work (bool: makes its queue busy), step, gid (window id or null), flops, args.
    `windows`: gid, rank, step, lo, hi (ns). `device_tracks`: track, rank, unit of the
    queues whose busy/idle is reported.
    """

    ev: pl.DataFrame
    windows: pl.DataFrame
    device_tracks: pl.DataFrame
    deps: pl.DataFrame
    cpu_mode: bool
    warnings: list[str] = field(default_factory=list)

    @property
    def n_windows(self) -> int:
        """Number of (rank, step) windows."""
        return self.windows.height

    def lo_hi(self) -> tuple[np.ndarray, np.ndarray]:
        """Window bounds per gid as int64 arrays."""
        return (
            self.windows["lo"].to_numpy().astype(np.int64),
            self.windows["hi"].to_numpy().astype(np.int64),
        )
