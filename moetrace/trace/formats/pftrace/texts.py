"""Texts of the vectorised .pftrace reader: UTF-8 strings at many byte spans of the file at
once (gathered into one buffer, sliced and checked by Polars), interned names by (sequence,
iid), and literal names over interned ones (protobuf's last-wins)."""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.trace.formats.pftrace.arrays import unique
from moetrace.trace.formats.pftrace.scan import Fields


def span_strings(data: bytes, off: np.ndarray, length: np.ndarray) -> pl.Series:
    """UTF-8 texts at the given spans (strict, as protobuf's parser is), as a String Series.

    Short texts with few distinct values (kinds, categories) are decoded once per distinct
    value. Texts that fill at least half of the bytes they reach (args) are sliced from those
    bytes as they lie; others are first gathered into one buffer (a byte between texts).
    Polars slices the texts and checks them as UTF-8 (`_sliced_strings`)."""
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
                span_strings(data, off[lo : lo + _STRING_BLOCK], length[lo : lo + _STRING_BLOCK])
                for lo in range(0, n, _STRING_BLOCK)
            ],
            rechunk=False,
        )
    if widest <= 8:
        few = _few_short_strings(data, raw, off, length)
        if few is not None:
            return few
    if n <= _ONE_BY_ONE:  # few texts: slicing them costs less than a Polars query
        return _one_by_one(data, off, length)
    total = int(length.sum()) + n - 1  # with the separators
    lo, hi = int(off.min()), int((off + length).max())
    if 2 * total >= hi - lo:  # texts fill most of the bytes they reach (args): no gather
        return _sliced_strings(data, data[lo:hi], off - lo, off, length)
    if (widest + 1) * n <= 2 * total + (1 << 16) and int(off.max()) + widest <= len(raw):
        joined = _window_spans(raw, off, length, widest)
    elif _increasing_apart(off, length) and total * 4 > _reach(off, length):
        joined = _compress_spans(raw, off, length)
    else:
        joined = _gather_spans(raw, off, length, _joined_starts(length), total)
    return _sliced_strings(data, joined.tobytes(), _joined_starts(length), off, length)


def _increasing_apart(off: np.ndarray, length: np.ndarray) -> bool:
    """Whether the spans are in increasing order with at least one byte between them."""
    return len(off) > 1 and bool((off[1:] > off[:-1] + length[:-1]).all())


def _reach(off: np.ndarray, length: np.ndarray) -> int:
    """Bytes from the first span's start to the last one's end (spans in increasing order)."""
    return int(off[-1]) + int(length[-1]) - int(off[0])


def _joined_starts(length: np.ndarray) -> np.ndarray:
    """Where each text starts in the joined buffer (texts separated by one byte)."""
    start = np.zeros(len(length), dtype=np.int64)
    np.cumsum(length[:-1] + 1, out=start[1:])
    return start


def _sliced_strings(
    data: bytes, buffer: bytes, starts: np.ndarray, off: np.ndarray, length: np.ndarray
) -> pl.Series:
    """The texts buffer[starts[i] : starts[i] + length[i]] (the spans `off`, `length` of
    `data`) as a String Series: views into one Binary copy of the buffer, checked as UTF-8 by
    Polars in one pass (no Python string of the whole, no split on separators). The Series
    keeps the whole buffer: callers pass one that the texts fill at least half of. Invalid
    UTF-8: the texts are decoded one by one, which raises Python's own UnicodeDecodeError."""
    whole = pl.Series(values=[buffer], dtype=pl.Binary)
    at = pl.DataFrame({"at": starts, "len": length})
    try:
        return at.select(
            pl.lit(whole).first().bin.slice(pl.col("at"), pl.col("len")).cast(pl.String)
        ).to_series()
    except pl.exceptions.PolarsError:  # "invalid utf8"
        return _one_by_one(data, off, length)


_ONE_BY_ONE = 256
"""Most texts decoded one by one in Python (~0.3 µs each) rather than by a Polars query."""


def _one_by_one(data: bytes, off: np.ndarray, length: np.ndarray) -> pl.Series:
    """The texts decoded one by one (strict UTF-8: Python's own error on invalid bytes)."""
    return pl.Series(
        values=[
            data[o : o + k].decode("utf-8")
            for o, k in zip(off.tolist(), length.tolist(), strict=True)
        ],
        dtype=pl.String,
    )


_MAX_U64 = np.uint64(0xFFFFFFFFFFFFFFFF)


_STRING_BLOCK = 1 << 17
"""Texts per block of `span_strings` (of args, ~40 bytes each: ~5 MB per joined copy)."""


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
    distinct, first, inverse = unique(word)  # then texts of one word must share a length
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
    length-delimited payload follows its tag and length) joined by separators, by one mask
    over the bytes they reach: each span is taken with the byte before it, which becomes the
    separator. The mask is a repeat of (span, gap) run lengths, so the work is per byte
    reached, not per byte of every span (for dense spans such as args), with no sums over
    the bytes."""
    lo = int(off[0]) - 1
    runs = np.empty(2 * len(off) - 1, dtype=np.int64)
    runs[0::2] = length + 1  # a span with the byte before it
    runs[1::2] = off[1:] - 1 - (off[:-1] + length[:-1])  # the gap up to the next one's
    keep = np.zeros(len(runs), dtype=bool)
    keep[0::2] = True
    inside = np.repeat(keep, runs)
    return np.asarray(raw[lo : lo + len(inside)][inside][1:])


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


def interned(
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


def literal_over(texts: pl.Series, data: bytes, literal: Fields) -> pl.Series:
    """`texts` (interned: a text per row) with each row that has literal texts (`literal`, rows by
    `msg`) given its last one instead, as protobuf's last-wins."""
    if len(literal.msg) == 0:
        return texts
    last = np.zeros(len(texts), dtype=np.int64) - 1
    last[literal.msg] = np.arange(len(literal.msg))
    has = np.flatnonzero(last >= 0)
    return texts.scatter(has, span_strings(data, literal.off[last[has]], literal.length[last[has]]))
