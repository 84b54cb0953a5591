"""The time ruler at every zoom: labels that tell ticks apart, never cut by the cursor or
the next tick, at round values (issue 26 item 4)."""

from __future__ import annotations

import re

import pytest

from moetrace.tui.format import nice_step, parse_time, tick_label
from moetrace.tui.widgets.render import MARK_STYLE, overlay_marks, ruler_strip

LABEL = re.compile(r"╵([^╵ ]+ (?:ns|µs|ms|s))")


@pytest.mark.parametrize(
    ("t", "step", "text"),
    [
        (6_741_000.0, 1_000.0, "6.741 ms"),  # 1 µs step at 6.74 ms: three decimals of ms
        (6_741_500.0, 500.0, "6.7415 ms"),
        (2_000_000.0, 500_000.0, "2 ms"),  # trailing zeros dropped
        (0.0, 100.0, "0 ns"),
        (1_500_000_000.0, 100_000_000.0, "1.5 s"),
        (12.5, 0.5, "12.5 ns"),
        (250_000.0, 50_000.0, "250 µs"),
    ],
)
def test_tick_labels_by_hand(t: float, step: float, text: str) -> None:
    assert tick_label(t, step) == text


def _labels(text: str) -> list[tuple[int, float]]:
    """(column of the tick, time the label says in ns) of every label on a ruler line."""
    out = []
    for m in LABEL.finditer(text):
        value = parse_time(m.group(1).replace(" ", ""))
        assert value is not None, m.group(1)
        out.append((m.start(), value))
    return out


@pytest.mark.parametrize(
    ("t0", "span", "width"),
    [
        (6_740_000.0, 2_000.0, 80),  # deep zoom at 6.74 ms: 100 ns ticks
        (6_740_000.0, 37.0, 80),  # deeper: fractions of a ns apart
        (0.0, 312_700_000.0, 200),
        (1_234_567_891.0, 9_000.0, 120),  # seconds into the trace, µs apart
        (17.0, 1_000_000.0, 140),
    ],
)
def test_labels_are_distinct_round_and_at_their_ticks(t0: float, span: float, width: int) -> None:
    text = ruler_strip(t0, t0 + span, width).text
    labels = _labels(text)
    assert len(labels) >= 2
    step = nice_step(span, width)
    cell = span / width
    values = [v for _, v in labels]
    assert values == sorted(set(values))  # distinct, increasing: no "6.74 ms 6.74 ms"
    for col, value in labels:
        assert value / step == pytest.approx(round(value / step), abs=1e-6)  # a round value
        assert int((value - t0) / cell + 1e-6) == col or abs((value - t0) / cell - col) < 1


def test_the_cursor_never_overwrites_a_digit() -> None:
    t0, t1, width = 6_740_000.0, 6_742_000.0, 80
    plain = ruler_strip(t0, t1, width).text
    labelled = [m.start(1) for m in LABEL.finditer(plain)]
    cursor = labelled[1] + 2  # a column inside the second label
    marks = {cursor: "┃"}
    drawn = overlay_marks(ruler_strip(t0, t1, width, reserved=frozenset(marks)), marks, MARK_STYLE)
    text = drawn.text
    assert text[cursor] == "┃"
    for m in re.finditer(r"[0-9.]+ (?:ns|µs|ms|s)", text):
        assert parse_time(m.group(0).replace(" ", "")) is not None
        assert not m.start() <= cursor < m.end()
    # every other label is still there, whole
    assert len(_labels(text)) == len(_labels(plain)) - 1
