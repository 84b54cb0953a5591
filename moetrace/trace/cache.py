"""A columnar cache of loaded traces: reopening a trace maps Arrow IPC files instead of re-parsing.

The first load of a file writes its `Trace` (the four typed Polars frames + meta) into
`$XDG_CACHE_HOME/moetrace` (default `~/.cache/moetrace`), one entry per (resolved path, flavor).
An entry is used only when everything about it checks out: the magic, `CACHE_FORMAT_VERSION`,
moetrace's version, the source's resolved path, size and mtime_ns, the requested flavor, a
CRC-32 of the header, and the size and XXH3-64 hash of every frame file. Anything else (stale,
truncated, corrupt, from an older moetrace) is ignored and rebuilt, never trusted.

Entry layout: a header file `<key>.mtcache` (MAGIC, header length (u64 LE), header CRC-32
(u32 LE), header JSON: identity, meta, and per frame its file name, size and hash) and one
uncompressed Arrow IPC file per frame, `<key>.<writer>.<table>.arrow`. Uncompressed, so that
Polars takes each frame's buffers as they lie instead of decoding them (it memory-maps the big
ones: seen from ~96 MB on Polars 2.1; smaller ones are one read): a reopen costs one XXH3-64
pass over the frame's pages through a memory map (~15 GB/s) and no decompression. Frame
files are never rewritten in place: each writer names its own (`<writer>` is random), installs
them atomically, then the header; so concurrent writers of one entry can only make a reader
miss, never mix frames.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import secrets
import struct
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import xxhash

from moetrace.errors import OutputError
from moetrace.trace.atomic import atomic_path, atomic_write
from moetrace.trace.formats.chrome.deep import TooDeep, call_deep
from moetrace.trace.model import SCHEMAS, Trace

CACHE_FORMAT_VERSION = 3  # 3: one uncompressed, memory-mapped Arrow file per frame
"""Bump whenever the reader's output or this layout changes: older entries are then rebuilt."""

MAGIC = b"MOETRACE-CACHE\n"
_PREFIX = struct.Struct("<QI")  # header length (bytes), header CRC-32
_SUFFIX = ".mtcache"
_FRAME_SUFFIX = ".arrow"
_KEY_CHARS = 32
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


def _key(source: Path, flavor: str | None) -> str:
    """The entry's key: a hash of the resolved path and the flavor asked for (32 hex chars)."""
    key = f"{source.resolve()}\0{flavor or ''}".encode("utf-8", "surrogateescape")
    return hashlib.sha256(key).hexdigest()[:_KEY_CHARS]


def entry_path(source: Path, flavor: str | None) -> Path:
    """The header file of the entry for `source` read with `flavor` (one entry per pair;
    a stale one is replaced by the next load)."""
    return cache_dir() / (_key(source, flavor) + _SUFFIX)


def entry_files(source: Path, flavor: str | None) -> list[Path]:
    """Every file of the entry for `source` and `flavor` (header first), as on disk now."""
    header = entry_path(source, flavor)
    frames = sorted(cache_dir().glob(_key(source, flavor) + ".*" + _FRAME_SUFFIX))
    return ([header] if header.exists() else []) + frames


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


def _file_hash(path: Path) -> int:
    """XXH3-64 of a file's bytes, hashed through a read-only memory map (no copy)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return xxhash.xxh3_64_intdigest(b"")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return xxhash.xxh3_64_intdigest(view)


def read_cached(source: Path, flavor: str | None) -> Trace | None:
    """The cached `Trace` of `source`, or None when there is no valid, current entry."""
    entry = entry_path(source, flavor)
    try:
        data = entry.read_bytes()
        identity = _identity(source, flavor)
    except OSError:
        return None
    header = _header(data, identity)
    trace = None if header is None else _frames(entry.parent, header)
    if trace is not None:
        with contextlib.suppress(OSError):
            os.utime(entry)  # mark as recently used, for the size cap
    return trace


def _header(data: bytes, identity: dict[str, Any]) -> dict[str, Any] | None:
    """Parse and verify a header file; None on any mismatch or damage."""
    start = len(MAGIC) + _PREFIX.size
    if len(data) < start or not data.startswith(MAGIC):
        return None
    header_len, header_crc = _PREFIX.unpack_from(data, len(MAGIC))
    header_bytes = data[start:]
    if len(header_bytes) != header_len or zlib.crc32(header_bytes) != header_crc:
        return None
    try:  # meta may hold a deeply nested top-level JSON value of the source
        header = call_deep(lambda: msgspec.json.decode(header_bytes))
    except (msgspec.DecodeError, TooDeep):
        return None
    if not isinstance(header, dict) or header.get("identity") != identity:
        return None
    return header


def _frames(directory: Path, header: dict[str, Any]) -> Trace | None:
    """The entry's frames, each memory-mapped by Polars once its size and hash check out."""
    frames: dict[str, pl.DataFrame] = {}
    try:
        for table, name, length, digest in header["frames"]:
            path = directory / name
            if table not in SCHEMAS or Path(name).name != name or not name.endswith(_FRAME_SUFFIX):
                return None
            if path.stat().st_size != length or _file_hash(path) != digest:
                return None
            frame = pl.read_ipc(path)
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
    Each frame file, then the header, is written to a temporary file in the cache directory
    and renamed into place, so a reader never sees half an entry. Cache trouble (read-only
    home, full disk) never fails a load.
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
    directory = cache_dir()
    key = _key(source, flavor)
    writer = secrets.token_hex(4)
    frames: list[list[Any]] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for table in SCHEMAS:
            target = directory / f"{key}.{writer}.{table}{_FRAME_SUFFIX}"
            with atomic_path(target, force=True) as tmp:  # a cache file is replaced freely
                getattr(trace, table).write_ipc(tmp, compression="uncompressed")
            frames.append([table, target.name, target.stat().st_size, _file_hash(target)])
        header = msgspec.json.encode(
            {"identity": identity, "meta": msgspec.Raw(meta_json), "frames": frames}
        )
        with atomic_write(directory / (key + _SUFFIX), force=True) as fh:
            fh.write(MAGIC + _PREFIX.pack(len(header), zlib.crc32(header)) + header)
        kept = {name for _, name, _, _ in frames}
        for old in directory.glob(key + ".*" + _FRAME_SUFFIX):  # an earlier writer's frames
            if old.name not in kept:
                old.unlink(missing_ok=True)
        _trim(max_bytes())
    except (OSError, OutputError, pl.exceptions.PolarsError):
        # a cache that cannot be written is only a slower load; drop what this writer left
        for _, name, _, _ in frames:
            with contextlib.suppress(OSError):
                (directory / name).unlink()
        return False
    return True


def _cache_files() -> Iterator[tuple[str, Path, os.stat_result]]:
    """(entry key, path, stat) of every finished cache file (temporary files excluded)."""
    for p in cache_dir().glob("*"):
        if p.name.startswith(".") or not p.name.endswith((_SUFFIX, _FRAME_SUFFIX)):
            continue
        try:
            yield p.name[:_KEY_CHARS], p, p.stat()
        except FileNotFoundError:
            continue


def _trim(limit: int) -> None:
    """Delete the least recently used entries (header and frames together) until the cache
    holds at most `limit` bytes; an entry's age is its header's mtime (frames without a
    header, left by an interrupted writer, count as the oldest)."""
    sizes: dict[str, int] = {}
    used: dict[str, int] = {}
    files: dict[str, list[Path]] = {}
    for key, p, st in _cache_files():
        sizes[key] = sizes.get(key, 0) + st.st_size
        files.setdefault(key, []).append(p)
        if p.name.endswith(_SUFFIX):
            used[key] = st.st_mtime_ns
    total = sum(sizes.values())
    for key in sorted(sizes, key=lambda k: used.get(k, -1)):
        if total <= limit:
            break
        for p in files[key]:
            p.unlink(missing_ok=True)
        total -= sizes[key]


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
    if not cache_dir().is_dir():
        return {"directory": str(cache_dir()), "entries": 0, "bytes": 0}
    found = list(_cache_files())
    entries = sum(1 for _, p, _ in found if p.name.endswith(_SUFFIX))
    return {
        "directory": str(cache_dir()),
        "entries": entries,
        "bytes": sum(st.st_size for _, _, st in found),
    }


def clear_cache() -> tuple[int, int]:
    """Delete every cache entry (and leftover temporary files); (entries, bytes) removed."""
    directory = cache_dir()
    if not directory.is_dir():
        return 0, 0
    count = total = 0
    for p in directory.glob("*"):
        if not p.name.endswith((_SUFFIX, _FRAME_SUFFIX, ".tmp")):
            continue  # only the cache's own files (entries, frames, leftover temporaries)
        try:
            size = p.stat().st_size
            p.unlink()
        except FileNotFoundError:
            continue
        if p.name.endswith(_SUFFIX) and not p.name.startswith("."):
            count += 1
        total += size
    return count, total
