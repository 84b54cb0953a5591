"""`nesting_depth` and `overflow_lanes` against their definitions, computed the slow
obvious way, on arbitrary (overlapping, tied, zero-length) slices, narrow and wide ranges."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest

from moetrace.testing.nesting import definition_depth, definition_lanes
from moetrace.trace.nesting import MAX_OVERFLOW_LANE, nesting_depth, overflow_lanes

Column = np.ndarray | pl.Series


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


@pytest.mark.parametrize("limit", [1, 3, 8, 25])
def test_blocks_of_tracks_give_the_definition(limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run over blocks of whole tracks (as at 1M events, to bound memory), depths and lanes
    still equal the definition; every block holds whole tracks in input order."""
    from moetrace.trace import nesting

    monkeypatch.setattr(nesting, "BLOCK_EVENTS", limit)
    rng = np.random.default_rng(17)
    blocked = 0
    for case in range(120):
        n = int(rng.integers(1, 60))
        track = rng.integers(0, int(rng.integers(1, 9)), n).astype(np.int64)
        if case % 5 == 0:  # track ids beyond uint16: the general argsort
            track = track * 70_000 + 3
        ts = rng.integers(0, 25, n).astype(np.int64)
        dur = rng.integers(0, 9, n).astype(np.int64)
        blocks = nesting.track_blocks(track)
        if blocks is not None:
            blocked += 1
            assert sorted(np.concatenate(blocks).tolist()) == list(range(n))
            owner: dict[int, int] = {}
            for b, rows in enumerate(blocks):
                for t in set(track[rows].tolist()):
                    assert owner.setdefault(t, b) == b, case  # a track is never split
                same = track[rows][1:] == track[rows][:-1]
                assert (np.diff(rows)[same] > 0).all(), case  # input order within a track
        tl, sl, dl = track.tolist(), ts.tolist(), dur.tolist()
        depth, bad = nesting_depth(track, ts, dur)
        ref_depth, ref_bad = definition_depth(tl, sl, dl)
        assert depth.tolist() == ref_depth and bad.tolist() == ref_bad, case
        lane, lane_depth = overflow_lanes(track, ts, dur, MAX_OVERFLOW_LANE)
        ref_lane, ref_lane_depth = definition_lanes(tl, sl, dl)
        assert lane.tolist() == ref_lane and lane_depth.tolist() == ref_lane_depth, case
        # ts/dur as many-chunk Polars Series (as the Chrome reader passes them)
        lane, lane_depth = overflow_lanes(track, _chunked(ts), _chunked(dur), MAX_OVERFLOW_LANE)
        assert lane.tolist() == ref_lane and lane_depth.tolist() == ref_lane_depth, case
    assert blocked > 30  # the blocked path really ran


def _chunked(values: np.ndarray) -> pl.Series:
    """`values` as an Int64 Series in chunks of 7 rows."""
    parts = [pl.Series(values[i : i + 7], dtype=pl.Int64) for i in range(0, len(values), 7)]
    return pl.concat(parts, rechunk=False)


def test_flow_binding_by_blocks_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Chrome reader's enclosing/next slice lookups give the same ids over blocks of
    whole tracks as in one pass over every slice."""
    from moetrace.trace import nesting
    from moetrace.trace.formats.chrome import phases

    rng = np.random.default_rng(23)
    for case in range(80):
        n, m = int(rng.integers(1, 50)), int(rng.integers(1, 30))
        s_track = rng.integers(0, 6, n).astype(np.uint32)
        s_ts = rng.integers(0, 40, n).astype(np.int64)
        s_dur = rng.integers(0, 12, n).astype(np.int64)
        s_depth, _ = nesting_depth(s_track.astype(np.int64), s_ts, s_dur)
        s_id = rng.permutation(n).astype(np.uint32)
        q_track = rng.integers(0, 8, m).astype(np.int64)  # tracks 6, 7: no slices
        q_ts = rng.integers(-2, 55, m).astype(np.int64)
        ts_s, dur_s = _chunked(s_ts), _chunked(s_dur)  # as the reader passes them
        cases: list[tuple[Callable[..., np.ndarray], list[Column], list[Column]]] = [
            (phases.enclosing_slice, [s_ts, s_dur, s_depth, s_id], [ts_s, dur_s, s_depth, s_id]),
            (phases.next_slice, [s_ts, s_dur, s_id], [ts_s, dur_s, s_id]),
        ]
        for find, columns, as_series in cases:
            whole = phases._by_track_blocks(find, None, s_track, columns, q_track, q_ts)
            monkeypatch.setattr(nesting, "BLOCK_EVENTS", int(rng.integers(1, 10)))
            blocks = nesting.track_blocks(s_track)
            monkeypatch.undo()
            for given in (columns, as_series):
                parts = phases._by_track_blocks(find, blocks, s_track, given, q_track, q_ts)
                assert parts.tolist() == whole.tolist(), (case, find.__name__)


def test_per_track_work_is_bounded_by_a_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory guard (no RSS threshold): on many tracks, no pass of the nesting or lane
    algorithms sees more events than a block (its whole tracks), so their per-event
    temporaries are bounded by BLOCK_EVENTS, not by the trace's size."""
    from moetrace.trace import nesting

    rng = np.random.default_rng(29)
    n, limit = 5000, 256
    track = rng.integers(0, 200, n).astype(np.int64)  # ~25 events per track
    ts = rng.integers(0, 10_000, n).astype(np.int64)
    dur = rng.integers(0, 400, n).astype(np.int64)
    longest = int(np.bincount(track).max())
    seen: list[int] = []
    one_pass = nesting._nesting_depth

    def spy(t: np.ndarray, s: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        seen.append(len(s))
        return one_pass(t, s, d)

    monkeypatch.setattr(nesting, "_nesting_depth", spy)
    monkeypatch.setattr(nesting, "BLOCK_EVENTS", limit)
    depth, bad = nesting_depth(track, ts, dur)
    lane, lane_depth = overflow_lanes(track, ts, dur, MAX_OVERFLOW_LANE)
    assert seen and max(seen) <= limit + longest
    monkeypatch.undo()  # one pass over every event: the same results
    whole_depth, whole_bad = nesting_depth(track, ts, dur)
    whole_lane, whole_lane_depth = overflow_lanes(track, ts, dur, MAX_OVERFLOW_LANE)
    assert np.array_equal(depth, whole_depth) and np.array_equal(bad, whole_bad)
    assert np.array_equal(lane, whole_lane) and np.array_equal(lane_depth, whole_lane_depth)
