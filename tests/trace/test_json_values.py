"""Exact µs -> ns parsing: the fast vectorised paths agree with a Decimal reference."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.trace.formats.chrome.values import to_ns, us_values_to_ns


def _reference(value: Any) -> int | None:
    if value is None:
        return None
    try:
        ns = (Decimal(str(value)) * 1000).to_integral_value(rounding=ROUND_HALF_UP)
    except ArithmeticError:
        return None
    return int(ns) if -(2**63) <= ns < 2**63 else None


_decimal_text = st.builds(
    lambda whole, frac, neg: (
        ("-" if neg else "") + str(whole) + ("." + frac if frac is not None else "")
    ),
    st.integers(0, 9_999_999_999_999_999),
    st.one_of(st.none(), st.text("0123456789", min_size=1, max_size=8)),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_decimal_text, st.integers(-(2**53), 2**53), st.none()), max_size=30))
def test_fast_paths_match_decimal(values: list[Any]) -> None:
    got, invalid = us_values_to_ns(values)
    want = [_reference(v) for v in values]
    assert got.to_list() == want
    assert invalid.to_list() == [
        v is not None and w is None for v, w in zip(values, want, strict=True)
    ]
    text = pl.Series([None if v is None else str(v) for v in values], dtype=pl.String)
    assert to_ns(text)[0].to_list() == want


def test_epoch_string_is_exact() -> None:
    got, _ = us_values_to_ns(["1736408883688177.930", "1736408883688177.931", "1e-3", "soon"])
    assert got.to_list() == [1736408883688177930, 1736408883688177931, 1, None]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            _decimal_text,
            st.text("0123456789.-e+ ", min_size=1, max_size=12),
            st.sampled_from(["1736408883688177.930", "0.001", "12.", "1.2345", "1e3"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_text_values_match_decimal(values: list[str]) -> None:
    """Texts of any shape (odd signs, several dots, exponents): exact ns as the Decimal
    reference, and exactly the rows Decimal rejects are flagged invalid ("0..", "--0" were 0)."""
    got, invalid = us_values_to_ns(values)
    want = [_reference(v) for v in values]
    assert got.to_list() == want
    assert invalid.to_list() == [w is None for w in want]


def test_malformed_numeric_texts_are_invalid_not_zero() -> None:
    """Regressions the property test found: each of these once parsed as 0 ns or raised."""
    odd = ["0..", "--0", ".-00", "1e1000000"]
    got, invalid = us_values_to_ns(odd)
    assert got.to_list() == [None, None, None, None]
    assert invalid.to_list() == [True, True, True, True]
    assert us_values_to_ns([".5"])[0].to_list() == [500]
