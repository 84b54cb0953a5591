"""`nesting_depth` and `overflow_lanes` against their definitions, computed the slow
obvious way, on arbitrary (overlapping, tied, zero-length) slices, narrow and wide ranges."""

from __future__ import annotations

import numpy as np
import pytest

from moetrace.testing.nesting import definition_depth, definition_lanes
from moetrace.trace.nesting import MAX_OVERFLOW_LANE, nesting_depth, overflow_lanes


@pytest.mark.parametrize("scale", ["narrow", "wide_times", "wide_tracks"])
def test_depth_and_lanes_match_definition(scale: str) -> None:
    rng = np.random.default_rng(11)
    for case in range(150):
        n = int(rng.integers(1, 30))
        track = rng.integers(0, 3, n).astype(np.int64)
        ts = rng.integers(0, 15, n).astype(np.int64)
        dur = rng.integers(0, 8, n).astype(np.int64)
        if case % 4 == 0:  # many exact ties of start
            ts = (ts // 5) * 5
        if scale == "wide_times":  # spans beyond 2**40 ns: dense time ranks
            ts = ts * (2**38) - 2**50
            dur = dur * (2**38)
        if scale == "wide_tracks":  # track keys beyond 2**22: dense track codes
            track = track * (2**40) + 7
        tl, sl, dl = track.tolist(), ts.tolist(), dur.tolist()
        depth, bad = nesting_depth(track, ts, dur)
        ref_depth, ref_bad = definition_depth(tl, sl, dl)
        assert depth.tolist() == ref_depth, case
        assert bad.tolist() == ref_bad, case
        if scale != "wide_tracks":  # lanes are packed into track * 65 + lane
            lane, lane_depth = overflow_lanes(track, ts, dur, MAX_OVERFLOW_LANE)
            ref_lane, ref_lane_depth = definition_lanes(tl, sl, dl)
            assert lane.tolist() == ref_lane, case
            assert lane_depth.tolist() == ref_lane_depth, case


def test_unsorted_input_sorted_input_same_depths() -> None:
    """The shortcut for files already in time order and the general sort agree."""
    rng = np.random.default_rng(5)
    track = rng.integers(0, 4, 400)
    ts = np.sort(rng.integers(0, 2000, 400))
    dur = rng.integers(0, 50, 400)
    depth, bad = nesting_depth(track, ts, dur)
    perm = rng.permutation(400)
    depth_p, _ = nesting_depth(track[perm], ts[perm], dur[perm])
    ref_depth, ref_bad = definition_depth(track.tolist(), ts.tolist(), dur.tolist())
    assert depth.tolist() == ref_depth and bad.tolist() == ref_bad
    # A permutation changes only which of two identical slices comes first: depths of
    # slices with a unique (track, ts, dur) do not move.
    keys = list(zip(track.tolist(), ts.tolist(), dur.tolist(), strict=True))
    unique = np.array([keys.count(k) == 1 for k in keys])
    assert np.array_equal(depth_p[np.argsort(perm)][unique], depth[unique])
