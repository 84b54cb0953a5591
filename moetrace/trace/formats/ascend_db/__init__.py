"""Ascend msprof / torch_npu SQLite database (`ascend_pytorch_profiler_N.db`,
`msprof_*.db`): read-only, detected by the SQLite header and msprof's table names."""

from __future__ import annotations

from moetrace.trace.formats.ascend_db.read import NAME, claims, read
from moetrace.trace.formats.sqlite import ReadOnlySqliteFormat

ASCEND_DB = ReadOnlySqliteFormat(NAME, (".db",), "msprof databases", claims, read)
"""The msprof database as a registry `Format` (reading only)."""
