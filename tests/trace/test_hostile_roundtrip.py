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
from test_pftrace_props import assert_same  # tests/trace is on sys.path (rootdir-less tests)
from test_roundtrip import _diff

from moetrace.trace.formats.chrome.read import read_chrome
from moetrace.trace.io import load, write_trace
from moetrace.trace.model import Trace

_any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
_control = st.text(st.characters(max_codepoint=0x9F, categories=["Cc"]), min_size=1, max_size=4)
_odd_digits = st.sampled_from(["07", "00", "-07", "-0", "0", "+7", " 7", "7 ", "0x1f", "1e3"])
_pid = st.one_of(
    st.integers(-(2**70), 2**70),  # JSON integers of any size
    st.integers(-(2**70), 2**70).map(str),  # the same as strings
    _odd_digits,
    _any_text,
    _control,
)
_name = st.one_of(_any_text, _control, st.sampled_from(["[bold]x[/]", "\x1b[31mred", "é✓中"]))
_arg_value = st.one_of(
    st.integers(-(2**80), 2**80),
    _name,
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def hostile_events(draw: Any) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 12))
    pids = draw(st.lists(_pid, min_size=1, max_size=3))
    tids = draw(st.lists(_pid, min_size=1, max_size=3))
    base = draw(st.sampled_from([0, 1_736_408_883_688_177, -5_000]))
    events: list[dict[str, Any]] = []
    for _i in range(n):
        ev: dict[str, Any] = {
            "ph": draw(st.sampled_from(["X", "X", "i", "C"])),
            "name": draw(_name),
            "pid": draw(st.sampled_from(pids)),
            "tid": draw(st.sampled_from(tids)),
            "ts": base + draw(st.integers(0, 10_000)),
        }
        if ev["ph"] == "X":
            ev["dur"] = draw(st.integers(0, 500))
        if ev["ph"] == "C":
            ev["args"] = {"value": draw(st.integers(-(2**40), 2**40))}
        elif draw(st.booleans()):
            ev["args"] = draw(st.dictionaries(_name, _arg_value, max_size=3))
        if draw(st.booleans()):
            ev["cat"] = draw(_name)
        events.append(ev)
    for pid in pids:
        events.append(
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": draw(_name)}}
        )
    return events


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
    assert first.frames_equal(second), _diff(first, second)

    # Without the "moetrace" object, the plain Chrome events alone give the same processes.
    plain = json.loads(text)
    del plain["moetrace"]
    (tmp_path / "plain.json").write_text(json.dumps(plain))
    assert _event_pids(load(tmp_path / "plain.json")) == _event_pids(first)

    back = load(write_trace(first, tmp_path / "out.pftrace", force=True))
    assert_same(first, back)


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
