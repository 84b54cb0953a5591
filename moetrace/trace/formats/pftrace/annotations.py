"""Debug annotations of the vectorised .pftrace reader: each event's id, kind, flops, bytes
and args from its annotations, decoded as columns (scanned in lock step, names coded once)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import polars as pl

from moetrace.trace.formats.pftrace.protocol import (
    D_BOOL,
    D_DOUBLE,
    D_INT,
    D_JSON,
    D_NAME,
    D_NAME_IID,
    D_NESTED,
    D_POINTER,
    D_STRING,
    D_UINT,
    D_VALUES,
    WIRE_FIXED64,
    WIRE_LEN,
    WIRE_VARINT,
)
from moetrace.trace.formats.pftrace.read_packets import PacketReader
from moetrace.trace.formats.pftrace.scan import Fields, Scan, Unsupported, scan
from moetrace.trace.formats.pftrace.texts import interned, literal_over, span_strings

_KNOWN_NOTES = ("id", "kind", "flops", "bytes")

THREAD_MIN = 1 << 14
"""Fewest annotations (or args texts) worth a thread of their own: below, starting and
joining it costs more than the work it takes off the waiting thread."""


_NOTE_FIELDS = {D_NAME_IID, D_NAME, *D_VALUES, *D_NESTED}


def _note_values(parts: Scan, k: int) -> Fields:
    """The one scalar value of each of the `k` annotations (field, wire, value, off, length
    per annotation, in annotation order); anything else is not read here."""
    vfield = np.zeros(k, dtype=np.int8)  # the value's field number (2-9)
    vwire = np.zeros(k, dtype=np.int8)
    value = np.zeros(k, dtype=np.uint64)
    off = np.zeros(k, dtype=parts.offsets)
    length = np.zeros(k, dtype=parts.offsets)
    total = 0
    for number in D_VALUES:
        texts = (D_STRING, D_JSON)
        expected = WIRE_FIXED64 if number == D_DOUBLE else WIRE_LEN if number in texts else 0
        for piece in parts.pieces.get(number, []):
            if piece.wire != expected:
                raise Unsupported("debug annotation value of an unexpected wire type")
            total += len(piece.msg)
            vfield[piece.msg] = number
            vwire[piece.msg] = piece.wire
            if piece.value is not None:
                value[piece.msg] = piece.value
            else:
                off[piece.msg], length[piece.msg] = piece.off, piece.length
    # as many values as annotations and none without: exactly one each
    if total != k or bool((vfield == 0).any()):
        raise Unsupported("a debug annotation without exactly one value")
    return Fields(np.broadcast_to(np.int64(0), (k,)), vfield, vwire, value, off, length)


def _interned_codes(
    table: dict[int, dict[int, str]], seq: np.ndarray, iid: np.ndarray
) -> tuple[np.ndarray, list[str]] | None:
    """(code per annotation into the distinct names, the names) when every event (`seq`: the
    events' sequences) is of one sequence and iids are small (a dense lookup; missing iids
    name ""), else None."""
    if len(seq) == 0 or int(seq.min()) != int(seq.max()):
        return None
    names = table.get(int(seq[0]), {})
    top = max(names, default=0)
    if top >= 1 << 20:
        return None
    distinct: dict[str, int] = {}
    code_of_iid = np.array(
        [distinct.setdefault(names.get(i, ""), len(distinct)) for i in range(top + 2)],
        dtype=np.int32,
    )
    code = code_of_iid[np.minimum(iid, np.uint64(top + 1)).astype(np.int64)]  # past the end: ""
    return code, list(distinct)


def repeated_pairs(owner: np.ndarray, code: np.ndarray, n_codes: int) -> bool:
    """Whether some owner (sorted) has the same code twice: compared with the annotations
    1, 2, ... rows before while events have few, else by a sort of (owner, code) keys
    (numpy 2's hash-based np.unique took ~0.5 s per 100k events here)."""
    if len(owner) < 2:
        return False
    most = int(np.bincount(owner).max())
    if most <= 8:
        return any(
            bool(((owner[lag:] == owner[:-lag]) & (code[lag:] == code[:-lag])).any())
            for lag in range(1, most)
        )
    pairs = np.sort(owner.astype(np.int64) * max(n_codes, 1) + code)
    return bool((pairs[1:] == pairs[:-1]).any())


def event_notes(
    data: bytes, buf: np.ndarray, notes: Fields, reader: PacketReader, ev_seq: np.ndarray, m: int
) -> dict[str, Any]:
    """id, kind, flops, bytes and args of every event from its debug annotations."""
    k = len(notes.msg)
    parts = scan(buf, notes.off, notes.off + notes.length, _NOTE_FIELDS)
    if any(parts.count(number) for number in D_NESTED):
        raise Unsupported("nested debug annotation values")
    vals = _note_values(parts, k)
    vfield = vals.field
    # Key: literal name, else interned name, as a code per annotation into `names`.
    name_iid = parts.last(D_NAME_IID, WIRE_VARINT, k)[0]
    literal = parts.select(D_NAME, WIRE_LEN)
    del parts
    codes = None if len(literal.msg) else _interned_codes(reader.notes, ev_seq, name_iid)
    if codes is not None:
        code, names = codes
    else:
        key = literal_over(interned(reader.notes, ev_seq[notes.msg], name_iid, ""), data, literal)
        distinct = key.unique(maintain_order=True)
        code = (
            key.replace_strict(
                distinct, list(range(len(distinct))), return_dtype=pl.Int64
            ).to_numpy()
            if k
            else np.zeros(0, dtype=np.int64)
        )
        names = distinct.to_list()
        del key
    del name_iid
    if repeated_pairs(notes.msg, code, len(names)):
        raise Unsupported("an annotation name twice on one event")

    def named(text: str) -> np.ndarray:
        """Mask of the annotations whose name is `text` (compared as codes, not strings)."""
        return np.asarray(code == (names.index(text) if text in names else -1))

    # args: the "args" string (the biggest texts: decoded beside id, kind, flops and bytes,
    # on the core the main thread leaves while it waits for these notes); else the other
    # annotations as a JSON object.
    is_args_text = named("args") & ((vfield == D_STRING) | (vfield == D_JSON))
    text_rows = np.flatnonzero(is_args_text)
    if len(text_rows) < THREAD_MIN:  # few: a thread would cost more than it saves
        out = _scalar_notes(data, notes, vals, code, named, m)
        args_texts = span_strings(data, vals.off[text_rows], vals.length[text_rows])
    else:
        with ThreadPoolExecutor(max_workers=1) as pool:
            args_job = pool.submit(span_strings, data, vals.off[text_rows], vals.length[text_rows])
            out = _scalar_notes(data, notes, vals, code, named, m)
            args_texts = args_job.result()
    out["args"] = _args(data, notes, vals, code, names, is_args_text, args_texts, m)
    return out


def _scalar_notes(
    data: bytes,
    notes: Fields,
    vals: Fields,
    code: np.ndarray,
    named: Callable[[str], np.ndarray],
    m: int,
) -> dict[str, Any]:
    """id, kind, flops and bytes of the `m` events from their annotations (`vals`: the value
    of each, `code`: its name's code; `named(text)`: the mask of a name)."""
    vfield = vals.field
    out: dict[str, Any] = {}
    # id: an integer value (uint, int, pointer) -> given id; anything else -> a new one.
    is_id = named("id")
    if bool((is_id & (vfield == D_BOOL)).any()):
        raise Unsupported("a boolean id")
    id_ok = is_id & _one_of(vfield, (D_UINT, D_INT, D_POINTER))
    given = np.full(m, -1, dtype=np.int64)
    has_id = np.zeros(m, dtype=bool)
    raw_value = vals.value
    if bool((raw_value[id_ok & (vfield != D_INT)] >= np.uint64(1 << 63)).any()):
        raise Unsupported("an id beyond int64")
    id_values = raw_value[id_ok].view(np.int64)  # int64 two's complement for int values
    given[notes.msg[id_ok]] = id_values
    has_id[notes.msg[id_ok]] = True
    next_id = int(given[has_id].max()) + 1 if has_id.any() else 0
    fresh = np.flatnonzero(~has_id)
    given[fresh] = next_id + np.arange(len(fresh))
    out["id"] = given
    # kind: a string, or "other".
    is_kind = named("kind")
    kind_rows = np.flatnonzero(is_kind)
    if kind_rows.size and not bool(_one_of(vfield[kind_rows], (D_STRING, D_JSON)).all()):
        raise Unsupported("a kind that is not a string")
    texts = span_strings(data, vals.off[kind_rows], vals.length[kind_rows])
    texts = pl.select(pl.when(texts == "").then(pl.lit("other")).otherwise(texts)).to_series()
    kind = _per_event(texts.alias("kind"), notes.msg[kind_rows], m, "other")
    out["kind"] = kind
    # flops, bytes: doubles.
    for name in ("flops", "bytes"):
        sel = np.flatnonzero(named(name))
        if sel.size and bool((vfield[sel] != D_DOUBLE).any()):
            raise Unsupported(f"a {name} that is not a double")
        column = np.full(m, np.nan)
        column[notes.msg[sel]] = raw_value[sel].view(np.float64)
        present = np.zeros(m, dtype=bool)
        present[notes.msg[sel]] = True
        series = pl.Series(name, column)
        missing = np.flatnonzero(~present)
        out[name] = series.scatter(missing, None) if missing.size else series
    return out


def _args(
    data: bytes,
    notes: Fields,
    vals: Fields,
    code: np.ndarray,
    names: list[str],
    is_args_text: np.ndarray,
    texts: pl.Series,
    m: int,
) -> pl.Series:
    """args of the `m` events: the "args" string (`texts`, of the annotations
    `is_args_text`); else the other annotations as a JSON object."""
    k = len(notes.msg)
    vfield, raw_value = vals.field, vals.value
    text_rows = np.flatnonzero(is_args_text)
    extra = (
        np.flatnonzero(
            ~_one_of(code, [names.index(n) for n in _KNOWN_NOTES if n in names]) & ~is_args_text
        )
        if k
        else np.zeros(0, dtype=np.int64)
    )
    extras: dict[int, dict[str, Any]] = {}
    if extra.size:  # events whose args text is there keep it: their other notes are dropped
        with_text = np.zeros(m, dtype=bool)
        with_text[notes.msg[text_rows]] = True
        extra = extra[~with_text[notes.msg[extra]]]
    for j in np.asarray(extra, dtype=np.int64).tolist():
        owner = int(notes.msg[j])
        extras.setdefault(owner, {})[str(names[code[j]])] = _scalar(
            data,
            int(vfield[j]),
            int(raw_value[j]),
            int(vals.off[j]),
            int(vals.length[j]),
        )
    args_series = _per_event(texts.alias("args"), notes.msg[text_rows], m, None)
    if extras:
        owners = sorted(extras)
        args_series = args_series.scatter(
            owners, [json.dumps(extras[o], default=str) for o in owners]
        )
    return args_series


def _one_of(values: np.ndarray, choices: Sequence[int]) -> np.ndarray:
    """np.isin(values, choices) for a few choices: one comparison each (no sort)."""
    out = np.zeros(len(values), dtype=bool)
    for choice in choices:
        out |= values == choice
    return out


def _per_event(texts: pl.Series, owners: np.ndarray, m: int, default: str | None) -> pl.Series:
    """A column of the `m` events: `texts[i]` at event `owners[i]` (distinct), `default`
    elsewhere. A gather of `texts` and the default copies 16-byte string views, not the
    texts (a scatter into a column of defaults copies every text: ~30 ms per 150k args)."""
    if len(owners) == m and bool((owners == np.arange(m)).all()):
        return texts  # every event has one, in order (moetrace's files)
    index = np.full(m, len(texts), dtype=np.int64)  # the default, after the texts
    index[owners] = np.arange(len(owners))
    padded = pl.concat([texts, pl.Series(texts.name, [default], dtype=pl.String)])
    return padded.gather(index)


def _scalar(data: bytes, field: int, raw: int, off: int, length: int) -> Any:
    """A debug annotation's value as the protobuf classes give it."""
    if field in (D_STRING, D_JSON):
        return data[off : off + length].decode("utf-8")
    if field == D_BOOL:
        return bool(raw)
    if field == D_INT:
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if field == D_DOUBLE:
        return float(np.array([raw], dtype=np.uint64).view(np.float64)[0])
    return raw
