"""Chrome Trace Event JSON reader: `read_chrome` (plain Chrome semantics, then the flavor's
meaning); the writer is `write.py`.

Reading is column-wise, in stages: `source` hands out the bytes (gzip, truncation), `decode`
turns them into raw JSON-text columns (msgspec), this module types the columns (`ts`/`dur` in
exact ns, with warnings for what it drops), `build` turns them into slices (X, matched B/E,
b/e async, instants), counters (C), metadata (M) and bound flows, and `flavors` says what
they mean (unit, rank, kind).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors import detect_flavor, flavor_named, interpret
from moetrace.trace.formats.chrome import build as parts
from moetrace.trace.formats.chrome import columns as jc
from moetrace.trace.formats.chrome.decode import RawTrace, decode_file
from moetrace.trace.formats.chrome.deep import MAX_DEPTH, TooDeep, call_deep, first_too_deep
from moetrace.trace.formats.chrome.source import Reader
from moetrace.trace.model import Trace, TraceFormatError

TIME_LIMIT_NS = 2**62 - 1
"""Largest |time| (ns) an event may have: any difference of two such times fits in int64."""

_SLICE_PHASES = ("X", "B", "E", "i", "I", "R", "b", "e", "n")
_KNOWN = {*_SLICE_PHASES, "C", "s", "t", "f", "M"}
_IGNORED_NAMES = {
    "S": "legacy async",
    "T": "legacy async",
    "F": "legacy async",
    "p": "legacy async",
    "O": "object snapshot",
    "N": "object",
    "D": "object",
    "P": "sample",
    "v": "memory dump",
    "V": "memory dump",
    "c": "clock sync",
    "(": "context",
    ")": "context",
}


def read_chrome(path: str | Path, *, flavor: str | None = None) -> Trace:
    """Read a Chrome JSON trace (.json or .json.gz, array or object form) into a `Trace`.

    `flavor` forces an interpretation ("kineto", "ascend", "moetrace", "chrome"); by
    default it is detected from the file. Raises `TraceFormatError` on unreadable input.
    """
    try:
        return call_deep(lambda: trace_from_raw(decode_file(path), path, flavor=flavor))
    except TooDeep:
        raise TraceFormatError(
            path,
            f"JSON nested deeper than {MAX_DEPTH:,} levels (moetrace's nesting limit)",
            _deep_position(Path(path)),
        ) from None


def _deep_position(path: Path) -> str | None:
    """`byte N` (of the decompressed data) where the nesting passes MAX_DEPTH."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    reader = Reader(path, head)
    try:
        at = first_too_deep(lambda: reader.read(16 << 20))
    finally:
        reader.close()
    return None if at is None else f"byte {at}"


def _warn_count(warnings: list[str], mask: pl.Series, idx: pl.Series, what: str) -> None:
    n = int(mask.sum())
    if n:
        first = int(idx.filter(mask)[0])
        warnings.append(f"{n} event(s) {what} (first: event #{first})")


def _flag(raw: pl.DataFrame, bit: int) -> pl.Series:
    return (raw["flags"] & bit) > 0


def decode_columns(raw: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """Text columns -> typed columns (exact ns times). Drops, and reports, events whose
    required fields are missing or of the wrong type; odd but usable values are warnings."""
    idx, ph = raw["idx"], raw["ph"]
    not_obj = _flag(raw, jc.FLAG_NOT_OBJECT)
    if not_obj.any():
        first = int(idx.filter(not_obj)[0])
        warnings.append(
            f"{int(not_obj.sum())} array element(s) are not JSON objects, skipped "
            f"(first: event #{first})"
        )
    no_ph = ~not_obj & (ph.is_null() | (ph.str.len_chars() != 1)).fill_null(True)
    _warn_count(warnings, no_ph, idx, "without a one-letter string 'ph', skipped")
    ts, dur = raw["ts"], raw["dur"]
    present = set(raw.columns)
    rare = [
        pl.col(c) if c in present else pl.lit(None).alias(c)  # Null columns cost no memory
        for c in ("id2", "bind_id", "flow_in", "flow_out")
    ]
    frame = raw.select(
        "idx",
        "ph",
        "name",
        "cat",
        "pid",
        "tid",
        "id",
        "bp",
        "args",
        "ts",
        "dur",
        *rare,
        (pl.col("kind") if "kind" in present else pl.lit(None)).alias("kind_ext"),
        (
            pl.col("flops").cast(pl.Float64, strict=False) if "flops" in present else pl.lit(None)
        ).alias("flops"),
        (
            pl.col("bytes").cast(pl.Float64, strict=False) if "bytes" in present else pl.lit(None)
        ).alias("bytes"),
    )
    ts_bad = _flag(raw, jc.FLAG_BAD_TS)
    dur_bad = _flag(raw, jc.FLAG_BAD_DUR)
    keep = ~(no_ph | not_obj)
    is_meta = (ph == "M").fill_null(False)
    non_str = _flag(raw, jc.FLAG_NAME_NOT_STR)
    _warn_count(warnings, keep & non_str, idx, "with a non-string 'name' (kept as its JSON text)")
    _warn_count(
        warnings, keep & ts_bad & ~is_meta, idx, "with a non-numeric or out-of-range 'ts', skipped"
    )
    missing_ts = keep & ~is_meta & ts.is_null() & ~ts_bad
    _warn_count(warnings, missing_ts, idx, "without 'ts', skipped")
    keep = keep & (is_meta | (ts.is_not_null() & ~ts_bad))
    is_x = (ph == "X").fill_null(False)
    _warn_count(warnings, keep & is_x & dur_bad, idx, "with a non-numeric 'dur', skipped")
    no_dur = keep & is_x & dur.is_null() & ~dur_bad
    _warn_count(warnings, no_dur, idx, "of phase X without 'dur', skipped")
    negative = (dur < 0).fill_null(False)
    _warn_count(warnings, keep & is_x & negative, idx, "with a negative 'dur', skipped")
    keep = keep & ~(is_x & (dur.is_null() | negative | dur_bad))
    # Times beyond ±2^62 ns would overflow int64 in ends, windows and differences (a window
    # from -9.2e15 to +9.2e15 µs is 1.8e19 ns): such events are refused, by position.
    beyond = (ts > TIME_LIMIT_NS) | (ts < -TIME_LIMIT_NS) | (is_x & (dur > TIME_LIMIT_NS - ts))
    beyond = keep & ~is_meta & beyond.fill_null(False)
    _warn_count(
        warnings,
        beyond,
        idx,
        "with 'ts' or 'ts'+'dur' beyond ±2^62 ns (±146 years, moetrace's time range), skipped",
    )
    keep = keep & ~beyond
    _warn_count(
        warnings, keep & raw["pid"].is_null() & ~is_meta, idx, "without 'pid' (put on pid 0)"
    )
    odd_id = _flag(raw, jc.FLAG_ODD_ID)  # set by the decoder for every non-int/str pid/tid
    _warn_count(
        warnings,
        keep & odd_id,
        idx,
        "with a pid/tid that is neither number nor string (kept as JSON text)",
    )
    odd_args = raw["args"].is_not_null() & ~raw["args"].str.starts_with("{").fill_null(True)
    _warn_count(
        warnings, keep & odd_args, idx, "with 'args' that is not an object (kept as JSON text)"
    )
    if not bool(keep.all()):  # filtering copies every column: only when something goes
        frame = frame.filter(keep)
    frame = frame.with_columns(pl.col("pid").fill_null("0"))
    return frame.with_columns(pl.col("tid").fill_null(pl.col("pid")))


def trace_from_raw(raw: RawTrace, path: str | Path, *, flavor: str | None = None) -> Trace:
    """Build a `Trace` from decoded raw columns (Chrome semantics + flavor)."""
    warnings = list(raw.warnings)
    columns, raw.events = raw.events, raw.events.clear()  # let the text columns go early
    frame = decode_columns(columns, warnings)
    del columns
    phases = (
        Counter(frame["ph"].to_list())
        if frame.height < 2000
        else dict(frame.group_by("ph").len().iter_rows())
    )
    unknown = {p: n for p, n in phases.items() if p not in _KNOWN}
    for p, n in sorted(unknown.items()):
        what = _IGNORED_NAMES.get(p, "unknown phase")
        warnings.append(f"skipped {n} event(s) of phase {p!r} ({what})")
    meta_rows = frame.filter(pl.col("ph") == "M")
    chosen = flavor_named(flavor) if flavor else detect_flavor(raw.top, frame, meta_rows, path)
    holder = [frame]  # build() drops the big frame as soon as it has taken what it needs
    del frame
    built = parts.build(holder, meta_rows, raw.top, warnings, restore=chosen.restore)
    meta: dict[str, Any] = {
        "format": "chrome-json",
        "flavor": flavor or chosen.name,
        "source": [str(path)],
        "container": raw.container,
        "top": {k: v for k, v in raw.top.items() if k != "moetrace"},
    }
    trace = interpret(chosen, built, raw.top, path, meta)
    prior = trace.meta.get("warnings", [])
    if not (isinstance(prior, list) and all(isinstance(w, str) for w in prior)):
        # a file's own meta (a moetrace trace's "moetrace" key) may carry anything there
        warnings.append("the file's own 'warnings' meta is not a list of text: ignored")
        prior = []
    trace.meta["warnings"] = [*warnings, *prior]
    return trace
