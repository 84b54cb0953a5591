"""Search: names and args (`key=value`), each hit zoomed to with context, n/N through hits
(Pilot, 80×24 and 200×50, NO_COLOR)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tui_helpers import running, static_text

import moetrace
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp
from moetrace.tui.lanes import search_events

SAMPLE = Path(__file__).parents[2] / "sample_traces" / "tile_zipf.json.gz"


def _trace(args: list[str | None]) -> Trace:
    n = len(args)
    return Trace.from_frames(
        {
            "id": list(range(n)),
            "track": [0] * n,
            "name": [f"k{i}" for i in range(n)],
            "kind": ["compute"] * n,
            "ts": [10 * i for i in range(n)],
            "dur": [5] * n,
            "args": args,
        },
        {"track": [0], "rank": [0], "unit": ["aic"]},
    )


def test_key_value_matches_that_arg_exactly_and_text_matches_args_too() -> None:
    trace = _trace(
        ['{"expert":3,"chunk":0}', '{"expert":30}', '{"Expert": "3"}', None, '{"x":"expert=3"}']
    )
    assert search_events(trace, "expert=3").tolist() == [0, 2]
    assert search_events(trace, " expert = 30 ").tolist() == [1]
    assert search_events(trace, "chunk=0").tolist() == [0]
    assert search_events(trace, "chunk").tolist() == [0]  # plain text: in the args
    assert search_events(trace, "k3").tolist() == [3]  # and in the name
    assert search_events(trace, "nope=1").tolist() == []


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_search_by_arg_zooms_to_each_hit_and_n_steps_on(
    size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    trace = moetrace.load(SAMPLE)
    ev = trace.events.sort("ts", "id")
    want = [
        (i, ts, dur)
        for i, ts, dur, a in zip(ev["id"], ev["ts"], ev["dur"], ev["args"], strict=True)
        if a and json.loads(a).get("expert") == 3
    ]
    assert len(want) > 2
    app = MoetraceApp(trace, metrics=False)
    async with running(app, size=size) as pilot:
        await pilot.press("slash", *"expert=3", "enter")
        tl = app.timeline
        assert app.model is not None
        for k, (event_id, ts, dur) in enumerate(want[:3]):
            assert tl.selected == event_id
            start = ts - app.model.origin
            # zoomed: the hit in view, twice its length of context either side
            assert tl.t0 <= start and tl.t1 >= start + dur
            assert tl.t1 - tl.t0 == pytest.approx(5 * dur, rel=0.01)
            assert f"hit {k + 1} of {len(want)}" in static_text(app, "#status")
            await pilot.press("n")
        await pilot.press("N", "N")
        assert tl.selected == want[1][0]
