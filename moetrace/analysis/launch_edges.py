"""Kineto launch edges: a kernel / memcpy / memset and the runtime call that launched it share
the `correlation` arg. The Kineto reader already turns them into `launch` deps
(trace/flavors/kineto_links.py); they are checked and rebuilt here for traces that were not
read by it (merged ranks, converted files), with the same rules.
"""

from __future__ import annotations

import polars as pl

from moetrace.trace.flavors.kineto_links import (
    arg_int,
    correlation_launches,
    drop_miscorrelated_launches,
)

__all__ = ["arg_int", "drop_miscorrelated_launches", "kineto_launch_edges"]


def kineto_launch_edges(ev: pl.DataFrame, deps: pl.DataFrame) -> pl.DataFrame | None:
    """`launch` deps (src host call, dst device event) by correlation, for device events that
    have none yet. `ev` needs id, rank, unit, kind, name, args."""
    return correlation_launches(ev, deps)
