"""Vectorised decoding of raw JSON value text: strings, exact integer nanoseconds, booleans.

Columns arrive as the exact JSON text of each value (`"X"`, `1736408883688177.930`,
`"1736408883688177.930"`, `null`). Numbers are parsed from their digits, never via float64,
so epoch-sized microsecond timestamps keep every nanosecond.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import msgspec
import polars as pl

_NUMBER = r"^\s*(-?)(\d{1,16})(?:\.(\d*))?\s*$"
_MAX_WHOLE = (2**63 - 1) // 1000 - 1  # larger whole parts take the exact slow path


def json_text(raw: pl.Series) -> tuple[pl.Series, pl.Series]:
    """JSON strings -> their text (escapes resolved); `null` -> null; other values keep their
    JSON text. Returns (text, is_string) where `is_string` is False for non-string values."""
    is_null = raw.is_null() | (raw == "null")
    is_str = raw.str.starts_with('"').fill_null(False)
    inner = raw.str.slice(1, raw.str.len_chars() - 2)
    out = pl.select(
        pl.when(is_null).then(None).when(is_str).then(inner).otherwise(raw).alias(raw.name)
    ).to_series()
    escaped = is_str & raw.str.contains("\\", literal=True).fill_null(False)
    if escaped.any():
        where = escaped.arg_true()
        decoded = [msgspec.json.decode(v) for v in raw.gather(where).to_list()]
        out = out.scatter(where, pl.Series(decoded, dtype=pl.String))
    return out, (is_str | is_null)


def to_ns(raw: pl.Series, scale: int = 1000) -> tuple[pl.Series, pl.Series]:
    """Microseconds as JSON text (int, decimal, or numeric string) -> Int64 ns, exactly.

    Fractions finer than 1 ns round half away from zero. Returns (ns, invalid) where
    `invalid` marks values present but not numeric (missing values are null, not invalid).
    `scale` is ns per unit (1000 for µs).
    """
    digits = {1000: 3, 1: 0}[scale]
    text = raw.str.strip_chars('"')
    missing = raw.is_null() | (raw == "null")
    groups = text.str.extract_groups(_NUMBER)
    sign = groups.struct.field("1")
    whole = groups.struct.field("2")
    frac = groups.struct.field("3").fill_null("")
    padded = frac.str.pad_end(digits + 1, "0")
    whole_int = whole.cast(pl.Int64, strict=False)
    whole_int = pl.select(pl.when(whole_int <= _MAX_WHOLE).then(whole_int)).to_series()
    ns = pl.select(
        (
            whole_int * scale
            + (padded.str.slice(0, digits).cast(pl.Int64, strict=False) if digits else 0)
            + (padded.str.slice(digits, 1).cast(pl.Int64, strict=False) >= 5).cast(pl.Int64)
        ).alias("ns")
    ).to_series()
    ns = pl.select(pl.when(sign == "-").then(-ns).otherwise(ns)).to_series().alias(raw.name)
    unparsed = ns.is_null() & ~missing
    if unparsed.any():
        where = unparsed.arg_true()
        values = [_decimal_ns(v, scale) for v in raw.gather(where).to_list()]
        ns = ns.scatter(where, pl.Series(values, dtype=pl.Int64))
        unparsed = ns.is_null() & ~missing
    return ns, unparsed


def _decimal_ns(text: str | None, scale: int) -> int | None:
    """Slow exact path for exponents (`1e-05`), `+` signs, long integers: Decimal, not float."""
    if text is None:
        return None
    t = text.strip().strip('"').strip()
    try:
        value = Decimal(t) * scale
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    ns = int(value.to_integral_value(rounding="ROUND_HALF_UP"))
    return ns if -(2**63) <= ns < 2**63 else None


def json_bool(raw: pl.Series) -> pl.Series:
    """`true` -> True; anything else (false, null, absent) -> False."""
    return (raw == "true").fill_null(False)
