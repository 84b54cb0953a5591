"""What the SQLite-based readers share (Ascend msprof/torch_npu DB, Nsight Systems export).

A database is opened strictly read-only (`file:...?mode=ro&immutable=1`): SQLite then
neither takes locks nor reads or creates a `-wal`/`-shm` beside the file, so reading a
profile never changes anything next to it. Rows come out in bulk (`fetchall` into Polars
columns, see `fetch`); every SQLite error becomes one `TraceFormatError` line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import polars as pl

from moetrace.trace import progress
from moetrace.trace.model import Trace, TraceFormatError

MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database (sqlite.org/fileformat.html, 1.3)."""


def is_sqlite(head: bytes) -> bool:
    """True when a file starting with `head` is an SQLite 3 database."""
    return head.startswith(MAGIC)


def read_head(path: Path) -> bytes:
    """The first 100 bytes of `path` (the SQLite header), as a TraceFormatError on failure."""
    try:
        with open(path, "rb") as fh:
            return fh.read(100)
    except IsADirectoryError:
        raise TraceFormatError(path, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror}") from None


@contextmanager
def open_readonly(path: Path, what: str) -> Iterator[sqlite3.Connection]:
    """A read-only, immutable connection to `path` (never writes or locks beside it).
    Refuses a file that is not SQLite (`what` names the format expected), one shorter than
    its header says (truncated), one with a non-empty `-wal` beside it (changes an immutable
    read would silently miss), and turns any SQLite error while reading into one line."""
    head = read_head(path)
    if not is_sqlite(head):
        raise TraceFormatError(
            path, f"not an SQLite database (expected {what}): no 'SQLite format 3' header", "byte 0"
        )
    if len(head) < 100:
        raise TraceFormatError(path, f"truncated SQLite database: {len(head)}-byte header")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    size = path.stat().st_size
    if pages and page_size and size < pages * page_size:
        raise TraceFormatError(
            path,
            f"truncated SQLite database: {size} bytes, its header says {pages} pages of "
            f"{page_size} ({pages * page_size} bytes)",
        )
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        raise TraceFormatError(
            path,
            f"a non-empty {wal.name} beside it holds changes not yet in the database (the "
            "profiler is still writing it, or was killed); moetrace reads databases read-only "
            "and never applies a WAL: let the profiler finish, or checkpoint a copy "
            "(sqlite3 copy.db 'PRAGMA wal_checkpoint')",
        )
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise TraceFormatError(path, f"cannot open SQLite database: {exc}") from None
    _reading[id(conn)] = [path, size, _bytes_read(), 0]
    progress.report(path, 0, size, "SQLite: opening")
    try:
        yield conn
    except sqlite3.Error as exc:
        raise TraceFormatError(path, f"damaged SQLite database ({what}): {exc}") from None
    finally:
        _reading.pop(id(conn), None)
        conn.close()


# The viewer's progress (moetrace.trace.progress) while a database is read: per open
# connection (by id) its [path, bytes, this process's bytes read when it opened, queries].
# SQLite reads its pages with pread (no file position to follow): the share is the bytes
# this process has read since (/proc/self/io rchar) over the file's, kept below 100% until
# the reader is done (an index may be read twice).
_reading: dict[int, list[Any]] = {}


def _bytes_read() -> int:
    """Bytes this process has read so far (/proc/self/io rchar; 0 where there is none)."""
    try:
        with open("/proc/self/io", encoding="ascii") as io:
            for line in io:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _query_done(conn: sqlite3.Connection) -> None:
    """Report the progress of the database `conn` reads after one more query."""
    entry = _reading.get(id(conn))
    if entry is None:
        return
    path, size, base, queries = entry
    entry[3] = queries + 1
    done = min(max(_bytes_read() - base, 0), int(0.95 * size))
    progress.report(path, done, size, f"SQLite: {queries + 1} queries")


def table_names(conn: sqlite3.Connection) -> set[str]:
    """Names of the tables and views of the database."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    return {str(r[0]) for r in rows.fetchall()}


def columns_of(conn: sqlite3.Connection, table: str) -> set[str]:
    """Column names of `table` (empty when there is no such table)."""
    return {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")').fetchall()}


def tables_of(path: Path) -> set[str]:
    """Table names of the SQLite database at `path` (read-only), for format detection."""
    with open_readonly(path, "a trace database") as conn:
        return table_names(conn)


def fetch(conn: sqlite3.Connection, sql: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The rows of `sql` as a typed frame, in bulk: one `fetchall` handed to Polars' row
    constructor (measured against `pl.read_database` in benchmarks/bench_nsys.py; no Python
    code runs per row here). `schema` names the selected columns in order."""
    rows = conn.execute(sql).fetchall()
    _query_done(conn)
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(rows, schema=schema, orient="row", infer_schema_length=0)


def strings(conn: sqlite3.Connection, table: str, id_col: str, value_col: str) -> pl.DataFrame:
    """A string-id table (id -> text) as a frame with columns `id`, `value`."""
    return fetch(
        conn,
        f'SELECT "{id_col}", "{value_col}" FROM "{table}"',
        {"id": pl.Int64(), "value": pl.String()},
    )


def lookup(ids: pl.Expr, table: pl.DataFrame) -> pl.Expr:
    """Text of each id in `ids` from a `strings` frame (null when unknown)."""
    return ids.replace_strict(table["id"], table["value"], default=None, return_dtype=pl.String)


@dataclass(frozen=True)
class ReadOnlySqliteFormat:
    """A registry `Format` for an SQLite profile moetrace reads but never writes: the SQLite
    header sniffs it, `claims` (its table names) says which reader takes it."""

    name: str
    extensions: tuple[str, ...]
    what: str  # "msprof databases", "nsys exports": the subject of the not-written line
    claims_tables: Callable[[set[str]], bool]
    read_path: Callable[[Path], Trace]

    def sniff(self, head: bytes) -> bool:
        """The SQLite header; which SQLite reader takes the file is `claims`' decision."""
        return is_sqlite(head)

    def claims(self, tables: set[str]) -> bool:
        """True when an SQLite file with these tables is in this format."""
        return self.claims_tables(tables)

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        """Read the database (its flavor is fixed by the producer)."""
        return self.read_path(path)

    def write(self, trace: Trace, out: Path | BinaryIO, *, force: bool) -> None:
        """Not written: moetrace writes .json/.json.gz/.pftrace."""
        raise TraceFormatError(
            out if isinstance(out, Path) else None,
            f"{self.what} are read, not written: use .json, .json.gz or .pftrace",
        )
