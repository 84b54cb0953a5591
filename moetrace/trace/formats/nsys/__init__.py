"""Nsight Systems SQLite export (`nsys export --type sqlite`): read-only, detected by the
SQLite header and nsys's table names; a `.nsys-rep` gets the line saying how to export it."""

from __future__ import annotations

from moetrace.trace.formats.nsys.read import NAME, claims, read
from moetrace.trace.formats.sqlite import ReadOnlySqliteFormat

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
"""Nsight Systems' own report files: exported first (EXPORT_HINT)."""


NSYS = ReadOnlySqliteFormat(NAME, (".sqlite",), "nsys exports", claims, read)
"""The nsys SQLite export as a registry `Format` (reading only)."""
