"""The vectorised .pftrace decoding pieces against slow obvious references: the lock-step
field scan against a per-message Python protobuf walk (varints up to 10 bytes, fields at the
very end of an unpadded buffer, damaged bytes), the span-to-text decoder on every path,
the repeated-annotation check and the BEGIN/END pairing against a stack."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import moetrace.trace.formats.pftrace.texts as texts_module
from moetrace.trace.formats.pftrace.annotations import repeated_pairs
from moetrace.trace.formats.pftrace.arrays import unique
from moetrace.trace.formats.pftrace.read_vectorised import _pair_slices, _Tracks
from moetrace.trace.formats.pftrace.scan import Malformed, _Piece, _placements, scan, varints
from moetrace.trace.formats.pftrace.texts import (
    _compress_spans,
    _gather_spans,
    _joined_starts,
    _window_spans,
    span_strings,
)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _walk(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """(field, wire, value, off, length) of each field of data[start:end], one by one."""

    def read_varint(pos: int) -> tuple[int, int]:
        value, shift = 0, 0
        while True:
            byte = data[pos]
            value |= (byte & 0x7F) << shift
            pos += 1
            shift += 7
            if byte < 0x80:
                return value & (2**64 - 1), pos

    rows = []
    pos = start
    while pos < end:
        tag, pos = read_varint(pos)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = read_varint(pos)
            rows.append((field, 0, value, 0, 0))
        elif wire == 1:
            rows.append((field, 1, int.from_bytes(data[pos : pos + 8], "little"), 0, 0))
            pos += 8
        elif wire == 5:
            rows.append((field, 5, int.from_bytes(data[pos : pos + 4], "little"), 0, 0))
            pos += 4
        else:
            length, pos = read_varint(pos)
            rows.append((field, 2, 0, pos, length))
            pos += length
    return rows


_FIELD = st.tuples(
    st.sampled_from([1, 2, 3, 9, 15, 16, 47, 2047, 2**20]),  # 1-, 2-, 3- and 4-byte tags
    st.sampled_from([0, 1, 2, 5]),
    st.one_of(st.integers(0, 127), st.integers(0, 2**64 - 1), st.sampled_from([2**63, 2**64 - 1])),
    st.binary(max_size=20),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_FIELD, max_size=6), min_size=1, max_size=12))
def test_scan_finds_what_a_per_message_walk_finds(messages: list[list[tuple[Any, ...]]]) -> None:
    data = bytearray()
    starts, ends = [], []
    for fields in messages:
        starts.append(len(data))
        for number, wire, value, payload in fields:
            data += _varint(number << 3 | wire)
            if wire == 0:
                data += _varint(value)
            elif wire == 1:
                data += value.to_bytes(8, "little")
            elif wire == 5:
                data += (value & 0xFFFFFFFF).to_bytes(4, "little")
            else:
                data += _varint(len(payload)) + payload
        ends.append(len(data))
    raw = bytes(data)  # no padding: the last field ends at the last byte
    found = scan(np.frombuffer(raw, dtype=np.uint8), np.array(starts), np.array(ends))
    expected: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for msg, (start, end) in enumerate(zip(starts, ends, strict=True)):
        for field, wire, value, off, length in _walk(raw, start, end):
            expected.setdefault(field, []).append((msg, wire, value, off, length))
    assert found.numbers() == sorted(expected)
    for number, rows in expected.items():
        got = found.select(number)
        assert (
            list(
                zip(
                    got.msg.tolist(),
                    got.wire.tolist(),
                    got.value.tolist(),
                    got.off.tolist(),
                    got.length.tolist(),
                    strict=True,
                )
            )
            == rows
        )
        assert set(got.field.tolist()) == {number}
        values, present = found.last(number, rows[-1][1], len(messages))
        for msg in range(len(messages)):
            mine = [r for r in rows if r[0] == msg and r[1] == rows[-1][1]]
            assert bool(present[msg]) == bool(mine)
            assert int(values[msg]) == (mine[-1][2] if mine else 0)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x08",  # a tag at the last byte, no value
        b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # an 11-byte varint
        b"\x12\x05ab",  # a length past the end
        b"\x0b\x00",  # wire type 3 (groups)
        b"\x00\x01",  # field number 0
        b"\x09\x01\x02",  # a fixed64 past the end
    ],
)
def test_damaged_bytes_are_malformed_not_index_errors(raw: bytes) -> None:
    with pytest.raises(Malformed):
        scan(np.frombuffer(raw, dtype=np.uint8), np.array([0]), np.array([len(raw)]))


@given(
    values=st.lists(st.integers(0, 2**14 - 1) | st.integers(0, 2**64 - 1), min_size=1, max_size=40),
    cut=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_varints_of_one_to_ten_bytes_equal_a_byte_by_byte_decode(
    values: list[int], cut: bool
) -> None:
    # Mostly one- and two-byte varints (texts' lengths, iids: the two-byte path), with longer
    # ones mixed in (the word path), the last one possibly cut at the end of the buffer.
    encoded = [_varint(v) for v in values]
    pos = np.cumsum([0] + [len(e) for e in encoded[:-1]]).astype(np.int32)
    data = b"".join(encoded)
    if cut and len(encoded[-1]) > 1:
        data = data[:-1]  # the last varint loses its final byte: read as if a 0 followed
        values[-1] &= (1 << (7 * (len(encoded[-1]) - 1))) - 1
    got, size = varints(np.frombuffer(data, dtype=np.uint8), pos)
    assert [int(v) for v in got] == values
    assert np.broadcast_to(size, len(values)).tolist() == [len(e) for e in encoded]


@given(
    blocks=st.lists(
        st.lists(st.lists(st.booleans(), min_size=12, max_size=12), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    )
)
@example(blocks=[[[True] * 12] * 3, [[True, False] * 6] * 2 + [[False] * 12]])  # interleaved
@settings(max_examples=200, deadline=None)
def test_placements_order_rows_by_message_then_piece(blocks: list[list[list[bool]]]) -> None:
    # Each block covers its own 12 messages and holds some pieces (steps), each with a row for
    # some of those messages: rows must land ordered by message, then by piece (a stable sort).
    pieces: list[_Piece] = []
    keys: list[tuple[int, int]] = []
    for b, steps in enumerate(blocks):
        for has in steps:
            msg = 12 * b + np.flatnonzero(has)
            keys += [(int(m), len(pieces)) for m in msg]
            pieces.append(_Piece(msg.astype(np.int32), 0))
    # row r (pieces' rows one after the other) goes to the rank of its (message, piece)
    ranked = sorted(range(len(keys)), key=lambda r: keys[r])
    expected = np.empty(len(keys), dtype=np.int64)
    expected[ranked] = np.arange(len(keys))
    got = np.concatenate(
        [
            np.arange(len(keys))[place] if isinstance(place, slice) else place
            for place in _placements(pieces)
        ]
        or [np.zeros(0, dtype=np.int64)]
    )
    assert got.tolist() == expected.tolist()


def test_ten_byte_varints_at_the_very_end_of_the_buffer() -> None:
    values = [2**64 - 1, 2**63, 2**56, 1 << 49, 300, 0]
    for value in values:
        raw = np.frombuffer(b"\x00" * 3 + _varint(value), dtype=np.uint8)
        got, size = varints(raw, np.array([3], dtype=np.int32))
        assert int(got[0]) == value
        assert int(np.asarray(size).reshape(-1)[0]) == len(_varint(value))


def _spans(
    data: bytes, rng: np.random.Generator, n: int, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray]:
    length = rng.integers(lo, hi + 1, n)
    off = np.sort(rng.choice(np.arange(1, len(data) - hi), n, replace=False))
    return off, length


@pytest.mark.parametrize(
    ("n", "lo", "hi", "alphabet"),
    [
        (3000, 0, 8, b"ab"),  # few short texts: decoded once each
        (3000, 0, 8, bytes(range(97, 123))),  # many distinct short texts
        (3000, 20, 40, bytes(range(32, 127))),  # similar lengths: windows
        (500, 0, 3000, bytes(range(32, 127))),  # very different lengths: gathers
        (200_000, 30, 40, b"xyz{}:,"),  # more than one block of texts
        (300, 5, 30, b"a\x00b"),  # NULs inside texts: one by one
        (300, 2, 12, "é€ß".encode()),  # multi-byte UTF-8 (spans may cut it: then an error)
    ],
)
def test_strings_on_every_path_equal_slicing_one_by_one(
    n: int, lo: int, hi: int, alphabet: bytes
) -> None:
    rng = np.random.default_rng(n + hi)
    size = max(4 * n * (hi + 2), 10_000)
    data = bytes(rng.choice(np.frombuffer(alphabet, dtype=np.uint8), size))
    off, length = _spans(data, rng, n, lo, hi)
    try:
        expected = [data[o : o + k].decode("utf-8") for o, k in zip(off, length, strict=True)]
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            span_strings(data, off, length)
        return
    assert span_strings(data, off, length).to_list() == expected
    # the same spans in a shuffled order (overlapping allowed for the gather path)
    order = rng.permutation(n)
    assert span_strings(data, off[order], length[order]).to_list() == [expected[i] for i in order]


@given(
    gaps=st.lists(st.integers(1, 6), min_size=2, max_size=60),
    lengths=st.lists(st.integers(0, 40), min_size=60, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=150, deadline=None)
def test_every_joiner_lays_texts_out_as_slicing_one_by_one(
    gaps: list[int], lengths: list[int], seed: int
) -> None:
    # Spans in increasing order with a gap of >= 1 byte (as protobuf payloads are): each
    # joiner must put text i at _joined_starts(length)[i], one byte after the previous one.
    length = np.array(lengths[: len(gaps)], dtype=np.int64)
    off = np.cumsum(np.array(gaps, dtype=np.int64) + np.concatenate([[0], length[:-1]]))
    size = int(off[-1] + length[-1]) + int(np.random.default_rng(seed).integers(0, 50))
    raw = np.random.default_rng(seed).integers(0, 256, size).astype(np.uint8)
    data = raw.tobytes()
    start = _joined_starts(length)
    total = int(length.sum()) + len(length) - 1
    expected = [data[o : o + k] for o, k in zip(off.tolist(), length.tolist(), strict=True)]
    joined = [
        _compress_spans(raw, off, length),
        _gather_spans(raw, off, length, start, total),
    ]
    if int(off.max()) + int(length.max()) <= size:
        joined.append(_window_spans(raw, off, length, int(length.max())))
    for out in joined:
        assert len(out) == total
        got = [out[s : s + k].tobytes() for s, k in zip(start, length, strict=True)]
        assert got == expected


@pytest.mark.parametrize("broken", [False, True])
@pytest.mark.parametrize(
    ("gaps", "path"),
    [
        ((1, 4), "region"),  # texts fill most of what they reach (args): sliced in place
        ((60, 130), "mask"),  # a third of it, lengths far apart: gathered by a run mask
    ],
)
def test_strings_of_spread_texts_equal_slicing_one_by_one(
    gaps: tuple[int, int], path: str, broken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Texts of very different lengths between bytes of protobuf framing. NULs and multi-byte
    # characters inside texts are kept; one invalid byte makes it an error, as decoding it
    # alone is.
    rng = np.random.default_rng(7)
    chars = list('ab{}:," \x00éß€\U0001f600')
    sizes = np.where(
        rng.random(3000) < 0.05, rng.integers(500, 1500, 3000), rng.integers(0, 30, 3000)
    )
    texts = ["".join(rng.choice(chars, int(k))) for k in sizes]
    pieces, off, length, at = [], [], [], 0
    for text in texts:
        frame = bytes(rng.integers(0x80, 0x100, int(rng.integers(*gaps))).astype(np.uint8))
        body = text.encode()
        pieces += [frame, body]
        off.append(at + len(frame))
        length.append(len(body))
        at += len(frame) + len(body)
    data = bytearray(b"".join(pieces))
    if broken:
        data[off[1500] + length[1500] // 2] = 0xFF  # never valid in UTF-8
    starts, lengths = np.array(off), np.array(length)
    masked: list[int] = []

    def counting_compress(*a: Any) -> Any:
        masked.append(1)
        return _compress_spans(*a)

    monkeypatch.setattr(texts_module, "_compress_spans", counting_compress)
    if broken:
        with pytest.raises(UnicodeDecodeError):
            span_strings(bytes(data), starts, lengths)
        return
    assert span_strings(bytes(data), starts, lengths).to_list() == texts
    assert bool(masked) == (path == "mask")


@pytest.mark.parametrize("per_owner", [3, 20])  # compared by lags, and by a sort
def test_repeated_pairs_equal_a_set_of_pairs(per_owner: int) -> None:
    rng = np.random.default_rng(per_owner)
    for _ in range(200):
        owners = np.sort(rng.integers(0, 30, rng.integers(1, 30 * per_owner)))
        codes = rng.integers(0, 2 * per_owner, len(owners)).astype(np.int32)
        pairs = list(zip(owners.tolist(), codes.tolist(), strict=True))
        assert repeated_pairs(owners.astype(np.int32), codes, 2 * per_owner) == (
            len(set(pairs)) != len(pairs)
        )


@pytest.mark.parametrize("n_tracks", [5, 70_000])  # radix sorts, and the general sort
def test_pairing_equals_a_stack_per_track(n_tracks: int) -> None:
    rng = np.random.default_rng(n_tracks)
    kinds: list[int] = []
    uuids: list[int] = []
    stacks: dict[int, int] = {}
    for _ in range(200_000):
        uuid = int(rng.integers(0, n_tracks)) * 7919 + 2**42
        open_ = stacks.setdefault(uuid, 0)
        if open_ and rng.random() < 0.5:
            kinds.append(2)
            stacks[uuid] -= 1
        else:
            kinds.append(int(rng.choice([1, 1, 3, 4])))
            stacks[uuid] += kinds[-1] == 1
        uuids.append(uuid)
    for uuid, depth in stacks.items():  # close everything
        kinds += [2] * depth
        uuids += [uuid] * depth
    kind = np.array(kinds, dtype=np.int64)
    uuid_col = np.array(uuids, dtype=np.uint64)
    ts = np.arange(len(kind), dtype=np.int64) * 10
    expected = ts.copy()
    open_rows: dict[int, list[int]] = {}
    for row, (k, u) in enumerate(zip(kinds, uuids, strict=True)):
        if k == 1:
            open_rows.setdefault(u, []).append(row)
        elif k == 2:
            expected[open_rows[u].pop()] = ts[row]
    unique_uuid, _, code = unique(uuid_col)
    end = _pair_slices(kind, _Tracks(unique_uuid, code), ts)
    assert np.array_equal(end, expected)


def test_scanning_in_small_blocks_reads_the_same_trace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The scan walks messages in blocks (`SCAN_BLOCK`); blocks of 7 messages (every field's
    rows in many pieces) must read the same trace as one block."""
    from moetrace.executor.run import simulate
    from moetrace.testing.compare import assert_trace_equal
    from moetrace.trace.formats.pftrace import scan as scan_module
    from moetrace.trace.formats.pftrace.read_vectorised import read_vectorised
    from moetrace.trace.io import write_trace

    path = tmp_path / "sim.pftrace"
    write_trace(simulate(ranks=2, tokens=128), path)
    data = path.read_bytes()
    whole = read_vectorised(path, data)
    monkeypatch.setattr(scan_module, "SCAN_BLOCK", 7)
    blocks = read_vectorised(path, data)
    assert whole is not None and blocks is not None and whole.events.height > 100
    assert_trace_equal(blocks, whole, meta=True)


def test_threads_read_the_same_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Big traces take worker threads (scan blocks, the annotations, their args texts); with
    the thresholds at their lowest a small trace takes them too and must read the same."""
    from moetrace.executor.run import simulate
    from moetrace.testing.compare import assert_trace_equal
    from moetrace.trace.formats.pftrace import read_vectorised as read_module
    from moetrace.trace.formats.pftrace import scan as scan_module
    from moetrace.trace.io import write_trace

    # (the package's own `annotations` name is the __future__ feature, not the module)
    notes_module = importlib.import_module("moetrace.trace.formats.pftrace.annotations")
    started: list[int] = []
    submit = notes_module.ThreadPoolExecutor.submit

    def counting_submit(self: Any, *a: Any) -> Any:
        started.append(1)
        return submit(self, *a)

    monkeypatch.setattr(notes_module.ThreadPoolExecutor, "submit", counting_submit)

    path = tmp_path / "sim.pftrace"
    write_trace(simulate(ranks=2, tokens=128), path)
    data = path.read_bytes()
    alone = read_module.read_vectorised(path, data)
    monkeypatch.setattr(notes_module, "THREAD_MIN", 1)
    monkeypatch.setattr(read_module, "THREAD_MIN", 1)
    monkeypatch.setattr(scan_module, "SCAN_SPLIT", 3)
    threaded = read_module.read_vectorised(path, data)
    assert alone is not None and threaded is not None and alone.events.height > 100
    assert_trace_equal(threaded, alone, meta=True)
    assert len(started) >= 3  # the annotations, their args texts, odd scan blocks
