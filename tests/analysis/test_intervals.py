"""Interval-set algebra (numpy, many groups at once) against a boolean-array brute force."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.analysis import intervals as iv

GROUPS = 4
SPAN = 120


@st.composite
def interval_sets(draw: st.DrawFn) -> iv.Intervals:
    n = draw(st.integers(0, 25))
    g = draw(st.lists(st.integers(0, GROUPS - 1), min_size=n, max_size=n))
    s = draw(st.lists(st.integers(0, SPAN - 25), min_size=n, max_size=n))
    d = draw(st.lists(st.integers(0, 24), min_size=n, max_size=n))
    return iv.make(g, s, [a + b for a, b in zip(s, d, strict=True)])


def cover(x: iv.Intervals, group: int) -> np.ndarray:
    """Which ns of [0, SPAN) the intervals of `group` cover."""
    c = np.zeros(SPAN, dtype=bool)
    for g, s, e in zip(x.group, x.start, x.end, strict=True):
        if g == group:
            c[s:e] = True
    return c


def is_union(x: iv.Intervals) -> bool:
    """Sorted by (group, start), non-empty, disjoint and not touching within a group."""
    ok = bool((x.end > x.start).all())
    for i in range(1, len(x)):
        same = x.group[i] == x.group[i - 1]
        ok &= bool(x.group[i] > x.group[i - 1] or (same and x.start[i] > x.end[i - 1]))
    return ok


@settings(max_examples=100, deadline=None)
@given(a=interval_sets(), b=interval_sets(), lo=st.integers(0, 50), width=st.integers(0, 70))
def test_set_operations_match_brute_force(
    a: iv.Intervals, b: iv.Intervals, lo: int, width: int
) -> None:
    ua, ub = iv.union(a), iv.union(b)
    los = np.full(GROUPS, lo, dtype=np.int64)
    his = np.full(GROUPS, lo + width, dtype=np.int64)
    window = np.zeros(SPAN, dtype=bool)
    window[lo : lo + width] = True
    Cover = Callable[[np.ndarray, np.ndarray], np.ndarray]
    results: dict[str, tuple[iv.Intervals, Cover]] = {
        "union": (ua, lambda ca, cb: ca),
        "and": (iv.intersection(ua, ub), lambda ca, cb: ca & cb),
        "minus": (iv.difference(ua, ub), lambda ca, cb: ca & ~cb),
        "or": (iv.union2(ua, ub), lambda ca, cb: ca | cb),
        "clip": (iv.union(iv.clip(a, los, his)), lambda ca, cb: ca & window),
        "complement": (
            iv.complement(iv.union(iv.clip(a, los, his)), los, his),
            lambda ca, cb: window & ~ca,
        ),
    }
    for name, (got, want) in results.items():
        assert is_union(got), name
        for g in range(GROUPS):
            expected = want(cover(a, g), cover(b, g))
            assert np.array_equal(cover(got, g), expected), (name, g)
        lengths = iv.lengths_by_group(got, GROUPS)
        assert [int(x) for x in lengths] == [
            int(want(cover(a, g), cover(b, g)).sum()) for g in range(GROUPS)
        ], name


@settings(max_examples=100, deadline=None)
@given(a=interval_sets(), q=interval_sets())
def test_covered_length_matches_brute_force(a: iv.Intervals, q: iv.Intervals) -> None:
    ua = iv.union(a)
    got = iv.covered_length(ua, q.group, q.start, q.end)
    for k in range(len(q)):
        c = cover(a, int(q.group[k]))
        assert got[k] == c[q.start[k] : q.end[k]].sum()


def test_epoch_sized_times_stay_exact() -> None:
    """Nanosecond epoch times (~1.7e18) with many groups: the packer falls back to ranks."""
    base = 1_736_405_443_881_410_320
    a = iv.make(
        [0, 0, 1, 5000],
        [base, base + 5, base + 1, base],
        [base + 10, base + 20, base + 3, base + 7],
    )
    u = iv.union(a)
    assert u.start.tolist() == [base, base + 1, base]
    assert u.end.tolist() == [base + 20, base + 3, base + 7]
    assert iv.lengths_by_group(u, 5001)[[0, 1, 5000]].tolist() == [20, 2, 7]
