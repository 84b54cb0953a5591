"""Decode one piece of a traceEvents array (`ev, ev, ...`) into a frame of text columns.

msgspec decodes into small typed structs: strings as `str`, numbers as `Any` with
`float_hook=str` (so a float literal arrives as its exact text, never as a float64), args as
`msgspec.Raw` (the byte-exact JSON text). Each field becomes a column with one list
comprehension and one Polars constructor; rarely used fields (flow v2, moetrace's own keys)
are only decoded for pieces that contain them. A piece that does not fit the types (a
non-string name, a number in the array...) is decoded leniently, element by element, and
the odd values are flagged for warnings.

Columns: idx, ph, name, cat, ts, dur, pid, tid, id, bp, args (JSON text), bind_id,
flow_in, flow_out, kind, flops, bytes (text or null), flags (UInt8 bit set, see FLAG_*).
"""

from __future__ import annotations

from typing import Any

import msgspec
import polars as pl

from moetrace.trace.formats.chrome.values import flatten_nested, us_values_to_ns

_NULL = msgspec.Raw(b"null")
_SEP = b"\x1f"  # valid JSON never holds a raw control character

FLAG_NOT_OBJECT = 1  # the array element is not a JSON object
FLAG_NAME_NOT_STR = 2  # name present but not a string (kept as its JSON text)
FLAG_PH_NOT_STR = 4  # ph present but not a string
FLAG_ODD_ID = 8  # pid or tid neither a number nor a string
FLAG_BAD_TS = 16  # ts is an object/array/bool (not a number or string)
FLAG_BAD_DUR = 32

RARE_KEYS = (b"bind_id",)  # distinctive bytes: a quick `in` test per piece (flow v2)


class Event(msgspec.Struct, gc=False):
    """The fields of a trace event moetrace reads (others are skipped by the decoder)."""

    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    id: Any = None
    bp: str | None = None
    args: msgspec.Raw = _NULL


class FullEvent(Event, gc=False):
    """Event plus flow v2 keys and moetrace's own extension keys."""

    id2: msgspec.Raw = _NULL
    bind_id: Any = None
    flow_in: Any = None
    flow_out: Any = None
    kind: str | None = None
    flops: Any = None
    bytes: Any = None


class LooseEvent(msgspec.Struct, gc=False):
    """Any value in any field: the lenient path for pieces that break the types."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    id: Any = None
    bp: Any = None
    args: msgspec.Raw = _NULL
    id2: msgspec.Raw = _NULL
    bind_id: Any = None
    flow_in: Any = None
    flow_out: Any = None
    kind: Any = None
    flops: Any = None
    bytes: Any = None


_FAST = msgspec.json.Decoder(list[Event], float_hook=str)
_FULL = msgspec.json.Decoder(list[FullEvent], float_hook=str)
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_LOOSE = msgspec.json.Decoder(LooseEvent, float_hook=str)

COLUMNS: dict[str, pl.DataType] = {
    "idx": pl.UInt32(), "ph": pl.String(), "name": pl.String(), "cat": pl.String(),
    "ts": pl.Int64(), "dur": pl.Int64(), "pid": pl.String(), "tid": pl.String(),
    "id": pl.String(), "bp": pl.String(), "args": pl.String(), "bind_id": pl.String(),
    "flow_in": pl.Boolean(), "flow_out": pl.Boolean(), "kind": pl.String(),
    "flops": pl.String(), "bytes": pl.String(), "id2": pl.String(), "flags": pl.UInt8(),
}  # fmt: skip


RARE = ("bind_id", "flow_in", "flow_out", "kind", "flops", "bytes", "id2")
"""Columns only present when some piece had those keys (absent columns cost no memory)."""


def empty_columns() -> pl.DataFrame:
    """The columns of a piece with no events (every common column, none of the rare ones)."""
    return pl.DataFrame(schema={c: t for c, t in COLUMNS.items() if c not in RARE})


def _finish(cols: dict[str, pl.Series], flags: pl.Series, full: bool) -> pl.DataFrame:
    """The frame of a piece; rare columns only for pieces that may hold them."""
    cols["flags"] = flags
    names = [c for c in COLUMNS if full or c not in RARE]
    return pl.DataFrame([cols[c].alias(c) for c in names])


def _text(values: list[Any]) -> pl.Series:
    """str stays, int -> digits, None -> null (values of other types are fixed up by callers).
    Homogeneous lists (all str, or all int) take Polars' fast strict constructors."""
    return _text_strict(values)[0]


def _text_strict(values: list[Any]) -> tuple[pl.Series, bool]:
    """`_text` plus whether a strict constructor took the values: then every value was a
    str (or every one an int) or None, and no value needs the odd-value check."""
    flat = flatten_nested(values)
    if flat is not values:  # arrays/objects among them: text, and the odd-value check
        return pl.Series(flat, dtype=pl.String, strict=False), False
    first = next((v for v in values if v is not None), None)
    # Polars' Int64 constructor takes True as 1: booleans among ints take the odd-value path.
    if (
        isinstance(first, int)
        and not isinstance(first, bool)
        and bool not in set(map(type, values))
    ):
        try:
            return pl.Series(values, dtype=pl.Int64).cast(pl.String), True
        except (TypeError, OverflowError, pl.exceptions.PolarsError):
            pass
    elif isinstance(first, str):
        try:
            return pl.Series(values, dtype=pl.String), True
        except (TypeError, pl.exceptions.PolarsError):
            pass
    elif first is None:
        return pl.repeat(None, len(values), dtype=pl.String, eager=True), True
    return pl.Series(values, dtype=pl.String, strict=False), False


def _args(values: list[msgspec.Raw]) -> pl.Series:
    try:
        joined = _SEP.join(values).decode("utf-8")
    except UnicodeDecodeError as exc:
        # msgspec checks UTF-8 in strings it decodes, not in raw values: report it as the
        # JSON error it is (the caller finds the byte).
        raise msgspec.DecodeError(f"invalid UTF-8 in 'args' ({exc.reason})") from None
    s = pl.Series([joined]).str.split("\x1f").explode()
    if s.len() != len(values):  # cannot happen with valid JSON; stay correct anyway
        s = pl.Series([bytes(v).decode("utf-8") for v in values], dtype=pl.String)
    return pl.select(pl.when(s == "null").then(None).otherwise(s)).to_series()


def decode_bracketed(
    data: bytes | memoryview, first_index: int, *, full: bool = False
) -> pl.DataFrame:
    """`[ev, ev, ...]` -> columns; `full` decodes moetrace's own keys too (else only flow v2
    keys). Raises msgspec.DecodeError on bad JSON."""
    try:
        events = (_FULL if full else _FAST).decode(data)
    except msgspec.ValidationError:
        return _loose_columns(data, first_index)
    n = len(events)
    if n == 0:
        return empty_columns()
    cols: dict[str, pl.Series] = {
        "idx": pl.int_range(first_index, first_index + n, dtype=pl.UInt32, eager=True),
        "ph": pl.Series([e.ph for e in events], dtype=pl.String),
        "name": pl.Series([e.name for e in events], dtype=pl.String),
        "cat": pl.Series([e.cat for e in events], dtype=pl.String),
    }
    flags = pl.repeat(0, n, dtype=pl.UInt8, eager=True)
    cols["ts"], ts_bad = us_values_to_ns([e.ts for e in events])
    cols["dur"], dur_bad = us_values_to_ns([e.dur for e in events])
    flags = flags | (ts_bad.cast(pl.UInt8) * FLAG_BAD_TS) | (dur_bad.cast(pl.UInt8) * FLAG_BAD_DUR)
    ids = {"pid": [e.pid for e in events], "tid": [e.tid for e in events]}
    for field, values in ids.items():
        series, strict = _text_strict(values)
        if not strict:  # mixed or odd values (objects, arrays, bools): JSON text + flag
            series, bad = _fix_odd(values, series)
            flags = flags | (bad.cast(pl.UInt8) * FLAG_ODD_ID)
        cols[field] = series
    cols["id"] = _text([e.id for e in events])
    cols["bp"] = pl.Series([e.bp for e in events], dtype=pl.String)
    cols["args"] = _args([e.args for e in events])
    if full:
        cols["bind_id"] = _text([e.bind_id for e in events])  # type: ignore[attr-defined]
        cols["flow_in"] = pl.Series([e.flow_in is True for e in events], dtype=pl.Boolean)  # type: ignore[attr-defined]
        cols["flow_out"] = pl.Series([e.flow_out is True for e in events], dtype=pl.Boolean)  # type: ignore[attr-defined]
        cols["kind"] = _text([e.kind for e in events])  # type: ignore[attr-defined]
        cols["flops"] = _text([e.flops for e in events])  # type: ignore[attr-defined]
        cols["bytes"] = _text([e.bytes for e in events])  # type: ignore[attr-defined]
        cols["id2"] = _args([e.id2 for e in events])  # type: ignore[attr-defined]
    return _finish(cols, flags, full)


def _fix_odd(values: list[Any], series: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Values Polars could not make text of (objects, arrays, bools, floats): JSON text + flag."""
    bad = [(v is not None and not isinstance(v, str | int)) or isinstance(v, bool) for v in values]
    fixed = [msgspec.json.encode(v).decode() if b else v for v, b in zip(values, bad, strict=True)]
    return _text(fixed), pl.Series(bad, dtype=pl.Boolean)


def _loose_columns(data: bytes | memoryview, first_index: int) -> pl.DataFrame:
    """Element by element: objects become events with every odd value flagged; anything
    else becomes a placeholder flagged FLAG_NOT_OBJECT (reported, then skipped)."""
    rows: list[LooseEvent] = []
    flags: list[int] = []
    for raw in _RAW_LIST.decode(data):
        try:
            ev = _LOOSE.decode(raw)
        except msgspec.ValidationError:
            rows.append(LooseEvent(name=bytes(raw)[:40].decode("utf-8", "replace")))
            flags.append(FLAG_NOT_OBJECT)
            continue
        flag = 0
        if ev.name is not None and not isinstance(ev.name, str):
            flag |= FLAG_NAME_NOT_STR
            ev.name = msgspec.json.encode(ev.name).decode()
        if ev.ph is not None and not isinstance(ev.ph, str):
            flag |= FLAG_PH_NOT_STR
            ev.ph = None
        for field in ("pid", "tid"):
            v = getattr(ev, field)
            if v is not None and (isinstance(v, bool) or not isinstance(v, str | int)):
                flag |= FLAG_ODD_ID
                setattr(ev, field, msgspec.json.encode(v).decode())
        for field, bit in (("ts", FLAG_BAD_TS), ("dur", FLAG_BAD_DUR)):
            v = getattr(ev, field)
            if v is not None and (isinstance(v, bool) or not isinstance(v, str | int)):
                flag |= bit
                setattr(ev, field, msgspec.json.encode(v).decode())
        for field in ("cat", "bp", "kind", "id", "bind_id", "flops", "bytes"):
            v = getattr(ev, field)
            if v is not None and not isinstance(v, str | int):
                setattr(ev, field, msgspec.json.encode(v).decode())
        rows.append(ev)
        flags.append(flag)
    n = len(rows)
    if n == 0:
        return empty_columns()
    cols: dict[str, pl.Series] = {
        "idx": pl.int_range(first_index, first_index + n, dtype=pl.UInt32, eager=True)
    }
    for field in (
        "ph",
        "name",
        "cat",
        "pid",
        "tid",
        "id",
        "bp",
        "bind_id",
        "kind",
        "flops",
        "bytes",
    ):
        cols[field] = _text([getattr(e, field) for e in rows])
    ts, ts_bad = us_values_to_ns([e.ts for e in rows])
    dur, dur_bad = us_values_to_ns([e.dur for e in rows])
    cols["ts"], cols["dur"] = ts, dur
    bad_bits = (ts_bad.cast(pl.UInt8) * FLAG_BAD_TS) | (dur_bad.cast(pl.UInt8) * FLAG_BAD_DUR)
    cols["args"] = _args([e.args for e in rows])
    cols["id2"] = _args([e.id2 for e in rows])
    cols["flow_in"] = pl.Series([e.flow_in is True for e in rows], dtype=pl.Boolean)
    cols["flow_out"] = pl.Series([e.flow_out is True for e in rows], dtype=pl.Boolean)
    return _finish(cols, pl.Series(flags, dtype=pl.UInt8) | bad_bits, True)
