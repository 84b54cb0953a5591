"""Helpers for the viewer tests: a headless app runner and rendered-row lookups."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from moetrace.analysis.report import Report
from moetrace.tui.app import MoetraceApp
from moetrace.tui.lane_parts import Lane, Row
from moetrace.tui.lanes import LaneModel
from moetrace.tui.widgets.timeline import TimelineView


@asynccontextmanager
async def running(app: MoetraceApp, size: tuple[int, int] = (140, 36)) -> AsyncIterator[Any]:
    """Run `app` headless and wait until loading and metrics workers are done."""
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        yield pilot


async def settle(app: MoetraceApp, pilot: Any) -> None:
    """Wait for Textual's workers and the viewer's load/analysis threads, then their
    messages."""
    await pilot.pause()
    await wait_background(app)
    await pilot.pause()


async def wait_background(app: MoetraceApp) -> None:
    """Until no worker or load/analysis daemon thread runs (they post their results)."""
    import asyncio

    from moetrace.tui.loading import busy

    await app.workers.wait_for_complete()
    while busy():
        await asyncio.sleep(0.01)
    await app.workers.wait_for_complete()


def lane_text(timeline: TimelineView, key: tuple[object, ...]) -> str:
    """The rendered text of the visible row with this key (label gutter included)."""
    for i, row in enumerate(timeline.rows):
        if row.key == key:
            return timeline.render_line(timeline.row_y(i)).text
    raise AssertionError(f"row {key} not visible")


def find_row(timeline: TimelineView, pred: Callable[[Any], bool]) -> int:
    for i, row in enumerate(timeline.rows):
        if pred(row):
            return i
    raise AssertionError("no such row")


def static_text(app: MoetraceApp, selector: str) -> str:
    """Plain text of a Static's content (Text or any Rich renderable), as the user reads it."""
    import io

    from rich.console import Console

    content = app.query_one(selector).content  # type: ignore[attr-defined]
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(content)
    return console.export_text()


def model_of(view: MoetraceApp | TimelineView) -> LaneModel:
    """The lane model of an app or timeline that has loaded its trace (fails the test if not)."""
    assert view.model is not None, "no lane model: the trace is not loaded"
    return view.model


def report_of(app: MoetraceApp) -> Report:
    """The metrics report of an app whose analysis finished (fails the test if not)."""
    assert app.report is not None, "no report: the analysis did not finish"
    return app.report


def lane_of(row: Row) -> Lane:
    """The lane of a timeline row of kind "lane" (fails the test for a summary row)."""
    assert row.lane is not None, f"row {row.key} is not a lane"
    return row.lane


def located(model: LaneModel, event_id: int) -> tuple[Lane, float, float]:
    """`model.locate(event_id)` for an event the model knows (fails the test if unknown)."""
    where = model.locate(event_id)
    assert where is not None, f"event {event_id} is not in the lane model"
    return where
