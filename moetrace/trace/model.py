"""The one data model: a `Trace` is a frozen set of typed Polars frames.

Every reader produces a `Trace`, every analyzer, writer and view consumes one. Times are
integer nanoseconds (Int64) everywhere; nothing goes through float64 on the way in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

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


class TraceFormatError(ValueError):
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


class TraceValidationError(ValueError):
    """A `Trace` breaks an invariant of the model (see `Trace.problems`)."""


def empty_frame(table: str) -> pl.DataFrame:
    """An empty frame with the schema of `table` (events, tracks, deps or counters)."""
    return pl.DataFrame(schema=SCHEMAS[table])


def conform(frame: pl.DataFrame | Mapping[str, Any] | None, table: str) -> pl.DataFrame:
    """Cast `frame` to the schema of `table`: missing nullable columns become null, column
    order is fixed, extra columns are dropped. Raises `TraceValidationError` on a bad cast."""
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
    try:
        return frame.select(exprs)
    except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as exc:
        raise TraceValidationError(f"{table}: {exc}") from exc


def nesting_depth(
    track: np.ndarray, ts: np.ndarray, dur: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Depth of every event on its track, and a mask of events that break nesting.

    Order per track is (ts, longest first, input order). depth(e) = number of events before e
    on its track that end after e starts; with well-nested slices those are exactly the
    slices enclosing e. An event is badly nested when its parent (the last earlier event one
    level up) does not contain it, i.e. two slices overlap partially. O(n log n), no loops per
    event (one pass per depth level for the check, each over that level's events only).
    """
    n = len(ts)
    if n == 0:
        return np.zeros(0, dtype=np.uint16), np.zeros(0, dtype=bool)
    track = np.asarray(track, dtype=np.int64)
    ts = np.asarray(ts, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    tk, s_rel, e_rel, width = _track_time_keys(track, ts, ts + dur)
    start_key = tk * width + s_rel
    order = _nesting_order(tk, start_key, dur)
    sk = start_key[order]
    del start_key
    end_key = tk * width
    end_key += e_rel
    end_key.sort()
    # Events of my track that ended at or before my start: every end key of an earlier
    # track sorts below mine and there are exactly as many as the events before my track's
    # first one, so depth = position - (end keys <= my start key), with no per-track offset.
    d_sorted = np.arange(n, dtype=np.int64)
    d_sorted -= np.searchsorted(end_key, sk, side="right")
    del end_key
    d_s = dur[order]
    zero = d_s == 0
    if zero.any():
        # ...but a zero-length event at my start that is me or comes after me in order
        # "ended" at my start without being before me: add those back.
        zkey = sk[zero]
        zcount_at = np.searchsorted(zkey, sk, side="right") - np.searchsorted(zkey, sk, side="left")
        zpos = np.flatnonzero(zero)
        zcount_at[zpos] -= np.arange(len(zpos)) - np.searchsorted(zkey, zkey, side="left")
        d_sorted += zcount_at
    bad_sorted = _badly_nested(d_sorted, tk[order], (ts + dur)[order])
    depth = np.empty(n, dtype=np.uint16)
    depth[order] = np.minimum(d_sorted, np.iinfo(np.uint16).max)
    bad = np.empty(n, dtype=bool)
    bad[order] = bad_sorted
    return depth, bad


def _track_time_keys(
    track: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.int64]:
    """(track codes from 0, start ranks, end ranks, width) such that code * width + rank sorts
    like (track, time). Small ranges use offsets (no sort); wide ones dense ranks."""
    t_lo, t_hi = int(track.min()), int(track.max())
    if t_hi - t_lo < 2**22:
        tk = track - t_lo
    else:
        tk = np.unique(track, return_inverse=True)[1].astype(np.int64).reshape(-1)
    lo, hi = int(start.min()), int(end.max())
    if hi - lo < 2**40 and int(tk.max()) < 2**22:
        return tk, start - lo, end - lo, np.int64(2**40)
    times = np.sort(np.concatenate([start, end]))
    return (
        tk,
        np.searchsorted(times, start),
        np.searchsorted(times, end),
        np.int64(len(times) + 1),
    )


def _nesting_order(tk: np.ndarray, start_key: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Positions sorted by (track, start, longest first, input order).

    Files are mostly in time order already, so a stable sort by track alone (a radix sort
    for < 65536 tracks) often leaves starts sorted; only runs of equal (track, start) are then
    re-sorted by duration."""
    if int(tk.max()) < 2**16:
        order = np.argsort(tk.astype(np.uint16), kind="stable")
        sk = start_key[order]
        if not bool((sk[1:] >= sk[:-1]).all()):
            order = np.argsort(start_key, kind="stable")
            sk = start_key[order]
    else:
        order = np.argsort(start_key, kind="stable")
        sk = start_key[order]
    tie = sk[1:] == sk[:-1]
    if not tie.any():
        return order
    in_run = np.zeros(len(sk), dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    run_pos = np.flatnonzero(in_run)
    members = order[run_pos]
    resorted = np.lexsort((-dur[members], sk[run_pos]))  # stable: input order on full ties
    order[run_pos] = members[resorted]
    return order


def _badly_nested(d_sorted: np.ndarray, t_s: np.ndarray, e_s: np.ndarray) -> np.ndarray:
    """For events in nesting order with depths `d_sorted`: True where the parent (the last
    earlier event one level up) is missing, on another track or ends before the event."""
    n = len(d_sorted)
    bad = np.zeros(n, dtype=bool)
    max_depth = int(d_sorted.max())
    if max_depth == 0:
        return bad
    # Events grouped by depth, in order within each group (stable sort; radix when small).
    by_level = np.argsort(
        d_sorted.astype(np.uint16) if max_depth < 2**16 else d_sorted, kind="stable"
    )
    bounds = np.concatenate(([0], np.cumsum(np.bincount(d_sorted, minlength=max_depth + 1))))
    for level in range(1, max_depth + 1):
        child = by_level[bounds[level] : bounds[level + 1]]
        parents = by_level[bounds[level - 1] : bounds[level]]
        if len(child) == 0:
            continue
        if len(parents) == 0:
            bad[child] = True
            continue
        p = np.searchsorted(parents, child, side="left") - 1
        ok = p >= 0
        pp = parents[np.clip(p, 0, None)]
        ok &= t_s[pp] == t_s[child]
        ok &= e_s[pp] >= e_s[child]
        bad[child] = ~ok
    return bad


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

        Refuses to overwrite an existing file unless `force`.
        """
        from moetrace.trace.io import write_trace

        return write_trace(self, path, force=force)
