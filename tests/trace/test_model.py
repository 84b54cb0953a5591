"""The Trace model: schemas, nesting depth against a slow stack reference, validation."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.trace.model import Trace, TraceValidationError
from moetrace.trace.nesting import nesting_depth


def slow_depth(track: list[int], ts: list[int], dur: list[int]) -> tuple[list[int], list[bool]]:
    """Obvious stack walk per track in (ts, -dur, index) order."""
    n = len(ts)
    order = sorted(range(n), key=lambda i: (track[i], ts[i], -dur[i], i))
    depth = [0] * n
    bad = [False] * n
    stack: list[int] = []
    cur_track = None
    for i in order:
        if track[i] != cur_track:
            stack, cur_track = [], track[i]
        while stack and ts[stack[-1]] + dur[stack[-1]] <= ts[i]:
            stack.pop()
        depth[i] = len(stack)
        if stack and ts[stack[-1]] + dur[stack[-1]] < ts[i] + dur[i]:
            bad[i] = True
        stack.append(i)
    return depth, bad


@st.composite
def nested_events(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """Random well-nested slices (built by recursive splitting) on a few tracks."""
    track, ts, dur = [], [], []

    def fill(t: int, lo: int, hi: int, level: int) -> None:
        if level > 4 or hi - lo < 1:
            return
        k = draw(st.integers(0, 3))
        cuts = sorted(draw(st.lists(st.integers(lo, hi), min_size=2 * k, max_size=2 * k)))
        for a, b in zip(cuts[::2], cuts[1::2], strict=True):
            track.append(t)
            ts.append(a)
            dur.append(b - a)
            fill(t, a, b, level + 1)

    for t in range(draw(st.integers(1, 3))):
        fill(t, 0, 1000, 0)
    return track, ts, dur


@settings(max_examples=200, deadline=None)
@given(nested_events())
def test_depth_matches_stack_walk_on_nested_slices(
    ev: tuple[list[int], list[int], list[int]],
) -> None:
    track, ts, dur = ev
    depth, bad = nesting_depth(np.array(track), np.array(ts), np.array(dur))
    ref_depth, _ = slow_depth(track, ts, dur)
    assert depth.tolist() == ref_depth
    assert not bad.any()


def test_partial_overlap_is_flagged() -> None:
    depth, bad = nesting_depth(np.array([0, 0, 0]), np.array([0, 5, 20]), np.array([10, 10, 1]))
    assert depth.tolist() == [0, 1, 0]
    assert bad.tolist() == [False, True, False]


def test_zero_length_events_at_a_slice_boundary() -> None:
    # instant at the start of a slice is inside it; at its end is not
    depth, bad = nesting_depth(np.array([0, 0, 0]), np.array([0, 0, 10]), np.array([10, 0, 0]))
    assert depth.tolist() == [0, 1, 0]
    assert not bad.any()


def _tiny() -> Trace:
    return Trace.from_frames(
        events={
            "id": [0, 1, 2],
            "track": [0, 0, 1],
            "name": ["a", "b", "c"],
            "cat": ["x", "x", "y"],
            "kind": ["compute", "compute", "comm"],
            "ts": [0, 10, 5],
            "dur": [100, 20, 50],
        },
        tracks={
            "track": [0, 1],
            "rank": [0, 0],
            "pid": ["0", "0"],
            "tid": ["1", "2"],
            "unit": ["aic", "link"],
        },
        deps={"src": [1], "dst": [2], "kind": ["data"]},
        compute_depth=True,
    )


def test_from_frames_casts_and_validates() -> None:
    tr = _tiny()
    assert tr.events.schema["kind"] == pl.Enum(
        ["compute", "comm", "memory", "host", "marker", "other"]
    )
    assert tr.events["depth"].to_list() == [0, 1, 0]
    assert tr.problems() == []
    assert tr.ranks == [0]
    assert tr.window() == (0, 100)


def test_validate_names_every_problem() -> None:
    tr = _tiny()
    broken = Trace(
        events=tr.events.with_columns(
            pl.Series("id", [0, 0, 2], dtype=pl.UInt32), pl.Series("dur", [100, -1, 50])
        ),
        tracks=tr.tracks,
        deps=tr.deps.with_columns(pl.Series("dst", [9], dtype=pl.UInt32)),
    )
    found = broken.problems()
    assert any("duplicate ids" in p for p in found)
    assert any("negative durations" in p for p in found)
    assert any("missing events" in p for p in found)
    with pytest.raises(TraceValidationError, match="duplicate ids"):
        broken.validate()


def test_bad_kind_is_a_validation_error() -> None:
    with pytest.raises(TraceValidationError):
        Trace.from_frames(
            events={
                "id": [0],
                "track": [0],
                "name": ["a"],
                "kind": ["cooking"],
                "ts": [0],
                "dur": [1],
            },
        )
