"""A damaged trace is refused at its first impossible byte, after reading a few pieces, not
the whole file (issue 27: 400 MB of header + zeros took 57 s and 1.7 GB before its error)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from moetrace.trace.formats.chrome import decode
from moetrace.trace.formats.chrome.source import Reader
from moetrace.trace.io import load
from moetrace.trace.model import TraceFormatError

HEADER = b'{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2},'


class CountingReader(Reader):
    """The real source, counting the (decompressed) bytes the decoder asked for and got."""

    taken = 0

    def read(self, n: int) -> bytes:
        data = super().read(n)
        CountingReader.taken += len(data)
        return data


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingReader]:
    CountingReader.taken = 0
    monkeypatch.setattr(decode, "_Reader", CountingReader)
    return CountingReader


@pytest.mark.parametrize("garbage", [b"\x00", b"\x01", b"\x1f"])
def test_header_then_garbage_stops_within_a_few_pieces(
    tmp_path: Path, counting: type[CountingReader], garbage: bytes
) -> None:
    path = tmp_path / "damaged.json"
    size = 20 * decode.CHUNK
    with open(path, "wb") as fh:
        fh.write(HEADER)
        fh.write(garbage * (size - len(HEADER)))
    with pytest.raises(TraceFormatError, match=f"byte {len(HEADER)}: byte 0x{garbage[0]:02x}"):
        load(str(path), cache=False)
    assert counting.taken <= 3 * decode.CHUNK, counting.taken


def test_sparse_zeros_after_a_header_stop_at_once(
    tmp_path: Path, counting: type[CountingReader]
) -> None:
    path = tmp_path / "sparse.json"
    with open(path, "wb") as fh:
        fh.write(HEADER)
        fh.truncate(50 * decode.CHUNK)  # a hole: zeros on read, no disk used
    with pytest.raises(TraceFormatError, match="cannot appear in JSON"):
        load(str(path), cache=False)
    assert counting.taken <= 3 * decode.CHUNK


def test_gzip_of_header_then_zeros_stops_early(
    tmp_path: Path, counting: type[CountingReader]
) -> None:
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(gzip.compress(HEADER + bytes(20 * decode.CHUNK), compresslevel=1))
    with pytest.raises(TraceFormatError, match=f"byte {len(HEADER)}"):
        load(str(path), cache=False)
    assert counting.taken <= 3 * decode.CHUNK


def test_header_keys_then_zeros_stop_early(tmp_path: Path, counting: type[CountingReader]) -> None:
    """Zeros before "traceEvents" was found: the header search reads no further either."""
    path = tmp_path / "head.json"
    with open(path, "wb") as fh:
        fh.write(b'{"displayTimeUnit": "ns", ')
        fh.truncate(20 * decode.CHUNK)
    with pytest.raises(TraceFormatError, match="cannot appear in JSON"):
        load(str(path), cache=False)
    assert counting.taken <= 3 * decode.CHUNK


def test_gzip_member_crc_error_names_the_member(tmp_path: Path) -> None:
    """A bad CRC is found at a member's end; the error names that member and the check,
    not "after byte 0" (issue 27)."""
    first = gzip.compress(HEADER)
    second = bytearray(gzip.compress(b'{"ph":"X","name":"b","pid":1,"tid":1,"ts":5,"dur":2}]}'))
    second[-8] ^= 0xFF  # the trailer's CRC-32 (RFC 1952: CRC32 then ISIZE, 4 bytes each)
    path = tmp_path / "crc.json.gz"
    path.write_bytes(first + bytes(second))
    with pytest.raises(TraceFormatError) as info:
        load(str(path), cache=False)
    message = str(info.value)
    assert "gzip member 2: CRC-32 of its data does not match its trailer" in message
    assert f"compressed byte {len(first) + len(second)} or before" in message
