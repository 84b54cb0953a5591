"""SVG snapshots (NO_COLOR) of issue 26's layout items at 80×24 and 200×50: lane labels that
keep their tail and C++ short names with the slice details open, the metrics pane's free and
idle columns, and the MoE table of a CPU-only trace (exposed –). Deterministic: in-memory
traces, every worker finished before the picture. Update with --snapshot-update after a
deliberate change."""

from __future__ import annotations

from typing import Any

import pytest
from test_narrow_layout import cpu_moe_trace, lanes_trace, steps_trace, until_report

from moetrace.tui.app import MoetraceApp

SIZES = [(80, 24), (200, 50)]


async def ready(pilot: Any) -> None:
    await until_report(pilot.app, pilot)


@pytest.fixture(autouse=True)
def no_color(monkeypatch: Any) -> None:
    monkeypatch.setenv("NO_COLOR", "1")


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "200x50"])
def test_labels_and_details(snap_compare: Any, size: tuple[int, int]) -> None:
    app = MoetraceApp(lanes_trace(), title="lanes")
    assert snap_compare(
        app, press=["j", "j", "full_stop", "enter"], terminal_size=size, run_before=ready
    )


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "200x50"])
def test_metrics_free_and_idle(snap_compare: Any, size: tuple[int, int]) -> None:
    app = MoetraceApp(steps_trace(), title="steps")
    press = ["p"] if size[0] < 120 else []
    assert snap_compare(app, press=press, terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "200x50"])
def test_moe_table_cpu_only(snap_compare: Any, size: tuple[int, int]) -> None:
    app = MoetraceApp(cpu_moe_trace(), title="cpu moe")
    assert snap_compare(app, press=["8"], terminal_size=size, run_before=ready)
