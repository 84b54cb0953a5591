"""Odd and hostile traces render without errors; names are shown literally; many ranks collapse."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from textual.widgets import DataTable
from tui_helpers import lane_of, lane_text, located, model_of, report_of, running, static_text

from moetrace.testing.synthetic import one_lane_trace, synthetic_trace
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp
from moetrace.tui.lanes import LaneModel, safe_text

KEYS = ("w", "w", "d", "a", "j", "full_stop", "comma", "s", "f", "0", "c", "i", "x", "k")
HOSTILE = "[bold red]x\x1b[31m"


def one_event(
    ts: list[int], dur: list[int], names: list[str] | None = None, thread: str = "t"
) -> Trace:
    n = len(ts)
    events = {
        "id": range(n),
        "track": [0] * n,
        "name": names or ["e"] * n,
        "kind": ["compute"] * n,
        "ts": ts,
        "dur": dur,
    }
    tracks = {
        "track": [0],
        "rank": [0],
        "pid": ["1"],
        "tid": ["1"],
        "thread_name": [thread],
        "unit": ["stream"],
    }
    return Trace.from_frames(events, tracks, compute_depth=True)


def nested(depth: int) -> Trace:
    ts = list(range(depth))
    dur = [2 * (depth - i) + 10 for i in range(depth)]
    return one_event(ts, dur)


ODD = {
    "empty": lambda: Trace(),
    "one_lane": lambda: one_event([100], [50]),
    "zero_length": lambda: one_event([0, 10, 10, 20], [0, 0, 5, 0]),
    "nested_20": lambda: nested(21),
    "million_on_one_lane": lambda: one_lane_trace(1_000_000),
}


@pytest.mark.parametrize("name", list(ODD))
async def test_odd_traces_render_and_take_keys(name: str) -> None:
    trace = ODD[name]()
    app = MoetraceApp(trace, metrics=name != "million_on_one_lane")
    async with running(app, size=(120, 30)) as pilot:
        await pilot.press(*KEYS)
        await pilot.pause()
        tl = app.timeline
        for y in range(min(len(tl.rows) + 2, 10)):
            assert tl.render_line(y).cell_length == tl.label_width + tl.lanes_width
        if name == "empty":
            assert tl.rows == [] and " 0 events" in app.sub_title
        if name == "nested_20":
            assert ("track", 0) in tl.collapsed
            lanes = [r for r in tl.rows if r.kind == "lane"]
            assert len(lanes) == 1
            tl.cursor_row = tl.rows.index(lanes[0])
            await pilot.press("space")
            assert len([r for r in tl.rows if r.kind == "lane"]) == 21
        if name == "million_on_one_lane":
            text = lane_text(tl, ("lane", 0, 0))[tl.label_width :]
            # density glyphs, plus the selected event's marks (the keys above select one)
            assert set(text.strip()) <= set("▁▂▃▄▅▆▇█▌▐▏▕") | set("[]◆")


async def test_names_are_shown_literally() -> None:
    trace = one_event([0, 100], [50, 50], names=[HOSTILE, "b"], thread=f"lane {HOSTILE}")
    app = MoetraceApp(trace)
    async with running(app) as pilot:
        app.timeline.select_event(0)
        await pilot.pause()
        details = static_text(app, "#details-text")
        assert "[bold red]x\\x1b[31m" in details and "\x1b" not in details
        label = lane_text(app.timeline, ("lane", 0, 0))
        assert "[bold red]" in label and "\x1b" not in label
        await pilot.press("slash", *"[bold", "enter")
        assert app.timeline.selected == 0
        await pilot.press("4")
        cell = app.screen.query_one(DataTable).get_row_at(0)[0]
        assert "[bold red]" in str(cell) and "\x1b" not in str(cell)


def test_safe_text_escapes_control_characters() -> None:
    assert safe_text("a\x1b[31mb\x07\x9b") == "a\\x1b[31mb\\x07\\x9b"
    assert safe_text("plain [b]µs") == "plain [b]µs"


async def test_many_ranks_collapse_to_one_summary_lane_each() -> None:
    trace = synthetic_trace(ranks=256, events_per_lane=8, seed=3, with_deps=False)
    app = MoetraceApp(trace, metrics=False)
    async with running(app, size=(120, 30)) as pilot:
        tl = app.timeline
        assert len(tl.rows) == 256 and all(r.kind == "rank" for r in tl.rows)
        # A collapsed rank shows the busy share of its lanes: blank exactly where all are idle.
        model = LaneModel(trace)
        text = lane_text(tl, ("rank", 0))[tl.label_width :]
        assert text.strip() and any(c in "▁▂▃▄▅▆▇█" for c in text)
        await pilot.press("space")
        assert len(tl.rows) > 256 and tl.rows[1].kind == "unit"
        await pilot.press(
            "pagedown", "pagedown", "pagedown", "pagedown", "pagedown", "pagedown", "pagedown"
        )
        assert tl.cursor_row == 70 and int(tl.scroll_offset.y) > 0
        assert model.summary_scale(("rank", 0)) == 6


@pytest.mark.parametrize("schedule", ["tile", "sequential"])
async def test_executor_trace(schedule: str) -> None:
    run = pytest.importorskip("moetrace.executor.run")
    trace = run.simulate(ranks=8, tokens=256, schedule=schedule, seed=0)
    app = MoetraceApp(trace)
    async with running(app, size=(140, 40)) as pilot:
        assert app.report is not None
        ov = app.overlays
        assert ov is not None
        path = ov.cp_events[ov.cp_paths == ov.cp_paths[0]]
        assert len(path) > 2
        app.timeline.select_event(int(path[1]))
        await pilot.press("right_square_bracket")
        assert app.timeline.selected == int(path[2])
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert app.timeline.selected == int(path[0])
        units = {r.unit for r in app.timeline.rows if r.kind == "unit"}
        assert {"aic", "aiv", "link"} <= units
        lane = located(model_of(app.timeline), int(path[0]))[0]
        assert lane_text(app.timeline, ("lane", lane.track, lane.depth)).strip()
        # Dependency follow off the path: ] goes to the earliest-starting successor.
        on_path = set(app.report.critical_path["event_id"].drop_nulls().to_list())
        ev = trace.events.select("id", "ts")
        deps = trace.deps.filter(~pl.col("src").is_in(list(on_path))).join(
            ev, left_on="dst", right_on="id"
        )
        src = int(deps["src"][0])
        want = deps.filter(pl.col("src") == src).sort(["ts", "dst"])["dst"][0]
        app.timeline.select_event(src)
        await pilot.press("right_square_bracket")
        assert app.timeline.selected == want
        # Search: the first hit in time of a task name.
        name = trace.events["name"][0]
        await pilot.press("slash", *name, "enter")
        hits = trace.events.filter(
            pl.col("name").str.to_lowercase().str.contains(name.lower(), literal=True)
        )
        assert app.timeline.selected == hits.sort(["ts", "id"])["id"][0]


async def test_real_kineto_trace(real_traces: Path) -> None:
    io = pytest.importorskip("moetrace.trace.io")
    trace = io.load([real_traces / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz"])
    app = MoetraceApp(trace)
    async with running(app, size=(140, 40)) as pilot:
        tl = app.timeline
        stream = next(i for i, r in enumerate(tl.rows) if r.kind == "lane" and r.unit == "stream")
        tl.cursor_row = stream
        await pilot.press("full_stop")
        lane = lane_of(tl.rows[stream])
        first = trace.events.filter(
            (pl.col("track") == lane.track) & (pl.col("depth") == lane.depth)
        ).sort("ts")
        assert tl.selected == first["id"][0]
        await pilot.press("full_stop")
        assert tl.selected == first["id"][1]
        await pilot.press("slash", *"ncclKernel", "enter")
        name = trace.events.filter(pl.col("id") == tl.selected)["name"][0]
        assert "ncclkernel" in name.lower()
        hits = trace.events.filter(
            pl.col("name").str.to_lowercase().str.contains("ncclkernel", literal=True)
        )
        assert f"of {hits.height}" in static_text(app, "#status")
        await pilot.press("c", "x", "i", "w", "w", "d")
        assert tl.active_overlays == {"critical", "exposed", "gaps"}
        assert report_of(app).ranks.height >= 1
        assert np.isfinite(tl.t0)


async def test_critical_path_shows_on_collapsed_ranks() -> None:
    trace = synthetic_trace(ranks=20, events_per_lane=10, seed=2)
    app = MoetraceApp(trace)
    async with running(app, size=(120, 30)) as pilot:
        tl = app.timeline
        assert all(r.kind == "rank" for r in tl.rows)
        y = 2  # rank 0's summary row

        def gold_cells() -> int:
            return sum(
                len(seg.text)
                for seg in tl.render_line(y)
                if seg.style is not None and seg.style.bold
            )

        before = gold_cells()
        await pilot.press("c")
        assert gold_cells() > before


async def test_real_ascend_trace_comm_table_and_exposed_overlay(real_traces: Path) -> None:
    io = pytest.importorskip("moetrace.trace.io")
    trace = io.load([real_traces / "ascend" / "level0__rank0_ascend_pt__trace_view.json"])
    app = MoetraceApp(trace)
    async with running(app, size=(140, 40)) as pilot:
        comm = report_of(app).comm
        assert comm.height > 0
        await pilot.press("3")
        table = app.screen.query_one(DataTable)
        assert table.row_count == comm.height
        top = comm.sort(["exposed_ns", "dur_ns"], descending=True)["event_id"][0]
        await pilot.press("enter")
        assert app.timeline.selected == top
        name = trace.events.filter(pl.col("id") == top)["name"][0]
        assert name in static_text(app, "#details-text")
        await pilot.press("x")
        lane = located(model_of(app.timeline), int(top))[0]
        text = lane_text(app.timeline, ("lane", lane.track, lane.depth))
        assert text[app.timeline.label_width :].strip()


async def test_step_navigation_on_a_real_multi_step_trace(real_traces: Path) -> None:
    io = pytest.importorskip("moetrace.trace.io")
    trace = io.load([real_traces / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz"])
    app = MoetraceApp(trace)
    async with running(app, size=(140, 40)) as pilot:
        ranks = report_of(app).ranks
        steps = sorted(set(ranks["step"].to_list()))
        assert len(app.steps) == len(steps) > 1
        await pilot.press("g")
        first = ranks.filter(pl.col("step") == steps[0])
        lo = int(first.select(pl.min("window_start_ns")).item()) - model_of(app).origin
        hi = int(first.select(pl.max("window_end_ns")).item()) - model_of(app).origin
        tl = app.timeline
        assert tl.t0 < lo < hi < tl.t1 and tl.t1 - tl.t0 < 1.1 * (hi - lo)
        await pilot.press("g")
        second = ranks.filter(pl.col("step") == steps[1])
        assert (
            tl.t0
            < int(second.select(pl.min("window_start_ns")).item()) - model_of(app).origin
            < tl.t1
        )


async def test_braille_packs_four_collapsed_ranks_per_row() -> None:
    trace = synthetic_trace(ranks=40, events_per_lane=6, seed=5, with_deps=False)
    app = MoetraceApp(trace, metrics=False)
    async with running(app, size=(120, 30)) as pilot:
        tl = app.timeline
        await pilot.press("b")
        assert len(tl.rows) == 10 and tl.rows[0].label == "rank 0–3"
        cells = lane_text(tl, tl.rows[0].key)[tl.label_width :]
        assert all(0x2800 <= ord(c) <= 0x28FF for c in cells)
        # Independent check of one cell: dot row i lit iff rank i has a non-marker event there.
        ev = trace.events_with_tracks().filter(pl.col("kind") != "marker")
        edges = np.linspace(tl.t0, tl.t1, 2 * tl.lanes_width + 1)
        col = next(i for i, c in enumerate(cells) if c != "\u2800")
        bits = ord(cells[col]) - 0x2800
        for rank, (left_bit, right_bit) in enumerate(
            ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
        ):
            r = ev.filter(pl.col("rank") == rank)
            s = (r["ts"].to_numpy() - model_of(tl).origin).astype(float)
            e = s + r["dur"].to_numpy()
            for half, bit in ((0, left_bit), (1, right_bit)):
                a, b = edges[2 * col + half], edges[2 * col + half + 1]
                busy = bool(np.any((s < b) & (e > a)))
                assert bool(bits & bit) == busy
        await pilot.press("space")
        assert tl.rows[0].key == ("rank", 0) and tl.rows[0].expanded
        await pilot.press("b")
        assert len(tl.rows) > 40


async def test_next_event_from_a_summary_row_steps_into_its_first_lane() -> None:
    app = MoetraceApp(synthetic_trace(ranks=2, events_per_lane=30, seed=1))
    async with running(app) as pilot:
        await pilot.press("full_stop")  # cursor on "rank 0"
        assert app.timeline.selected == 0
        assert app.timeline.rows[app.timeline.cursor_row].key == ("lane", 0, 0)


async def test_big_summaries_are_built_in_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    import moetrace.tui.widgets.timeline_summaries as timeline_mod

    monkeypatch.setattr(timeline_mod, "SYNC_SUMMARY_EVENTS", 10)
    trace = synthetic_trace(ranks=2, events_per_lane=30, seed=1)
    app = MoetraceApp(trace, metrics=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any(w.name == "summaries" for w in app.workers) or model_of(
            app.timeline
        ).cached_summary(("all",))
        text = lane_text(app.timeline, ("rank", 0))[app.timeline.label_width :]
        assert "…" not in text and any(c in "▁▂▃▄▅▆▇█" for c in text)
        assert model_of(app.timeline).cached_summary(("rank", 0)) is not None


async def test_ascend_counters_are_step_charts(real_traces: Path) -> None:
    """Ascend counter tracks (AI Core Freq, HBM, LLC…) are one row per counter, named, with
    ▁…█ the highest value in force in each cell (checked by a slow loop over the samples)."""
    io = pytest.importorskip("moetrace.trace.io")
    trace = io.load([real_traces / "ascend" / "level0__rank0_ascend_pt__trace_view.json"])
    app = MoetraceApp(trace, metrics=False)
    async with running(app, size=(200, 60)) as pilot:
        tl = app.timeline
        counters = [r for r in tl.rows if r.kind == "counter"]
        names = trace.counters["name"].unique().to_list()
        assert sorted(r.label for r in counters) == sorted(names)
        assert not any(r.kind == "lane" and r.label.startswith("other ") for r in tl.rows)
        origin, cell = model_of(tl).origin, tl.cell_ns
        checked = 0
        for row in counters:
            samples = trace.counters.filter(pl.col("name") == row.label).sort("ts")
            ts = (samples["ts"].to_numpy() - origin).astype(float)
            values = samples["value"].to_numpy()
            lo, hi = min(values.min(), 0.0), values.max()
            i = tl.rows.index(row)
            tl.cursor_row = i
            tl.ensure_row_visible()
            await pilot.pause()
            text = lane_text(tl, row.key)[tl.label_width :]
            assert f"≤{hi:.4g}" in lane_text(tl, row.key)[: tl.label_width] or len(row.label) > 30
            for col, ch in enumerate(text):
                a, b = tl.t0 + col * cell, tl.t0 + (col + 1) * cell
                in_force = [v for t, v in zip(ts, values, strict=True) if t <= a]
                inside = [v for t, v in zip(ts, values, strict=True) if a < t < b]
                seen = ([in_force[-1]] if in_force else []) + inside
                if not seen:
                    assert ch == " "
                    continue
                level = int(np.clip(np.ceil((max(seen) - lo) / ((hi - lo) or 1) * 8 - 1e-9), 0, 8))
                assert ch == ("▁" if level == 0 else " ▁▂▃▄▅▆▇█"[level]), (row.label, col)
                checked += 1
        assert checked > 100
