"""Pilot tests: keys move the viewport, select events, follow the critical path and deps."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from rich.color import Color
from textual import events
from textual.widgets import OptionList
from tui_helpers import (
    find_row,
    lane_of,
    lane_text,
    located,
    model_of,
    report_of,
    running,
    static_text,
)

from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp

GOLD = Color.parse("#ffd700")


def details_text(app: MoetraceApp) -> str:
    return static_text(app, "#details-text")


async def test_first_frame_draws_each_event_where_it_is(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app):
        tl = app.timeline
        text = lane_text(tl, ("lane", 0, 0))
        assert text.startswith("    AIC 0")
        cells = text[tl.label_width : tl.label_width + tl.lanes_width]
        # Independent check: a cell is blank iff no event of track 0 meets it.
        ev = small_trace.events.filter(pl.col("track") == 0)
        s = (ev["ts"].to_numpy() - model_of(tl).origin).astype(float)
        e = s + ev["dur"].to_numpy()
        edges = np.linspace(tl.t0, tl.t1, tl.lanes_width + 1)
        for c, ch in enumerate(cells):
            busy = bool(np.any((s < edges[c + 1]) & (e > edges[c])))
            assert (ch != " ") == busy, (c, ch)


async def test_next_previous_event_and_details(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        await pilot.press("j", "j")  # rank 0 -> aic -> AIC 0
        assert app.timeline.rows[app.timeline.cursor_row].key == ("lane", 0, 0)
        await pilot.press("full_stop")
        assert app.timeline.selected == 0
        assert "matmul_0" in details_text(app)
        await pilot.press("full_stop", "full_stop", "comma")
        assert app.timeline.selected == 1
        assert "matmul_1" in details_text(app)


async def test_zoom_keeps_the_view_centre_and_pan_moves_the_view(small_trace: Trace) -> None:
    # Perfetto's keyboard zoom: with nothing selected it anchors at the centre of the view.
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        width, centre = tl.t1 - tl.t0, (tl.t0 + tl.t1) / 2
        await pilot.press("w")
        assert np.isclose(tl.t1 - tl.t0, 0.8 * width)
        assert np.isclose((tl.t0 + tl.t1) / 2, centre)
        assert tl.t0 <= tl.cursor_t < tl.t1  # the cursor is never left outside the view
        t0, w = tl.t0, tl.t1 - tl.t0
        await pilot.pause(0.2)  # not a held key: no acceleration
        await pilot.press("d")
        assert np.isclose(tl.t0, t0 + 0.1 * w)
        await pilot.press("0")
        assert tl.t0 == 0.0 and np.isclose(tl.t1, model_of(tl).span)


async def test_zoom_keeps_the_selected_slice_under_the_anchor(small_trace: Trace) -> None:
    """With a selection in view, w/s zoom around it: the columns it covered before a zoom
    in still show it afterwards (it only grows around its middle)."""
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        ev = small_trace.events.filter(pl.col("track") == 0).sort("ts")
        target = ev.row(25, named=True)  # well right of the view centre
        tl.select_event(int(target["id"]))
        await pilot.pause()
        start = target["ts"] - model_of(tl).origin
        mid = start + target["dur"] / 2
        before = (mid - tl.t0) / (tl.t1 - tl.t0)
        assert abs(before - 0.5) > 0.1
        for key in ("w", "w", "s", "w"):
            await pilot.press(key)
            await pilot.pause(0.2)
            assert np.isclose((mid - tl.t0) / (tl.t1 - tl.t0), before)
        # The drawn row shows the selected event at the anchor's column.
        col = int((mid - tl.t0) / tl.cell_ns)
        text = lane_text(tl, ("lane", 0, 0))
        assert text[tl.label_width + col] != " "


async def test_mouse_zoom_anchors_at_the_pointer(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app, size=(140, 16)) as pilot:  # more lanes than rows: lanes scroll
        tl = app.timeline
        x = tl.label_width + tl.lanes_width // 4
        t_under = tl._time_at(x)
        await wheel(pilot, tl, events.MouseScrollUp, x, ctrl=True)
        assert tl.t1 - tl.t0 < model_of(tl).span  # zoomed in
        assert np.isclose(tl._time_at(x), t_under, atol=tl.cell_ns)
        top = tl.scroll_offset.y
        t0, t1 = tl.t0, tl.t1
        await wheel(pilot, tl, events.MouseScrollDown, x, shift=True)
        assert tl.t0 > t0 and np.isclose(tl.t1 - tl.t0, t1 - t0)  # Shift+wheel pans
        assert tl.scroll_offset.y == top
        t0, t1 = tl.t0, tl.t1
        await wheel(pilot, tl, events.MouseScrollDown, x)  # the plain wheel scrolls lanes
        assert tl.scroll_offset.y > top and (tl.t0, tl.t1) == (t0, t1)


async def wheel(pilot: Any, tl: Any, kind: Any, x: int, **mods: bool) -> None:
    """Send one wheel event at column x of the timeline, with Ctrl/Shift as given."""
    tl.post_message(
        kind(tl, x, 5, 0, 0, 0, mods.get("shift", False), False, mods.get("ctrl", False))
    )
    await pilot.pause()


async def test_held_zoom_is_rate_limited(small_trace: Trace) -> None:
    """Ten quick w presses zoom by at most MAX_ZOOM_PER_S (unlimited they were ×1400)."""
    from moetrace.tui.widgets.viewport import MAX_ZOOM_PER_S

    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        tl.clock = lambda: 1000.0  # all ten presses within the same second, however slow
        width = tl.t1 - tl.t0
        await pilot.press(*["w"] * 10)
        assert width / (tl.t1 - tl.t0) <= MAX_ZOOM_PER_S * (1 + 1e-9)
        assert width / (tl.t1 - tl.t0) > 1.2
        zoomed = tl.t1 - tl.t0
        await pilot.pause(0.2)  # not a repeat (no acceleration)
        await pilot.press("s")  # the other way is never held back
        assert np.isclose((tl.t1 - tl.t0) / zoomed, 1 / 0.8)
        tl.clock = lambda: 1001.5  # a second later the limit has passed
        zoomed = tl.t1 - tl.t0
        await pilot.pause(0.2)
        await pilot.press("w")
        assert np.isclose((tl.t1 - tl.t0) / zoomed, 0.8)


async def test_cursor_never_leaves_the_trace(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        # A held key (each clock reading 10 ms after the last): steps grow to 8 cells, so a
        # few dozen presses run far past either end of the trace (whose span is ~100 cells).
        ticks = iter(range(100_000))
        tl.clock = lambda: 1000.0 + 0.01 * next(ticks)
        await pilot.press(*["right"] * 60, "s", "s", *["right"] * 60)
        assert 0 <= tl.cursor_t < model_of(tl).span
        assert tl.cursor_t > 0.9 * model_of(tl).span  # it did reach the end, and stopped there
        await pilot.press(*["left"] * 120, "d")
        assert 0 <= tl.cursor_t < model_of(tl).span
        assert tl.cursor_t < 0.1 * model_of(tl).span
        tl.set_view(-1e12, -1e12 + 1000)  # asked for a view far before the trace
        assert 0 <= tl.cursor_t < model_of(tl).span


async def test_held_keys_accelerate(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        ticks = iter(range(10_000))
        # a held key: every clock reading 50 ms after the last, however slow the machine is
        tl.clock = lambda: 1000.0 + 0.05 * next(ticks)
        widths = []
        for _ in range(4):
            before = tl.t1 - tl.t0
            await pilot.press("w")
            widths.append((tl.t1 - tl.t0) / before)
        assert widths[0] > widths[-1]  # later repeats zoom by a bigger step


async def test_search_then_n_steps_through_hits(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        await pilot.press("slash", *"swiglu_7", "enter")
        names = dict(zip(small_trace.events["id"], small_trace.events["name"], strict=True))
        want = sorted(i for i, n in names.items() if "swiglu_7" in n)
        assert len(want) == 4
        first = app.timeline.selected
        assert names[first] == "swiglu_7"
        await pilot.press("n")
        second = app.timeline.selected
        assert second != first and second in want
        await pilot.press("N")
        assert app.timeline.selected == first
        assert "hit 1 of 4" in static_text(app, "#status")


async def test_critical_path_next_and_previous(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app) as pilot:
        cp = report_of(app).critical_path
        path = (
            cp.filter((pl.col("rank") == 0) & (pl.col("segment") == "event"))
            .sort("seq")["event_id"]
            .to_list()
        )
        assert len(path) > 3
        app.timeline.select_event(path[1])
        await pilot.pause()
        assert "ON the critical path" in details_text(app)
        await pilot.press("right_square_bracket")
        assert app.timeline.selected == path[2]
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert app.timeline.selected == path[0]
        await pilot.press("left_square_bracket")  # start of the path: stays
        assert app.timeline.selected == path[0]


async def test_follow_dependencies_off_the_critical_path(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app) as pilot:
        on_path = set(report_of(app).critical_path["event_id"].drop_nulls().to_list())
        deps = small_trace.deps.filter(~pl.col("src").is_in(list(on_path)))
        src = int(deps["src"][0])
        out = deps.filter(pl.col("src") == src)
        ev = small_trace.events.select("id", "ts", "dur")
        # Expected by hand: the earliest-starting successor.
        succ = sorted(out["dst"].to_list(), key=lambda i: ev.filter(pl.col("id") == i)["ts"][0])
        app.timeline.select_event(src)
        await pilot.press("right_square_bracket")
        assert app.timeline.selected == succ[0]
        target = app.timeline.selected
        if target not in on_path:
            preds = small_trace.deps.filter(pl.col("dst") == target)["src"].to_list()
            ends = {
                p: int(
                    ev.filter(pl.col("id") == p)["ts"][0] + ev.filter(pl.col("id") == p)["dur"][0]
                )
                for p in preds
            }
            await pilot.press("left_square_bracket")
            assert app.timeline.selected == max(ends, key=lambda p: ends[p])


async def test_dependency_option_in_details_jumps(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app) as pilot:
        src, dst = small_trace.deps.row(0)[:2]
        app.timeline.select_event(src)
        await pilot.pause()
        deps = app.query_one("#deps", OptionList)
        assert any(str(o.id) == f"→{dst}" for o in deps.options)
        deps.focus()
        index = next(i for i, o in enumerate(deps.options) if str(o.id) == f"→{dst}")
        deps.highlighted = index
        await pilot.press("enter")
        assert app.timeline.selected == dst


async def test_overlays_restyle_cells(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app) as pilot:
        tl = app.timeline
        first = (
            report_of(app)
            .critical_path.filter(pl.col("segment") == "event")
            .sort(["rank", "seq"])["event_id"][0]
        )
        lane, _, _ = located(model_of(tl), int(first))
        y = find_row(tl, lambda r: r.key == ("lane", lane.track, lane.depth)) + 2

        def gold() -> bool:
            return any(
                seg.style is not None and seg.style.color == GOLD for seg in tl.render_line(y)
            )

        assert not gold()
        await pilot.press("c")
        assert "critical" in tl.active_overlays and gold()
        await pilot.press("c")
        assert not gold()
        await pilot.press("i")
        gaps_track = int(report_of(app).gaps["track"][0])
        gy = find_row(tl, lambda r: r.key == ("lane", gaps_track, 0)) + 2
        assert "·" in tl.render_line(gy).text


async def test_area_selection_feeds_the_metrics_pane(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app) as pilot:
        await pilot.press("j", "j", "v", "d", "right", "right", "j", "v")
        await app.workers.wait_for_complete()
        await pilot.pause()
        body = static_text(app, "#metrics-body")
        assert tl_area(app) is not None
        assert "area" in body and "rank 0" in body


def tl_area(app: MoetraceApp) -> object:
    return app.timeline.area


async def test_lane_filter_keeps_matching_lanes(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        await pilot.press("backslash", *"aiv", "enter")
        lanes = [r for r in app.timeline.rows if r.kind == "lane"]
        assert lanes and all(r.unit == "aiv" for r in lanes)
        assert len(lanes) == 4


async def test_mouse_click_selects_the_event_under_it(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        first = small_trace.events.filter(pl.col("track") == 0).sort("ts").row(0, named=True)
        mid = first["ts"] - model_of(tl).origin + first["dur"] / 2
        col = int((mid - tl.t0) / tl.cell_ns)
        y = find_row(tl, lambda r: r.key == ("lane", 0, 0)) + 2
        await pilot.click("#timeline", offset=(app.timeline.label_width + col, y))
        assert tl.selected == first["id"]


async def test_groups_collapse_and_expand(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        before = len(tl.rows)
        await pilot.press("space")  # cursor on rank 0
        assert len(tl.rows) == before - (before // 2 - 1)
        assert "▸ rank 0" in lane_text(tl, ("rank", 0))
        await pilot.press("space")
        assert len(tl.rows) == before


async def test_focus_centres_then_fits_the_selection(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        ev = small_trace.events.filter(pl.col("id") == 20).row(0, named=True)
        tl.select_event(20)
        start = ev["ts"] - model_of(tl).origin
        whole = (tl.t0, tl.t1)
        await pilot.press("f")
        # The whole trace is in view: centring would show time before its start, so the view
        # cannot move and the first press fits the event at once.
        assert (tl.t0, tl.t1) != whole
        assert tl.t0 <= start and tl.t1 > start + ev["dur"]
        assert tl.t1 - tl.t0 <= 1.3 * ev["dur"] + 2 * tl.cell_ns
        await pilot.press("m")
        assert tl.marks == [start]
        assert "▼" in tl.render_line(1).text


async def test_mouse_drag_selects_an_area(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app) as pilot:
        tl = app.timeline
        await pilot.mouse_down("#timeline", offset=(40, 4))
        await pilot.mouse_up("#timeline", offset=(70, 8))
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert tl.area is not None and tl.area.row0 == 2 and tl.area.row1 == 6
        assert np.isclose(tl.area.t0, tl.t0 + (40 - tl.label_width + 0.5) * tl.cell_ns)
        assert "area" in static_text(app, "#metrics-body")


async def test_shift_wheel_pans_and_ctrl_wheel_zooms(small_trace: Trace) -> None:
    from textual import events

    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        tl = app.timeline
        await pilot.press("w", "w")
        await pilot.pause(0.2)
        t0, width = tl.t0, tl.t1 - tl.t0
        tl.on_mouse_scroll_down(events.MouseScrollDown(tl, 50, 5, 0, 1, 0, True, False, False))
        assert np.isclose(tl.t0, t0 + 0.1 * width) and np.isclose(tl.t1 - tl.t0, width)
        x = 60
        under = tl.t0 + (x - tl.label_width + 0.5) * tl.cell_ns
        tl.on_mouse_scroll_up(events.MouseScrollUp(tl, x, 5, 0, -1, 0, False, False, True))
        assert np.isclose(tl.t1 - tl.t0, 0.8 * width)
        assert np.isclose(
            tl.t0 + (x - tl.label_width + 0.5) * tl.cell_ns, under
        )  # the time under the pointer stays


async def test_bindings_can_be_remapped_by_id(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app) as pilot:
        app.set_keymap({"timeline.zoom_in": "e"})
        await pilot.pause()
        width = app.timeline.t1 - app.timeline.t0
        await pilot.press("e")
        assert np.isclose(app.timeline.t1 - app.timeline.t0, 0.8 * width)


async def test_slice_names_are_drawn_inside_wide_slices(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app, size=(160, 30)) as pilot:
        tl = app.timeline
        ev = small_trace.events.filter(pl.col("track") == 0).sort("ts")
        target = ev.row(3, named=True)
        s = target["ts"] - model_of(tl).origin
        e = s + target["dur"]
        tl.set_view(s - (e - s), e + (e - s))  # the slice fills the middle third
        await pilot.pause()
        text = lane_text(tl, ("lane", 0, 0))[tl.label_width :]
        cell = tl.cell_ns
        first, last = int(np.ceil((s - tl.t0) / cell)), int(np.floor((e - tl.t0) / cell))
        body = text[first:last]
        assert body.strip() == target["name"]  # e.g. "matmul_3", centred in its box
        assert text[first - 1] in "▐▕█ " and text[last] in "▌▏█ "
        # Zoomed out to the whole trace the slices are too thin: no names, only glyphs.
        await pilot.press("0")
        text = lane_text(tl, ("lane", 0, 0))[tl.label_width :]
        assert "matmul" not in text


async def test_overlays_differ_by_glyph_not_only_colour(
    small_trace: Trace, monkeypatch: Any
) -> None:
    """Under NO_COLOR: ▓ only where a critical-path event is, ▒ only on exposed comm, ·
    only in idle gaps; each overlay shows at least one such cell on the trace."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = MoetraceApp(small_trace)
    async with running(app, size=(200, 40)) as pilot:
        assert app.no_color
        tl = app.timeline
        report, origin = report_of(app), model_of(tl).origin
        edges = np.linspace(tl.t0, tl.t1, tl.lanes_width + 1)

        def covered(starts: np.ndarray, ends: np.ndarray, col: int) -> bool:
            return bool(np.any((starts < edges[col + 1]) & (ends > edges[col])))

        seen = {"▓": 0, "▒": 0, "·": 0}
        await pilot.press("c", "x", "i")
        for row in [r for r in tl.rows if r.kind == "lane" and lane_of(r).depth == 0]:
            track = lane_of(row).track
            cells = lane_text(tl, row.key)[tl.label_width :]
            cp = report.critical_path.filter(pl.col("segment") == "event").join(
                small_trace.events.select(pl.col("id").alias("event_id"), "track"), on="event_id"
            )
            cp = cp.filter(pl.col("track") == track)
            exp = report.exposed.filter(pl.col("rank") == row.rank)
            gaps = report.gaps.filter(pl.col("track") == track)
            for col, ch in enumerate(cells):
                if ch == "▓":
                    assert covered(
                        cp["start_ns"].to_numpy() - origin, cp["end_ns"].to_numpy() - origin, col
                    )
                if ch == "▒":
                    assert row.unit == "link"
                    assert covered(
                        exp["start_ns"].to_numpy() - origin, exp["end_ns"].to_numpy() - origin, col
                    )
                if ch == "·":
                    assert covered(
                        gaps["start_ns"].to_numpy() - origin,
                        gaps["end_ns"].to_numpy() - origin,
                        col,
                    )
                if ch in seen:
                    seen[ch] += 1
        assert all(seen.values()), seen


async def test_flows_of_the_selected_event_are_marked_at_both_ends(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app, size=(200, 40)) as pilot:
        tl = app.timeline
        deps = small_trace.deps
        ev = small_trace.events
        # An event with a dependency in and one out.
        chosen = next(
            int(e)
            for e in deps["dst"].to_list()
            if deps.filter(pl.col("src") == e).height and deps.filter(pl.col("dst") == e).height
        )
        tl.select_event(chosen)
        await pilot.pause()
        origin, cell = model_of(tl).origin, tl.cell_ns

        def mark_at(event_id: int, at_end: bool) -> str:
            row = ev.filter(pl.col("id") == event_id).row(0, named=True)
            lane, _, _ = located(model_of(tl), event_id)
            t = row["ts"] - origin + (row["dur"] if at_end else 0) - (1e-6 if at_end else 0)
            text = lane_text(tl, ("lane", lane.track, lane.depth))
            return text[tl.label_width + int((t - tl.t0) // cell)]

        for src in deps.filter(pl.col("dst") == chosen)["src"].to_list():
            assert mark_at(src, at_end=True) == "▶"  # the flow leaves its source's end
        for dst in deps.filter(pl.col("src") == chosen)["dst"].to_list():
            assert mark_at(dst, at_end=False) == "◀"  # and arrives at its destination's start
        await pilot.press("right_square_bracket")  # and the jump along it
        assert tl.selected in deps.filter(pl.col("src") == chosen)["dst"].to_list()
        await pilot.press("escape")
        assert tl.flow_ends == []


async def test_pinned_rows_stay_at_the_top(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app, size=(120, 14)) as pilot:
        tl = app.timeline
        target = find_row(tl, lambda r: r.key == ("lane", 7, 0))  # a lane of rank 1
        tl.cursor_row = target
        await pilot.press("t")
        assert tl.rows[0].key == ("lane", 7, 0) and tl.rows[0].label.startswith("⚑")
        assert [r.key for r in tl.rows].count(("lane", 7, 0)) == 1
        await pilot.press(*["j"] * 14)  # scrolled down: the pinned lane stays below the ruler
        assert tl.scroll_offset.y > 0
        assert tl.render_line(2).text == lane_text(tl, ("lane", 7, 0))
        assert tl.render_line(2).text.startswith(f"⚑ {model_of(tl).lanes[(7, 0)].label}")
        assert tl.row_at(3) == 1 + int(tl.scroll_offset.y)
        tl.cursor_row = 0
        await pilot.press("t")  # unpin: back in its place under rank 1
        # (the key press changed the rows: mypy still holds the key narrowed by the assert above)
        assert tl.rows[0].key == ("rank", 0) and tl.rows[target].key == ("lane", 7, 0)  # type: ignore[comparison-overlap]


async def test_cjk_and_emoji_names_are_drawn_at_their_width(small_trace: Trace) -> None:
    """Names in CJK or with emoji are drawn as they are (no '?'), each wide character on two
    cells, and every row keeps exactly the widget's width (issue 26 item 4)."""
    ev = small_trace.events.with_columns(
        name=pl.lit("专家") + pl.col("name").str.replace("matmul", "计算🚀")
    )
    tracks = small_trace.tracks.with_columns(thread_name=pl.lit("流 ") + pl.col("thread_name"))
    trace = Trace(ev, tracks, small_trace.deps, small_trace.counters, small_trace.meta)
    app = MoetraceApp(trace, metrics=False)
    async with running(app, size=(160, 30)) as pilot:
        tl = app.timeline
        lane = trace.events.filter(pl.col("track") == 0).sort("ts")
        target = lane.row(3, named=True)
        s = target["ts"] - model_of(tl).origin
        e = s + target["dur"]
        tl.set_view(s - (e - s), e + (e - s))
        await pilot.pause()
        row = next(i for i, r in enumerate(tl.rows) if r.key == ("lane", 0, 0))
        strip = tl.render_line(tl.row_y(row))
        assert strip.cell_length == tl.size.width
        text = strip.text
        assert target["name"] in text and "?" not in text
        assert "流 " in text[: tl.label_width + 2]  # the gutter label keeps its CJK too


async def test_cursor_row_and_selection_are_marked_by_glyphs(
    small_trace: Trace, monkeypatch: Any
) -> None:
    """Under NO_COLOR the cursor row still shows (◂ in its gutter, on no other row) and the
    selected slice shows its ends ([ and ], or ◆ in one cell): a glyph, not only colour."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app, size=(160, 30)) as pilot:
        tl = app.timeline
        ev = small_trace.events.filter(pl.col("track") == 0).sort("ts").row(3, named=True)
        s = ev["ts"] - model_of(tl).origin
        e = s + ev["dur"]
        tl.set_view(s - (e - s), e + (e - s))  # the slice fills the middle third
        tl.select_event(ev["id"], move_view=False)
        await pilot.pause()
        lines = [tl.render_line(y).text for y in range(2, tl.size.height)]
        gutters = [line[: tl.label_width] for line in lines]
        assert sum(g.endswith("◂") for g in gutters) == 1
        cursor_y = tl.row_y(tl.cursor_row)
        assert tl.render_line(cursor_y).text[: tl.label_width].endswith("◂")
        text = lane_text(tl, ("lane", 0, 0))[tl.label_width :]
        cell = tl.cell_ns
        first, last = int((s - tl.t0) / cell), int((e - 1e-9 - tl.t0) / cell)
        assert text[first] == "[" and text[last] == "]"
        assert text.count("[") == 1 and text.count("]") == 1
