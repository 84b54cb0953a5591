"""The lane tree: grouping, ordering, collapse state, filter, id lookups, summaries."""

from __future__ import annotations

import numpy as np
import polars as pl
from tui_helpers import located

from moetrace.testing.synthetic import synthetic_trace
from moetrace.trace.model import Trace
from moetrace.tui.lanes import LaneModel, search_events


def test_rows_group_rank_unit_track() -> None:
    model = LaneModel(synthetic_trace(ranks=2, events_per_lane=5))
    rows = model.rows(set())
    kinds = [r.kind for r in rows[:11]]
    assert kinds == [
        "rank",
        "unit",
        "lane",
        "lane",
        "unit",
        "lane",
        "lane",
        "unit",
        "lane",
        "unit",
        "lane",
    ]
    assert [r.label for r in rows if r.kind == "unit"][:4] == ["aic", "aiv", "link", "other"]
    assert rows[11].key == ("rank", 1)


def test_collapse_and_filter() -> None:
    model = LaneModel(synthetic_trace(ranks=3, events_per_lane=5))
    rows = model.rows({("rank", 0), ("unit", 1, "aic")})
    assert rows[0].key == ("rank", 0) and not rows[0].expanded and rows[1].key == ("rank", 1)
    unit_aic = next(r for r in rows if r.key == ("unit", 1, "aic"))
    assert not unit_aic.expanded
    assert not any(r.kind == "lane" and r.rank == 1 and r.unit == "aic" for r in rows)
    link_only = model.rows(set(), "link")
    assert {r.unit for r in link_only if r.kind == "lane"} == {"link"}
    assert len([r for r in link_only if r.kind == "lane"]) == 3


def test_locate_and_lanes_of_agree_with_the_frames() -> None:
    trace = synthetic_trace(ranks=2, events_per_lane=7, seed=4)
    model = LaneModel(trace)
    ev = trace.events.sort("id")
    sample = ev.sample(20, seed=1)
    where = model.lanes_of(sample["id"].to_numpy())
    for (track, depth), row in zip(where.tolist(), sample.iter_rows(named=True), strict=True):
        assert (track, depth) == (row["track"], row["depth"])
        lane, start, end = located(model, row["id"])
        assert (lane.track, lane.depth) == (track, depth)
        assert start == row["ts"] - model.origin and end == start + row["dur"]
    assert model.lanes_of(np.array([10**8])).tolist() == [[-1, -1]]
    assert model.locate(10**8) is None


def test_summary_counts_top_level_non_marker_events_of_the_group() -> None:
    trace = synthetic_trace(ranks=2, events_per_lane=6, seed=2)
    model = LaneModel(trace)
    joined = trace.events_with_tracks()
    for rank in (0, 1):
        want = joined.filter((pl.col("rank") == rank) & (pl.col("kind") != "marker")).height
        assert len(model.summary(("rank", rank))) == want
        assert model.summary_scale(("rank", rank)) == 6
    aic = joined.filter((pl.col("rank") == 0) & (pl.col("unit") == "aic")).height
    assert len(model.summary(("unit", 0, "aic"))) == aic


def test_search_is_literal_and_case_insensitive() -> None:
    trace = Trace.from_frames(
        {
            "id": [0, 1, 2],
            "track": [0, 0, 0],
            "name": ["A.b", "axb", "[x]"],
            "kind": ["compute"] * 3,
            "ts": [0, 10, 20],
            "dur": [5, 5, 5],
        },
        {"track": [0], "rank": [0], "unit": ["aic"]},
    )
    assert search_events(trace, "a.B").tolist() == [0]
    assert search_events(trace, "[x").tolist() == [2]
    assert search_events(trace, "").tolist() == []


def test_name_boxes_and_fit_cells_by_hand() -> None:
    from moetrace.tui.binning import IntervalIndex, name_boxes
    from moetrace.tui.format import fit_cells, fit_label

    # 10 cells of 10 ns over [0, 100): slices [5, 57) -> whole cells 1..4 (cols 1-4, 4 cells),
    # [60, 70) -> 1 cell (too thin), [72, 200) -> cells 8, 9 (cut by the view: 2 cells).
    index = IntervalIndex(
        np.array([5.0, 60.0, 72.0]), np.array([57.0, 70.0, 200.0]), np.array([7, 8, 9])
    )
    where, first, last = name_boxes(index, 0.0, 100.0, 10)
    assert where.tolist() == [0] and first.tolist() == [1] and last.tolist() == [5]
    assert fit_cells("ab", 4) == [" ", "a", "b", " "]
    assert fit_cells("matmul_12", 4) == ["m", "a", "t", "…"]
    # Wide characters at their width: two cells each, the second ""; never '?'.
    assert fit_cells("名字", 4) == ["名", "", "字", ""]
    assert fit_cells("名字x", 4) == ["名", "", " ", "…"]  # 字 would be cut in half: a space
    assert fit_cells("🚀 moe", 6) == ["🚀", "", " ", "m", "o", "e"]
    assert fit_cells("e\u0301x", 3) == [" ", "e\u0301", "x"]  # a combining accent: no cell
    # cut labels keep their tail ("3"); a wide character cut in half becomes a space
    assert fit_label("专家 3", 6) == "专 …3 " and fit_label("专家 3", 5) == "专…3 "
    assert fit_label("专家", 4) == "专 " + " " and fit_label("专家 3", 7) == "专家 3 "


def test_names_of_follow_event_ids(small_trace: Trace) -> None:
    model = LaneModel(small_trace)
    ids = small_trace.events["id"].to_numpy()[[5, 0, 17]]
    expected = small_trace.events["name"].to_list()
    assert model.names_of(ids) == [expected[5], expected[0], expected[17]]


def test_step_levels_by_hand() -> None:
    from moetrace.tui.binning import step_levels

    # samples: t=10 -> 4, t=12 -> 8, t=35 -> 0, t=70 -> 2; cells of 10 ns over [0, 100).
    ts = np.array([10.0, 12.0, 35.0, 70.0])
    values = np.array([4.0, 8.0, 0.0, 2.0])
    levels = step_levels(ts, values, 0.0, 100.0, 10, 0.0, 8.0)
    # cell 0 before any sample; cell 1 has 4 and 8 -> 8; cell 2 holds 8; cell 3 holds 8 then
    # 0 at 35 -> 8; cells 4-6 hold 0; cell 7 has 2; cells 8-9 hold 2.
    assert levels.tolist() == [-1, 8, 8, 8, 0, 0, 0, 2, 2, 2]


def test_rankless_labels_say_so() -> None:
    from moetrace.tui.format import count_text, where_text

    assert count_text(0, "rank") == "no rank ids" and count_text(1, "rank") == "1 rank"
    assert count_text(8, "rank") == "8 ranks"
    assert where_text(None, None) == "whole trace" and where_text(3, None) == "r3"
    assert where_text(3, 1) == "r3 s1" and where_text(None, 2) == "s2"
