"""Any other Chrome JSON ("chrome"): plain Chrome semantics, kinds guessed from names
(collective names are comm, memcpy/memset memory, threads named *stream* compute)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors.base import Evidence, Flavor, track_attr, with_kind
from moetrace.trace.flavors.built import Built

NAME = "chrome"

_GENERIC_COMM = r"(?i)nccl|rccl|hccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast"


def detect(evidence: Evidence) -> bool:
    """The fallback: every file is plain Chrome JSON."""
    return True


def interpret(
    built: Built, top: dict[str, Any], path: str | Path, meta: dict[str, Any]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Streams by thread name, no rank, kinds from names."""
    return _generic(built)


def _generic(built: Built) -> tuple[pl.DataFrame, pl.DataFrame]:
    tracks = built.tracks.with_columns(
        pl.when(pl.col("thread_name").str.to_lowercase().str.contains("stream").fill_null(False))
        .then(pl.lit("stream"))
        .otherwise(pl.lit("cpu"))
        .alias("unit"),
        pl.lit(None, pl.Int32).alias("rank"),
    )
    # Lazy (see base.with_kind): an eager with_columns copies every many-chunk column.
    ev = built.events.lazy().with_columns(track_attr(tracks, "unit").alias("unit")).collect()
    kind = (
        pl.when(pl.col("name").str.contains(_GENERIC_COMM))
        .then(pl.lit("comm"))
        .when(pl.col("name").str.contains(r"(?i)memcpy|memset"))
        .then(pl.lit("memory"))
        .when(pl.col("unit") == "stream")
        .then(pl.lit("compute"))
        .otherwise(pl.lit("host"))
    )
    return tracks, with_kind(ev, kind)


GENERIC = Flavor(NAME, detect, interpret)
