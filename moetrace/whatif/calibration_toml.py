"""A calibration written as a hardware preset TOML: every field's value, unit and source."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from moetrace.executor.hardware import PRESET_FIELDS
from moetrace.whatif.calibration import Calibration


def _toml_value(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value))


def to_toml(cal: Calibration) -> str:
    """The calibrated hardware in the presets' format: every field's value, unit and source
    (the fit with its R² for fitted fields, the base preset's source for the others)."""
    meta = PRESET_FIELDS.get(cal.base.name, PRESET_FIELDS["ascend-a3"])
    fitted = {f.field: f for f in cal.fits}
    lines = [
        f"# moetrace hardware calibrated from {cal.trace_name} (moetrace calibrate).",
        f"name = {json.dumps(cal.hardware.name)}",
        f"description = {json.dumps(f'{cal.base.name} with fields fitted to {cal.trace_name}')}",
    ]
    for key, value in dataclasses.asdict(cal.hardware).items():
        if key == "name":
            continue
        unit, source = meta[key]
        if key in fitted:
            source = fitted[key].source(cal.trace_name)
        elif key in cal.known:
            source = f"from the trace's meta: {cal.trace_name} (executor.hardware)"
        else:
            source = f"{cal.base.name} preset: {source}"
        lines += [
            "",
            f"[fields.{key}]",
            f"value = {_toml_value(value)}",
            f"unit = {json.dumps(unit)}",
            f"source = {json.dumps(source)}",
        ]
    return "\n".join(lines) + "\n"
