"""The fast path of Chrome JSON piece decoding: lean structs and joined raw text.

`columns.decode_bracketed` builds its columns from Python values: `float_hook=str` makes a
Python string of every float (a Python call per number) and `Any` fields are decoded
generically. Here msgspec decodes ts, dur, id and args as `msgspec.Raw` (no Python value per
number), each such field is joined into one text per piece and split and parsed by Polars;
id and bp are taken only for events that are not complete slices. The columns are the ones
`decode_bracketed` builds (a hypothesis test compares them, tests/trace/test_json_fast.py);
values outside the fast forms (exponents, quoted numbers, odd types) go through the same
converters it uses. A worker thread for the Polars part was tried: it saves wall time on an
idle multi-core machine but costs ~90 MB of peak RSS at 1M events (allocator arenas per
thread), against issue 14's memory target.
"""

from __future__ import annotations

from typing import Any

import msgspec
import polars as pl

from moetrace.trace.formats.chrome import columns as jc
from moetrace.trace.formats.chrome.values import _MAX_WHOLE, us_values_to_ns

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
    try:
        events = _LEAN.decode(data)
    except msgspec.ValidationError:
        return None
    n = len(events)
    ph = pl.Series([e.ph for e in events], dtype=pl.String)
    names = [e.name for e in events]
    cats = [e.cat for e in events]
    pids = [e.pid for e in events]
    tids = [e.tid for e in events]
    # id and bp matter only for events that are not complete slices (flows, async, counters,
    # metadata): taken for those alone.
    other = (ph != "X").fill_null(True).arg_true().to_list() if n else []
    ts, dur, args, ids = (
        _text_of([e.ts for e in events], "ts"),
        _text_of([e.dur for e in events], "dur"),
        _text_of([e.args for e in events], "args"),
        _text_of([events[i].id for i in other], "id"),
    )
    bps = [events[i].bp for i in other]
    del events  # the raw values hold the input buffer: let it go before returning
    return _finish(n, first_index, ph, names, cats, pids, tids, ts, dur, args, other, ids, bps)


def _text_of(raws: list[msgspec.Raw], field: str) -> str:
    """Raw JSON values joined by the separator, as text. msgspec checks UTF-8 only in the
    values it decodes: invalid bytes in a raw one are reported here as the JSON error they
    are (the caller finds the byte)."""
    try:
        return _SEP.join(raws).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise msgspec.DecodeError(f"invalid UTF-8 in {field!r} ({exc.reason})") from None


def _split(joined: str, n: int) -> pl.Series:
    """`n` texts joined by the separator -> a String Series."""
    if n == 0:
        return pl.Series([], dtype=pl.String)
    return pl.Series([joined], dtype=pl.String).str.split("\x1f").explode()


def _times(joined: str, n: int) -> tuple[pl.Series, pl.Series]:
    """Raw ts/dur texts (µs) -> (Int64 ns, invalid), exactly as `us_values_to_ns` gives for the
    decoded values: plain numbers with 3 decimals or none here, every other text decoded and
    handed to it."""
    text = _split(joined, n)
    t = pl.col("t")
    dot = t.str.find(".", literal=True)
    # One parse per value: the digits without the point (all of them when there is none).
    digits = t.str.replace(".", "", literal=True, n=1).cast(pl.Int64, strict=False)
    out = pl.DataFrame({"t": text}).select(
        pl.when((t.str.len_bytes().cast(pl.Int64) - dot.cast(pl.Int64)) == 4)
        .then(digits)
        .when(dot.is_null() & (digits.abs() <= _MAX_WHOLE))
        .then(digits * 1000)
        .alias("ns"),
        (t != "null").alias("present"),
    )
    ns, present = out["ns"], out["present"]
    rest = ns.is_null() & present
    bad = pl.repeat(False, n, dtype=pl.Boolean, eager=True)
    if rest.any():
        where = rest.arg_true()
        values = [_ANY.decode(v) for v in text.gather(where).to_list()]
        fixed, fixed_bad = us_values_to_ns(values)
        ns = ns.scatter(where, fixed)
        bad = bad.scatter(where, fixed_bad)
    return ns, bad


_SIMPLE_ID = r'^(?:-?[1-9][0-9]{0,17}|0|"[^"\\]*"|null)$'
"""Ids whose text `_json_columns._text` would give without decoding: ints of < 19 digits,
strings without escapes, null (anything else is decoded and given to `_text`)."""


def _ids(joined: str, n: int) -> pl.Series:
    text = _split(joined, n)
    if n == 0:
        return text
    if not bool(text.str.contains(_SIMPLE_ID).all()):
        return jc._text([_ANY.decode(v) for v in text.to_list()])
    quoted = text.str.starts_with('"')
    return pl.select(
        pl.when(text == "null")
        .then(None)
        .when(quoted)
        .then(text.str.slice(1, text.str.len_bytes() - 2))
        .otherwise(text)
    ).to_series()


def _spread(values: pl.Series, where: list[int], n: int) -> pl.Series:
    """A column of `n` nulls with `values` at positions `where`."""
    if len(where) == n:
        return values
    out = pl.repeat(None, n, dtype=values.dtype, eager=True)
    return out.scatter(where, values) if where else out


def _finish(
    n: int,
    first_index: int,
    ph: pl.Series,
    names: list[Any],
    cats: list[Any],
    pids: list[Any],
    tids: list[Any],
    ts: str,
    dur: str,
    args: str,
    other: list[int],
    ids: str,
    bps: list[Any],
) -> pl.DataFrame:
    """The columns of one piece (see `columns.COLUMNS`)."""
    if n == 0:
        return jc.empty_columns()
    cols: dict[str, pl.Series] = {
        "idx": pl.int_range(first_index, first_index + n, dtype=pl.UInt32, eager=True),
        "ph": ph,
        "name": pl.Series(names, dtype=pl.String),
        "cat": pl.Series(cats, dtype=pl.String),
    }
    cols["ts"], ts_bad = _times(ts, n)
    cols["dur"], dur_bad = _times(dur, n)
    flags = (ts_bad.cast(pl.UInt8) * jc.FLAG_BAD_TS) | (dur_bad.cast(pl.UInt8) * jc.FLAG_BAD_DUR)
    for field, values in (("pid", pids), ("tid", tids)):
        series, strict = jc._text_strict(values)
        if not strict:  # mixed int and str: text (no odd values pass the lean types)
            series, bad = jc._fix_odd(values, series)
            flags = flags | (bad.cast(pl.UInt8) * jc.FLAG_ODD_ID)
        cols[field] = series
    cols["id"] = _spread(_ids(ids, len(other)), other, n)
    cols["bp"] = _spread(pl.Series(bps, dtype=pl.String), other, n)
    text = _split(args, n)
    cols["args"] = pl.select(pl.when(text == "null").then(None).otherwise(text)).to_series()
    return jc._finish(cols, flags, False)
