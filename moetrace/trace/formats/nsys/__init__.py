"""Nsight Systems SQLite export (`nsys export --type sqlite`): read-only, detected by the
SQLite header and nsys's table names; a `.nsys-rep` gets the line saying how to export it."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from moetrace.trace.formats.nsys.read import NAME, claims, read
from moetrace.trace.formats.sqlite import is_sqlite
from moetrace.trace.model import Trace, TraceFormatError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
"""Nsight Systems' own report files: exported first (EXPORT_HINT)."""


class NsysFormat:
    """The nsys SQLite export as a registry `Format` (reading only)."""

    name = NAME
    extensions: tuple[str, ...] = (".sqlite",)

    def sniff(self, head: bytes) -> bool:
        """SQLite header; `claims` decides on the tables."""
        return is_sqlite(head)

    def claims(self, tables: set[str]) -> bool:
        """True when an SQLite file with these tables is an nsys export."""
        return claims(tables)

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        """Read the export (its flavor is always nsys)."""
        return read(path)

    def write(self, trace: Trace, out: Path | BinaryIO, *, force: bool) -> None:
        """Not written: moetrace writes .json/.json.gz/.pftrace."""
        raise TraceFormatError(
            out if isinstance(out, Path) else None,
            "nsys exports are read, not written: use .json, .json.gz or .pftrace",
        )


NSYS = NsysFormat()
