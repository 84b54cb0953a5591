"""moetrace's own files: tracks, kinds, overflow lanes, event ids and deps are stored in the
file (top-level `moetrace` key) and restored exactly, so the round trip is lossless."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors import generic
from moetrace.trace.flavors.base import Evidence, Flavor, assemble
from moetrace.trace.flavors.built import Built
from moetrace.trace.model import TRACK_SCHEMA, Trace
from moetrace.trace.nesting import nesting_depth

NAME = "moetrace"


def detect(evidence: Evidence) -> bool:
    """The file carries moetrace's top-level `moetrace` table."""
    return isinstance(evidence.top.get("moetrace"), dict)


def interpret(
    built: Built, top: dict[str, Any], path: str | Path, meta: dict[str, Any]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A moetrace file without its track table (edited by hand, or older) reads as generic
    Chrome JSON; with it, `restored_trace` applies instead."""
    return generic.interpret(built, top, path, meta)


def restored_trace(built: Built, meta: dict[str, Any]) -> Trace:
    """The `Trace` of a file whose tracks were restored: kinds as written (`other` where
    missing), deps and meta as stored (the reader's source and format win)."""
    raw_meta = built.stored.get("meta")
    stored_meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    events = (  # lazy: see base.with_kind
        built.events.lazy()
        .with_columns(pl.col("kind_ext").fill_null("other").alias("kind"))
        .collect()
    )
    merged = {**stored_meta, **meta, "flavor": stored_meta.get("flavor", "moetrace")}
    merged["source"] = meta["source"]
    return assemble(
        built, built.tracks, events, stored_deps(built.stored), merged, mark_steps=False
    )


_DAMAGED = (pl.exceptions.PolarsError, TypeError, ValueError, OverflowError, KeyError)
"""What building a frame from a hand-edited or damaged stored table can raise."""


def restore_moetrace_tracks(
    slices: pl.DataFrame, counters: pl.DataFrame, stored: dict[str, Any], warnings: list[str]
) -> Built | None:
    """Files written by moetrace carry their tracks table, overflow lanes, event ids and deps:
    restore them exactly instead of re-deriving them (the round trip is lossless). None, with
    a warning, when those tables are damaged (columns of different lengths, wrong types): the
    events are then laid out as any Chrome JSON's."""
    try:
        tracks = pl.DataFrame(stored["tracks"]).with_columns(
            [
                pl.col(c).cast(t, strict=False)
                for c, t in TRACK_SCHEMA.items()
                if c in stored["tracks"]
            ]
        )
        if isinstance(stored.get("lanes"), dict):
            schema = {"pid": pl.String, "tid": pl.String, "track": pl.UInt32}
            lookup = pl.DataFrame(stored["lanes"], schema=schema)
        else:
            lookup = tracks.select("pid", "tid", pl.col("track").cast(pl.UInt32))
        stored_deps(stored)  # checked now: restored_trace reads it later
    except _DAMAGED as exc:
        reason = (str(exc).strip().splitlines() or [""])[0][:120]
        warnings.append(
            f"the file's moetrace track table is damaged ({type(exc).__name__}: {reason}): "
            "tracks laid out from the events instead"
        )
        return None
    lookup = lookup.unique(["pid", "tid"], keep="first")
    slices = slices.join(lookup, on=["pid", "tid"], how="left", maintain_order="left")
    counters = counters.join(lookup, on=["pid", "tid"], how="left", maintain_order="left")
    lost = int(slices["track"].null_count())
    if lost:
        warnings.append(
            f"{lost} event(s) on threads missing from the moetrace track table, skipped"
        )
        slices = slices.filter(pl.col("track").is_not_null())
    ids = stored.get("event_ids")
    if isinstance(ids, list) and len(ids) == slices.height:
        slices = slices.with_columns(pl.Series("id", ids, dtype=pl.UInt32))
    depth, _ = nesting_depth(
        slices["track"].to_numpy(), slices["ts"].to_numpy(), slices["dur"].to_numpy()
    )
    slices = slices.with_columns(pl.Series("depth", depth, dtype=pl.UInt16))
    flows = pl.DataFrame(
        schema={"src": pl.Int64, "dst": pl.Int64, "cat": pl.String, "name": pl.String}
    )
    return Built(
        slices, tracks, flows, counters.select("track", "name", "ts", "value"), stored=stored
    )


def stored_deps(stored: dict[str, Any]) -> pl.DataFrame:
    """The deps of a stored `moetrace` table (src, dst, kind); raises on a damaged one."""
    deps = stored.get("deps") or {"src": [], "dst": [], "kind": []}
    return pl.DataFrame(deps, schema={"src": pl.UInt32, "dst": pl.UInt32, "kind": pl.String})


MOETRACE = Flavor(NAME, detect, interpret, restore=restore_moetrace_tracks)
