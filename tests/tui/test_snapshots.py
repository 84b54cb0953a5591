"""SVG snapshots of the main screens (pytest-textual-snapshot; textual pinned to 8.2.8).

Deterministic: seeded synthetic trace, no clock in the header, the prompt's cursor blink off,
every worker (metrics) finished before the picture is taken, and the timeline's key clock
advancing 10 ms per reading (a repeated key counts as held however slow the machine is: under
load two presses of `w` came > 150 ms apart and zoomed less).
Update with `pytest tests/tui/test_snapshots.py --snapshot-update` after a deliberate change.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from tui_helpers import settle

from moetrace.testing.synthetic import synthetic_trace
from moetrace.tui.app import MoetraceApp
from moetrace.tui.widgets.timeline import TimelineView

SIZE = (150, 40)


@pytest.fixture(autouse=True)
def steady_key_clock(monkeypatch: Any) -> None:
    """Each clock reading 10 ms after the last (s), whatever the wall clock does."""
    ticks = itertools.count()
    monkeypatch.setattr(TimelineView, "clock", staticmethod(lambda: 1000.0 + 0.01 * next(ticks)))


def make_app() -> MoetraceApp:
    return MoetraceApp(synthetic_trace(ranks=2, events_per_lane=30, seed=1), title="synthetic")


async def ready(pilot: Any) -> None:
    await settle(pilot.app, pilot)


async def select_on_path(pilot: Any) -> None:
    await ready(pilot)
    app = pilot.app
    app.timeline.select_event(int(app.overlays.cp_events[3]))
    await pilot.pause()


@pytest.mark.parametrize(
    "keys",
    [(), ("c",), ("i",), ("x",)],
    ids=["main", "critical_path", "idle_gaps", "exposed_comm"],
)
def test_main_screen(snap_compare: Any, keys: tuple[str, ...]) -> None:
    assert snap_compare(
        make_app(), press=[*keys, "w"], terminal_size=SIZE, run_before=select_on_path
    )


def test_critical_path_table(snap_compare: Any) -> None:
    assert snap_compare(make_app(), press=["1"], terminal_size=SIZE, run_before=ready)


def test_help_screen(snap_compare: Any) -> None:
    assert snap_compare(make_app(), press=["question_mark"], terminal_size=SIZE, run_before=ready)


@pytest.mark.parametrize("keys", [(), ("b",)], ids=["collapsed", "braille"])
def test_many_ranks(snap_compare: Any, keys: tuple[str, ...]) -> None:
    app = MoetraceApp(
        synthetic_trace(ranks=40, events_per_lane=10, seed=2), metrics=False, title="40 ranks"
    )
    assert snap_compare(app, press=list(keys), terminal_size=SIZE, run_before=ready)


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (250, 70)], ids=["80x24", "120x40", "250x70"]
)
def test_terminal_sizes(snap_compare: Any, size: tuple[int, int]) -> None:
    """The layout at a small, a middle and a big terminal (side pane folds below 120)."""
    assert snap_compare(make_app(), press=["w"], terminal_size=size, run_before=select_on_path)


@pytest.mark.parametrize("size", [(80, 24), (150, 40)], ids=["80x24", "150x40"])
def test_no_color_overlays(snap_compare: Any, monkeypatch: Any, size: tuple[int, int]) -> None:
    """NO_COLOR: critical path ▓, exposed comm ▒ and idle gaps · differ by glyph."""
    monkeypatch.setenv("NO_COLOR", "1")
    assert snap_compare(
        make_app(), press=["c", "x", "i", "w", "w"], terminal_size=size, run_before=select_on_path
    )
