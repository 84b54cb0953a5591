"""The timeline's view state on its own (no Textual): zoom keeps its anchor's column, the
cursor never leaves the trace, held zoom is rate-limited, the view grows with a job."""

from __future__ import annotations

import math

import pytest

from moetrace.tui.widgets.viewport import (
    MAX_VIEW_SPAN,
    MAX_ZOOM_PER_S,
    MIN_CELL_NS,
    Area,
    Viewport,
    scroll_to_show,
)


def view(span: float = 1000.0, cells: int = 100) -> Viewport:
    v = Viewport(cells=cells)
    v.reset(span)
    return v


@pytest.mark.parametrize("anchor", [0.0, 137.0, 500.0, 999.0])
@pytest.mark.parametrize("factor", [0.8, 0.5, 1.25, 3.0])
def test_zoom_keeps_the_anchor_at_its_column(anchor: float, factor: float) -> None:
    v = view()
    v.set_view(100.0, 900.0)
    before = (anchor - v.t0) / (v.t1 - v.t0)  # where the anchor is, as a share of the width
    width = v.t1 - v.t0
    v.zoom_by(factor, anchor)
    # The width is the asked one unless the clamp to the trace moved the window…
    assert v.t1 - v.t0 == pytest.approx(min(width * factor, 1000.0 * MAX_VIEW_SPAN))
    if v.t0 > 0 and v.t1 < 1000:
        # …and then the anchor is at the same share of the view (the same column).
        assert (anchor - v.t0) / (v.t1 - v.t0) == pytest.approx(before)


def test_keyboard_zoom_anchors_at_the_selection_in_view_else_the_centre() -> None:
    v = view()
    v.set_view(200.0, 600.0)
    assert v.zoom_anchor() == 400.0
    v.selected_span = ((0, 0), 250.0, 270.0)
    assert v.zoom_anchor() == 260.0
    v.selected_span = ((0, 0), 550.0, 700.0)  # partly in view: the middle of the visible part
    assert v.zoom_anchor() == 575.0
    v.selected_span = ((0, 0), 800.0, 900.0)  # out of view: the centre again
    assert v.zoom_anchor() == 400.0


def test_the_cursor_never_leaves_the_trace() -> None:
    v = view(span=1000.0, cells=100)
    for t0, t1 in [(-5000.0, -4000.0), (3000.0, 9000.0), (-1e12, 1e12), (999.9, 1000.0)]:
        v.set_view(t0, t1)
        assert 0.0 <= v.cursor_t < 1000.0
        assert v.t0 <= v.cursor_t < v.t1
    v.set_view(0.0, 1000.0)
    for _ in range(300):
        v.move_cursor(7)
    assert 0.0 <= v.cursor_t < 1000.0
    for _ in range(300):
        v.move_cursor(-7)
    assert v.cursor_t == 0.0


def test_the_view_is_clamped_to_the_trace_and_the_deepest_zoom() -> None:
    v = view(span=1000.0, cells=100)
    v.set_view(400.0, 400.0)  # zero width: the deepest zoom instead
    assert v.t1 - v.t0 == pytest.approx(MIN_CELL_NS * 100)
    v.set_view(-1e6, 1e6)  # wider than the trace: from its start, past its end
    assert (v.t0, v.t1) == (0.0, MAX_VIEW_SPAN * 1000)
    v.set_view(5000.0, 5100.0)  # past the end: slid back to end at the trace's end
    assert (v.t0, v.t1) == pytest.approx((900.0, 1000.0))
    v.set_view(-300.0, -100.0)  # before the start: slid forward to begin at 0
    assert (v.t0, v.t1) == (0.0, 200.0)


def test_panning_stops_at_either_end_of_the_trace() -> None:
    v = view(span=1000.0, cells=100)
    v.set_view(0.0, 200.0)
    for _ in range(30):
        v.pan_by(-0.5)
    assert (v.t0, v.t1) == (0.0, 200.0)  # never into negative time
    for _ in range(30):
        v.pan_by(0.5)
    assert (v.t0, v.t1) == pytest.approx((800.0, 1000.0))


def test_held_zoom_is_limited_per_second_and_the_other_way_is_not() -> None:
    v = view()
    total = 1.0
    for _ in range(20):  # 20 presses of ×0.5 within one second
        total *= v.limited_zoom(0.5, now=10.0)
    assert total == pytest.approx(1 / MAX_ZOOM_PER_S)
    assert v.limited_zoom(2.0, now=10.1) == pytest.approx(2.0)  # zooming back is allowed
    assert v.limited_zoom(0.5, now=11.5) == pytest.approx(0.5)  # a second later: free again


def test_pan_moves_by_a_share_of_the_width() -> None:
    v = view()
    v.set_view(100.0, 300.0)
    v.pan_by(0.5)
    assert (v.t0, v.t1) == (200.0, 400.0)
    assert 200.0 <= v.cursor_t < 400.0


def test_focus_centres_then_fits() -> None:
    v = view()
    v.set_view(0.0, 100.0)
    v.focus(500.0, 520.0)
    assert (v.t0 + v.t1) / 2 == pytest.approx(510.0) and v.t1 - v.t0 == pytest.approx(100.0)
    v.focus(500.0, 520.0)  # already centred: fit with 10% padding
    assert (v.t0, v.t1) == pytest.approx((498.0, 522.0))


def test_area_takes_two_presses_and_is_never_empty() -> None:
    v = view()
    v.cursor_t, v.cursor_row = 300.0, 4
    assert v.area_step() is None
    v.cursor_t, v.cursor_row = 200.0, 1
    area = v.area_step()
    assert area == Area(200.0, 300.0 + v.cell_ns, 1, 4)


def test_a_growing_job_keeps_absolute_times() -> None:
    """More ranks arrive: the origin moves 50 ns earlier and the span grows. A zoomed view,
    the cursor, the selection and the marks stay on the same absolute times; a view of the
    whole trace stays the whole trace."""
    v = view(span=1000.0)
    v.set_view(100.0, 200.0)
    v.cursor_t = 150.0
    v.selected_span = ((3, 0), 120.0, 130.0)
    v.marks.append(110.0)
    v.grow(2000.0, 50.0)
    assert (v.t0, v.t1, v.cursor_t) == (150.0, 250.0, 200.0)
    assert v.selected_span == ((3, 0), 170.0, 180.0) and v.marks == [160.0]
    whole = view(span=1000.0)
    whole.grow(2000.0, 0.0)
    assert (whole.t0, whole.t1) == (0.0, 2000.0)


@pytest.mark.parametrize(
    ("row", "pinned", "top", "visible", "expected"),
    [
        (1, 2, 0, 10, None),  # a pinned row is always on screen
        (5, 0, 0, 10, None),  # on screen
        (15, 0, 0, 10, 6),  # below: scroll so it is the last row
        (3, 0, 8, 10, 3),  # above: scroll so it is the first
        (12, 2, 0, 10, 1),  # counted among the scrolled rows
    ],
)
def test_scroll_to_show(
    row: int, pinned: int, top: int, visible: int, expected: int | None
) -> None:
    assert scroll_to_show(row, pinned, top, visible) == expected
    if expected is not None:  # and with that scroll the row is on screen
        assert expected <= row - pinned < expected + visible


def test_columns_and_times_are_inverse() -> None:
    v = view(span=1000.0, cells=100)
    v.set_view(100.0, 300.0)
    for column in range(100):
        assert v.column_of(v.time_at(column)) == column
    assert v.column_of(99.999) == -1 and v.column_of(300.0) == 100
    assert math.isclose(v.cell_ns, 2.0)


def test_focus_fits_at_once_when_the_clamp_keeps_the_view_from_centring() -> None:
    v = view(span=1000.0, cells=100)
    v.set_view(0.0, 1000.0)  # the whole trace: centring on 50 would need t0 < 0
    v.focus(40.0, 60.0)
    assert (v.t0, v.t1) == pytest.approx((38.0, 62.0))  # 10% padding
    v.set_view(0.0, 200.0)
    v.focus(500.0, 520.0)  # can move: centres first
    assert (v.t0 + v.t1) / 2 == pytest.approx(510.0) and v.t1 - v.t0 == pytest.approx(200.0)
