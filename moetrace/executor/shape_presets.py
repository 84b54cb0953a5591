"""MoE layer shapes as data: one TOML file per model in executor/shapes/, schema-checked at load.

Each file has `name`, `description`, `source` (where the shape as a whole comes from) and a
`[fields.KEY]` table with `value`, `unit` and `source` for every field below; nothing more,
nothing missing. `dispatch_dtype` is the dtype a model's dispatch uses by default.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.sourced_fields import sourced_fields

SHAPE_DIR = Path(__file__).with_name("shapes")

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}

_COUNTS = ("hidden", "intermediate", "experts", "top_k", "shared_experts")
_FIELDS = (*_COUNTS, "dispatch_dtype")


@dataclass(frozen=True)
class MoEShape:
    """One MoE layer: hidden size H, expert intermediate size I, experts, top-k, shared experts."""

    name: str
    hidden: int
    intermediate: int
    experts: int
    top_k: int
    shared_experts: int
    source: str


@dataclass(frozen=True)
class ShapePreset:
    """A shape file: the shape, its default dispatch dtype, and each field's (unit, source)."""

    shape: MoEShape
    dispatch_dtype: str
    description: str
    fields: dict[str, tuple[str, str]]


def load_shape(path: str | Path) -> ShapePreset:
    """One shape TOML, checked: every field present with value, unit and source; counts are
    integers (experts, hidden >= 1; shared experts >= 0); the dtype is one the executor knows."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ExecutorInputError(f"{p}: cannot read MoE shape preset: {exc}") from None
    fields = data.get("fields")
    top = (data.get("name"), data.get("description"), data.get("source"))
    if not all(isinstance(v, str) and v for v in top) or not isinstance(fields, dict):
        raise ExecutorInputError(f"{p}: a shape needs name, description, source and [fields.*]")
    values, meta = sourced_fields(p, fields, _FIELDS)
    for key in _COUNTS:
        value, least = values[key], 0 if key == "shared_experts" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ExecutorInputError(f"{p}: {key} must be an integer >= {least} (got {value!r})")
    dtype = values["dispatch_dtype"]
    if dtype not in DTYPE_BYTES:
        known = ", ".join(DTYPE_BYTES)
        raise ExecutorInputError(f"{p}: dispatch_dtype {dtype!r} is not one of {known}")
    counts = {k: int(values[k]) for k in _COUNTS}
    shape = MoEShape(name=str(data["name"]), source=str(data["source"]), **counts)
    return ShapePreset(shape, str(values["dispatch_dtype"]), str(data["description"]), meta)


def load_shapes(folder: Path = SHAPE_DIR) -> dict[str, ShapePreset]:
    """Every shape file of `folder` by name (a name given twice is an error)."""
    out: dict[str, ShapePreset] = {}
    for path in sorted(folder.glob("*.toml")):
        preset = load_shape(path)
        if preset.shape.name in out:
            raise ExecutorInputError(f"{path}: shape {preset.shape.name!r} defined twice")
        out[preset.shape.name] = preset
    return out
