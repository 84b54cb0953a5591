"""The layout fits any terminal: the timeline keeps ≥ 60% of the width, the side pane folds
away below 120 columns (p brings it back), and everything works at 80×24."""

from __future__ import annotations

import pytest
from tui_helpers import lane_text, running, static_text

from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp


@pytest.mark.parametrize(
    ("size", "side_shown"),
    [((80, 24), False), ((100, 30), False), ((120, 40), True), ((250, 70), True)],
)
async def test_timeline_keeps_most_of_the_width(
    small_trace: Trace, size: tuple[int, int], side_shown: bool
) -> None:
    app = MoetraceApp(small_trace)
    async with running(app, size=size) as pilot:
        tl = app.timeline
        side = app.query_one("#side")
        assert side.display is side_shown
        assert tl.size.width >= 0.6 * size[0]
        expected_side = min(58, int(0.4 * size[0])) if side_shown else 0
        assert tl.size.width == size[0] - expected_side
        # label gutter + time cells + scrollbar = the timeline's width; time gets ≥ 40 cells
        scrollbar = 1 if tl.show_vertical_scrollbar else 0
        assert tl.label_width + tl.lanes_width + scrollbar == tl.size.width
        assert tl.lanes_width >= 40
        # p toggles the side pane; the timeline never drops below 60%
        await pilot.press("p")
        await pilot.pause()
        assert side.display is not side_shown
        assert tl.size.width >= 0.6 * size[0]
        await pilot.press("p")
        await pilot.pause()
        assert side.display is side_shown


async def test_everything_works_at_80x24(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app, size=(80, 24)) as pilot:
        tl = app.timeline
        await pilot.press("j", "j", "full_stop")  # rank 0 -> aic -> AIC 0, next event
        assert tl.selected == 0
        assert app.query_one("#side").display is False
        await pilot.press("enter")  # details asked for: the side pane opens beside
        await pilot.pause()
        assert app.query_one("#side").display is True
        assert tl.size.width >= 48
        assert "matmul_0" in static_text(app, "#details-text")
        row = lane_text(tl, ("lane", 0, 0))
        assert len(row) == tl.label_width + tl.lanes_width
        await pilot.press("q")  # closes the side pane first
        await pilot.pause()
        assert app.query_one("#side").display is False and not app._exit


async def test_resize_folds_and_unfolds_the_side_pane(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace)
    async with running(app, size=(200, 40)) as pilot:
        side = app.query_one("#side")
        assert side.display is True
        await pilot.resize_terminal(90, 30)
        await pilot.pause()
        assert side.display is False and app.timeline.size.width == 90
        await pilot.resize_terminal(160, 40)
        await pilot.pause()
        assert side.display is True and app.timeline.size.width == 160 - 58


async def test_hovering_a_label_shows_it_in_full(small_trace: Trace) -> None:
    app = MoetraceApp(small_trace, metrics=False)
    async with running(app, size=(80, 24)) as pilot:
        tl = app.timeline
        y = 2 + next(i for i, r in enumerate(tl.rows) if r.key == ("lane", 0, 0))
        await pilot.hover("#timeline", offset=(3, y))
        assert tl.tooltip == "rank 0 · aic · AIC 0"
        await pilot.hover("#timeline", offset=(tl.label_width + 5, y))
        assert tl.tooltip is None
