"""Vectorised protobuf field scanning: the fields of many small messages at once, with numpy.

`scan` walks every message of a batch in lock step: step k decodes the k-th field of each
message still open (tag varint, then its varint / fixed / length-delimited value), so the
Python loop runs once per field position, not once per message. `packet_spans` finds the
packets of a whole `Trace` with protobuf's own parser (its C runtime), without building them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from moetrace.trace.formats.pftrace.records import varint_len

_U64 = np.uint64
PAD = 16
"""Zero bytes the caller appends to the buffer, so a read past a message's end stays inside."""


class Malformed(ValueError):
    """The bytes are not what the scan expects (bad varint, unknown wire type, overrun)."""


@dataclass
class Fields:
    """Rows of fields: owning message, field number, wire type, the value of varint / fixed
    fields, and where a length-delimited payload lies (offset, length); in message order
    (and, within a message, in the order they appear)."""

    msg: np.ndarray
    field: np.ndarray
    wire: np.ndarray
    value: np.ndarray  # uint64
    off: np.ndarray
    length: np.ndarray

    def last(self, n_msgs: int, default: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(value per message, present mask): the last occurrence wins, as in protobuf."""
        out = np.full(n_msgs, default, dtype=_U64)
        present = np.zeros(n_msgs, dtype=bool)
        out[self.msg] = self.value  # rows are in message order: later ones overwrite
        present[self.msg] = True
        return out, present


_COLUMNS = 6


class Scan:
    """The fields a `scan` found, kept per field number as pieces (one per lock step, each in
    message order); `select` joins the pieces of one field number."""

    def __init__(self) -> None:
        self.pieces: dict[int, list[tuple[np.ndarray, ...]]] = {}

    def add(self, columns: tuple[np.ndarray, ...]) -> None:
        """One lock step's rows (msg, field, wire, value, off, length), sorted by message."""
        field = columns[1]
        if len(field) == 0:
            return
        top = int(field.max())
        if int(field.min()) == top:  # the usual case: every message at the same field
            self.pieces.setdefault(top, []).append(columns)
            return
        order = np.argsort(field.astype(np.uint16) if top < 2**16 else field, kind="stable")
        ordered = field[order]
        change = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
        bounds = [0, *change.tolist(), len(field)]
        for lo, hi in itertools.pairwise(bounds):
            rows = order[lo:hi]
            self.pieces.setdefault(int(ordered[lo]), []).append(tuple(c[rows] for c in columns))

    def numbers(self) -> list[int]:
        """The field numbers found."""
        return sorted(self.pieces)

    def select(self, number: int, wire: int | None = None) -> Fields:
        """The rows of field `number` (of wire type `wire`, when given), in message order
        (and, within a message, in the order they appear)."""
        pieces = self.pieces.get(number, [])
        if not pieces:
            empty = np.zeros(0, dtype=np.int64)
            return Fields(empty, empty, empty.astype(np.int8), empty.astype(_U64), empty, empty)
        if len(pieces) == 1:
            cols = list(pieces[0])
        else:
            cols = [np.concatenate([p[k] for p in pieces]) for k in range(_COLUMNS)]
            # Runs sorted by message, one per step: a stable sort (timsort) merges them.
            order = np.argsort(cols[0], kind="stable")
            cols = [c[order] for c in cols]
        if wire is not None and bool((cols[2] != wire).any()):
            keep = cols[2] == wire
            cols = [c[keep] for c in cols]
        return Fields(cols[0], cols[1], cols[2], cols[3], cols[4], cols[5])


_LOW7 = [_U64(0x7F << (7 * j)) for j in range(8)]
_STOPS = _U64(0x8080808080808080)


def _words(buf: np.ndarray) -> np.ndarray:
    """The 8 bytes at every offset of `buf` as a little-endian uint64 (an overlapping view,
    no copy): one gather reads a whole varint or fixed64."""
    return np.ndarray(shape=(len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the base-128 varint at each position: (values as uint64, byte counts)."""
    byte = buf[pos]
    if not bool((byte >= 0x80).any()):  # all one byte: the common case for tags and lengths
        return byte.astype(_U64), np.ones(len(pos), dtype=np.int64)
    word = _words(buf)[pos]
    stop = ~word & _STOPS  # the high bit of each byte that ends a varint
    first = stop & (~stop + _U64(1))  # the lowest one: 2**(8 * size - 1); 0 if size > 8
    size = np.bitwise_count((first - _U64(1)) & _STOPS).astype(np.int64) + 1
    word &= (first << _U64(1)) - _U64(1)  # the varint's own bytes (all 8 when longer)
    value = word & _LOW7[0]
    for j in range(1, min(int(size.max()), 8)):  # only as many 7-bit groups as there are
        value |= (word >> _U64(j)) & _LOW7[j]
    long = np.flatnonzero(first == 0)  # 9 or 10 bytes (ns timestamps, negative ints)
    if len(long):
        at = pos[long]
        b8 = buf[at + 8].astype(_U64)
        b9 = buf[at + 9].astype(_U64)
        ten = b8 >= _U64(0x80)
        if bool((ten & (b9 >= _U64(0x80))).any()):
            raise Malformed("varint longer than 10 bytes")
        value[long] |= (b8 & _U64(0x7F)) << _U64(56)
        value[long] |= np.where(ten, (b9 & _U64(1)) << _U64(63), _U64(0))
        size[long] = 9 + ten
    return value, size


def _fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian fixed-width values at each position, as uint64."""
    word = _words(buf)[pos]
    return np.asarray(word if width == 8 else word & _U64((1 << (8 * width)) - 1))


def scan(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, wanted: set[int] | None = None
) -> Scan:
    """Every field of the messages buf[starts[i]:ends[i]] (only the `wanted` field numbers
    are kept, when given; all are walked). See `Fields`."""
    found = Scan()
    idx = np.flatnonzero(ends > starts)
    pos = starts[idx].astype(np.int64)
    limit = len(buf) - PAD
    want = None
    if wanted is not None:  # a lookup table; the last slot stands for every larger number
        want = np.zeros(max(wanted) + 2, dtype=bool)
        want[list(wanted)] = True
    while len(idx):
        tag, tag_len = varints(buf, pos)
        field = (tag >> _U64(3)).astype(np.int64)
        wire = (tag & _U64(7)).astype(np.int8)
        p = pos + tag_len
        value = np.zeros(len(idx), dtype=_U64)
        off = p
        length = np.zeros(len(idx), dtype=np.int64)
        nxt = np.empty(len(idx), dtype=np.int64)
        kinds = np.flatnonzero(np.bincount(wire, minlength=8)).tolist()
        for w in kinds:
            m = wire == w if len(kinds) > 1 else slice(None)
            at = p[m]
            if w == 0:
                v, size = varints(buf, at)
                value[m], nxt[m] = v, at + size
            elif w == 1:
                value[m], nxt[m] = _fixed(buf, at, 8), at + 8
            elif w == 5:
                value[m], nxt[m] = _fixed(buf, at, 4), at + 4
            elif w == 2:
                n, size = varints(buf, at)
                if int(n.max(initial=0)) > limit:
                    raise Malformed("length beyond the end of the data")
                off = off.copy() if off is p else off
                off[m] = at + size
                length[m] = n.astype(np.int64)
                nxt[m] = off[m] + length[m]
            else:
                raise Malformed(f"wire type {w} (groups are not read)")
        if len(field) and int(field.min()) == 0:
            raise Malformed("field number 0")
        columns: tuple[np.ndarray, ...] = (idx, field, wire, value, off, length)
        if want is not None:
            keep_rows = want[np.minimum(field, len(want) - 1)]
            if not bool(keep_rows.all()):
                columns = tuple(c[keep_rows] for c in columns)
        found.add(columns)
        end = ends[idx]
        if bool((nxt > end).any()):
            raise Malformed("field runs past the end of its message")
        keep = nxt < end
        idx, pos = idx[keep], nxt[keep]
    return found


_SPLITTER: Any = None


def _splitter() -> Any:
    """A message `Packets { repeated bytes packet = 1; }`: parsing a Trace with it yields each
    packet's bytes, and so their lengths, at the C runtime's speed."""
    global _SPLITTER
    if _SPLITTER is None:
        proto = descriptor_pb2.FileDescriptorProto(
            name="moetrace_packet_spans.proto", package="moetrace_scan"
        )
        message = proto.message_type.add(name="Packets")
        message.field.add(
            name="packet",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        )
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)
        _SPLITTER = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("moetrace_scan.Packets")
        )
    return _SPLITTER


def packet_spans(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) byte offsets of every `Trace.packet` payload in `data`.

    Raises `Malformed` when `data` holds anything but packets (other top-level fields)."""
    try:
        parsed = _splitter().FromString(data)
    except Exception as exc:  # protobuf's DecodeError, or a RuntimeError from upb
        raise Malformed(str(exc)) from None
    lens = np.fromiter(map(len, parsed.packet), dtype=np.int64, count=len(parsed.packet))
    del parsed
    sizes = 1 + varint_len(lens) + lens
    ends = np.cumsum(sizes)
    if len(ends) == 0 or int(ends[-1]) != len(data):
        raise Malformed("top-level fields other than packets")
    starts = ends - lens
    head = np.frombuffer(data, dtype=np.uint8)[ends - sizes]
    if not bool((head == 0x0A).all()):
        raise Malformed("top-level fields other than packets")
    return starts, ends
