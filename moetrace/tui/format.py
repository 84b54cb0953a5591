"""How numbers look on screen: durations with units, percentages. Formatting only."""

from __future__ import annotations

import math


def fmt_ns(ns: float | None, digits: int = 3) -> str:
    """A duration or time in ns as text with a unit (ns, µs, ms, s)."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "–"
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.{digits}g} µs"
    if a < 1e9:
        return f"{ns / 1e6:.{digits}g} ms"
    return f"{ns / 1e9:.{digits}g} s"


def fmt_pct(ratio: float | None) -> str:
    """A ratio 0..1 as a percentage, '–' when unknown."""
    if ratio is None or (isinstance(ratio, float) and math.isnan(ratio)):
        return "–"
    return f"{100 * ratio:.1f}%"


def nice_step(span: float, cells: int, min_cells: int = 14) -> float:
    """A 1/2/5×10^k tick step (ns) so ticks are at least `min_cells` cells apart."""
    if span <= 0 or cells <= 0:
        return 1.0
    raw = span * min_cells / cells
    base = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if base * m >= raw:
            return float(base * m)
    return float(base * 10)


TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def parse_time(text: str) -> float | None:
    """'1.5ms', '200 us', '3s' or a bare number of ns -> ns; None if it is not a time."""
    s = text.replace(" ", "")
    for unit in sorted(TIME_UNITS, key=len, reverse=True):
        if s.endswith(unit):
            s, scale = s[: -len(unit)], TIME_UNITS[unit]
            break
    else:
        scale = 1.0
    try:
        value = float(s) * scale
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None
