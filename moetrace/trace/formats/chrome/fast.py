"""The fast path of Chrome JSON piece decoding: lean structs and joined raw text.

`columns.decode_bracketed` builds its columns from Python values: `float_hook=str` makes a
Python string of every float (a Python call per number) and `Any` fields are decoded
generically. Here msgspec decodes ts, dur, id and args as `msgspec.Raw` (no Python value per
number), each such field is joined into one text per piece and split and parsed by Polars;
id and bp are taken only for events that are not complete slices.

`LeanColumns` gathers many pieces and does the Polars work once, over the whole run of
pieces: each piece leaves only a few one-row or small Series (its joined texts, its names),
and the ~25 Polars operations that turn them into columns run once per file instead of once
per 4 MB piece (~900 small collects at 1M events, a third of the load). The columns are the
ones `decode_bracketed` builds for each piece (a hypothesis test compares them,
tests/trace/test_json_fast.py); values outside the fast forms (exponents, quoted numbers, odd
types) go through the same converters it uses. A worker thread for the Polars part was
tried twice (per piece, then per batch): it overlaps with the next decode on an idle
multi-core machine but raised the 1M-event peak RSS by ~90 MB, then by ~50 MB (few-tracks
shape: ~510 MB against ~460 MB), against issue 14's memory target: not used. A third try
(one batch in flight, at ec81bfc's lower build peak) still raised it by 40-60 MB.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
import numpy as np
import polars as pl

from moetrace.trace.formats.chrome import columns as jc
from moetrace.trace.formats.chrome.values import fast_us_ns, us_values_to_ns

_NULL = msgspec.Raw(b"null")
_SEP = b"\x1f"  # valid JSON never holds a raw control character


class LeanEvent(msgspec.Struct, gc=False):
    """The fields moetrace reads, with numbers and args kept as raw JSON text.

    pid/tid are `int | str`: anything else fails validation and the piece takes the
    lenient path of `_json_columns` (which flags such values), as before."""

    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: msgspec.Raw = _NULL
    dur: msgspec.Raw = _NULL
    pid: int | str | None = None
    tid: int | str | None = None
    id: msgspec.Raw = _NULL
    bp: str | None = None
    args: msgspec.Raw = _NULL


_LEAN = msgspec.json.Decoder(list[LeanEvent])
_ANY = msgspec.json.Decoder(float_hook=str)  # the value semantics of columns' decoders


def decode_lean(data: bytes | memoryview, first_index: int) -> pl.DataFrame | None:
    """Columns of `[ev, ev, ...]` (see `columns.COLUMNS`), or None when the piece does not
    fit the lean types (the caller takes the lenient path of `columns`). Raises
    msgspec.DecodeError for invalid JSON or invalid UTF-8."""
    batch = LeanColumns(first_index)
    if not batch.add(data):
        return None
    return batch.finish()


class LeanColumns:
    """The columns of consecutive pieces `[ev, ...]`, built once for all of them.

    `add` decodes a piece and keeps only its per-field Series (joined raw texts as one-row
    Series, strings as Series): the piece's bytes and structs go before it returns. `finish`
    gives the frame of every piece added, equal to the pieces' `decode_lean` frames one after
    the other (idx from `first_index`)."""

    def __init__(self, first_index: int) -> None:
        self.first_index = first_index
        self.count = 0  # events added so far
        self._fields: dict[str, list[pl.Series]] = {
            k: [] for k in ("ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "id", "bp")
        }
        self._other: list[pl.Series] = []  # positions (from 0) of the events that are not X
        self._sizes: list[int] = []  # events per piece
        self._other_sizes: list[int] = []  # events that are not X, per piece

    def add(self, data: bytes | memoryview) -> bool:
        """Decode one piece; False (and nothing kept) when it does not fit the lean types.
        Raises msgspec.DecodeError for invalid JSON or invalid UTF-8 (nothing kept)."""
        try:
            events = _LEAN.decode(data)
        except msgspec.ValidationError:
            return False
        n = len(events)
        if n == 0:
            return True
        ph = pl.Series([e.ph for e in events], dtype=pl.String)
        # id and bp matter only for events that are not complete slices (flows, async,
        # counters, metadata): taken for those alone.
        other = (ph != "X").fill_null(True).arg_true()
        where = other.to_list()
        piece = {
            "ph": ph,
            "name": pl.Series([e.name for e in events], dtype=pl.String),
            "cat": pl.Series([e.cat for e in events], dtype=pl.String),
            "pid": _id_column([e.pid for e in events]),
            "tid": _id_column([e.tid for e in events]),
            "ts": _joined([e.ts for e in events], "ts"),
            "dur": _joined([e.dur for e in events], "dur"),
            "args": _joined([e.args for e in events], "args"),
            "bp": pl.Series([events[i].bp for i in where], dtype=pl.String),
        }
        if where:
            piece["id"] = _joined([events[i].id for i in where], "id")
        del events  # the raw values hold the input buffer: let it go before returning
        for field, series in piece.items():
            self._fields[field].append(series)
        if where:
            self._other.append(other.cast(pl.Int64) + self.count)
            self._other_sizes.append(len(where))
        self._sizes.append(n)
        self.count += n
        return True

    def finish(self) -> pl.DataFrame:
        """The columns of every piece added (see `columns.COLUMNS`)."""
        n = self.count
        if n == 0:
            return jc.empty_columns()
        f = self._fields
        first = self.first_index
        cols: dict[str, pl.Series] = {
            "idx": pl.int_range(first, first + n, dtype=pl.UInt32, eager=True),
            "ph": _concat(f["ph"]),
            "name": _concat(f["name"]),
            "cat": _concat(f["cat"]),
        }
        cols["ts"], ts_bad = _times(_split(f["ts"]), self._sizes)
        cols["dur"], dur_bad = _times(_split(f["dur"]), self._sizes)
        flags = (ts_bad.cast(pl.UInt8) * jc.FLAG_BAD_TS) | (
            dur_bad.cast(pl.UInt8) * jc.FLAG_BAD_DUR
        )
        for field in ("pid", "tid"):
            parts = f[field]
            if any(s.dtype != pl.Int64 for s in parts):
                parts = [s.cast(pl.String) for s in parts]
            cols[field] = _concat(parts).cast(pl.String)
        other = _concat(self._other) if self._other else pl.Series([], dtype=pl.Int64)
        ids = _ids(f["id"]) if f["id"] else pl.Series([], dtype=pl.String)
        cols["id"] = _spread(ids, other, n)
        cols["bp"] = _spread(_concat(f["bp"]), other, n)
        text = _split(f["args"])
        cols["args"] = pl.select(pl.when(text == "null").then(None).otherwise(text)).to_series()
        for parts in f.values():
            parts.clear()
        return jc._finish(cols, flags, False)


def _concat(parts: list[pl.Series]) -> pl.Series:
    return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=True)


def _id_column(values: list[Any]) -> pl.Series:
    """pid or tid values (int | str | None) -> Int64 when every one is an int (cast to text
    once for the whole file: the same text `columns._text_strict` gives), else the text
    `columns._text_strict` / `_fix_odd` give (the lean types admit no odd value, so nothing
    is flagged)."""
    first = next((v for v in values if v is not None), None)
    if isinstance(first, int):  # no bool here: msgspec's int | str refuses true/false
        try:
            return pl.Series(values, dtype=pl.Int64)
        except (TypeError, OverflowError, pl.exceptions.PolarsError):
            pass
    return jc._text(values)


def _joined(raws: list[msgspec.Raw], field: str) -> pl.Series:
    """Raw JSON values joined by the separator, as a one-row String Series. msgspec checks
    UTF-8 only in the values it decodes: invalid bytes in a raw one are reported here as the
    JSON error they are (the caller finds the byte)."""
    try:
        text = _SEP.join(raws).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"invalid UTF-8 in {field!r} ({exc.reason})") from None
    return pl.Series([text], dtype=pl.String)


def _split(rows: list[pl.Series]) -> pl.Series:
    """One-row Series of texts joined by the separator -> a String Series of the texts."""
    return _concat(rows).str.split("\x1f").explode()


def _times(text: pl.Series, sizes: list[int]) -> tuple[pl.Series, pl.Series]:
    """Raw ts/dur texts (µs) of pieces of `sizes` events -> (Int64 ns, invalid), exactly as
    `us_values_to_ns` gives for each piece's decoded values: plain numbers with 3 decimals or
    none here, every other text decoded and handed to it, piece by piece."""
    n = text.len()
    # One chunk, as the other columns: unaligned chunks make later eager selects copy
    # every column of the frame (~100 MB at 1M events).
    ns, present = fast_us_ns(text).rechunk(), text != "null"
    rest = ns.is_null() & present
    bad = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if rest.any():
        where = rest.arg_true()
        ends = np.cumsum(sizes)
        piece_of = np.searchsorted(ends, where.to_numpy(), side="right")
        values = [_ANY.decode(v) for v in text.gather(where).to_list()]
        fixed_parts, bad_parts = [], []
        for lo, hi in _runs(piece_of):  # the fallback's batch rules are per piece
            fixed, fixed_bad = us_values_to_ns(values[lo:hi])
            fixed_parts.append(fixed)
            bad_parts.append(fixed_bad)
        ns = ns.scatter(where, pl.concat(fixed_parts))
        bad = bad.scatter(where, pl.concat(bad_parts))
    return ns, bad


def _runs(labels: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of equal values in sorted `labels`."""
    starts = np.flatnonzero(np.diff(labels)) + 1
    bounds = [0, *starts.tolist(), len(labels)]
    return list(itertools.pairwise(bounds))


_SIMPLE_ID = r'^(?:-?[1-9][0-9]{0,17}|0|"[^"\\]*"|null)$'
"""Ids whose text `_json_columns._text` would give without decoding: ints of < 19 digits,
strings without escapes, null (anything else is decoded and given to `_text`)."""


def _ids(rows: list[pl.Series]) -> pl.Series:
    """Raw id texts (one joined row per piece) -> the text `columns._text` gives for each
    piece's decoded ids: in one pass when every id has a simple form, else piece by piece."""
    text = _split(rows)
    if not bool(text.str.contains(_SIMPLE_ID).all()):
        return pl.concat([_piece_ids(_split([row])) for row in rows])
    return _simple_ids(text)


def _piece_ids(text: pl.Series) -> pl.Series:
    if not bool(text.str.contains(_SIMPLE_ID).all()):
        return jc._text([_ANY.decode(v) for v in text.to_list()])
    return _simple_ids(text)


def _simple_ids(text: pl.Series) -> pl.Series:
    quoted = text.str.starts_with('"')
    return pl.select(
        pl.when(text == "null")
        .then(None)
        .when(quoted)
        .then(text.str.slice(1, text.str.len_bytes() - 2))
        .otherwise(text)
    ).to_series()


def _spread(values: pl.Series, where: pl.Series, n: int) -> pl.Series:
    """A column of `n` nulls with `values` at positions `where`."""
    if len(where) == n:
        return values
    out = pl.repeat(None, n, dtype=values.dtype, eager=True)
    return out.scatter(where, values) if len(where) else out
