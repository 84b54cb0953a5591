"""Vectorised protobuf field scanning: the fields of many small messages at once, with numpy.

`scan` walks every message of a batch in lock step: step k decodes the k-th field of each
message still open (tag varint, then its varint / fixed / length-delimited value), so the
Python loop runs once per field position (and distinct tag), not once per message. Offsets
are int32 when the buffer is under 1 GB (half the memory of int64; sums of an offset and a
checked length cannot overflow), and only the fields asked for are kept, each as pieces of
(messages, value) or (messages, offset, length). `packet_spans` finds the packets of a whole
`Trace` with protobuf's own parser (its C runtime), without building them.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from moetrace.trace.formats.pftrace.records import varint_len

_U64 = np.uint64
_SMALL = 1 << 30
"""Buffers under this many bytes use int32 offsets: offset + length (both checked to be at
most the buffer's size) stays below 2**31."""
_LEN = 2


class Malformed(ValueError):
    """The bytes are not what the scan expects (bad varint, unknown wire type, overrun)."""


class Unsupported(Exception):
    """Something the vectorised reader does not reproduce: use the per-packet reader."""


def offset_dtype(size: int) -> type[np.signedinteger[Any]]:
    """The dtype of byte offsets into a buffer of `size` bytes (int32 when it is small)."""
    return np.int32 if size < _SMALL else np.int64


@dataclass
class Fields:
    """Rows of fields: owning message, field number, wire type, the value of varint / fixed
    fields, and where a length-delimited payload lies (offset, length); in message order
    (and, within a message, in the order they appear)."""

    msg: np.ndarray  # int64
    field: np.ndarray
    wire: np.ndarray
    value: np.ndarray  # uint64 (0 for length-delimited rows)
    off: np.ndarray
    length: np.ndarray

    def last(self, n_msgs: int, default: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(value per message, present mask): the last occurrence wins, as in protobuf."""
        out = np.full(n_msgs, default, dtype=_U64)
        present = np.zeros(n_msgs, dtype=bool)
        out[self.msg] = self.value  # rows are in message order: later ones overwrite
        present[self.msg] = True
        return out, present


@dataclass
class _Piece:
    """The rows of one field number and wire type found in one lock step, in message order:
    `value` for varint / fixed rows, `off` and `length` for length-delimited ones."""

    msg: np.ndarray
    wire: int
    value: np.ndarray | None = None
    off: np.ndarray | None = None
    length: np.ndarray | None = None


class Scan:
    """The fields a `scan` found, kept per field number as pieces (one per lock step and
    wire type, each in message order); `select` joins the pieces of one field number."""

    def __init__(self, offsets: type[np.signedinteger[Any]] = np.int64) -> None:
        self.pieces: dict[int, list[_Piece]] = {}
        self.offsets = offsets

    def add(self, number: int, piece: _Piece) -> None:
        """One lock step's rows of field `number` (one wire type), sorted by message."""
        self.pieces.setdefault(number, []).append(piece)

    def numbers(self) -> list[int]:
        """The field numbers found."""
        return sorted(self.pieces)

    def _chosen(self, number: int, wire: int | None) -> list[_Piece]:
        return [p for p in self.pieces.get(number, []) if wire is None or p.wire == wire]

    def count(self, number: int) -> int:
        """How many rows of field `number` were found (any wire type)."""
        return sum(len(p.msg) for p in self.pieces.get(number, []))

    def last(
        self, number: int, wire: int, n_msgs: int, default: int = 0
    ) -> tuple[np.ndarray, np.ndarray]:
        """(value per message, present mask) of field `number` with wire type `wire`: the last
        occurrence wins, as in protobuf (the pieces are in step order: no sort needed)."""
        chosen = self._chosen(number, wire)
        if (
            chosen
            and sum(len(p.msg) for p in chosen) == n_msgs
            and all(p.value is not None for p in chosen)
            and _one_after_another(chosen)
        ):
            # every message has it once (a piece per scan block): the rows are the messages
            # in order
            values = [p.value for p in chosen if p.value is not None]
            joined = values[0] if len(values) == 1 else np.concatenate(values)
            return joined.astype(_U64, copy=False), _repeat(True, n_msgs, bool)
        out = np.full(n_msgs, default, dtype=_U64)
        present = np.zeros(n_msgs, dtype=bool)
        for piece in chosen:
            if piece.value is not None:
                out[piece.msg] = piece.value
            else:
                out[piece.msg] = 0
            present[piece.msg] = True
        return out, present

    def drop(self, *numbers: int) -> None:
        """Forget the rows of these field numbers (their memory goes once nothing else holds
        them): callers drop each field once they have read it."""
        for number in numbers:
            self.pieces.pop(number, None)

    def select(self, number: int, wire: int | None = None) -> Fields:
        """The rows of field `number` (of wire type `wire`, when given), in message order
        (and, within a message, in the order they appear)."""
        pieces = self._chosen(number, wire)
        n = sum(len(p.msg) for p in pieces)
        places = _placements(pieces)
        msg = np.empty(n, dtype=pieces[0].msg.dtype if pieces else np.int64)
        wires = np.empty(n, dtype=np.int8)
        # Columns no piece has stay zero-stride views (no memory): values of length-delimited
        # fields, spans of varint / fixed ones.
        has_value = any(p.value is not None for p in pieces)
        has_span = any(p.off is not None for p in pieces)
        value = np.zeros(n, dtype=_U64) if has_value else _zeros(n, _U64)
        off = np.zeros(n, dtype=self.offsets) if has_span else _zeros(n, self.offsets)
        length = np.zeros(n, dtype=self.offsets) if has_span else _zeros(n, self.offsets)
        for piece, rows in zip(pieces, places, strict=True):
            msg[rows] = piece.msg
            wires[rows] = piece.wire
            if piece.value is not None:
                value[rows] = piece.value
            if piece.off is not None:
                off[rows], length[rows] = piece.off, piece.length
        return Fields(msg, _repeat(number, n, np.int64), wires, value, off, length)


def _repeat(value: int, n: int, dtype: Any) -> np.ndarray:
    """`value` n times as a read-only zero-stride view (no memory)."""
    return np.broadcast_to(np.array([value], dtype=dtype), (n,))


def _zeros(n: int, dtype: Any) -> np.ndarray:
    """n zeros as a read-only zero-stride view (no memory)."""
    return _repeat(0, n, dtype)


def pick(column: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """column[rows], keeping a zero-stride column (see `Scan.select`) zero-stride."""
    if column.ndim == 1 and column.strides[0] == 0 and len(column):
        return np.broadcast_to(column[:1], (len(rows),))
    return np.asarray(column[rows])


def _one_after_another(pieces: list[_Piece]) -> bool:
    """Whether each piece's messages all follow the previous pieces' (then the rows, piece
    after piece, are in message order)."""
    top = -1
    for piece in pieces:
        if len(piece.msg):
            if int(piece.msg[0]) <= top:
                return False
            top = int(piece.msg[-1])
    return True


def _placements(pieces: list[_Piece]) -> list[np.ndarray | slice]:
    """Where each piece's rows go in message order (within a message, in step order).

    Pieces come in clusters: those of one scan block cover its messages only, and blocks
    follow each other. The list is cut where every message before is below every message
    after; a cluster of one piece is a slice, and the pieces of a cluster are placed by a
    counting sort over the cluster's messages only (a message has at most one row per
    piece), not over every message of the scan."""
    first = [int(p.msg[0]) if len(p.msg) else 1 << 62 for p in pieces]  # rows are sorted
    last = [int(p.msg[-1]) if len(p.msg) else -1 for p in pieces]
    below_after = list(itertools.accumulate(reversed(first), min))[::-1]
    places: list[np.ndarray | slice] = []
    base, i, top = 0, 0, -1
    for j in range(1, len(pieces) + 1):
        top = max(top, last[j - 1])
        if j < len(pieces) and top >= below_after[j]:
            continue  # pieces i..j-1 overlap what follows: not a cut
        cluster = pieces[i:j]
        if len(cluster) == 1:
            places.append(slice(base, base + len(cluster[0].msg)))
        elif all(np.array_equal(p.msg, cluster[0].msg) for p in cluster[1:]):
            # the same messages in every piece (each event's k annotations): interleaved
            k = len(cluster)
            places += [slice(base + q, base + k * len(cluster[0].msg), k) for q in range(k)]
        else:
            lo = min(first[i:j])
            count = np.zeros(max(top - lo + 1, 0), dtype=np.int64)
            for piece in cluster:
                count[piece.msg - lo] += 1
            start = np.cumsum(count) - count + base
            for piece in cluster:
                places.append(start[piece.msg - lo])
                start[piece.msg - lo] += 1
        base += sum(len(p.msg) for p in cluster)
        i, top = j, -1
    return places


_LOW7 = [_U64(0x7F << (7 * j)) for j in range(8)]
_STOPS = _U64(0x8080808080808080)


def words_at(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The 8 bytes at each position of `buf` as a little-endian uint64, bytes past the end
    read as 0: one gather (from an overlapping view, no copy of `buf`) reads a whole varint
    or fixed64. Raises `Malformed` for a position past the end."""
    if len(pos) == 0:
        return np.zeros(0, dtype=_U64)
    top = int(pos.max())  # (offsets are never negative: starts, ends and lengths are not)
    if top >= len(buf):
        raise Malformed("a read past the end of the data")
    if len(buf) < 8:  # too short for one word: a zero-padded copy
        buf = np.concatenate([buf, np.zeros(8 - len(buf), dtype=np.uint8)])
    last = len(buf) - 8  # the last offset with 8 bytes after it
    words = np.ndarray(shape=(last + 1,), dtype="<u8", buffer=buf, strides=(1,))
    if top <= last:
        return np.asarray(words[pos])
    beyond = (np.maximum(pos, last) - last).astype(_U64)  # bytes of the word past the end
    return np.asarray(words[np.minimum(pos, last)] >> (beyond * _U64(8)))


def varints(
    buf: np.ndarray, pos: np.ndarray, first_byte: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | int]:
    """Decode the base-128 varint at each position: (values, byte counts, of the dtype of
    `pos`, or 1 when every varint is one byte). Values are uint64, or uint8 when every varint
    is one byte, uint16 when every one is at most two (an eighth / a quarter of the memory
    for the many small ones: types, iids, seq ids, lengths).
    `first_byte`: buf[pos], when the caller has it already."""
    try:
        byte = buf[pos] if first_byte is None else first_byte
    except IndexError:
        raise Malformed("a read past the end of the data") from None
    if len(byte) == 0 or int(byte.max()) < 0x80:  # all one byte: tags, lengths, small ints
        return byte, 1
    short = _two_byte_varints(buf, pos, byte)
    if short is not None:
        return short
    word = words_at(buf, pos)
    stop = ~word & _STOPS  # the high bit of each byte that ends a varint
    first = stop & (~stop + _U64(1))  # the lowest one: 2**(8 * size - 1); 0 if size > 8
    size = np.bitwise_count((first - _U64(1)) & _STOPS).astype(pos.dtype) + 1  # 9 if > 8
    word &= (first << _U64(1)) - _U64(1)  # the varint's own bytes (all 8 when longer)
    value = _groups(word, min(int(size.max()), 8))
    long_rows = first == 0  # 9 or 10 bytes (ns timestamps, negative ints)
    n_long = int(np.count_nonzero(long_rows))
    if n_long:
        rows = slice(None) if n_long == len(pos) else np.flatnonzero(long_rows)
        tail = words_at(buf, pos[rows] + 2)  # bytes 8 and 9 at the top
        b8 = (tail >> _U64(48)) & _U64(0xFF)
        b9 = tail >> _U64(56)
        ten = b8 >= _U64(0x80)
        if bool((ten & (b9 >= _U64(0x80))).any()):
            raise Malformed("varint longer than 10 bytes")
        value[rows] |= (b8 & _U64(0x7F)) << _U64(56)
        value[rows] |= np.where(ten, (b9 & _U64(1)) << _U64(63), _U64(0))
        size[rows] = 9 + ten
    return value, size


def _two_byte_varints(
    buf: np.ndarray, pos: np.ndarray, byte: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """`varints` when each is at most two bytes (lengths of texts, iids and ids under 16384:
    two byte gathers, half the work of the 8-byte word path; values as uint16), else None.
    `byte`: buf[pos]."""
    last = len(buf) - 1
    more = byte >= 0x80
    if int(pos.max()) < last:
        second = buf[pos + 1]
    else:  # a byte past the end reads as 0, as in `words_at` (the caller finds the overrun)
        second = np.where(pos < last, buf[np.minimum(pos + 1, last)], np.uint8(0))
    if bool((more & (second >= 0x80)).any()):
        return None
    value = (byte & np.uint8(0x7F)).astype(np.uint16)  # below 2**14: a quarter of uint64
    value |= np.where(more, second.astype(np.uint16) << np.uint16(7), np.uint16(0))
    return value, more.astype(pos.dtype) + 1


def _groups(word: np.ndarray, count: int) -> np.ndarray:
    """The 7-bit groups of the low `count` bytes of each word (high bits of the varint's bytes
    included), packed into one value: a loop over the groups for short varints, else three
    halving rounds (pairs of bytes, then of 14-bit, then of 28-bit groups)."""
    if count <= 4:
        value = word & _LOW7[0]
        for j in range(1, count):
            value |= (word >> _U64(j)) & _LOW7[j]
        return value
    x = word & _U64(0x7F7F7F7F7F7F7F7F)
    x = (x & _U64(0x007F007F007F007F)) | ((x & _U64(0x7F007F007F007F00)) >> _U64(1))
    x = (x & _U64(0x00003FFF00003FFF)) | ((x & _U64(0x3FFF00003FFF0000)) >> _U64(2))
    return (x & _U64(0x0FFFFFFF)) | ((x & _U64(0x0FFFFFFF00000000)) >> _U64(4))


def _fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Little-endian fixed-width values at each position, as uint64."""
    word = words_at(buf, pos)
    return np.asarray(word if width == 8 else word & _U64((1 << (8 * width)) - 1))


def _distinct_tags(tag: np.ndarray) -> list[tuple[int, np.ndarray | None]]:
    """The distinct tags of a step with the rows of each (None: every row has that tag)."""
    low, high = int(tag.min()), int(tag.max())
    if low == high:
        return [(low, None)]
    if high < 1 << 16:
        present = np.flatnonzero(np.bincount(tag.astype(np.int64, copy=False), minlength=high + 1))
        distinct = present.tolist()
    else:
        distinct = np.unique(tag).tolist()
    return [(t, np.flatnonzero(tag == t)) for t in distinct]


def scan(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    wanted: set[int] | None = None,
    *,
    spans: bool = False,
) -> Scan:
    """Every field of the messages buf[starts[i]:ends[i]] (only the `wanted` field numbers
    are kept, when given; all are walked). See `Fields`. With `spans`, varint and fixed
    fields keep where their value lies too (`off`, `length`: to edit them in place)."""
    found = Scan(offset_dtype(len(buf)))
    opened = np.flatnonzero(ends > starts)
    opened = opened.astype(np.int32 if len(starts) < 1 << 31 else np.int64, copy=False)
    size = SCAN_BLOCK
    if len(opened) >= 2 * SCAN_SPLIT:  # at least two blocks: one for each of two threads
        size = min(size, -(-len(opened) // 2))
    blocks = [opened[lo : lo + size] for lo in range(0, len(opened), size)]
    if len(blocks) <= 1:
        for block in blocks:
            _scan_block(found, buf, block, starts, ends, wanted, spans)
        return found
    # Blocks of messages are independent: this thread scans the even ones while a worker
    # scans the odd ones (numpy lets go of the GIL in its loops), each into its own Scan;
    # their pieces are then joined in block order, as one thread would have found them.
    parts = [Scan(found.offsets) for _ in blocks]
    with ThreadPoolExecutor(max_workers=1) as pool:
        odd = [
            pool.submit(_scan_block, parts[i], buf, blocks[i], starts, ends, wanted, spans)
            for i in range(1, len(blocks), 2)
        ]
        for i in range(0, len(blocks), 2):
            _scan_block(parts[i], buf, blocks[i], starts, ends, wanted, spans)
        for job in odd:
            job.result()
    for part in parts:
        for number, pieces in part.pieces.items():
            found.pieces.setdefault(number, []).extend(pieces)
    return found


SCAN_BLOCK = 1 << 19
"""Messages scanned together: the lock step's work arrays stay ~2 MB each, whatever the file."""

SCAN_SPLIT = 1 << 15
"""Fewest messages per block when a scan is split in two for two threads (below, one
thread: the lock step's Python overhead per step would outweigh the numpy work)."""


def _scan_block(
    found: Scan,
    buf: np.ndarray,
    idx: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    wanted: set[int] | None,
    spans: bool,
) -> None:
    """`scan` of the messages `idx` (increasing), adding their pieces to `found`."""
    offsets = found.offsets
    limit = len(buf)
    pos = np.asarray(starts[idx], dtype=offsets)
    end = np.asarray(ends[idx], dtype=offsets)
    while len(idx):
        first_byte = buf[pos]
        tag: np.ndarray
        tag_len: np.ndarray | int
        if int(first_byte.max()) < 0x80:  # one-byte tags (fields 1-15): no varint decode
            tag, tag_len = first_byte, 1
        else:
            tag, tag_len = varints(buf, pos, first_byte)
        nxt = np.empty(len(idx), dtype=offsets)
        for t, rows in _distinct_tags(tag):
            number, wire = t >> 3, t & 7
            if number == 0:
                raise Malformed("field number 0")
            if rows is None:
                at = pos + tag_len
            else:
                at = pos[rows] + (tag_len if isinstance(tag_len, int) else tag_len[rows])
            piece = _Piece(idx if rows is None else idx[rows], wire)
            if wire == 0:
                piece.value, size = varints(buf, at)
                stop = at + size
            elif wire == 1:
                piece.value, stop = _fixed(buf, at, 8), at + 8
            elif wire == 5:
                piece.value, stop = _fixed(buf, at, 4), at + 4
            elif wire == _LEN:
                n, size = varints(buf, at)
                if int(n.max(initial=0)) > limit:
                    raise Malformed("length beyond the end of the data")
                piece.off = at + size
                piece.length = n.astype(offsets)
                stop = piece.off + piece.length
            else:
                raise Malformed(f"wire type {wire} (groups are not read)")
            if spans and piece.off is None:
                piece.off, piece.length = at, stop - at
            if rows is None:
                nxt = stop
            else:
                nxt[rows] = stop
            if wanted is None or number in wanted:
                found.add(number, piece)
        if bool((nxt > end).any()):
            raise Malformed("field runs past the end of its message")
        keep = nxt < end
        if bool(keep.all()):
            pos = nxt
        else:
            idx, pos, end = idx[keep], nxt[keep], end[keep]


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
