"""Binning against slow, obvious references: busy time, counts, glyphs, odd lanes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from moetrace.tui.binning import (
    CRITICAL,
    GLYPHS,
    MERGED,
    IntervalIndex,
    bin_lane,
    event_at,
    glyph_text,
    nearest_event,
    overlay_cells,
    runs,
)


def slow_busy(starts: np.ndarray, ends: np.ndarray, t: float) -> float:
    return float(sum(max(0.0, min(e, t) - s) for s, e in zip(starts, ends, strict=True)))


def disjoint_lane(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    durs = rng.integers(1, 50, n).astype(float)
    gaps = rng.integers(0, 30, n).astype(float)
    ends = np.cumsum(durs + gaps)
    return ends - durs, ends


@pytest.mark.parametrize("seed", range(5))
def test_busy_below_matches_slow_sum_disjoint(seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts, ends = disjoint_lane(rng, 200)
    index = IntervalIndex(starts, ends, np.arange(200), np.zeros(200, np.int8))
    ts = rng.uniform(-10, ends[-1] + 10, 50)
    got = index.busy_below(ts)
    want = [slow_busy(starts, ends, t) for t in ts]
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_busy_and_count_match_slow_reference_overlapping(seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts = rng.uniform(0, 1000, 300)
    ends = starts + rng.uniform(0.5, 80, 300)
    index = IntervalIndex(starts, ends, disjoint=False)
    lo = rng.uniform(0, 1000, 40)
    hi = lo + rng.uniform(0.1, 100, 40)
    np.testing.assert_allclose(
        index.busy_below(hi), [slow_busy(starts, ends, t) for t in hi], rtol=1e-9
    )
    want_count = [int(np.sum((starts < b) & (ends > a))) for a, b in zip(lo, hi, strict=True)]
    assert index.count_meeting(lo, hi).tolist() == want_count


def test_half_blocks_mark_sub_cell_edges() -> None:
    # 10 cells of 10 ns over [0, 100); one event [25, 45): cell 2 has only its right half busy,
    # cell 3 is full, cell 4 only its left half.
    index = IntervalIndex(np.array([25.0]), np.array([45.0]), np.array([7]), np.array([0], np.int8))
    binned = bin_lane(index, 0.0, 100.0, 10)
    assert glyph_text(binned.glyphs) == "  ▐█▌     "
    assert binned.keys.tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 0, 0]


def test_sliver_shorter_than_half_a_cell() -> None:
    index = IntervalIndex(
        np.array([11.0, 38.0]), np.array([12.0, 39.0]), np.arange(2), np.zeros(2, np.int8)
    )
    assert glyph_text(bin_lane(index, 0.0, 40.0, 4).glyphs) == " ▏ ▕"


def test_merged_cell_is_a_bar_of_its_busy_fraction() -> None:
    # Cell 0 [0, 8): four events of 1 ns = half busy -> level 4 of 8 (▄); cell 1: idle.
    starts = np.array([0.0, 2.0, 4.0, 6.0])
    index = IntervalIndex(starts, starts + 1, np.arange(4), np.zeros(4, np.int8))
    binned = bin_lane(index, 0.0, 16.0, 2)
    assert glyph_text(binned.glyphs) == "▄ "
    assert binned.keys[0] & MERGED and binned.keys[1] == 0


def test_kind_of_a_cell_is_its_first_event() -> None:
    index = IntervalIndex(
        np.array([0.0, 10.0]), np.array([10.0, 20.0]), np.arange(2), np.array([1, 2], np.int8)
    )
    binned = bin_lane(index, 0.0, 20.0, 2)
    assert binned.keys.tolist() == [2, 3]


def test_instants_and_zero_length_events() -> None:
    index = IntervalIndex(
        np.array([5.0, 15.0]), np.array([5.0, 15.0]), np.arange(2), np.zeros(2, np.int8)
    )
    assert len(index.starts) == 0 and len(index.instants) == 2
    assert glyph_text(bin_lane(index, 0.0, 30.0, 3).glyphs) == "││ "


def test_summary_lane_scales_by_lane_count() -> None:
    # Two lanes, one busy all the time, one idle: the summary is half busy (▄) everywhere.
    index = IntervalIndex.merged([IntervalIndex(np.array([0.0]), np.array([100.0]))])
    binned = bin_lane(index, 0.0, 100.0, 4, scale=2)
    assert glyph_text(binned.glyphs) == "▄▄▄▄"


def test_badly_nested_lane_is_clipped_not_broken() -> None:
    index = IntervalIndex(
        np.array([0.0, 5.0]), np.array([10.0, 8.0]), np.arange(2), np.zeros(2, np.int8)
    )
    assert np.all(np.diff(index.ends) >= 0) and np.all(index.ends >= index.starts)


def test_lookups() -> None:
    index = IntervalIndex(
        np.array([0.0, 20.0]), np.array([10.0, 30.0]), np.array([5, 6]), np.zeros(2, np.int8)
    )
    assert event_at(index, 25.0) == 1 and event_at(index, 15.0) is None
    assert nearest_event(index, 8.0, 22.0, 21.0) == 1
    assert overlay_cells(index, 0.0, 40.0, 4).tolist() == [True, False, True, False]


def test_runs_encode_style_changes() -> None:
    keys = np.array([0, 0, 1, 1, 1, CRITICAL, 0])
    assert runs(keys) == [(0, 2, 0), (2, 5, 1), (5, 6, CRITICAL), (6, 7, 0)]
    # one character per glyph code, the last two the overlays' own (critical ▓, exposed ▒)
    assert len(GLYPHS) == 18 and GLYPHS[16:] == "▓▒"


def test_million_events_on_one_lane_bin_fast_and_exactly() -> None:
    rng = np.random.default_rng(0)
    starts, ends = disjoint_lane(rng, 1_000_000)
    index = IntervalIndex(starts, ends, np.arange(len(starts)), np.zeros(len(starts), np.int8))
    t = time.perf_counter()
    for _ in range(10):
        binned = bin_lane(index, 0.0, float(ends[-1]), 200)
    per_frame = (time.perf_counter() - t) / 10
    assert per_frame < 0.05
    occupancy = index.occupancy(0.0, float(ends[-1]), 200)
    total_busy = float(np.sum(ends - starts))
    np.testing.assert_allclose(occupancy.sum() * ends[-1] / 200, total_busy, rtol=1e-9)
    assert np.all(binned.keys & MERGED)
