"""Kineto synchronisation edges, as Holistic Trace Analysis models them (placeholder)."""

from __future__ import annotations

import polars as pl

from moetrace.analysis.steps import Prepared


def kineto_sync_edges(prep: Prepared) -> pl.DataFrame | None:
    """Extra `sync` dependency edges (src, dst, kind) derived from CUDA sync calls."""
    return None
