"""Vectorised protobuf encoding of the hot `.pftrace` packets (BEGIN/END/INSTANT/COUNTER).

Each packet is a record (`records`) of its fields in field-number order, which is
what the protobuf runtime (upb) writes, so the output is byte-identical to the official
`StreamingTraceProtoBuilder` path (a test compares them). Only the variable-length args
strings are copied byte-wise, between a BEGIN's head and its suffix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from moetrace.trace.formats.pftrace.layout import COUNTER, END
from moetrace.trace.formats.pftrace.plan import PftracePlan
from moetrace.trace.formats.pftrace.records import (
    Piece,
    const,
    copy_strings,
    cumsum0,
    fixed64,
    flows,
    nested_size,
    table,
    varint,
    varint_len,
    write_records,
)

_U8 = np.uint8


def _utf8(values: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of a String series back to back, and each row's byte length (0 for null)."""
    lens = values.str.len_bytes().fill_null(0).to_numpy().astype(np.int64)
    joined = values.str.join("").item() if values.len() else ""
    return np.frombuffer((joined or "").encode("utf-8"), dtype=_U8), lens


def _kind_table(kinds: pl.Series) -> tuple[list[bytes], np.ndarray]:
    """The whole `kind` debug annotation per distinct kind, and each row's entry."""
    names = sorted(kinds.drop_nulls().unique().to_list())
    entries = []
    for name in names:
        raw = name.encode("utf-8")
        body = b"\x08\x02\x32" + _varint_bytes(len(raw)) + raw
        entries.append(b"\x22" + _varint_bytes(len(body)) + body)
    codes = kinds.replace_strict(names, list(range(len(names))), default=0, return_dtype=pl.Int64)
    return entries, codes.to_numpy().astype(np.int64)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


CHUNK_PACKETS = 1 << 16
"""Packets encoded per pass: all temporaries of a pass stay small (cache, no page faults)."""


@dataclass
class _Begins:
    """BEGIN/INSTANT inputs for the whole trace, rows in file order (see `_begins`)."""

    perm: np.ndarray  # event row of each BEGIN/INSTANT packet, in file order
    kind_entries: list[bytes]
    kind_code: np.ndarray
    kind_set: np.ndarray
    args_set: np.ndarray
    args_bytes: np.ndarray
    args_len: np.ndarray
    args_off: np.ndarray
    out_row: np.ndarray  # flows, rows renumbered to file order and sorted
    out_flow: np.ndarray
    in_row: np.ndarray
    in_flow: np.ndarray


def _begins(plan: PftracePlan, perm: np.ndarray) -> _Begins:
    n = len(perm)
    rank = np.empty(n, dtype=np.int64)
    rank[perm] = np.arange(n)

    def renumbered(rows: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        new = rank[rows]
        order = np.argsort(new, kind="stable")  # keeps each row's flows in written order
        return new[order], ids[order]

    kinds, args = plan.kind.gather(perm), plan.args.gather(perm)
    kind_entries, kind_code = _kind_table(kinds)
    args_bytes, args_len = _utf8(args)
    out_row, out_flow = renumbered(plan.out_row, plan.out_flow)
    in_row, in_flow = renumbered(plan.in_row, plan.in_flow)
    return _Begins(
        perm=perm,
        kind_entries=kind_entries,
        kind_code=kind_code,
        kind_set=kinds.is_not_null().to_numpy(),
        args_set=args.is_not_null().to_numpy(),
        args_bytes=args_bytes,
        args_len=args_len,
        args_off=cumsum0(args_len),
        out_row=out_row,
        out_flow=out_flow,
        in_row=in_row,
        in_flow=in_flow,
    )


def _begin_pieces(
    plan: PftracePlan, b: _Begins, lo: int, hi: int
) -> tuple[list[Piece], list[Piece], np.ndarray]:
    """Pieces of BEGIN/INSTANT packets lo..hi (file order): head + fields, then the args
    bytes, then the suffix; and each packet's total size."""
    perm = b.perm[lo:hi]
    n = len(perm)
    ts, lane = plan.ts[perm], plan.lane_uuid[perm]
    cat_iid, event_id = plan.cat_iid[perm], plan.event_id[perm]
    flops_set, bytes_set = plan.flops_set[perm], plan.bytes_set[perm]
    kind_set, args_set, args_len = b.kind_set[lo:hi], b.args_set[lo:hi], b.args_len[lo:hi]
    instant = (plan.end[perm].view(np.int64) <= ts.view(np.int64)).astype(np.int64)
    has_cat = cat_iid > 0
    o_lo, o_hi = np.searchsorted(b.out_row, [lo, hi])
    i_lo, i_hi = np.searchsorted(b.in_row, [lo, hi])
    id_body = 3 + varint_len(event_id)
    args_body = 3 + varint_len(args_len) + args_len
    fields = [
        const(b"\x18", has_cat),
        varint(cat_iid, has_cat),
        const(b"\x22"),
        varint(id_body),
        const(b"\x08\x01\x18"),
        varint(event_id),
        table(b.kind_entries, b.kind_code[lo:hi], kind_set),
        const(b"\x22\x0b\x08\x03\x29", flops_set),
        fixed64(plan.flops[perm], flops_set),
        const(b"\x22\x0b\x08\x04\x29", bytes_set),
        fixed64(plan.bytes_[perm], bytes_set),
        const(b"\x22", args_set),
        varint(args_body, args_set),
        const(b"\x08\x05\x4a", args_set),
        varint(args_len, args_set),
    ]
    suffix = [
        table([b"\x48\x01", b"\x48\x03"], instant),
        const(b"\x50"),
        varint(plan.name_iid[perm]),
        const(b"\x58"),
        varint(lane),
        flows(b"\xf9\x02", b.out_row[o_lo:o_hi] - lo, b.out_flow[o_lo:o_hi]),
        flows(b"\x81\x03", b.in_row[i_lo:i_hi] - lo, b.in_flow[i_lo:i_hi]),
        const(b"\x68\x02"),
    ]
    fields_len = sum((p.widths(n) for p in fields), np.zeros(n, np.int64))
    suffix_len = sum((p.widths(n) for p in suffix), np.zeros(n, np.int64)) - 2  # minus flags
    event_len = fields_len + args_len + suffix_len
    begin_len = 1 + varint_len(ts) + 2 + nested_size(event_len) + 2
    head = [
        const(b"\x0a"),
        varint(begin_len),
        const(b"\x40"),
        varint(ts),
        const(b"\x50\x01\x5a"),
        varint(event_len),
    ]
    return head + fields, suffix, nested_size(begin_len)


def _end_pieces(plan: PftracePlan, rows: np.ndarray) -> tuple[list[Piece], np.ndarray]:
    end_ts, end_uuid = plan.end[rows], plan.lane_uuid[rows]
    event_len = 3 + varint_len(end_uuid)
    end_len = 1 + varint_len(end_ts) + 2 + nested_size(event_len)
    pieces = [
        const(b"\x0a"),
        varint(end_len),
        const(b"\x40"),
        varint(end_ts),
        const(b"\x50\x01\x5a"),
        varint(event_len),
        const(b"\x48\x02\x58"),
        varint(end_uuid),
    ]
    return pieces, nested_size(end_len)


def _counter_pieces(plan: PftracePlan, rows: np.ndarray) -> tuple[list[Piece], np.ndarray]:
    counter_ts, counter_uuid = plan.counter_ts[rows], plan.counter_uuid[rows]
    event_len = 3 + varint_len(counter_uuid) + 10
    counter_len = 1 + varint_len(counter_ts) + 2 + nested_size(event_len)
    pieces = [
        const(b"\x0a"),
        varint(counter_len),
        const(b"\x40"),
        varint(counter_ts),
        const(b"\x50\x01\x5a"),
        varint(event_len),
        const(b"\x48\x04\x58"),
        varint(counter_uuid),
        const(b"\xe1\x02"),
        fixed64(plan.counter_value[rows]),
    ]
    return pieces, nested_size(counter_len)


def encode_hot_packets(plan: PftracePlan) -> bytes:
    """All BEGIN/END/INSTANT/COUNTER packets in file order, each wrapped as Trace{packet}.

    Encoded in passes of `CHUNK_PACKETS` consecutive packets; each pass computes its
    packets' sizes and offsets, writes them into one buffer, and the passes are joined.
    """
    kind, row = plan.packet_kind, plan.packet_row
    is_end, is_counter = kind == END, kind == COUNTER
    is_begin = ~(is_end | is_counter)
    begins = _begins(plan, row[is_begin])
    n_begin = cumsum0(is_begin)
    chunks: list[bytes] = []
    for p0 in range(0, len(kind), CHUNK_PACKETS):
        p1 = min(p0 + CHUNK_PACKETS, len(kind))
        b_lo, b_hi = int(n_begin[p0]), int(n_begin[p1])
        chunk_kind, chunk_row = kind[p0:p1], row[p0:p1]
        chunk_begin = is_begin[p0:p1]
        chunk_end, chunk_counter = chunk_kind == END, chunk_kind == COUNTER
        records, suffix, size = _begin_pieces(plan, begins, b_lo, b_hi)
        ends, end_size = _end_pieces(plan, chunk_row[chunk_end])
        counters, counter_size = _counter_pieces(plan, chunk_row[chunk_counter])
        sizes = np.empty(p1 - p0, dtype=np.int64)
        sizes[chunk_begin], sizes[chunk_end] = size, end_size
        sizes[chunk_counter] = counter_size
        start = cumsum0(sizes)
        out = np.empty(int(start[-1]), dtype=_U8)
        begin_start = start[:-1][chunk_begin]
        at = begin_start + write_records(out, begin_start, records)
        args_len = begins.args_len[b_lo:b_hi]
        first = int(begins.args_off[b_lo])
        flat = begins.args_bytes[first : int(begins.args_off[b_hi])]
        copy_strings(out, at, flat, args_len)
        write_records(out, at + args_len, suffix)
        write_records(out, start[:-1][chunk_end], ends)
        write_records(out, start[:-1][chunk_counter], counters)
        chunks.append(out.tobytes())
    return b"".join(chunks)
