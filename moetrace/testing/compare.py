"""Compare two traces frame by frame and say where they differ (for round-trip tests)."""

from __future__ import annotations

import polars as pl

from moetrace.trace.model import SCHEMAS, Trace

# The order a reader gives counters back in: by track, then named before unnamed, name, time.
_COUNTER_ORDER = ["track", pl.col("name").is_null(), "name", "ts"]


def canonical_order(trace: Trace) -> Trace:
    """`trace` with its rows in the order the readers produce: tracks by track id, events by
    event id, counters by (track, name, ts); deps unchanged. Meta is kept."""
    return Trace(
        trace.events.sort("id"),
        trace.tracks.sort("track"),
        trace.deps,
        trace.counters.sort(_COUNTER_ORDER, maintain_order=True),
        trace.meta,
    )


def trace_diff(actual: Trace, expected: Trace, *, ignore_args: bool = False) -> str:
    """The first frame (events, tracks, deps, counters) that differs, printed both ways;
    "" when all four are equal, row order included."""
    for table in SCHEMAS:
        a: pl.DataFrame = getattr(actual, table)
        b: pl.DataFrame = getattr(expected, table)
        if ignore_args and table == "events":
            a, b = a.drop("args"), b.drop("args")
        if not a.equals(b):
            return f"{table} differ:\nactual:\n{a}\nexpected:\n{b}"
    return ""


def assert_trace_equal(
    actual: Trace,
    expected: Trace,
    *,
    reorder: bool = False,
    meta: bool = False,
    ignore_args: bool = False,
) -> None:
    """Assert the four frames of `actual` equal those of `expected`, row order included.

    reorder: put `expected` in the readers' canonical row order first (a file format that
    stores rows by id, such as .pftrace). meta: the meta dicts must be equal too.
    """
    if reorder:
        expected = canonical_order(expected)
    diff = trace_diff(actual, expected, ignore_args=ignore_args)
    assert not diff, diff
    if meta:
        assert actual.meta == expected.meta, f"meta differ:\n{actual.meta}\n{expected.meta}"
