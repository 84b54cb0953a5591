"""Reading a trace file in blocks: plain bytes, or gzip inflated as it goes."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from moetrace.trace.model import TraceFormatError


class Reader:
    """Reads a plain or gzip file in blocks; reports errors as TraceFormatError.

    gzip is inflated with zlib directly (not GzipFile) so a stream cut short still yields
    every byte that was decompressed before the cut; concatenated members are followed.
    """

    def __init__(self, path: Path, head: bytes):
        self.path = path
        self.gzip = head[:2] == b"\x1f\x8b"
        self._file = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._inflate = zlib.decompressobj(wbits=31) if self.gzip else None
        self.eof = False
        self.truncated_gzip = False
        self._finished = False  # the last gzip member ended cleanly at end of file
        self.total = 0
        self.member = 1  # the gzip member being inflated (1-based): named in errors

    def read(self, n: int) -> bytes:
        if self.eof:
            return b""
        data = self._file.read(n) if self._inflate is None else self._read_gzip(n)
        if not data:
            self.eof = True
        self.total += len(data)
        return data

    def _read_gzip(self, n: int) -> bytes:
        assert self._inflate is not None
        out = bytearray()
        while len(out) < n and not self._finished:
            packed = self._inflate.unconsumed_tail or self._file.read(1 << 20)
            if not packed:
                if not self._inflate.eof:
                    self.truncated_gzip = True  # a stream cut short: keep what we have
                break
            try:
                out += self._inflate.decompress(packed, n - len(out))
            except zlib.error as exc:
                raise self._gzip_error(exc, len(out)) from None
            if self._inflate.eof:
                self.member += 1
                rest = self._inflate.unused_data
                self._inflate = zlib.decompressobj(wbits=31)
                if rest.strip(b"\x00"):
                    self._inflate_pending(rest)
                elif not rest and not self._peek():
                    self._finished = True
        return bytes(out)

    def _gzip_error(self, exc: zlib.error, pending: int) -> TraceFormatError:
        """Name what is wrong in which member: a CRC or length mismatch is found at the end of
        a member (its 8-byte trailer), after all of its data was inflated."""
        text = str(exc)
        if "incorrect data check" in text:
            what = f"gzip member {self.member}: CRC-32 of its data does not match its trailer"
        elif "incorrect length check" in text:
            what = f"gzip member {self.member}: length does not match its trailer"
        else:
            what = f"gzip member {self.member}: corrupt data ({text})"
        try:
            where = f"compressed byte {self._file.tell()} or before"
        except (OSError, ValueError):
            where = f"after byte {self.total + pending} of the decompressed data"
        return TraceFormatError(self.path, f"{what} (the file is damaged)", where)

    def _inflate_pending(self, rest: bytes) -> None:
        """Start the next gzip member with bytes already read past the previous one."""
        assert self._inflate is not None
        self._pending = rest
        self._file = _Prefixed(rest, self._file)  # type: ignore[assignment]

    def _peek(self) -> bool:
        pos = self._file.tell()
        more = bool(self._file.read(1))
        self._file.seek(pos)
        return more

    def close(self) -> None:
        self._file.close()


class _Prefixed:
    """A file whose next reads return `prefix` first (the start of a next gzip member)."""

    def __init__(self, prefix: bytes, inner: Any):
        self._prefix = prefix
        self._inner = inner

    def read(self, n: int) -> bytes:
        if self._prefix:
            out, self._prefix = self._prefix[:n], self._prefix[n:]
            return out
        return bytes(self._inner.read(n))

    def tell(self) -> int:
        return int(self._inner.tell()) - len(self._prefix)

    def seek(self, pos: int) -> None:
        self._inner.seek(pos + len(self._prefix))

    def close(self) -> None:
        self._inner.close()
