"""Vectorised `.pftrace` reading: the TrackEvent packets of a whole trace decoded with numpy.

The per-packet reader (`read_packets.read_slow`) builds a protobuf object per packet and reads
its fields in Python, ~40 µs per event. Here the packets are found by protobuf's C parser
(`scan.packet_spans`), their fields and those of their TrackEvents and debug
annotations are decoded in lock step (`scan.scan`), and BEGIN/END pairs, interned
names, ids, flows and counters are joined as columns. The few packets that are not events
(descriptors, interned strings, moetrace's metadata) still go through the protobuf classes.

Anything this reader does not reproduce exactly (interning that changes after the first
event, unmatched BEGIN/END, nested or repeated debug annotations, bytes that do not parse)
returns None, and the caller uses the per-packet reader: same result, just slower.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.formats.pftrace.plan import FLOW_KIND_BITS
from moetrace.trace.formats.pftrace.read_packets import (
    PacketReader,
    TrackIds,
    counter_track,
    finish,
)
from moetrace.trace.formats.pftrace.scan import PAD, Fields, Malformed, Scan, packet_spans, scan
from moetrace.trace.model import DEP_KINDS, Trace

_BEGIN, _END, _INSTANT, _COUNTER = 1, 2, 3, 4
_LEN, _VARINT, _FIXED64 = 2, 0, 1
# TracePacket fields
_P_TIMESTAMP, _P_SEQ, _P_EVENT, _P_INTERNED, _P_FLAGS, _P_CLEARED = 8, 10, 11, 12, 13, 41
# TrackEvent fields
_E_CAT_IIDS, _E_NOTES, _E_TYPE, _E_NAME_IID, _E_UUID = 3, 4, 9, 10, 11
_E_CATS, _E_NAME, _E_INT_VALUE, _E_DOUBLE_VALUE = 22, 23, 30, 44
_E_FLOW_OUT, _E_FLOW_IN, _E_FLOW_OUT_OLD, _E_FLOW_IN_OLD = 47, 48, 36, 42
# DebugAnnotation fields: name_iid, name; scalar values (bool, uint, int, double, string,
# pointer, legacy JSON); nested values (nested, dict entries, array values) are not read here.
_D_NAME_IID, _D_NAME = 1, 10
_D_BOOL, _D_UINT, _D_INT, _D_DOUBLE, _D_STRING, _D_POINTER, _D_JSON = 2, 3, 4, 5, 6, 7, 9
_D_VALUES = (_D_BOOL, _D_UINT, _D_INT, _D_DOUBLE, _D_STRING, _D_POINTER, _D_JSON)
_D_NESTED = (8, 11, 12)
_KNOWN_NOTES = ("id", "kind", "flops", "bytes")
_FLOW_WIRES = {
    _E_FLOW_OUT: _FIXED64,
    _E_FLOW_IN: _FIXED64,
    _E_FLOW_OUT_OLD: _VARINT,
    _E_FLOW_IN_OLD: _VARINT,
}


_PACKET_FIELDS = {_P_TIMESTAMP, _P_SEQ, _P_EVENT, _P_INTERNED, _P_FLAGS, _P_CLEARED}
_EVENT_FIELDS = {
    _E_CAT_IIDS,
    _E_NOTES,
    _E_TYPE,
    _E_NAME_IID,
    _E_UUID,
    _E_CATS,
    _E_NAME,
    _E_INT_VALUE,
    _E_DOUBLE_VALUE,
    *_FLOW_WIRES,
}
_NOTE_FIELDS = {_D_NAME_IID, _D_NAME, *_D_VALUES, *_D_NESTED}


class _Unsupported(Exception):
    """Something the vectorised reader does not reproduce: use the per-packet reader."""


def read_vectorised(path: Path, data: bytes) -> Trace | None:
    """The `Trace` of a .pftrace file, or None when it needs the per-packet reader."""
    try:
        return _read(path, data)
    except (_Unsupported, Malformed, UnicodeDecodeError):
        return None


def _strings(data: bytes, off: np.ndarray, length: np.ndarray) -> pl.Series:
    """UTF-8 texts at the given spans (strict, as protobuf's parser is), as a String Series.

    The spans are gathered into one buffer with NUL separators, decoded once and split by
    Polars; texts that contain NUL themselves are sliced one by one instead."""
    n = len(off)
    if n == 0:
        return pl.Series(values=[], dtype=pl.String)
    raw = np.frombuffer(data, dtype=np.uint8)
    length = length.astype(np.int64)
    out_start = np.zeros(n, dtype=np.int64)
    np.cumsum(length[:-1] + 1, out=out_start[1:])
    total = int(out_start[-1] + length[-1])
    off = off.astype(np.int64)
    if n > 1 and total * 4 > len(raw) and bool((off[1:] > off[:-1] + length[:-1]).all()):
        joined = _compress_spans(raw, off, length)
    else:
        joined = _gather_spans(raw, off, length, out_start, total)
    separators = np.zeros(total, dtype=bool)
    separators[out_start[1:] - 1] = True
    if bool((joined[~separators] == 0).any()):
        return pl.Series(
            values=[
                data[o : o + k].decode("utf-8")
                for o, k in zip(off.tolist(), length.tolist(), strict=True)
            ],
            dtype=pl.String,
        )
    text = joined.tobytes().decode("utf-8")
    return pl.Series(values=[text], dtype=pl.String).str.split("\x00").explode()


def _compress_spans(raw: np.ndarray, off: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The spans (in increasing order, each after a gap of at least one byte: a protobuf
    length-delimited payload follows its tag and length) joined by NUL separators, by one
    mask over the data: each span is taken with the byte before it, which becomes the
    separator. Per byte of data, not per byte of every span (for dense spans such as args)."""
    edges = np.zeros(len(raw) + 1, dtype=np.int8)
    edges[off - 1] = 1
    edges[off + length] -= 1
    inside = np.cumsum(edges[:-1], dtype=np.int8).view(bool)
    joined = raw[inside]
    joined[np.cumsum(length[:-1] + 1)] = 0  # the byte before each span but the first
    return np.asarray(joined[1:])


def _gather_spans(
    raw: np.ndarray, off: np.ndarray, length: np.ndarray, out_start: np.ndarray, total: int
) -> np.ndarray:
    """The spans joined by NUL separators, by an index gather per byte of the spans."""
    n = len(off)
    joined = np.zeros(total, dtype=np.uint8)  # separators stay 0
    step = 1 << 16  # spans per block: index temporaries stay small
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        lens = length[lo:hi]
        count = int(lens.sum())
        if count == 0:
            continue
        shift = np.repeat(off[lo:hi].astype(np.int64) - out_start[lo:hi], lens)
        target = np.arange(count, dtype=np.int64) + np.repeat(
            out_start[lo:hi] - (np.cumsum(lens) - lens - 0), lens
        )
        joined[target] = raw[target + shift]
    return joined


def _read(path: Path, data: bytes) -> Trace:
    starts, ends = packet_spans(data)
    buf = np.frombuffer(data + bytes(PAD), dtype=np.uint8)
    packets = scan(buf, starts, ends, _PACKET_FIELDS)
    n_packets = len(starts)
    event_field = packets.select(_P_EVENT, _LEN)
    is_event = np.zeros(n_packets, dtype=bool)
    is_event[event_field.msg] = True
    # Interning must be settled before the first event: then one table per sequence holds.
    first_event = int(np.argmax(is_event)) if is_event.any() else n_packets
    flags, _ = packets.select(_P_FLAGS, _VARINT).last(n_packets)
    cleared = packets.select(_P_CLEARED, _VARINT).last(n_packets)[0] != 0
    interned = np.zeros(n_packets, dtype=bool)
    interned[packets.select(_P_INTERNED).msg] = True
    changes = interned | ((flags & np.uint64(1)) != 0) | cleared
    if bool(changes[first_event:].any()):
        raise _Unsupported("interned data after the first event")
    reader = PacketReader()
    for index in np.flatnonzero(~is_event).tolist():
        reader.packet(pb.TracePacket.FromString(data[starts[index] : ends[index]]))
    event_packets = event_field.msg  # one TrackEvent per packet (the last one wins)
    if bool((np.diff(event_packets) <= 0).any()):
        raise _Unsupported("several track_event fields in a packet")
    ts = packets.select(_P_TIMESTAMP, _VARINT).last(n_packets)[0].view(np.int64)[event_packets]
    seq = packets.select(_P_SEQ, _VARINT).last(n_packets)[0][event_packets].astype(np.int64)
    fields = scan(buf, event_field.off, event_field.off + event_field.length, _EVENT_FIELDS)
    for number, wire in _FLOW_WIRES.items():
        if bool((fields.select(number).wire != wire).any()):
            raise _Unsupported("flow ids of an unexpected wire type")
    n = len(event_packets)
    kind = fields.select(_E_TYPE, _VARINT).last(n)[0].astype(np.int64)
    uuid = fields.select(_E_UUID, _VARINT).last(n)[0]
    slices = _pair_slices(kind, uuid, ts)
    rows = np.flatnonzero((kind == _BEGIN) | (kind == _INSTANT))
    tracks = TrackIds(reader.descriptors)
    events, flow_ids = _event_columns(data, buf, fields, rows, seq, ts, slices, reader, tracks)
    moetrace = (reader.payload or {}).get("writer") == "moetrace"
    deps = _deps(flow_ids, events, ts[rows], moetrace)
    counters = _counters(fields, kind, uuid, ts, reader, tracks)
    return finish(path, reader, tracks, events, deps, counters)


def _unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(values, return_index, return_inverse) by one stable sort (numpy's hash-based
    unique is ~20x slower on 1M uint64s)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.ones(len(values), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(new) - 1
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = group
    return ordered[new], order[new], inverse


def _pair_slices(kind: np.ndarray, uuid: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """End time of every event (its own ts for all but a BEGIN, which gets its END's).

    Per track uuid, in file order, each END closes the latest open BEGIN. Balanced stacks
    only: an END with nothing open or a BEGIN never closed needs the per-packet reader
    (it words a warning per case)."""
    end = ts.copy()
    rows = np.flatnonzero((kind == _BEGIN) | (kind == _END))
    if len(rows) == 0:
        return end
    order = rows[np.argsort(uuid[rows], kind="stable")]
    step = np.where(kind[order] == _BEGIN, 1, -1)
    level = np.cumsum(step)
    group_start = np.ones(len(order), dtype=bool)
    group_start[1:] = uuid[order][1:] != uuid[order][:-1]
    group_end = np.roll(group_start, -1)
    if bool((level < 0).any()) or bool((level[group_end] != 0).any()):
        raise _Unsupported("unbalanced BEGIN/END")
    # Balanced: a BEGIN pushed to level L pairs with the next END popping level L.
    depth = np.where(step > 0, level, level + 1)
    group = np.cumsum(group_start)
    pairs = order[np.lexsort((np.arange(len(order)), depth, group))]
    begins, finals = pairs[0::2], pairs[1::2]
    if not (bool((kind[begins] == _BEGIN).all()) and bool((kind[finals] == _END).all())):
        raise _Unsupported("BEGIN/END pairing")
    end[begins] = ts[finals]
    return end


def _interned(
    table: dict[int, dict[int, str]], seq: np.ndarray, iid: np.ndarray, default: str | None
) -> pl.Series:
    """Strings of (sequence, iid) pairs from the per-sequence interning tables."""
    if len(seq) and int(seq.min()) == int(seq.max()):
        names = table.get(int(seq[0]), {})
        top = max(names, default=0)
        if top < 2**20:  # one sequence, small iids: a gather from a dense table
            dense = pl.Series([names.get(i, default) for i in range(top + 2)], dtype=pl.String)
            index = np.minimum(iid, np.uint64(top + 1)).astype(np.int64)  # past the end: missing
            return dense.gather(index)
    keys = [(s, i, name) for s, names in table.items() for i, name in names.items()]
    lookup = pl.DataFrame(
        {
            "seq": [k[0] for k in keys],
            "iid": [k[1] for k in keys],
            "text": [k[2] for k in keys],
        },
        schema={"seq": pl.Int64, "iid": pl.UInt64, "text": pl.String},
    )
    frame = pl.DataFrame({"seq": seq, "iid": iid}, schema={"seq": pl.Int64, "iid": pl.UInt64})
    text = frame.join(lookup, on=["seq", "iid"], how="left", maintain_order="left")["text"]
    return text.fill_null(default) if default is not None else text


def _event_columns(
    data: bytes,
    buf: np.ndarray,
    fields: Scan,
    rows: np.ndarray,
    seq: np.ndarray,
    ts: np.ndarray,
    end: np.ndarray,
    reader: PacketReader,
    tracks: TrackIds,
) -> tuple[pl.DataFrame, dict[str, Fields]]:
    """The events frame of the BEGIN/INSTANT events `rows`, and their flow ids."""
    n_all = len(seq)
    m = len(rows)
    position = np.full(n_all, -1, dtype=np.int64)
    position[rows] = np.arange(m)

    def of_rows(f: Fields) -> Fields:
        keep = position[f.msg] >= 0
        picked = np.flatnonzero(keep)
        return Fields(
            position[f.msg[picked]],
            f.field[picked],
            f.wire[picked],
            f.value[picked],
            f.off[picked],
            f.length[picked],
        )

    ev_seq = seq[rows]
    # Name: literal, else interned (missing -> "").
    name = _interned(
        reader.names, ev_seq, fields.select(_E_NAME_IID, _VARINT).last(n_all)[0][rows], ""
    )
    literal = of_rows(fields.select(_E_NAME, _LEN))
    if len(literal.msg):
        last = np.zeros(m, dtype=np.int64) - 1
        last[literal.msg] = np.arange(len(literal.msg))
        has = np.flatnonzero(last >= 0)
        texts = _strings(data, literal.off[last[has]], literal.length[last[has]])
        name = name.scatter(has, texts)
    cat = _categories(
        data,
        of_rows(fields.select(_E_CAT_IIDS)),
        of_rows(fields.select(_E_CATS)),
        reader,
        ev_seq,
        m,
    )
    notes = _notes(data, buf, of_rows(fields.select(_E_NOTES, _LEN)), reader, ev_seq, m)
    uuid = fields.select(_E_UUID, _VARINT).last(n_all)[0][rows]
    unique_uuid, first, inverse = _unique(uuid)
    track_of = np.zeros(len(unique_uuid), dtype=np.int64)
    for k in np.argsort(first, kind="stable").tolist():  # new tracks in order of first use
        track_of[k] = tracks.track(int(unique_uuid[k]))
    flow_ids = {
        "out": of_rows(fields.select(_E_FLOW_OUT, _FIXED64)),
        "out_old": of_rows(fields.select(_E_FLOW_OUT_OLD, _VARINT)),
        "in": of_rows(fields.select(_E_FLOW_IN, _FIXED64)),
        "in_old": of_rows(fields.select(_E_FLOW_IN_OLD, _VARINT)),
    }
    frame = pl.DataFrame(
        {
            "id": notes["id"],
            "track": track_of[inverse.reshape(-1)],
            "name": name,
            "cat": cat,
            "kind": notes["kind"],
            "ts": ts[rows],
            "dur": end[rows] - ts[rows],
            "flops": notes["flops"],
            "bytes": notes["bytes"],
            "args": notes["args"],
        },
        schema_overrides={"ts": pl.Int64, "dur": pl.Int64, "id": pl.Int64},
    )
    return frame, flow_ids


def _categories(
    data: bytes, iids: Fields, literal: Fields, reader: PacketReader, ev_seq: np.ndarray, m: int
) -> pl.Series:
    """`cat`: the event's interned categories then its literal ones, joined by ","."""
    if len(iids.msg) == 0 and len(literal.msg) == 0:
        return pl.Series("cat", [None] * m, dtype=pl.String)
    if iids.msg.size and bool((iids.wire != _VARINT).any()):
        raise _Unsupported("packed category iids")
    count = np.bincount(iids.msg, minlength=m) + np.bincount(literal.msg, minlength=m)
    if int(count.max()) <= 1:
        one_iid = np.zeros(m, dtype=np.uint64)
        one_iid[iids.msg] = iids.value
        text = _interned(reader.cats, ev_seq, one_iid, "")
        text = text.scatter(np.flatnonzero(count == 0), None) if (count == 0).any() else text
        if literal.msg.size:
            text = text.scatter(literal.msg, _strings(data, literal.off, literal.length))
        return text.alias("cat")
    # Several categories on some events: join them per event (rare; only those events).
    parts: dict[int, list[str]] = {}
    seqs = ev_seq.tolist()
    for row, iid in zip(iids.msg.tolist(), iids.value.tolist(), strict=True):
        parts.setdefault(row, []).append(reader.cats[seqs[row]].get(iid, ""))
    for row, text in zip(
        literal.msg.tolist(), _strings(data, literal.off, literal.length), strict=True
    ):
        parts.setdefault(row, []).append(text)
    out: list[str | None] = [None] * m
    for row, texts in parts.items():
        out[row] = ",".join(texts)
    return pl.Series("cat", out, dtype=pl.String)


def _notes(
    data: bytes, buf: np.ndarray, notes: Fields, reader: PacketReader, ev_seq: np.ndarray, m: int
) -> dict[str, Any]:
    """id, kind, flops, bytes and args of every event from its debug annotations."""
    k = len(notes.msg)
    parts = scan(buf, notes.off, notes.off + notes.length, _NOTE_FIELDS)
    if any(parts.select(number).msg.size for number in _D_NESTED):
        raise _Unsupported("nested debug annotation values")
    chosen = [parts.select(number) for number in _D_VALUES]
    cols = [
        np.concatenate([getattr(c, name) for c in chosen])
        for name in ("msg", "field", "wire", "value", "off", "length")
    ]
    by_note = np.argsort(cols[0], kind="stable")
    vals = Fields(*(c[by_note] for c in cols))
    if len(vals.msg) != k or not bool((vals.msg == np.arange(k)).all()):
        raise _Unsupported("a debug annotation without exactly one value")
    vfield = vals.field
    vwire = vals.wire
    expected = np.where(vfield == _D_DOUBLE, _FIXED64, np.where(np.isin(vfield, (6, 9)), 2, 0))
    if bool((vwire != expected).any()):
        raise _Unsupported("debug annotation value of an unexpected wire type")
    # Key: literal name, else interned name.
    name_iid = parts.select(_D_NAME_IID, _VARINT).last(k)[0]
    key = _interned(reader.notes, ev_seq[notes.msg], name_iid, "")
    literal = parts.select(_D_NAME, _LEN)
    if len(literal.msg):
        last = np.zeros(k, dtype=np.int64) - 1
        last[literal.msg] = np.arange(len(literal.msg))
        has = np.flatnonzero(last >= 0)
        key = key.scatter(has, _strings(data, literal.off[last[has]], literal.length[last[has]]))
    distinct = key.unique(maintain_order=True)
    code = (
        key.replace_strict(distinct, list(range(len(distinct))), return_dtype=pl.Int64).to_numpy()
        if k
        else np.zeros(0, dtype=np.int64)
    )
    names = distinct.to_list()
    # each (event, name) pair once: a pair key seen twice is a name repeated on one event
    # (found by a sort: numpy 2's hash-based np.unique took ~0.5 s per 100k events here)
    pairs = np.sort(notes.msg * max(len(names), 1) + code)
    if bool((pairs[1:] == pairs[:-1]).any()):
        raise _Unsupported("an annotation name twice on one event")

    def named(text: str) -> np.ndarray:
        """Mask of the annotations whose name is `text` (compared as codes, not strings)."""
        return np.asarray(code == (names.index(text) if text in names else -1))

    out: dict[str, Any] = {}
    # id: an integer value (uint, int, pointer) -> given id; anything else -> a new one.
    is_id = named("id")
    if bool((is_id & (vfield == _D_BOOL)).any()):
        raise _Unsupported("a boolean id")
    id_ok = is_id & np.isin(vfield, (_D_UINT, _D_INT, _D_POINTER))
    given = np.full(m, -1, dtype=np.int64)
    has_id = np.zeros(m, dtype=bool)
    raw_value = vals.value
    if bool((raw_value[id_ok & (vfield != _D_INT)] >= np.uint64(1 << 63)).any()):
        raise _Unsupported("an id beyond int64")
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
    if kind_rows.size and bool((~np.isin(vfield[kind_rows], (6, 9))).any()):
        raise _Unsupported("a kind that is not a string")
    kind = pl.Series("kind", ["other"] * m, dtype=pl.String)
    if kind_rows.size:
        texts = _strings(data, vals.off[kind_rows], vals.length[kind_rows])
        texts = pl.select(pl.when(texts == "").then(pl.lit("other")).otherwise(texts)).to_series()
        kind = kind.scatter(notes.msg[kind_rows], texts)
    out["kind"] = kind
    # flops, bytes: doubles.
    for name in ("flops", "bytes"):
        sel = np.flatnonzero(named(name))
        if sel.size and bool((vfield[sel] != _D_DOUBLE).any()):
            raise _Unsupported(f"a {name} that is not a double")
        column = np.full(m, np.nan)
        column[notes.msg[sel]] = raw_value[sel].view(np.float64)
        present = np.zeros(m, dtype=bool)
        present[notes.msg[sel]] = True
        series = pl.Series(name, column)
        missing = np.flatnonzero(~present)
        out[name] = series.scatter(missing, None) if missing.size else series
    # args: the "args" string; else the other annotations as a JSON object.
    is_args_text = named("args") & np.isin(vfield, (6, 9))
    args: list[str | None] = [None] * m
    text_rows = np.flatnonzero(is_args_text)
    texts = _strings(data, vals.off[text_rows], vals.length[text_rows])
    extra = (
        np.flatnonzero(
            ~np.isin(code, [names.index(n) for n in _KNOWN_NOTES if n in names]) & ~is_args_text
        )
        if k
        else np.zeros(0, dtype=np.int64)
    )
    owners_with_text = set(notes.msg[text_rows].tolist())
    extras: dict[int, dict[str, Any]] = {}
    for j in np.asarray(extra, dtype=np.int64).tolist():
        owner = int(notes.msg[j])
        if owner in owners_with_text:
            continue
        extras.setdefault(owner, {})[str(names[code[j]])] = _scalar(
            data,
            int(vfield[j]),
            int(raw_value[j]),
            int(vals.off[j]),
            int(vals.length[j]),
        )
    args_series = pl.Series("args", args, dtype=pl.String)
    if text_rows.size:
        args_series = args_series.scatter(notes.msg[text_rows], texts)
    if extras:
        owners = sorted(extras)
        args_series = args_series.scatter(
            owners, [json.dumps(extras[o], default=str) for o in owners]
        )
    out["args"] = args_series
    return out


def _scalar(data: bytes, field: int, raw: int, off: int, length: int) -> Any:
    """A debug annotation's value as the protobuf classes give it."""
    if field in (_D_STRING, _D_JSON):
        return data[off : off + length].decode("utf-8")
    if field == _D_BOOL:
        return bool(raw)
    if field == _D_INT:
        return raw - (1 << 64) if raw >= 1 << 63 else raw
    if field == _D_DOUBLE:
        return float(np.array([raw], dtype=np.uint64).view(np.float64)[0])
    return raw


def _deps(
    flow_ids: dict[str, Fields], events: pl.DataFrame, event_ts: np.ndarray, moetrace: bool
) -> pl.DataFrame:
    """Dependency edges from flow ids: moetrace's one-to-one flows carry their kind and order
    in the id; others chain their points by (ts, start before end, event id)."""
    ids = events["id"].to_numpy()
    hop_rows: list[np.ndarray] = []
    hop_flow: list[np.ndarray] = []
    hop_role: list[np.ndarray] = []
    for key, role_code in (("out", 0), ("out_old", 0), ("in", 1), ("in_old", 1)):
        points = flow_ids[key]
        hop_rows.append(points.msg)
        hop_flow.append(points.value)
        hop_role.append(np.full(len(points.msg), role_code, dtype=np.int64))
    rows = np.concatenate(hop_rows)
    flow = np.concatenate(hop_flow).astype(np.uint64)
    role = np.concatenate(hop_role)
    event = ids[rows].astype(np.int64)
    hop_ts = event_ts[rows]
    if moetrace and len(rows):
        order = np.lexsort((role, flow))
        fs, rs, es = flow[order], role[order], event[order]
        single = (
            len(fs) % 2 == 0
            and bool((fs[0::2] == fs[1::2]).all())
            and bool((rs[0::2] == 0).all() & (rs[1::2] == 1).all())
            and bool((fs[2::2] != fs[1:-1:2]).all())
        )
        mask = np.uint64((1 << FLOW_KIND_BITS) - 1)
        code = (fs[0::2] & mask).astype(np.int64)
        if not single or bool((code >= len(DEP_KINDS)).any()):
            raise _Unsupported("moetrace flows that are not one-to-one")
        written = np.argsort(fs[0::2] >> np.uint64(FLOW_KIND_BITS), kind="stable")
        return pl.DataFrame(
            {
                "src": es[0::2][written],
                "dst": es[1::2][written],
                "kind": np.array(DEP_KINDS, dtype=object)[code[written]].tolist(),
            },
            schema={"src": pl.Int64, "dst": pl.Int64, "kind": pl.String},
        )
    order = np.lexsort((event, role, hop_ts, flow))
    fs, es = flow[order], event[order]
    link = np.flatnonzero(fs[1:] == fs[:-1])
    return pl.DataFrame(
        {"src": es[link], "dst": es[link + 1], "kind": ["flow"] * len(link)},
        schema={"src": pl.Int64, "dst": pl.Int64, "kind": pl.String},
    )


def _counters(
    fields: Scan,
    kind: np.ndarray,
    uuid: np.ndarray,
    ts: np.ndarray,
    reader: PacketReader,
    tracks: TrackIds,
) -> pl.DataFrame:
    """Counter samples: the double value, else the integer one (0 when neither)."""
    n = len(kind)
    rows = np.flatnonzero(kind == _COUNTER)
    double, has_double = fields.select(_E_DOUBLE_VALUE, _FIXED64).last(n)
    integer, _ = fields.select(_E_INT_VALUE, _VARINT).last(n)
    value = np.where(
        has_double[rows], double[rows].view(np.float64), integer[rows].view(np.int64).astype(float)
    )
    c_uuid = uuid[rows]
    unique_uuid, first, inverse = _unique(c_uuid)
    track = np.zeros(len(unique_uuid), dtype=np.int64)
    names: list[str | None] = [None] * len(unique_uuid)
    for k in np.argsort(first, kind="stable").tolist():
        info = counter_track(reader.descriptors, tracks, int(unique_uuid[k]))
        track[k], names[k] = info["track"], info["name"]
    inverse = inverse.reshape(-1)
    return pl.DataFrame(
        {
            "track": track[inverse],
            "name": pl.Series(names, dtype=pl.String).gather(inverse),
            "ts": ts[rows],
            "value": value,
        },
        schema={"track": pl.Int64, "name": pl.String, "ts": pl.Int64, "value": pl.Float64},
    )
