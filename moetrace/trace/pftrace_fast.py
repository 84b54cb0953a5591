"""Vectorised protobuf encoding of the hot `.pftrace` packets (BEGIN/END/INSTANT/COUNTER).

Every field of every packet is a "ragged" column: one flat uint8 buffer plus a byte length
per row (0 = field absent). Varints are encoded 7 bits at a time for all rows at once,
columns are concatenated row-wise by scattering each into its rows' slots, and the packets
are finally put in file order with one gather. Fields are emitted in field-number order,
which is what the protobuf runtime (upb) writes, so the output is byte-identical to
`StreamingTraceProtoBuilder`; a test compares the two.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.trace.pftrace_plan import BEGIN, END, INSTANT, PftracePlan

Ragged = tuple[np.ndarray, np.ndarray]
"""(flat uint8 bytes, int64 byte length of each row)."""

_U8 = np.uint8


def _offsets(lens: np.ndarray) -> np.ndarray:
    """Exclusive prefix sum: where each row starts in its flat buffer."""
    out = np.zeros(len(lens), dtype=np.int64)
    if len(lens) > 1:
        np.cumsum(lens[:-1], out=out[1:])
    return out


def varint(values: np.ndarray) -> Ragged:
    """Base-128 varints of uint64 `values` (1-10 bytes each)."""
    v = np.ascontiguousarray(values, dtype=np.uint64)
    lens = np.ones(len(v), dtype=np.int64)
    for k in range(1, 10):
        lens += v >= np.uint64(1 << (7 * k))
    flat = np.empty(int(lens.sum()), dtype=_U8)
    start = _offsets(lens)
    for k in range(int(lens.max(initial=0))):
        rows = np.flatnonzero(lens > k) if k else np.arange(len(v))
        byte = (v[rows] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = lens[rows] > k + 1
        flat[start[rows] + k] = (byte | (more.astype(np.uint64) << np.uint64(7))).astype(_U8)
    return flat, lens


def const(data: bytes, n: int, present: np.ndarray | None = None) -> Ragged:
    """The same bytes in every row (or only in rows where `present`)."""
    if present is None:
        return np.tile(np.frombuffer(data, dtype=_U8), n), np.full(n, len(data), np.int64)
    count = int(present.sum())
    return np.tile(np.frombuffer(data, dtype=_U8), count), np.where(present, len(data), 0)


def fixed64(values: np.ndarray, present: np.ndarray | None = None) -> Ragged:
    """Little-endian 8-byte values (uint64 or float64) in every row (or where `present`)."""
    v = np.ascontiguousarray(values)
    if present is not None:
        v = v[present]
    flat = v.astype(v.dtype.newbyteorder("<"), copy=False).view(_U8).ravel()
    lens = np.full(len(values), 8, np.int64) if present is None else np.where(present, 8, 0)
    return flat, lens


def strings(values: pl.Series) -> Ragged:
    """UTF-8 bytes of a String series; nulls are empty rows."""
    lens = values.str.len_bytes().fill_null(0).to_numpy().astype(np.int64)
    joined = values.str.join("").item() if values.len() else ""
    flat = np.frombuffer((joined or "").encode("utf-8"), dtype=_U8)
    return flat, lens


def concat(parts: list[Ragged]) -> Ragged:
    """Row-wise concatenation: row i of the result is row i of every part, in order."""
    lens = np.zeros(len(parts[0][1]), dtype=np.int64)
    for _, part_lens in parts:
        lens += part_lens
    out = np.empty(int(lens.sum()), dtype=_U8)
    cursor = _offsets(lens)
    for flat, part_lens in parts:
        if flat.size:
            shift = np.repeat(cursor - _offsets(part_lens), part_lens)
            out[shift + np.arange(flat.size)] = flat
        cursor += part_lens
    return out, lens


def gather(rows: Ragged, order: np.ndarray) -> Ragged:
    """Rows of `rows` taken in `order`."""
    flat, lens = rows
    new_lens = lens[order]
    shift = np.repeat(_offsets(lens)[order] - _offsets(new_lens), new_lens)
    return flat[shift + np.arange(int(new_lens.sum()))], new_lens


def stack(parts: list[Ragged]) -> Ragged:
    """Rows of all parts one after the other."""
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def field(tag: bytes, body: Ragged, present: np.ndarray | None = None) -> Ragged:
    """A length-delimited field: tag, varint length, body; absent where not `present`."""
    lens = body[1]
    pieces = concat([const(tag, len(lens)), varint(lens.astype(np.uint64)), body])
    if present is None:
        return pieces
    return pieces[0][np.repeat(present, pieces[1])], np.where(present, pieces[1], 0)


def _grouped(rows: np.ndarray, values: np.ndarray, n: int, tag: bytes) -> Ragged:
    """A repeated fixed64 field: for each event row, every (tag + 8 bytes) it owns, in order.

    `rows` is sorted; each row gets a contiguous run of the entries.
    """
    count = np.bincount(rows, minlength=n).astype(np.int64) if len(rows) else np.zeros(n, np.int64)
    item = concat([const(tag, len(values)), fixed64(values.astype(np.uint64))])
    return item[0], count * (len(tag) + 8)


def _annotation(iid: int, body: Ragged, present: np.ndarray | None = None) -> Ragged:
    """DebugAnnotation{name_iid=iid, <value field>} as a TrackEvent.debug_annotations entry."""
    inner = concat([const(bytes([0x08, iid]), len(body[1])), body])
    return field(b"\x22", inner, present)


def _event_bodies(plan: PftracePlan) -> Ragged:
    """TrackEvent bodies of the BEGIN/INSTANT packets, one row per event."""
    n = len(plan.ts)
    has_cat = plan.cat_iid > 0
    cat_varint = varint(plan.cat_iid)
    cat_field = concat([const(b"\x18", n), cat_varint])
    cat_field = (cat_field[0][np.repeat(has_cat, cat_field[1])], np.where(has_cat, cat_field[1], 0))
    kind_set = plan.kind.is_not_null().to_numpy()
    args_set = plan.args.is_not_null().to_numpy()
    kinds = strings(plan.kind)
    args = strings(plan.args)
    instant = plan.end.view(np.int64) <= plan.ts.view(np.int64)
    parts = [
        cat_field,
        _annotation(1, concat([const(b"\x18", n), varint(plan.event_id)])),
        _annotation(
            2, concat([const(b"\x32", n), varint(kinds[1].astype(np.uint64)), kinds]), kind_set
        ),
        _annotation(3, concat([const(b"\x29", n), fixed64(plan.flops)]), plan.flops_set),
        _annotation(4, concat([const(b"\x29", n), fixed64(plan.bytes_)]), plan.bytes_set),
        _annotation(
            5, concat([const(b"\x4a", n), varint(args[1].astype(np.uint64)), args]), args_set
        ),
        const(b"\x48\x01", n, ~instant),
        const(b"\x48\x03", n, instant),
        const(b"\x50", n),
        varint(plan.name_iid),
        const(b"\x58", n),
        varint(plan.lane_uuid),
        _grouped(plan.out_row, plan.out_flow, n, b"\xf9\x02"),
        _grouped(plan.in_row, plan.in_flow, n, b"\x81\x03"),
    ]
    return concat(parts)


def _packets(ts: np.ndarray, event: Ragged, flags: bool) -> Ragged:
    """TracePacket{timestamp, trusted_packet_sequence_id=1, track_event, [sequence_flags=2]}."""
    n = len(ts)
    parts = [const(b"\x40", n), varint(ts), const(b"\x50\x01", n), field(b"\x5a", event)]
    if flags:
        parts.append(const(b"\x68\x02", n))
    return concat(parts)


def encode_hot_packets(plan: PftracePlan) -> bytes:
    """All BEGIN/END/INSTANT/COUNTER packets in file order, each wrapped as Trace{packet}."""
    n = len(plan.ts)
    begins = _packets(plan.ts, _event_bodies(plan), flags=True)
    sliced = plan.end.view(np.int64) > plan.ts.view(np.int64)
    end_rows = np.flatnonzero(sliced)
    m = len(end_rows)
    end_event = concat([const(b"\x48\x02\x58", m), varint(plan.lane_uuid[end_rows])])
    ends = _packets(plan.end[end_rows], end_event, flags=False)
    c = len(plan.counter_ts)
    counter_event = concat(
        [
            const(b"\x48\x04\x58", c),
            varint(plan.counter_uuid),
            const(b"\xe1\x02", c),
            fixed64(plan.counter_value),
        ]
    )
    counters = _packets(plan.counter_ts, counter_event, flags=False)
    # Row of each hot packet in stack([begins, ends, counters]).
    end_slot = np.full(n, -1, dtype=np.int64)
    end_slot[end_rows] = np.arange(m)
    kind, row = plan.packet_kind, plan.packet_row
    index = np.where(
        (kind == BEGIN) | (kind == INSTANT),
        row,
        np.where(kind == END, n + end_slot[np.where(kind == END, row, 0)], n + m + row),
    )
    ordered = gather(stack([begins, ends, counters]), index)
    flat, _ = field(b"\x0a", ordered)
    return flat.tobytes()
