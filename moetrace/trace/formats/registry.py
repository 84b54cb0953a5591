"""The trace formats moetrace reads and writes, and how a file's format is chosen.

A format is a small plug-in (`Format`): a name, the file extensions it owns, `sniff(head)`
(does this file start like mine?), `read(path)` and `write(trace, path)`. Reading chooses
by content first (gzip magic or a JSON `{`/`[` -> Chrome JSON; a protobuf `Trace.packet`
tag -> Perfetto; the SQLite header -> the SQLite reader whose `claims` knows the tables: an
msprof database, an Nsight Systems export), then by extension; a file that is neither is
refused with one error naming it. Writing chooses by extension (a binary stream gets Chrome JSON).
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Protocol

from moetrace.trace import cache
from moetrace.trace.formats.ascend_db import ASCEND_DB
from moetrace.trace.formats.chrome import CHROME
from moetrace.trace.formats.nsys import NSYS, REPORT_SUFFIXES
from moetrace.trace.formats.nsys.read import EXPORT_HINT
from moetrace.trace.formats.pftrace import PFTRACE
from moetrace.trace.formats.rocprof import ROCPROF, looks_like
from moetrace.trace.formats.sqlite import is_sqlite, tables_of
from moetrace.trace.model import Trace, TraceFormatError

SNIFF_BYTES = 64
"""How much of a file's start `sniff` sees (bytes)."""


class Format(Protocol):
    """A trace file format: what `load` reads and `write_trace` writes."""

    @property
    def name(self) -> str:
        """Short name, as in `meta["format"]` and error messages."""
        ...

    @property
    def extensions(self) -> tuple[str, ...]:
        """Lower-case file name endings this format owns (".json", ".pftrace", ...)."""
        ...

    def sniff(self, head: bytes) -> bool:
        """True when a file starting with `head` (up to SNIFF_BYTES) is in this format."""
        ...

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        """Read `path`; raise TraceFormatError (file, position, what) on bad input."""
        ...

    def write(self, trace: Trace, out: Path | BinaryIO, *, force: bool) -> None:
        """Write `trace` atomically to `out` (a stream: as is), replacing only with `force`."""
        ...


class SqliteFormat(Format, Protocol):
    """A format stored in an SQLite database: which one is told by its table names."""

    def claims(self, tables: set[str]) -> bool:
        """True when a database with these tables is in this format."""
        ...


SQLITE_FORMATS: tuple[SqliteFormat, ...] = (ASCEND_DB, NSYS)
"""The SQLite-based formats, asked in order whether a database's tables are theirs."""

FORMATS: tuple[Format, ...] = (CHROME, PFTRACE, *SQLITE_FORMATS, ROCPROF)
"""Every format, in sniffing order: the first whose `sniff` says yes reads the file."""

EXPORT_FIRST: dict[str, str] = dict.fromkeys(REPORT_SUFFIXES, EXPORT_HINT)
"""File endings moetrace cannot read directly -> the one line saying how to export them."""

TRACE_SUFFIXES = tuple(ext for fmt in FORMATS for ext in fmt.extensions)
"""File endings of trace files (directory listings, output names)."""


def format_of_content(path: Path, head: bytes) -> Format:
    """The format that reads a file starting with `head`: by content, then by extension.
    Raises TraceFormatError naming the file when neither tells."""
    if is_sqlite(head):
        return sqlite_format_of(path)
    for ending, hint in EXPORT_FIRST.items():
        if path.name.lower().endswith(ending):
            raise TraceFormatError(path, hint)
    if looks_like(path, head):
        return ROCPROF  # JSON, but rocprofiler-sdk's own layout, not Chrome's
    for fmt in FORMATS:
        if fmt.sniff(head):
            return fmt
    by_name = format_of_name(path)
    if by_name is not None:
        return by_name
    raise TraceFormatError(
        path,
        "unknown trace format: the content is neither Chrome JSON (plain or gzip) nor a "
        f"Perfetto protobuf trace, and the name ends in none of {', '.join(TRACE_SUFFIXES)}",
        "byte 0",
    )


def sqlite_format_of(path: Path) -> Format:
    """The SQLite format whose tables `path` holds (the database opened read-only).
    Raises TraceFormatError naming the file and some of its tables when none claims it."""
    tables = tables_of(path)
    for fmt in SQLITE_FORMATS:
        if fmt.claims(tables):
            return fmt
    shown = ", ".join(sorted(tables)[:8]) or "none"
    raise TraceFormatError(
        path,
        "SQLite database of another program: no msprof (TASK, STRING_IDS) or Nsight Systems "
        f"(CUPTI_ACTIVITY_KIND_*, StringIds) tables; its tables: {shown}",
    )


def is_trace_database(path: Path) -> bool:
    """True when `path` is an SQLite database one of the SQLite formats reads (directory
    listings: another program's .db beside the traces is not one)."""
    try:
        with open(path, "rb") as fh:
            if not is_sqlite(fh.read(16)):
                return False
        tables = tables_of(path)
    except (OSError, TraceFormatError):
        return False
    return any(fmt.claims(tables) for fmt in SQLITE_FORMATS)


def format_of_name(path: Path) -> Format | None:
    """The format whose extension `path` ends with (the longest match), or None."""
    name = path.name.lower()
    owners = [(len(ext), fmt) for fmt in FORMATS for ext in fmt.extensions if name.endswith(ext)]
    return max(owners, key=lambda pair: pair[0])[1] if owners else None


def read_file(path: Path, *, flavor: str | None = None) -> Trace:
    """Read one trace file in the format its content (then its name) says."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except IsADirectoryError:
        raise TraceFormatError(path, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror}") from None
    return format_of_content(path, head).read(path, flavor=flavor)


def read_file_cached(path: Path, flavor: str | None = None, *, use_cache: bool = True) -> Trace:
    """`read_file` through the columnar cache (moetrace.trace.cache) unless `use_cache` is
    False."""
    if not use_cache:
        return read_file(path, flavor=flavor)
    return cache.load_with_cache(path, flavor, lambda p, f: read_file(p, flavor=f))
