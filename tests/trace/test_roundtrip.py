"""Round trips lose nothing: Trace -> Chrome JSON -> Trace, and Chrome JSON -> Trace -> Chrome
JSON -> Trace, on random traces (hypothesis) and on every real trace."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moetrace.testing.compare import assert_trace_equal
from moetrace.testing.strategies import chrome_events, traces
from moetrace.trace.formats.chrome.read import read_chrome
from moetrace.trace.formats.chrome.write import write_chrome
from moetrace.trace.io import load, write_trace
from moetrace.trace.model import Trace


def _roundtrip(trace: Trace, path: Path) -> Trace:
    write_chrome(trace, path)
    return read_chrome(path)


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(trace=traces())
def test_random_trace_roundtrips_exactly(trace: Trace, tmp_path: Path) -> None:
    back = _roundtrip(trace, tmp_path / "t.json")
    assert_trace_equal(back, trace)
    assert back.meta["executor"] == trace.meta["executor"]
    assert back.meta["peak_flops"] == trace.meta["peak_flops"]
    assert back.meta["format"] == "chrome-json"


@pytest.mark.slow
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(events=chrome_events(), obj=st.booleans())
def test_random_chrome_json_roundtrips(
    events: list[dict[str, Any]], obj: bool, tmp_path: Path
) -> None:
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"traceEvents": events} if obj else events))
    first = read_chrome(src)
    assert first.problems() == []
    second = _roundtrip(first, tmp_path / "out.json")
    assert_trace_equal(second, first)
    third = _roundtrip(second, tmp_path / "out2.json")
    assert_trace_equal(third, second)


@pytest.mark.slow
def test_every_real_trace_roundtrips(real_trace_files: list[Path], tmp_path: Path) -> None:
    for path in real_trace_files:
        if path.stat().st_size > 2_000_000:
            continue  # the big ones are covered by the CLI test below; keep this test quick
        first = load(path)
        out = tmp_path / (path.name.replace(".json.gz", "") + ".rt.json.gz")
        write_trace(first, out)
        second = load(out)
        assert_trace_equal(second, first)
        assert second.meta["flavor"] == first.meta["flavor"]


def test_written_json_is_object_form_metadata_first_3_decimals(tmp_path: Path) -> None:
    trace = Trace.from_frames(
        {
            "id": [0, 1],
            "track": [0, 0],
            "name": ["a", "b"],
            "kind": ["compute", "comm"],
            "ts": [1_736_405_443_909_176_934, 1_736_405_443_909_177_000],
            "dur": [5, 1_000],
        },
        {
            "track": [0],
            "pid": ["3"],
            "tid": ["7"],
            "unit": ["aic"],
            "rank": [2],
            "sort_index": [0],
            "thread_name": ["AIC 0"],
        },
        {"src": [0], "dst": [1], "kind": ["data"]},
        compute_depth=True,
    )
    buf = io.BytesIO()
    write_trace(trace, buf)
    doc = json.loads(buf.getvalue(), parse_float=str)
    assert isinstance(doc, dict) and list(doc)[-1] == "traceEvents"
    phs = [e["ph"] for e in doc["traceEvents"]]
    assert phs[: phs.count("M")] == ["M"] * phs.count("M") and phs.count("M") >= 2
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert xs[0]["ts"] == "1736405443909176.934" and xs[0]["dur"] == "0.005"
    assert xs[0]["pid"] == 3 and xs[0]["tid"] == 7
    # the dep is a v2 flow on the slices themselves (one in, one out)
    assert (
        xs[0]["flow_out"] is True
        and xs[1]["flow_in"] is True
        and xs[0]["bind_id"] == xs[1]["bind_id"]
    )


def test_fan_in_fan_out_deps_become_v1_flows(tmp_path: Path) -> None:
    trace = Trace.from_frames(
        {
            "id": [0, 1, 2, 3],
            "track": [0, 1, 2, 0],
            "name": list("abcd"),
            "kind": ["compute"] * 4,
            "ts": [0, 10, 10, 30],
            "dur": [5, 5, 5, 5],
        },
        {
            "track": [0, 1, 2],
            "pid": ["1", "1", "1"],
            "tid": ["1", "2", "3"],
            "unit": ["aic", "aiv", "link"],
        },
        {"src": [0, 0, 1, 2], "dst": [1, 2, 3, 3], "kind": ["data"] * 4},
        compute_depth=True,
    )
    path = tmp_path / "dag.json"
    write_trace(trace, path)
    doc = json.loads(path.read_text())
    v1 = [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    v2 = [e for e in doc["traceEvents"] if "bind_id" in e]
    assert len(v1) == 4 and len(v2) == 3  # 2 edges as v2 (chain 0->1->3), 2 as v1 pairs
    back = read_chrome(path)
    assert trace.frames_equal(back)
    # Without moetrace's tables, Chrome semantics alone recover the same edges from the flows.
    del doc["moetrace"]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(doc))
    again = read_chrome(plain)
    got = set(again.deps.select("src", "dst").iter_rows())
    assert got == {(0, 1), (0, 2), (1, 3), (2, 3)}
    assert again.deps.height == 4 and set(again.deps["kind"].cast(pl.String)) == {"flow"}


def test_executor_trace_roundtrips_exactly(tmp_path: Path) -> None:
    """A simulated run written as Chrome JSON loads back identical and knows how it was made."""
    run = pytest.importorskip("moetrace.executor.run")
    for schedule in ("sequential", "tile"):
        trace = run.simulate(ranks=4, tokens=256, schedule=schedule)
        back = _roundtrip(trace, tmp_path / f"{schedule}.json.gz")
        assert_trace_equal(back, trace)
        assert back.meta["executor"] == trace.meta["executor"]
        assert back.meta.get("peak_flops") == trace.meta.get("peak_flops")
        assert back.meta["flavor"] == "moetrace" and back.meta["format"] == "chrome-json"
        assert back.deps.height == trace.deps.height > 0


def test_gzip_output_is_byte_identical_across_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gzip header carries no time or name, so the same trace gives the same bytes.
    Deterministic: the clock is made to jump a day between the writes (no sleep)."""
    import time

    from moetrace.trace.io import load

    clock = iter(range(1_700_000_000, 1_700_000_000 + 10**6, 86_400))
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: float(next(clock, real_time())))

    trace = Trace.from_frames(
        events={"id": [0], "track": [0], "name": ["x"], "kind": ["compute"], "ts": [0], "dur": [5]},
        tracks={"track": [0], "pid": ["1"], "tid": ["1"], "unit": ["stream"]},
    )
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    trace.write(a)
    trace.write(b)
    assert a.read_bytes() == b.read_bytes()
    assert load(a).events["dur"].to_list() == [5]
