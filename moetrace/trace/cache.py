"""A columnar cache of loaded traces: reopening a trace reads Arrow IPC instead of re-parsing.

The first load of a file writes its `Trace` (the four typed Polars frames + meta) into
`$XDG_CACHE_HOME/moetrace` (default `~/.cache/moetrace`), one file per (resolved path, flavor).
An entry is used only when everything about it checks out: the magic, `CACHE_FORMAT_VERSION`,
moetrace's version, the source's resolved path, size and mtime_ns, the requested flavor, and a
CRC-32 of the header and of every frame. Anything else (stale, truncated, corrupt, from an
older moetrace) is ignored and rebuilt, never trusted.

Entry layout: MAGIC, header length (u64 LE), header CRC-32 (u32 LE), header (JSON), then one
LZ4-compressed Arrow IPC file per frame at the offsets the header lists (counted from the
end of the header).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import struct
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

from moetrace.errors import OutputError
from moetrace.trace.atomic import atomic_write
from moetrace.trace.formats.chrome.deep import TooDeep, call_deep
from moetrace.trace.model import SCHEMAS, Trace

CACHE_FORMAT_VERSION = 2  # 2: Kineto launch deps by correlation at read time
"""Bump whenever the reader's output or this layout changes: older entries are then rebuilt."""

MAGIC = b"MOETRACE-CACHE\n"
_PREFIX = struct.Struct("<QI")  # header length (bytes), header CRC-32
_SUFFIX = ".mtcache"
RACY_WINDOW_NS = 2_000_000_000
"""A file modified less than this before its load (2 s, FAT's mtime granularity) is not cached:
a rewrite of the same size within one mtime tick would otherwise look unchanged."""

now_ns: Callable[[], int] = time.time_ns
"""The clock the racy window is measured with (wall time, ns); tests replace it."""


DEFAULT_MAX_BYTES = 20 * 10**9
"""The cache keeps at most this many bytes (override: $MOETRACE_CACHE_MAX_BYTES); past it, the
least recently used entries go."""


def max_bytes() -> int:
    """The size cap in bytes: $MOETRACE_CACHE_MAX_BYTES, else `DEFAULT_MAX_BYTES`."""
    try:
        return int(os.environ.get("MOETRACE_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


def moetrace_version() -> str:
    """moetrace's version, from the package this module belongs to (always imported before
    it; looked up, not imported, so trace/ keeps importing only trace/)."""
    package = sys.modules.get("moetrace")
    return str(getattr(package, "__version__", "unknown"))


def cache_dir() -> Path:
    """The cache directory: `$XDG_CACHE_HOME/moetrace`, else `~/.cache/moetrace`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moetrace"


def entry_path(source: Path, flavor: str | None) -> Path:
    """The cache file for `source` read with `flavor` (one entry per pair; stale ones are
    overwritten by the next load)."""
    key = f"{source.resolve()}\0{flavor or ''}".encode("utf-8", "surrogateescape")
    return cache_dir() / (hashlib.sha256(key).hexdigest()[:32] + _SUFFIX)


def _identity(source: Path, flavor: str | None) -> dict[str, Any]:
    """What an entry must match to be used: the source's path, size and mtime, the flavor
    asked for, and the versions of this cache layout and of moetrace."""
    st = source.stat()
    return {
        "cache_version": CACHE_FORMAT_VERSION,
        "moetrace": moetrace_version(),
        "path": os.fsdecode(source.resolve()),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "flavor": flavor,
    }


def read_cached(source: Path, flavor: str | None) -> Trace | None:
    """The cached `Trace` of `source`, or None when there is no valid, current entry."""
    entry = entry_path(source, flavor)
    try:
        data = entry.read_bytes()
        identity = _identity(source, flavor)
    except OSError:
        return None
    trace = _decode(data, identity)
    if trace is not None:
        with contextlib.suppress(OSError):
            os.utime(entry)  # mark as recently used, for the size cap
    return trace


def _decode(data: bytes, identity: dict[str, Any]) -> Trace | None:
    """Parse and verify an entry; None on any mismatch or damage."""
    start = len(MAGIC) + _PREFIX.size
    if len(data) < start or not data.startswith(MAGIC):
        return None
    header_len, header_crc = _PREFIX.unpack_from(data, len(MAGIC))
    header_bytes = data[start : start + header_len]
    if len(header_bytes) != header_len or zlib.crc32(header_bytes) != header_crc:
        return None
    try:  # meta may hold a deeply nested top-level JSON value of the source
        header = call_deep(lambda: msgspec.json.decode(header_bytes))
    except (msgspec.DecodeError, TooDeep):
        return None
    if not isinstance(header, dict) or header.get("identity") != identity:
        return None
    view = memoryview(data)[start + header_len :]
    frames: dict[str, pl.DataFrame] = {}
    try:
        for table, offset, length, crc in header["frames"]:
            chunk = view[offset : offset + length]
            if len(chunk) != length or zlib.crc32(chunk) != crc or table not in SCHEMAS:
                return None
            frame = pl.read_ipc(io.BytesIO(chunk))
            if dict(frame.schema) != SCHEMAS[table]:
                return None
            frames[table] = frame
        meta = header["meta"]
    except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError, OSError):
        return None
    if set(frames) != set(SCHEMAS) or not isinstance(meta, dict):
        return None
    return Trace(frames["events"], frames["tracks"], frames["deps"], frames["counters"], meta)


def write_cached(source: Path, flavor: str | None, trace: Trace, before: os.stat_result) -> bool:
    """Store `trace` (just read from `source`, whose stat before the read was `before`).

    Skipped (False) when the file changed during the read, was modified within
    `RACY_WINDOW_NS` of now, or its meta does not survive a JSON round trip unchanged.
    Written to a temporary file in the cache directory and renamed into place, so a reader
    never sees half an entry. Cache trouble (read-only home, full disk) never fails a load.
    """
    try:
        identity = _identity(source, flavor)
        if (identity["size"], identity["mtime_ns"]) != (before.st_size, before.st_mtime_ns):
            return False
        if now_ns() - identity["mtime_ns"] < RACY_WINDOW_NS:
            return False
        meta_json = call_deep(lambda: msgspec.json.encode(trace.meta))  # deep JSON in meta
        if not call_deep(lambda: msgspec.json.decode(meta_json) == trace.meta):
            return False
    except (OSError, TypeError, ValueError, msgspec.EncodeError, TooDeep):
        return False
    blobs = []
    for table in SCHEMAS:
        buf = io.BytesIO()
        getattr(trace, table).write_ipc(buf, compression="lz4")
        blobs.append((table, buf.getvalue()))
    frames: list[list[Any]] = []
    offset = 0  # relative to the end of the header
    for table, blob in blobs:
        frames.append([table, offset, len(blob), zlib.crc32(blob)])
        offset += len(blob)
    header = msgspec.json.encode(
        {"identity": identity, "meta": msgspec.Raw(meta_json), "frames": frames}
    )
    parts = [MAGIC, _PREFIX.pack(len(header), zlib.crc32(header)), header]
    parts.extend(blob for _, blob in blobs)
    target = entry_path(source, flavor)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(target, force=True) as fh:  # a cache entry is replaced freely
            for part in parts:
                fh.write(part)
        _trim(max_bytes())
    except (OSError, OutputError):  # a cache that cannot be written is only a slower load
        return False
    return True


def _trim(limit: int) -> None:
    """Delete the least recently used entries until the cache holds at most `limit` bytes."""
    entries = []
    for p in cache_dir().glob("*" + _SUFFIX):
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        if not p.name.startswith("."):
            entries.append((st.st_mtime_ns, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size


def load_with_cache(
    source: Path, flavor: str | None, read: Callable[[Path, str | None], Trace]
) -> Trace:
    """`read(source, flavor)` through the cache: a valid entry is returned as is, else the
    file is read and (when cacheable) stored for next time."""
    cached = read_cached(source, flavor)
    if cached is not None:
        if cached.meta.get("source") != [str(source)]:  # the same file, named another way
            cached = cached.with_meta(source=[str(source)])
        return cached
    before = source.stat()
    trace = read(source, flavor)
    write_cached(source, flavor, trace, before)
    return trace


def cache_info() -> dict[str, Any]:
    """Where the cache is, how many entries it holds and their total size in bytes."""
    directory = cache_dir()
    entries = sorted(directory.glob("*" + _SUFFIX)) if directory.is_dir() else []
    sizes = [p.stat().st_size for p in entries if not p.name.startswith(".")]
    return {"directory": str(directory), "entries": len(sizes), "bytes": sum(sizes)}


def clear_cache() -> tuple[int, int]:
    """Delete every cache entry (and leftover temporary files); (entries, bytes) removed."""
    directory = cache_dir()
    if not directory.is_dir():
        return 0, 0
    count = total = 0
    for p in directory.glob("*" + _SUFFIX):
        try:
            size = p.stat().st_size
            p.unlink()
        except FileNotFoundError:
            continue
        if not p.name.startswith("."):
            count += 1
        total += size
    return count, total
