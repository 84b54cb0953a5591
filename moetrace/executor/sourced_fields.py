"""The `[fields.KEY]` tables of moetrace's data files (hardware presets, MoE shapes): every
field with a value, a unit and a source (a citation, or text saying why it is assumed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moetrace.executor.errors import ExecutorInputError

ENTRY_KEYS = {"value", "unit", "source"}


def sourced_fields(
    path: Path, fields: dict[str, Any], names: Sequence[str]
) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """(values, {field: (unit, source)}) of `fields`: exactly `names`, each a table with exactly
    value, unit and source, unit and source non-empty text. Raises ExecutorInputError naming
    `path` and the field."""
    missing = [k for k in names if k not in fields]
    unknown = [k for k in fields if k not in names]
    if missing or unknown:
        raise ExecutorInputError(
            f"{path}: fields missing {missing or '-'}, unknown {unknown or '-'}"
        )
    meta: dict[str, tuple[str, str]] = {}
    values: dict[str, Any] = {}
    for key in names:
        entry = fields[key]
        if not isinstance(entry, dict) or set(entry) != ENTRY_KEYS:
            raise ExecutorInputError(f"{path}: [fields.{key}] needs exactly value, unit, source")
        unit, source = entry["unit"], entry["source"]
        if not (isinstance(unit, str) and unit and isinstance(source, str) and source):
            raise ExecutorInputError(f"{path}: [fields.{key}] needs a non-empty unit and source")
        meta[key] = (unit, source)
        values[key] = entry["value"]
    return values, meta
