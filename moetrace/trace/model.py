"""The one data model: a `Trace` is a frozen set of typed Polars frames.

Every reader produces a `Trace`, every analyzer, writer and view consumes one. Times are
integer nanoseconds (Int64) everywhere; nothing goes through float64 on the way in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl

from moetrace.errors import MoetraceError
from moetrace.trace.nesting import nesting_depth

EVENT_KINDS = ("compute", "comm", "memory", "host", "marker", "other")
"""What an event does. `compute` and `comm` drive the overlap metrics."""

UNITS = ("aic", "aiv", "link", "stream", "cpu", "other")
"""What kind of core or queue a track is: AIC = cube cores, AIV = vector cores,
link = a TX/RX port, stream = a GPU/NPU stream, cpu = a host thread."""

DEP_KINDS = ("data", "flow", "launch", "sync")
"""Why one event waits for another: data (the executor's tile dependencies), flow (a source
flow arrow of unknown meaning), launch (host call -> device task), sync (event/stream waits)."""

Kind = pl.Enum(list(EVENT_KINDS))
Unit = pl.Enum(list(UNITS))
DepKind = pl.Enum(list(DEP_KINDS))

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.UInt32(),
    "track": pl.UInt32(),
    "name": pl.String(),
    "cat": pl.String(),
    "kind": Kind,
    "ts": pl.Int64(),  # start, ns
    "dur": pl.Int64(),  # ns, 0 for instants
    "depth": pl.UInt16(),  # nesting level on its track
    "flops": pl.Float64(),  # floating-point operations, when the source knows them
    "bytes": pl.Float64(),  # bytes moved, when the source knows them
    "args": pl.String(),  # the source's args as JSON text, kept losslessly
}

TRACK_SCHEMA: dict[str, pl.DataType] = {
    "track": pl.UInt32(),
    "rank": pl.Int32(),  # nullable: host threads that belong to no device
    # pid/tid as the source wrote them, as text: sources mix 64-bit ints (Ascend pids
    # above 2^32) and strings (Kineto "Spans", old "stream 7" tids); writers emit digits as ints.
    "pid": pl.String(),
    "tid": pl.String(),
    "process_name": pl.String(),
    "thread_name": pl.String(),
    "unit": Unit,
    "sort_index": pl.Int32(),
}

DEP_SCHEMA: dict[str, pl.DataType] = {
    "src": pl.UInt32(),
    "dst": pl.UInt32(),
    "kind": DepKind,
}

COUNTER_SCHEMA: dict[str, pl.DataType] = {
    "track": pl.UInt32(),
    "name": pl.String(),
    "ts": pl.Int64(),  # ns
    "value": pl.Float64(),
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "events": EVENT_SCHEMA,
    "tracks": TRACK_SCHEMA,
    "deps": DEP_SCHEMA,
    "counters": COUNTER_SCHEMA,
}


class TraceFormatError(MoetraceError, ValueError):
    """Bad input: names the file, the position and what was wrong, in one line."""

    def __init__(self, path: str | Path | None, message: str, position: str | None = None):
        self.path = None if path is None else str(path)
        self.position = position
        self.message = message
        where = self.path or "<input>"
        if position:
            where = f"{where}: {position}"
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its parts: a parallel load raises a worker's error in the parent.
        return (type(self), (self.path, self.message, self.position))


class TraceValidationError(MoetraceError, ValueError):
    """A `Trace` breaks an invariant of the model (see `Trace.problems`)."""


def empty_frame(table: str) -> pl.DataFrame:
    """An empty frame with the schema of `table` (events, tracks, deps or counters)."""
    return pl.DataFrame(schema=SCHEMAS[table])


def conform(frame: pl.DataFrame | Mapping[str, Any] | None, table: str) -> pl.DataFrame:
    """Cast `frame` to the schema of `table`: missing nullable columns become null, column
    order is fixed, extra columns are dropped; deps are put in (src, dst, kind) order, so the
    same trace is the same frames (and the same written bytes) on every run. Raises
    `TraceValidationError` on a bad cast."""
    schema = SCHEMAS[table]
    if frame is None:
        return empty_frame(table)
    if not isinstance(frame, pl.DataFrame):
        frame = pl.DataFrame(dict(frame))
    exprs = []
    for name, dtype in schema.items():
        if name in frame.columns:
            exprs.append(pl.col(name).cast(dtype, strict=True))
        else:
            exprs.append(pl.lit(None, dtype=dtype).alias(name))
    query = frame.lazy().select(exprs)
    if table == "deps":  # one order whatever join built them: writers number flows by row
        query = query.sort("src", "dst", "kind", maintain_order=True)
    try:
        out = query.collect()
    except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as exc:
        raise TraceValidationError(f"{table}: {exc}") from exc
    return _align_chunks(out)


def _align_chunks(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with every column in the same chunks (in place). Polars' eager select of
    columns with unaligned chunks (a loaded trace's: its text columns come in the decoder's
    batches, the computed ones in the query engine's) copies every column into one chunk,
    each time (~75 MB and ~0.1 s at 1M events). Every column is cut at the chunk boundaries
    of every other (their common refinement): zero-copy slices, never a copy (a cut to the
    biggest columns' chunks copied the others, ~45 MB at the end of a 1M-event load)."""
    layouts = [tuple(frame[name].chunk_lengths()) for name in frame.columns]
    if len(set(layouts)) < 2 or frame.height == 0:
        return frame
    bounds = sorted({int(end) for layout in set(layouts) for end in np.cumsum(layout)} | {0})
    pieces = list(pairwise(bounds))
    target = tuple(b - a for a, b in pieces)
    for i, (name, layout) in enumerate(zip(frame.columns, layouts, strict=True)):
        if layout != target:
            column = frame[name]
            parts = [column.slice(a, b - a) for a, b in pieces]
            frame.replace_column(i, pl.concat(parts, rechunk=False))
    return frame


@dataclass(frozen=True)
class Trace:
    """A trace: events, tracks, dependency edges and counters as Polars frames, plus meta.

    `meta` holds the source format and flavor, the time base, a simulated run's workload,
    hardware and schedule, and `warnings` (a list of strings) raised while reading.
    """

    events: pl.DataFrame = field(default_factory=lambda: empty_frame("events"))
    tracks: pl.DataFrame = field(default_factory=lambda: empty_frame("tracks"))
    deps: pl.DataFrame = field(default_factory=lambda: empty_frame("deps"))
    counters: pl.DataFrame = field(default_factory=lambda: empty_frame("counters"))
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_frames(
        cls,
        events: pl.DataFrame | Mapping[str, Any] | None = None,
        tracks: pl.DataFrame | Mapping[str, Any] | None = None,
        deps: pl.DataFrame | Mapping[str, Any] | None = None,
        counters: pl.DataFrame | Mapping[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        *,
        compute_depth: bool = False,
    ) -> Trace:
        """Build a `Trace` from loosely typed frames, casting each to its schema.

        With `compute_depth`, the `depth` column is (re)computed from ts/dur per track.
        """
        ev = conform(events, "events")
        if compute_depth and ev.height:
            depth, _ = nesting_depth(
                ev["track"].to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy()
            )
            ev = ev.with_columns(pl.Series("depth", depth, dtype=pl.UInt16))
        elif ev.height and ev["depth"].null_count():
            ev = ev.with_columns(pl.col("depth").fill_null(0))
        return cls(
            events=ev,
            tracks=conform(tracks, "tracks"),
            deps=conform(deps, "deps"),
            counters=conform(counters, "counters"),
            meta=dict(meta or {}),
        )

    # ----------------------------------------------------------------- queries
    @property
    def warnings(self) -> list[str]:
        """Problems met while reading that did not stop it."""
        return list(self.meta.get("warnings", []))

    @property
    def ranks(self) -> list[int]:
        """The distinct ranks of the trace's tracks, sorted."""
        return sorted(int(r) for r in self.tracks["rank"].drop_nulls().unique().to_list())

    def window(self) -> tuple[int, int] | None:
        """[first start, last end] of all events in ns, or None for an empty trace."""
        if self.events.height == 0:
            return None
        row = self.events.select(
            pl.col("ts").min().alias("lo"), (pl.col("ts") + pl.col("dur")).max().alias("hi")
        ).row(0)
        return int(row[0]), int(row[1])

    def events_with_tracks(self) -> pl.DataFrame:
        """Events joined with their track's rank, unit, pid and tid (left join on `track`)."""
        return self.events.join(
            self.tracks.select(
                "track", "rank", "unit", "pid", "tid", "process_name", "thread_name"
            ),
            on="track",
            how="left",
        )

    def with_meta(self, **updates: Any) -> Trace:
        """A copy with `meta` updated."""
        return Trace(self.events, self.tracks, self.deps, self.counters, {**self.meta, **updates})

    # -------------------------------------------------------------- validation
    def problems(self) -> list[str]:
        """Every broken invariant, as readable sentences; an empty list means valid."""
        out: list[str] = []
        for table, schema in SCHEMAS.items():
            frame: pl.DataFrame = getattr(self, table)
            got = dict(frame.schema)
            if list(got) != list(schema) or any(got[k] != schema[k] for k in schema):
                out.append(f"{table}: schema {got} differs from {schema}")
        if out:
            return out
        ev, tr, dp = self.events, self.tracks, self.deps
        if ev["id"].n_unique() != ev.height:
            out.append(f"events: {ev.height - ev['id'].n_unique()} duplicate ids")
        if tr["track"].n_unique() != tr.height:
            out.append(f"tracks: {tr.height - tr['track'].n_unique()} duplicate track ids")
        for col in ("id", "track", "ts", "dur", "kind", "name"):
            nulls = ev[col].null_count()
            if nulls:
                out.append(f"events: {nulls} null values in '{col}'")
        neg = ev.filter(pl.col("dur") < 0)
        if neg.height:
            out.append(f"events: {neg.height} negative durations (first id {neg['id'][0]})")
        orphan = ev.filter(~pl.col("track").is_in(tr["track"].implode()))
        if orphan.height:
            out.append(
                f"events: {orphan.height} events on unknown tracks (first id {orphan['id'][0]})"
            )
        if dp.height:
            ids = ev["id"].implode()
            dangling = dp.filter(~pl.col("src").is_in(ids) | ~pl.col("dst").is_in(ids))
            if dangling.height:
                out.append(f"deps: {dangling.height} edges point at missing events")
        if self.counters.height:
            bad_ct = self.counters.filter(~pl.col("track").is_in(tr["track"].implode()))
            if bad_ct.height:
                out.append(f"counters: {bad_ct.height} samples on unknown tracks")
        if ev.height and not neg.height:
            depth, bad = nesting_depth(
                ev["track"].to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy()
            )
            if bad.any():
                first = int(ev["id"][int(np.flatnonzero(bad)[0])])
                count = int(bad.sum())
                out.append(
                    f"events: {count} slices overlap partially on their track (first id {first})"
                )
            elif not np.array_equal(depth, ev["depth"].to_numpy()):
                wrong = int((depth != ev["depth"].to_numpy()).sum())
                out.append(f"events: {wrong} depths disagree with the nesting of ts/dur")
        return out

    def validate(self) -> Trace:
        """Raise `TraceValidationError` listing every broken invariant; return self if valid."""
        found = self.problems()
        if found:
            raise TraceValidationError("; ".join(found))
        return self

    # ---------------------------------------------------------------- equality
    def frames_equal(self, other: Trace, *, ignore_args: bool = False) -> bool:
        """True when all four frames are equal (row order included)."""
        for table in SCHEMAS:
            a: pl.DataFrame = getattr(self, table)
            b: pl.DataFrame = getattr(other, table)
            if ignore_args and table == "events":
                a, b = a.drop("args"), b.drop("args")
            if not a.equals(b):
                return False
        return True

    def __repr__(self) -> str:
        return (
            f"Trace(events={self.events.height}, tracks={self.tracks.height}, "
            f"deps={self.deps.height}, counters={self.counters.height}, "
            f"ranks={len(self.ranks)}, format={self.meta.get('format')!r})"
        )

    # -------------------------------------------------------------------- I/O
    def write(self, path: str | Path, *, force: bool = False) -> Path:
        """Write to `path`; the format follows the extension (.json, .json.gz, .pftrace).

        Refuses to overwrite an existing file unless `force`. This is `io.write_trace`,
        installed by `set_writer` when `moetrace.trace` (the package) is imported.
        """
        if _writer is None:
            raise RuntimeError("no trace writer installed: import moetrace.trace first")
        return _writer(self, path, force=force)


class TraceWriter(Protocol):
    """`io.write_trace`'s signature: write a trace, return the path written."""

    def __call__(self, trace: Trace, path: str | Path, *, force: bool = False) -> Path: ...


_writer: TraceWriter | None = None


def set_writer(write: TraceWriter) -> None:
    """Install the function behind `Trace.write`: the format registry lives above the model
    (every format imports the model), so the model is told its writer instead of importing it."""
    global _writer
    _writer = write
