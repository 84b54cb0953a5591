"""Vectorised decoding of raw JSON value text: strings, exact integer nanoseconds, booleans.

Columns arrive as the exact JSON text of each value (`"X"`, `1736408883688177.930`,
`"1736408883688177.930"`, `null`). Numbers are parsed from their digits, never via float64,
so epoch-sized microsecond timestamps keep every nanosecond.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec
import polars as pl

_NUMBER = r"^\s*(-?)(\d{1,16})(?:\.(\d*))?\s*$"
_MAX_WHOLE = (2**63 - 1) // 1000 - 1  # larger whole parts take the exact slow path


def to_ns(raw: pl.Series, scale: int = 1000) -> tuple[pl.Series, pl.Series]:
    """Microseconds as text (int, decimal, or numeric string, quotes allowed) -> Int64 ns,
    exactly: the digits before and after the point are cast separately, never via float.

    Fractions finer than 1 ns round half away from zero. Exponents and other rare forms take
    an exact Decimal path. Returns (ns, invalid) where `invalid` marks values present but
    not numeric or out of range (missing values are null, not invalid).
    """
    digits = {1000: 3, 1: 0}[scale]
    text = raw.str.strip_chars('" ')
    missing = raw.is_null() | (raw == "null")
    parts = text.str.split_exact(".", 1)
    whole = parts.struct.field("field_0")
    frac = parts.struct.field("field_1")
    negative = text.str.starts_with("-")
    magnitude = whole.str.strip_prefix("-").cast(pl.Int64, strict=False)
    magnitude = pl.select(
        pl.when((magnitude <= _MAX_WHOLE) & whole.str.contains(r"^-?[0-9]+$")).then(magnitude)
    ).to_series()
    frac_ok = frac.is_null() | (frac == "") | frac.str.contains(r"^[0-9]{1,18}$")
    frac_ok = frac_ok & (text.str.count_matches(".", literal=True) <= 1)  # split_exact drops "..."
    padded = frac.fill_null("").str.pad_end(digits + 1, "0")
    sub = padded.str.slice(0, digits).cast(pl.Int64, strict=False) if digits else pl.lit(0)
    carry = (padded.str.slice(digits, 1).cast(pl.Int64, strict=False) >= 5).cast(pl.Int64)
    ns = pl.select(
        pl.when(frac_ok & (whole != "") & (whole != "-"))
        .then(magnitude * scale + sub + carry)
        .otherwise(None)
        .alias("ns")
    ).to_series()
    ns = pl.select(pl.when(negative).then(-ns).otherwise(ns)).to_series().alias(raw.name)
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
        value = Decimal(t)
        # Out of int64 ns long before 10^20 us: reject before multiplying, so '1e1000000'
        # neither raises decimal.Overflow nor builds a million-digit integer.
        if not value.is_finite() or (value and value.adjusted() > 20):  # '0e30' is 0
            return None
        value = value * scale
    except ArithmeticError:  # InvalidOperation (not a number), Overflow
        return None
    ns = int(value.to_integral_value(rounding="ROUND_HALF_UP"))
    return ns if -(2**63) <= ns < 2**63 else None


_CONTAINERS = (list, dict)


def flatten_nested(values: list[Any]) -> list[Any]:
    """Arrays and objects among decoded values -> their JSON text (flagged later as odd).

    Polars' Series constructors infer nested types when they meet a list, at a cost that
    grows ~depth^2.6 (a 1500-deep array in a `ts` took minutes and gigabytes); scalar values
    pass unchanged. One C-level pass over the types (~0.5 ms per 30k-event piece)."""
    types = set(map(type, values))
    if list not in types and dict not in types:
        return values
    return [msgspec.json.encode(v).decode() if isinstance(v, _CONTAINERS) else v for v in values]


def us_values_to_ns(values: list[Any]) -> tuple[pl.Series, pl.Series]:
    """Decoded ts/dur values (int, exact decimal text from msgspec's float_hook, numeric
    string, None, anything else) -> (Int64 ns, invalid mask), exactly, without float64.

    Fast paths for what profilers write: integers (x 1000), and text with exactly three
    decimals (drop the point, cast the digits). Everything else goes through `to_ns`.
    """
    n = len(values)
    values = flatten_nested(values)
    first = next((v for v in values if v is not None), None)
    # Polars' Int64 constructor takes True as 1: a boolean among ints must not become 1 µs
    # (it is invalid, as it is when the first value is not an int).
    if (
        isinstance(first, int)
        and not isinstance(first, bool)
        and bool not in set(map(type, values))
    ):
        try:
            ints = pl.Series(values, dtype=pl.Int64)
            if bool((ints.is_null() | (ints.abs() <= _MAX_WHOLE)).all()):
                return ints * 1000, pl.repeat(False, n, dtype=pl.Boolean, eager=True)
        except (TypeError, OverflowError, pl.exceptions.PolarsError):
            pass
    try:
        text = pl.Series(values, dtype=pl.String)
    except (TypeError, pl.exceptions.PolarsError):
        text = pl.Series([None if v is None else str(v) for v in values], dtype=pl.String)
    ns = fast_us_ns(text)
    # Texts starting with "." take the exact path too: the fast one would read '.-00' as
    # '-00' = 0 (a prefix test is cheap; such texts are rare).
    rest = (ns.is_null() & text.is_not_null()) | text.str.starts_with(".").fill_null(False)
    if rest.any():
        where = rest.arg_true()
        fixed, _ = to_ns(text.gather(where))
        ns = ns.scatter(where, fixed)
    return ns, ns.is_null() & text.is_not_null()


def fast_us_ns(text: pl.Series) -> pl.Series:
    """Microsecond texts -> Int64 ns on the fast path profilers' numbers take: exactly three
    decimals (the digits without the point) or no point (x 1000, within range); null where
    the exact path (`to_ns`) must decide. One query per column: it runs once per piece."""
    t, digits, dot = pl.col("t"), pl.col("digits"), pl.col("dot")
    # digits and dot computed once as columns (an expression used twice in one select runs twice)
    return (
        pl.DataFrame({"t": text})
        .lazy()
        .with_columns(
            t.str.replace(".", "", literal=True, n=1).cast(pl.Int64, strict=False).alias("digits"),
            t.str.find(".", literal=True).cast(pl.Int64).alias("dot"),
        )
        .select(
            pl.when(t.str.len_bytes().cast(pl.Int64) - dot == 4)
            .then(digits)
            .when(dot.is_null() & (digits.abs() <= _MAX_WHOLE))
            .then(digits * 1000)
            .alias("ns")
        )
        .collect()
        .to_series()
    )


def decode_args(args: list[str | None]) -> list[dict[str, Any]]:
    """JSON args texts -> dicts (small populations only: M and C events)."""
    out: list[dict[str, Any]] = []
    for text in args:
        try:
            value = msgspec.json.decode(text) if text else {}
        except msgspec.DecodeError:
            value = {}
        out.append(value if isinstance(value, dict) else {})
    return out
