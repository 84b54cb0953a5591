"""Vectorised protobuf record writer: many small messages of the same shape, at once.

A record is a list of pieces (constant tags, varints, fixed64s, repeated fixed64 entries)
written back to back. Rows whose pieces have the same byte widths form a group; a group is
a dense (rows x width) byte matrix filled column block by column block with numpy and
copied to its rows' offsets in one scatter, in blocks of rows that stay in cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_U8 = np.uint8
_U64 = np.uint64


def varint_len(values: np.ndarray) -> np.ndarray:
    """Bytes of the base-128 varint of each uint64 value (1-10)."""
    v = np.asarray(values, dtype=_U64)
    lens = np.ones(len(v), dtype=np.int64)
    top = int(v.max(initial=0))
    for k in range(1, 10):
        if top < 1 << (7 * k):
            break
        lens += v >= _U64(1 << (7 * k))
    return lens


def nested_size(body: np.ndarray) -> np.ndarray:
    """Size of a length-delimited field with a 1-byte tag around a body of `body` bytes."""
    return np.asarray(1 + varint_len(body) + body)


def cumsum0(values: np.ndarray) -> np.ndarray:
    """[0, v0, v0+v1, ...]: start offsets, with the total at the end."""
    out = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(values, out=out[1:])
    return out


@dataclass
class Piece:
    """One field (or run of constant bytes) of a record.

    kind: "table" (row r gets `table[codes[r]]`; a constant is a 1-entry table),
    "varint" (`values`), "fixed64" (`values`, 8 bytes little-endian) or "flows" (for each
    row, every (tag, fixed64) entry of `values` whose `rows` entry is that row).
    `present` masks rows that have the field at all.
    """

    kind: str
    values: np.ndarray | None = None
    present: np.ndarray | None = None
    table: np.ndarray | None = None  # (entries, max width) uint8
    table_len: np.ndarray | None = None
    codes: np.ndarray | None = None
    tag: bytes = b""
    rows: np.ndarray | None = None
    _widths: np.ndarray | None = None

    def widths(self, n: int) -> np.ndarray:
        """Bytes of this piece in each of the `n` rows (0 where absent); computed once."""
        if self._widths is None or len(self._widths) != n:
            self._widths = self._compute_widths(n)
        return self._widths

    def _compute_widths(self, n: int) -> np.ndarray:
        if self.kind == "table":
            assert self.table_len is not None
            w = self.table_len[self.codes] if self.codes is not None else self.table_len[0]
            w = np.broadcast_to(w, (n,))
        elif self.kind == "varint":
            w = varint_len(self.values if self.values is not None else np.zeros(n, _U64))
        elif self.kind == "fixed64":
            w = np.full(n, 8, np.int64)
        else:
            assert self.rows is not None
            count = np.bincount(self.rows, minlength=n) if len(self.rows) else np.zeros(n)
            w = count.astype(np.int64) * (len(self.tag) + 8)
        return np.where(self.present, w, 0) if self.present is not None else np.asarray(w)

    def fill(self, block: np.ndarray, rows: np.ndarray) -> None:
        """Write this piece's bytes of `rows` (all of the same width) into `block`."""
        width = block.shape[1]
        if self.kind == "table":
            assert self.table is not None
            if self.codes is None:
                block[:] = self.table[0, :width]
            else:
                block[:] = self.table[self.codes[rows], :width]
        elif self.kind == "varint":
            assert self.values is not None
            if width == 1:
                block[:, 0] = self.values[rows]
                return
            shifts = (7 * np.arange(width)).astype(_U64)
            groups = (self.values[rows][:, None] >> shifts) & _U64(0x7F)
            block[:] = groups
            block[:, :-1] |= 0x80
        elif self.kind == "fixed64":
            assert self.values is not None
            raw = np.ascontiguousarray(self.values[rows])
            block[:] = raw.astype(raw.dtype.newbyteorder("<"), copy=False).view(_U8).reshape(-1, 8)
        else:
            assert self.rows is not None and self.values is not None
            step = len(self.tag) + 8
            count = width // step
            first = np.searchsorted(self.rows, rows)
            ids = self.values[first[:, None] + np.arange(count)]  # (g, count)
            cells = block.reshape(len(rows), count, step)
            cells[:, :, : len(self.tag)] = np.frombuffer(self.tag, _U8)
            cells[:, :, len(self.tag) :] = (
                np.ascontiguousarray(ids, dtype="<u8").view(_U8).reshape(len(rows), count, 8)
            )


def const(data: bytes, present: np.ndarray | None = None) -> Piece:
    table = np.frombuffer(data, _U8).reshape(1, -1)
    return Piece("table", table=table, table_len=np.array([len(data)]), present=present)


def table(entries: list[bytes], codes: np.ndarray, present: np.ndarray | None = None) -> Piece:
    width = max((len(e) for e in entries), default=0)
    matrix = np.zeros((max(len(entries), 1), width), _U8)
    for i, entry in enumerate(entries):
        matrix[i, : len(entry)] = np.frombuffer(entry, _U8)
    lens = np.array([len(e) for e in entries] or [0], dtype=np.int64)
    return Piece("table", table=matrix, table_len=lens, codes=codes, present=present)


def varint(values: np.ndarray, present: np.ndarray | None = None) -> Piece:
    return Piece("varint", values=np.asarray(values, dtype=_U64), present=present)


def fixed64(values: np.ndarray, present: np.ndarray | None = None) -> Piece:
    return Piece("fixed64", values=np.asarray(values), present=present)


def flows(tag: bytes, rows: np.ndarray, values: np.ndarray) -> Piece:
    return Piece("flows", tag=tag, rows=rows, values=np.asarray(values, dtype=_U64))


BLOCK_ROWS = 8192
"""Rows encoded per block: a block's byte matrix and index stay in the CPU cache."""


def write_records(out: np.ndarray, start: np.ndarray, pieces: list[Piece]) -> np.ndarray:
    """Write one record per row at `start[row]`; returns each row's record size in bytes.

    Rows are grouped by the tuple of their piece widths (a mixed-radix key), so inside a
    group every piece sits at the same column of a dense byte matrix.
    """
    n = len(start)
    widths = [p.widths(n) for p in pieces]
    size = sum(widths, np.zeros(n, np.int64))
    if n == 0:
        return size
    key = np.zeros(n, dtype=np.int64)
    for piece_widths in widths:
        low, high = int(piece_widths.min()), int(piece_widths.max())
        if low != high:
            key = key * (high - low + 1) + (piece_widths - low)
            if int(key.max()) > 1 << 40:
                key = np.unique(key, return_inverse=True)[1].ravel().astype(np.int64)
    if int(key.max()) == int(key.min()):
        groups = [np.arange(n)]
    else:
        dense = np.unique(key, return_inverse=True)[1].ravel() if int(key.max()) >= 1 << 16 else key
        order = (
            np.argsort(dense.astype(np.uint16), kind="stable")
            if int(dense.max()) < 1 << 16
            else np.argsort(dense, kind="stable")
        )
        groups = np.split(order, np.flatnonzero(np.diff(key[order])) + 1)
    for group in groups:
        shape = [int(w[group[0]]) for w in widths]
        width = sum(shape)
        columns = np.arange(width)
        # Blocks of rows small enough for their matrices to stay in cache.
        for lo in range(0, len(group), BLOCK_ROWS):
            rows = group[lo : lo + BLOCK_ROWS]
            record = np.empty((len(rows), width), dtype=_U8)
            column = 0
            for piece, piece_width in zip(pieces, shape, strict=True):
                if piece_width:
                    piece.fill(record[:, column : column + piece_width], rows)
                    column += piece_width
            out[start[rows][:, None] + columns] = record
    return size


def copy_strings(out: np.ndarray, at: np.ndarray, flat: np.ndarray, lens: np.ndarray) -> None:
    """Copy row i's `lens[i]` bytes of `flat` (rows back to back) to `out[at[i]:]`, in
    blocks of rows so the per-byte index stays small."""
    offsets = cumsum0(lens)
    for lo in range(0, len(lens), 8 * BLOCK_ROWS):
        hi = min(lo + 8 * BLOCK_ROWS, len(lens))
        first, last = int(offsets[lo]), int(offsets[hi])
        if last > first:
            shift = np.repeat(at[lo:hi] - offsets[lo:hi], lens[lo:hi])
            out[shift + np.arange(first, last)] = flat[first:last]
