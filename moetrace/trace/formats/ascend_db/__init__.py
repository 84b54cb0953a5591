"""Ascend msprof / torch_npu SQLite database (`ascend_pytorch_profiler_N.db`,
`msprof_*.db`): read-only, detected by the SQLite header and msprof's table names."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from moetrace.trace.formats.ascend_db.read import NAME, claims, read
from moetrace.trace.formats.sqlite import is_sqlite
from moetrace.trace.model import Trace, TraceFormatError


class AscendDbFormat:
    """The msprof database as a registry `Format` (reading only)."""

    name = NAME
    extensions: tuple[str, ...] = (".db",)

    def sniff(self, head: bytes) -> bool:
        """SQLite header; which SQLite reader takes the file is `claims`' decision."""
        return is_sqlite(head)

    def claims(self, tables: set[str]) -> bool:
        """True when an SQLite file with these tables is an msprof database."""
        return claims(tables)

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        """Read the database (the flavor is always Ascend's)."""
        return read(path)

    def write(self, trace: Trace, out: Path | BinaryIO, *, force: bool) -> None:
        """Not written: moetrace reads msprof databases, it writes .json/.json.gz/.pftrace."""
        raise TraceFormatError(
            out if isinstance(out, Path) else None,
            "msprof databases are read, not written: use .json, .json.gz or .pftrace",
        )


ASCEND_DB = AscendDbFormat()
