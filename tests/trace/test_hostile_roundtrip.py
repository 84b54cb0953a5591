"""Writers round-trip everything the reader accepts: string pids/tids such as "07", "00",
"-07", integers of any size, non-ASCII and control characters in names, categories and args.

Chrome JSON in -> Trace -> Chrome JSON (must be strict, valid JSON for Python's own parser)
-> Trace gives equal frames; -> .pftrace -> Trace gives equal frames too (the same comparison
test_pftrace_props makes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moetrace.testing.compare import assert_trace_equal
from moetrace.testing.strategies import hostile_events
from moetrace.trace.formats.chrome.read import read_chrome
from moetrace.trace.io import load, write_trace
from moetrace.trace.model import Trace


def _event_pids(trace: Trace) -> set[str]:
    return set(trace.events.join(trace.tracks, on="track")["pid"].to_list())


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=hostile_events(), ascii_only=st.booleans())
def test_hostile_values_round_trip_through_json_and_pftrace(
    events: list[dict[str, Any]], ascii_only: bool, tmp_path: Path
) -> None:
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": events}, ensure_ascii=ascii_only), "utf-8")
    first = read_chrome(src)
    assert first.problems() == []

    out = write_trace(first, tmp_path / "out.json", force=True)
    text = out.read_text("utf-8")
    json.loads(text)  # strict JSON: Python's parser reads what moetrace wrote
    second = load(out)
    assert_trace_equal(second, first)

    # Without the "moetrace" object, the plain Chrome events alone give the same processes.
    plain = json.loads(text)
    del plain["moetrace"]
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    assert _event_pids(load(tmp_path / "plain.json")) == _event_pids(first)

    back = load(write_trace(first, tmp_path / "out.pftrace", force=True))
    assert_trace_equal(back, first, reorder=True)


def test_string_pids_with_leading_zeros_stay_strings(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": "a", "pid": "07", "tid": "-07", "ts": 1, "dur": 2},
        {"ph": "X", "name": "b", "pid": "00", "tid": 123456789012345678901234, "ts": 1, "dur": 2},
        {"ph": "X", "name": "c", "pid": 7, "tid": "7", "ts": 1, "dur": 2},
    ]
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": events}))
    out = write_trace(load(src), tmp_path / "out.json")
    written = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    pairs = sorted((str(e["name"]), e["pid"], e["tid"]) for e in written)
    assert pairs == [("a", "07", "-07"), ("b", "00", 123456789012345678901234), ("c", 7, 7)]
