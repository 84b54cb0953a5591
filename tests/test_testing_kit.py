"""The testing kit itself: its comparator fails when it should, and it needs no hypothesis."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest

from moetrace.testing import assert_trace_equal, kineto_like, trace_diff
from moetrace.trace.model import Trace


def test_assert_trace_equal_names_the_first_differing_frame() -> None:
    trace = kineto_like()
    assert trace_diff(trace, trace) == ""
    shifted = Trace(
        trace.events.with_columns(pl.col("ts") + 1), trace.tracks, trace.deps, trace.counters
    )
    assert trace_diff(shifted, trace).startswith("events differ")
    with pytest.raises(AssertionError, match="events differ"):
        assert_trace_equal(shifted, trace)


def test_reorder_puts_the_expected_trace_in_reader_order_and_meta_is_opt_in() -> None:
    trace = kineto_like()
    reversed_rows = Trace(
        trace.events.reverse(), trace.tracks.reverse(), trace.deps, trace.counters, {}
    )
    with pytest.raises(AssertionError, match="events differ"):
        assert_trace_equal(trace, reversed_rows)
    assert_trace_equal(trace, reversed_rows, reorder=True)  # frames equal after reordering
    with pytest.raises(AssertionError, match="meta differ"):
        assert_trace_equal(trace, reversed_rows, reorder=True, meta=True)


def test_importing_the_kit_does_not_import_hypothesis() -> None:
    code = "import sys, moetrace.testing; print('hypothesis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
