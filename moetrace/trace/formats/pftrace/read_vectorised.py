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
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.formats.pftrace.plan import FLOW_KIND_BITS
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
    E_CAT_IIDS,
    E_CATS,
    E_DOUBLE_VALUE,
    E_FLOW_IN,
    E_FLOW_IN_OLD,
    E_FLOW_OUT,
    E_FLOW_OUT_OLD,
    E_INT_VALUE,
    E_NAME,
    E_NAME_IID,
    E_NOTES,
    E_TYPE,
    E_UUID,
    FLOW_WIRES,
    P_CLEARED,
    P_EVENT,
    P_FLAGS,
    P_INTERNED,
    P_SEQ,
    P_TIMESTAMP,
    TYPE_BEGIN,
    TYPE_COUNTER,
    TYPE_END,
    TYPE_INSTANT,
    WIRE_FIXED64,
    WIRE_LEN,
    WIRE_VARINT,
)
from moetrace.trace.formats.pftrace.read_packets import (
    PacketReader,
    TrackIds,
    counter_track,
    finish,
)
from moetrace.trace.formats.pftrace.scan import Fields, Malformed, Scan, packet_spans, pick, scan
from moetrace.trace.model import DEP_KINDS, Trace

_KNOWN_NOTES = ("id", "kind", "flops", "bytes")
_PACKET_FIELDS = {P_TIMESTAMP, P_SEQ, P_EVENT, P_INTERNED, P_FLAGS, P_CLEARED}
_EVENT_FIELDS = {
    E_CAT_IIDS,
    E_NOTES,
    E_TYPE,
    E_NAME_IID,
    E_UUID,
    E_CATS,
    E_NAME,
    E_INT_VALUE,
    E_DOUBLE_VALUE,
    *FLOW_WIRES,
}
_NOTE_FIELDS = {D_NAME_IID, D_NAME, *D_VALUES, *D_NESTED}


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

    Short texts with few distinct values (kinds, categories) are decoded once per distinct
    value. Otherwise the spans are gathered into one buffer with NUL separators, decoded once
    and split by Polars; texts that contain NUL themselves are sliced one by one instead."""
    n = len(off)
    if n == 0:
        return pl.Series(values=[], dtype=pl.String)
    raw = np.frombuffer(data, dtype=np.uint8)
    length = length.astype(np.int64)
    off = off.astype(np.int64)
    widest = int(length.max())
    if n > _STRING_BLOCK and widest > 8:  # in blocks: the joined copies stay small
        return pl.concat(
            [
                _strings(data, off[lo : lo + _STRING_BLOCK], length[lo : lo + _STRING_BLOCK])
                for lo in range(0, n, _STRING_BLOCK)
            ],
            rechunk=False,
        )
    if widest <= 8:
        few = _few_short_strings(data, raw, off, length)
        if few is not None:
            return few
    total = int(length.sum()) + n - 1  # with the separators
    if (widest + 1) * n <= 2 * total + (1 << 16) and int(off.max()) + widest <= len(raw):
        joined = _window_spans(raw, off, length, widest)
    elif n > 1 and total * 4 > len(raw) and bool((off[1:] > off[:-1] + length[:-1]).all()):
        joined = _compress_spans(raw, off, length)
    else:
        out_start = np.zeros(n, dtype=np.int64)
        np.cumsum(length[:-1] + 1, out=out_start[1:])
        joined = _gather_spans(raw, off, length, out_start, total)
    if int(np.count_nonzero(joined == 0)) != n - 1:  # a NUL inside a text, not a separator
        return pl.Series(
            values=[
                data[o : o + k].decode("utf-8")
                for o, k in zip(off.tolist(), length.tolist(), strict=True)
            ],
            dtype=pl.String,
        )
    text = joined.tobytes().decode("utf-8")
    return pl.Series(values=[text], dtype=pl.String).str.split("\x00").explode()


_MAX_U64 = np.uint64(0xFFFFFFFFFFFFFFFF)
_STRING_BLOCK = 1 << 17
"""Texts per block of `_strings` (of args, ~40 bytes each: ~5 MB per joined copy)."""


def _few_short_strings(
    data: bytes, raw: np.ndarray, off: np.ndarray, length: np.ndarray
) -> pl.Series | None:
    """The texts of spans of at most 8 bytes, decoded once per distinct byte string and
    gathered (None when they are many distinct ones, or a span ends within 8 bytes of the
    data's end)."""
    n = len(off)
    if int(off.max()) + 8 > len(raw):
        return None
    word = np.ndarray(shape=(len(raw) - 7,), dtype="<u8", buffer=raw, strides=(1,))[off]
    bits = (8 * np.minimum(length, 7)).astype(np.uint64)
    word &= np.where(length >= 8, _MAX_U64, (np.uint64(1) << bits) - np.uint64(1))
    distinct, first, inverse = _unique(word)  # then texts of one word must share a length
    if len(distinct) > max(n // 8, 64) or not bool((length[first][inverse] == length).all()):
        return None
    texts = [
        data[o : o + k].decode("utf-8")
        for o, k in zip(off[first].tolist(), length[first].tolist(), strict=True)
    ]
    return pl.Series(values=texts, dtype=pl.String).gather(inverse)


def _window_spans(raw: np.ndarray, off: np.ndarray, length: np.ndarray, widest: int) -> np.ndarray:
    """The spans joined by NUL separators, by a gather of fixed-width windows (the byte before
    each span, which becomes the separator, then `widest` bytes) and a mask of the bytes
    within each span: per byte of the widest span, for spans of similar lengths (args)."""
    width = widest + 1
    windows = np.lib.stride_tricks.sliding_window_view(raw, width)
    column = np.arange(width)
    block = windows[off - 1]
    block[:, 0] = 0
    return np.asarray(block[column <= length[:, None]][1:])


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
    buf = np.frombuffer(data, dtype=np.uint8)
    packets = scan(buf, starts, ends, _PACKET_FIELDS)
    n_packets = len(starts)
    event_field = packets.select(P_EVENT, WIRE_LEN)
    is_event = np.zeros(n_packets, dtype=bool)
    is_event[event_field.msg] = True
    # Interning must be settled before the first event: then one table per sequence holds.
    first_event = int(np.argmax(is_event)) if is_event.any() else n_packets
    flags, _ = packets.last(P_FLAGS, WIRE_VARINT, n_packets)
    cleared = packets.last(P_CLEARED, WIRE_VARINT, n_packets)[0] != 0
    interned = np.zeros(n_packets, dtype=bool)
    interned[packets.select(P_INTERNED).msg] = True
    changes = interned | ((flags & np.uint64(1)) != 0) | cleared
    if bool(changes[first_event:].any()):
        raise _Unsupported("interned data after the first event")
    del flags, cleared, interned, changes
    reader = PacketReader()
    for index in np.flatnonzero(~is_event).tolist():
        reader.packet(pb.TracePacket.FromString(data[starts[index] : ends[index]]))
    del is_event, starts, ends
    event_packets = event_field.msg  # one TrackEvent per packet (the last one wins)
    if bool((np.diff(event_packets) <= 0).any()):
        raise _Unsupported("several track_event fields in a packet")
    ts = packets.last(P_TIMESTAMP, WIRE_VARINT, n_packets)[0].view(np.int64)[event_packets]
    seq = packets.last(P_SEQ, WIRE_VARINT, n_packets)[0][event_packets].astype(np.int64)
    del packets, event_packets
    fields = scan(buf, event_field.off, event_field.off + event_field.length, _EVENT_FIELDS)
    del event_field
    for number, wire in FLOW_WIRES.items():
        if fields.count(number) != len(fields.select(number, wire).msg):
            raise _Unsupported("flow ids of an unexpected wire type")
    n = len(ts)
    kind = fields.last(E_TYPE, WIRE_VARINT, n)[0].astype(np.int64)
    uuid = fields.last(E_UUID, WIRE_VARINT, n)[0]
    fields.drop(E_TYPE, E_UUID)
    rows = np.flatnonzero((kind == TYPE_BEGIN) | (kind == TYPE_INSTANT))
    position = np.full(n, -1, dtype=np.int32 if len(rows) < 1 << 31 else np.int64)
    position[rows] = np.arange(len(rows))
    ev_seq = seq[rows]
    del seq
    annotations = _of_rows(fields.select(E_NOTES, WIRE_LEN), position)
    fields.drop(E_NOTES)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The annotations (id, kind, flops, bytes, args: a third of the work) are decoded
        # beside the rest: numpy and Polars let go of the GIL in their loops.
        notes_job = pool.submit(_notes, data, buf, annotations, reader, ev_seq, len(rows))
        del annotations
        unique_uuid, _, uuid_code = _unique(uuid)
        del uuid
        tracks_of = _Tracks(unique_uuid, uuid_code)
        slices = _pair_slices(kind, tracks_of, ts)
        counter_rows = np.flatnonzero(kind == TYPE_COUNTER)
        counter_values = _counter_values(fields, counter_rows, n)
        del kind
        tracks = TrackIds(reader.descriptors)
        columns, flow_ids = _event_columns(
            data, fields, rows, position, ev_seq, reader, tracks, tracks_of
        )
        del fields, position
        notes = notes_job.result()
    events = pl.DataFrame(
        {
            "id": notes["id"],
            "track": columns["track"],
            "name": columns["name"],
            "cat": columns["cat"],
            "kind": notes["kind"],
            "ts": ts[rows],
            "dur": slices[rows] - ts[rows],
            "flops": notes["flops"],
            "bytes": notes["bytes"],
            "args": notes["args"],
        },
        schema_overrides={"ts": pl.Int64, "dur": pl.Int64, "id": pl.Int64},
    )
    del notes, columns, slices
    moetrace = (reader.payload or {}).get("writer") == "moetrace"
    deps = _deps(flow_ids, events, ts[rows], moetrace)
    counters = _counters(counter_rows, counter_values, tracks_of, ts, reader, tracks)
    del ts, rows, tracks_of
    return finish(path, reader, tracks, events, deps, counters)


class _Tracks:
    """The track uuid of every event as a dense code (`code`, into `uuids`), and the track ids
    given to them in order of first use."""

    def __init__(self, uuids: np.ndarray, code: np.ndarray) -> None:
        self.uuids = uuids
        self.code = code

    def first_use(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes used by the events `rows`, in order of their first use; code per row)."""
        codes = self.code[rows]
        first = np.full(len(self.uuids), -1, dtype=np.int64)
        first[codes[::-1]] = np.arange(len(rows) - 1, -1, -1)  # the earliest write wins
        used = np.flatnonzero(first >= 0)
        return used[np.argsort(first[used], kind="stable")], codes


def _stable_order(values: np.ndarray, bound: int) -> np.ndarray:
    """np.argsort(values, kind="stable") of non-negative ints below `bound`: a radix sort when
    they fit in 16 bits (numpy's stable sort of uint16)."""
    if bound <= 1 << 16:
        return np.argsort(values.astype(np.uint16), kind="stable")
    return np.argsort(values, kind="stable")


def _unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(values, return_index, return_inverse) by one stable sort (numpy's hash-based
    unique is ~20x slower on 1M uint64s), or by one comparison per distinct value when there
    are few (kinds, lanes)."""
    few = _few_distinct(values)
    if few is not None:
        return few
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.ones(len(values), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(new) - 1
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = group
    return ordered[new], order[new], inverse


_FEW = 16
"""At most this many distinct values are found by one comparison each (`_few_distinct`)."""


def _few_distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`_unique`'s result when `values` has at most `_FEW` distinct values (else None): each
    one is found as the first value not yet coded, then compared with all."""
    n = len(values)
    if len(np.unique(values[:4096])) > _FEW:  # many already in a sample: not worth trying
        return None
    code = np.full(n, -1, dtype=np.int64)
    firsts: list[int] = []
    at = 0
    while at < n:
        if len(firsts) == _FEW:
            return None
        firsts.append(at)
        code[values == values[at]] = len(firsts) - 1
        uncoded = np.flatnonzero(code[at:] < 0)
        at = at + int(uncoded[0]) if len(uncoded) else n
    first = np.array(firsts, dtype=np.int64)
    order = np.argsort(values[first], kind="stable")  # `_unique` gives them sorted
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return values[first][order], first[order], rank[code]


def _pair_slices(kind: np.ndarray, tracks_of: _Tracks, ts: np.ndarray) -> np.ndarray:
    """End time of every event (its own ts for all but a BEGIN, which gets its END's).

    Per track uuid, in file order, each END closes the latest open BEGIN. Balanced stacks
    only: an END with nothing open or a BEGIN never closed needs the per-packet reader
    (it words a warning per case)."""
    end = ts.copy()
    rows = np.flatnonzero((kind == TYPE_BEGIN) | (kind == TYPE_END))
    if len(rows) == 0:
        return end
    n_codes = len(tracks_of.uuids)
    order = rows[_stable_order(tracks_of.code[rows], n_codes)]
    group = tracks_of.code[order]
    step = np.where(kind[order] == TYPE_BEGIN, 1, -1)
    level = np.cumsum(step)
    group_start = np.ones(len(order), dtype=bool)
    group_start[1:] = group[1:] != group[:-1]
    group_end = np.roll(group_start, -1)
    if bool((level < 0).any()) or bool((level[group_end] != 0).any()):
        raise _Unsupported("unbalanced BEGIN/END")
    # Balanced: a BEGIN pushed to level L pairs with the next END popping level L. Sorted by
    # (track, depth), file order within: by depth, then stably by track (both radix sorts).
    depth = np.where(step > 0, level, level + 1)
    by_depth = _stable_order(depth, int(depth.max()) + 1)
    pairs = order[by_depth[_stable_order(group[by_depth], n_codes)]]
    begins, finals = pairs[0::2], pairs[1::2]
    if not (bool((kind[begins] == TYPE_BEGIN).all()) and bool((kind[finals] == TYPE_END).all())):
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


def _of_rows(f: Fields, position: np.ndarray) -> Fields:
    """The rows of `f` of the events whose `position` (their row in the events frame) is not
    -1, numbered by that position."""
    at = position[f.msg]
    picked = np.flatnonzero(at >= 0)
    return Fields(
        at[picked], *(pick(c, picked) for c in (f.field, f.wire, f.value, f.off, f.length))
    )


def _event_columns(
    data: bytes,
    fields: Scan,
    rows: np.ndarray,
    position: np.ndarray,
    ev_seq: np.ndarray,
    reader: PacketReader,
    tracks: TrackIds,
    tracks_of: _Tracks,
) -> tuple[dict[str, Any], dict[str, Fields]]:
    """track, name and cat of the BEGIN/INSTANT events `rows` (at `position`), and their
    flow ids."""
    n_all = len(position)
    m = len(rows)

    def of_rows(f: Fields) -> Fields:
        return _of_rows(f, position)

    # Name: literal, else interned (missing -> "").
    name = _interned(reader.names, ev_seq, fields.last(E_NAME_IID, WIRE_VARINT, n_all)[0][rows], "")
    literal = of_rows(fields.select(E_NAME, WIRE_LEN))
    fields.drop(E_NAME_IID, E_NAME)
    name = _literal_over(name, data, literal)
    cat = _categories(
        data,
        of_rows(fields.select(E_CAT_IIDS)),
        of_rows(fields.select(E_CATS)),
        reader,
        ev_seq,
        m,
    )
    fields.drop(E_CAT_IIDS, E_CATS)
    used, codes = tracks_of.first_use(rows)
    track_of = np.zeros(len(tracks_of.uuids), dtype=np.int64)
    for k in used.tolist():  # new tracks in order of first use
        track_of[k] = tracks.track(int(tracks_of.uuids[k]))
    flow_ids = {
        "out": of_rows(fields.select(E_FLOW_OUT, WIRE_FIXED64)),
        "out_old": of_rows(fields.select(E_FLOW_OUT_OLD, WIRE_VARINT)),
        "in": of_rows(fields.select(E_FLOW_IN, WIRE_FIXED64)),
        "in_old": of_rows(fields.select(E_FLOW_IN_OLD, WIRE_VARINT)),
    }
    fields.drop(*FLOW_WIRES)
    return {"track": track_of[codes], "name": name, "cat": cat}, flow_ids


def _literal_over(interned: pl.Series, data: bytes, literal: Fields) -> pl.Series:
    """`interned` (a text per row) with each row that has literal texts (`literal`, rows by
    `msg`) given its last one instead, as protobuf's last-wins."""
    if len(literal.msg) == 0:
        return interned
    last = np.zeros(len(interned), dtype=np.int64) - 1
    last[literal.msg] = np.arange(len(literal.msg))
    has = np.flatnonzero(last >= 0)
    return interned.scatter(has, _strings(data, literal.off[last[has]], literal.length[last[has]]))


def _categories(
    data: bytes, iids: Fields, literal: Fields, reader: PacketReader, ev_seq: np.ndarray, m: int
) -> pl.Series:
    """`cat`: the event's interned categories then its literal ones, joined by ","."""
    if len(iids.msg) == 0 and len(literal.msg) == 0:
        return pl.Series("cat", [None] * m, dtype=pl.String)
    if iids.msg.size and bool((iids.wire != WIRE_VARINT).any()):
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
                raise _Unsupported("debug annotation value of an unexpected wire type")
            total += len(piece.msg)
            vfield[piece.msg] = number
            vwire[piece.msg] = piece.wire
            if piece.value is not None:
                value[piece.msg] = piece.value
            else:
                off[piece.msg], length[piece.msg] = piece.off, piece.length
    # as many values as annotations and none without: exactly one each
    if total != k or bool((vfield == 0).any()):
        raise _Unsupported("a debug annotation without exactly one value")
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


def _repeated_pairs(owner: np.ndarray, code: np.ndarray, n_codes: int) -> bool:
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


def _notes(
    data: bytes, buf: np.ndarray, notes: Fields, reader: PacketReader, ev_seq: np.ndarray, m: int
) -> dict[str, Any]:
    """id, kind, flops, bytes and args of every event from its debug annotations."""
    k = len(notes.msg)
    parts = scan(buf, notes.off, notes.off + notes.length, _NOTE_FIELDS)
    if any(parts.count(number) for number in D_NESTED):
        raise _Unsupported("nested debug annotation values")
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
        key = _literal_over(_interned(reader.notes, ev_seq[notes.msg], name_iid, ""), data, literal)
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
    if _repeated_pairs(notes.msg, code, len(names)):
        raise _Unsupported("an annotation name twice on one event")

    def named(text: str) -> np.ndarray:
        """Mask of the annotations whose name is `text` (compared as codes, not strings)."""
        return np.asarray(code == (names.index(text) if text in names else -1))

    out: dict[str, Any] = {}
    # id: an integer value (uint, int, pointer) -> given id; anything else -> a new one.
    is_id = named("id")
    if bool((is_id & (vfield == D_BOOL)).any()):
        raise _Unsupported("a boolean id")
    id_ok = is_id & _one_of(vfield, (D_UINT, D_INT, D_POINTER))
    given = np.full(m, -1, dtype=np.int64)
    has_id = np.zeros(m, dtype=bool)
    raw_value = vals.value
    if bool((raw_value[id_ok & (vfield != D_INT)] >= np.uint64(1 << 63)).any()):
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
    if kind_rows.size and not bool(_one_of(vfield[kind_rows], (D_STRING, D_JSON)).all()):
        raise _Unsupported("a kind that is not a string")
    texts = _strings(data, vals.off[kind_rows], vals.length[kind_rows])
    texts = pl.select(pl.when(texts == "").then(pl.lit("other")).otherwise(texts)).to_series()
    kind = _per_event(texts.alias("kind"), notes.msg[kind_rows], m, "other")
    out["kind"] = kind
    # flops, bytes: doubles.
    for name in ("flops", "bytes"):
        sel = np.flatnonzero(named(name))
        if sel.size and bool((vfield[sel] != D_DOUBLE).any()):
            raise _Unsupported(f"a {name} that is not a double")
        column = np.full(m, np.nan)
        column[notes.msg[sel]] = raw_value[sel].view(np.float64)
        present = np.zeros(m, dtype=bool)
        present[notes.msg[sel]] = True
        series = pl.Series(name, column)
        missing = np.flatnonzero(~present)
        out[name] = series.scatter(missing, None) if missing.size else series
    # args: the "args" string; else the other annotations as a JSON object.
    is_args_text = named("args") & ((vfield == D_STRING) | (vfield == D_JSON))
    text_rows = np.flatnonzero(is_args_text)
    texts = _strings(data, vals.off[text_rows], vals.length[text_rows])
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
    out["args"] = args_series
    return out


def _one_of(values: np.ndarray, choices: Sequence[int]) -> np.ndarray:
    """np.isin(values, choices) for a few choices: one comparison each (no sort)."""
    out = np.zeros(len(values), dtype=bool)
    for choice in choices:
        out |= values == choice
    return out


def _per_event(texts: pl.Series, owners: np.ndarray, m: int, default: str | None) -> pl.Series:
    """A column of the `m` events: `texts[i]` at event `owners[i]`, `default` elsewhere."""
    if len(owners) == m and bool((owners == np.arange(m)).all()):
        return texts  # every event has one, in order (moetrace's files)
    column = pl.Series(texts.name, [default] * m, dtype=pl.String)
    return column.scatter(owners, texts) if len(owners) else column


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


def _counter_values(fields: Scan, rows: np.ndarray, n: int) -> np.ndarray:
    """The value of the counter events `rows`: the double value, else the integer one (0
    when neither)."""
    double, has_double = fields.last(E_DOUBLE_VALUE, WIRE_FIXED64, n)
    integer, _ = fields.last(E_INT_VALUE, WIRE_VARINT, n)
    fields.drop(E_DOUBLE_VALUE, E_INT_VALUE)
    return np.asarray(
        np.where(
            has_double[rows],
            double[rows].view(np.float64),
            integer[rows].view(np.int64).astype(float),
        )
    )


def _counters(
    rows: np.ndarray,
    value: np.ndarray,
    tracks_of: _Tracks,
    ts: np.ndarray,
    reader: PacketReader,
    tracks: TrackIds,
) -> pl.DataFrame:
    """Counter samples of the counter events `rows` with their values."""
    used, codes = tracks_of.first_use(rows)
    track = np.zeros(len(tracks_of.uuids), dtype=np.int64)
    names: list[str | None] = [None] * len(tracks_of.uuids)
    for k in used.tolist():
        info = counter_track(reader.descriptors, tracks, int(tracks_of.uuids[k]))
        track[k], names[k] = info["track"], info["name"]
    return pl.DataFrame(
        {
            "track": track[codes],
            "name": pl.Series(names, dtype=pl.String).gather(codes),
            "ts": ts[rows],
            "value": value,
        },
        schema={"track": pl.Int64, "name": pl.String, "ts": pl.Int64, "value": pl.Float64},
    )
