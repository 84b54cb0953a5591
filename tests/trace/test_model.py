"""The Trace model: schemas, nesting depth against a slow stack reference, validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings

from moetrace.testing.nesting import stack_depth
from moetrace.testing.strategies import nested_slices
from moetrace.trace.model import Trace, TraceValidationError
from moetrace.trace.nesting import nesting_depth


@settings(max_examples=200, deadline=None)
@given(nested_slices())
def test_depth_matches_stack_walk_on_nested_slices(
    ev: tuple[list[int], list[int], list[int]],
) -> None:
    track, ts, dur = ev
    depth, bad = nesting_depth(np.array(track), np.array(ts), np.array(dur))
    ref_depth, _ = stack_depth(track, ts, dur)
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


def test_conform_aligns_unaligned_chunks_without_changing_values() -> None:
    """A loaded trace's columns come in different chunks (text in batches, computed columns
    whole): conform gives every column the same chunks, and the same values as a one-chunk
    copy of the input."""
    names = pl.concat(
        [pl.Series("name", ["a", "b", "c"]), pl.Series("name", ["d"]), pl.Series("name", ["e"])],
        rechunk=False,
    )
    ts = pl.concat([pl.Series("ts", [5, 6]), pl.Series("ts", [7, 8, 9])], rechunk=False)
    frame = pl.DataFrame(
        [
            pl.Series("id", [0, 1, 2, 3, 4], dtype=pl.UInt32),  # one chunk
            pl.Series("track", [0, 0, 1, 1, 1], dtype=pl.UInt32),
            names,  # 3 + 1 + 1
            ts,  # 2 + 3: another layout
            pl.Series("dur", [1, 1, 1, 1, 1], dtype=pl.Int64),
            pl.Series("kind", ["compute"] * 5),
        ]
    )
    assert len({tuple(frame[c].chunk_lengths()) for c in frame.columns}) > 1
    trace = Trace.from_frames(events=frame)
    layouts = {tuple(trace.events[c].chunk_lengths()) for c in trace.events.columns}
    assert len(layouts) == 1
    expected = Trace.from_frames(events=frame.rechunk()).events
    assert trace.events.equals(expected)
    assert trace.events["name"].to_list() == ["a", "b", "c", "d", "e"]
    assert trace.events["ts"].to_list() == [5, 6, 7, 8, 9]


def test_conform_aligns_chunks_without_copying() -> None:
    """Aligning chunks must cut columns, not copy them: at 1M events a copy of every
    numeric column was ~45 MB at the end of the load (the memory regression this guards).
    Every chunk of every aligned column is a view into the input column's own buffer, at
    the offset of its first row."""

    def address(series: pl.Series) -> int:
        return int(series.to_numpy().__array_interface__["data"][0])  # zero-copy: one chunk

    ts = pl.concat(
        [pl.Series("ts", [5, 6, 7]), pl.Series("ts", [8]), pl.Series("ts", [9, 10])],
        rechunk=False,
    )
    id_ = pl.Series("id", [0, 1, 2, 3, 4, 5], dtype=pl.UInt32)  # one chunk
    dur = pl.concat([pl.Series("dur", [1, 1]), pl.Series("dur", [2, 2, 2, 2])], rechunk=False)
    before = {
        "id": [(0, address(id_))],
        "ts": [(0, address(c)) for c in ts.get_chunks()],
        "dur": [(0, address(c)) for c in dur.get_chunks()],
    }
    starts = {"ts": [0, 3, 4], "dur": [0, 2], "id": [0]}
    frame = pl.DataFrame([id_, pl.Series("track", [0] * 6, dtype=pl.UInt32), ts, dur])
    events = Trace.from_frames(events=frame).events
    assert len({tuple(events[c].chunk_lengths()) for c in events.columns}) == 1
    assert events["ts"].to_list() == [5, 6, 7, 8, 9, 10]
    for name, width in (("id", 4), ("ts", 8), ("dur", 8)):
        row = 0
        for chunk in events[name].get_chunks():
            # the input chunk holding this row, and the row's address inside it
            k = max(i for i, s in enumerate(starts[name]) if s <= row)
            expected = before[name][k][1] + (row - starts[name][k]) * width
            assert address(chunk) == expected, (name, row)
            row += len(chunk)


def test_deps_come_in_one_order_whatever_order_they_are_given(tmp_path: Path) -> None:
    """Readers build deps by joins whose row order varies run to run; writers number flows by
    row, so the Trace fixes the order (src, dst, kind) and the written bytes are the same."""
    from moetrace.trace.io import write_trace

    events = {
        "id": [0, 1, 2, 3],
        "track": [0, 0, 1, 1],
        "name": ["a", "b", "k1", "k2"],
        "kind": ["host", "host", "compute", "compute"],
        "ts": [0, 10, 20, 30],
        "dur": [5, 5, 5, 5],
    }
    tracks = {"track": [0, 1], "pid": ["p", "p"], "tid": ["t", "s"], "unit": ["cpu", "stream"]}
    edges = [(1, 3, "launch"), (0, 2, "launch"), (0, 3, "sync"), (1, 2, "launch")]
    written: list[bytes] = []
    for order in (edges, edges[::-1], [edges[2], edges[0], edges[3], edges[1]]):
        deps = {
            "src": [e[0] for e in order],
            "dst": [e[1] for e in order],
            "kind": [e[2] for e in order],
        }
        trace = Trace.from_frames(events, tracks, deps)
        assert trace.deps.rows() == [
            (0, 2, "launch"),
            (0, 3, "sync"),
            (1, 2, "launch"),
            (1, 3, "launch"),
        ]
        out = tmp_path / f"t{len(written)}.json"
        write_trace(trace, out)
        written.append(out.read_bytes())
    assert written[0] == written[1] == written[2]
