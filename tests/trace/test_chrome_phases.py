"""Chrome phase semantics on small hand-made traces whose answers are known by construction:
B/E nesting, async b/n/e, instants i/I/R, counters C, flows v1 (s/t/f, bp e vs next slice)
and v2, M names and sort indices, exact ts from ints, floats and strings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.formats.chrome.read import read_chrome


def _load(tmp_path: Path, events: list[dict[str, Any]], **top: Any) -> Any:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, **top} if top else events))
    return read_chrome(path, flavor="chrome")


def _by_name(trace: Any) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in trace.events_with_tracks().to_dicts()}


def test_begin_end_nest_innermost_first(tmp_path: Path) -> None:
    t = _load(
        tmp_path,
        [
            {"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "args": {"a": 1}},
            {"ph": "B", "name": "inner", "pid": 1, "tid": 1, "ts": 2},
            {"ph": "B", "name": "other-thread", "pid": 1, "tid": 2, "ts": 3},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
            {"ph": "E", "pid": 1, "tid": 2, "ts": 6},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 9, "args": {"b": 2}},
        ],
    )
    ev = _by_name(t)
    assert (ev["outer"]["ts"], ev["outer"]["dur"], ev["outer"]["depth"]) == (0, 9000, 0)
    assert (ev["inner"]["ts"], ev["inner"]["dur"], ev["inner"]["depth"]) == (2000, 3000, 1)
    assert ev["other-thread"]["dur"] == 3000
    assert json.loads(ev["outer"]["args"]) == {"a": 1, "b": 2}  # E args merged into B's
    assert t.warnings == []


def test_async_nestable_and_instants(tmp_path: Path) -> None:
    t = _load(
        tmp_path,
        [
            {"ph": "b", "name": "req", "cat": "net", "id": "0x1", "pid": 1, "ts": 10},
            {"ph": "b", "name": "req2", "cat": "net", "id": "0x2", "pid": 1, "ts": 11},
            {"ph": "n", "name": "mark", "cat": "net", "id": "0x1", "pid": 1, "ts": 12},
            {"ph": "e", "name": "req", "cat": "net", "id": "0x1", "pid": 1, "ts": 20},
            {"ph": "e", "name": "req2", "cat": "net", "id": "0x2", "pid": 1, "ts": 30},
            {"ph": "i", "name": "i-thread", "pid": 1, "tid": 1, "ts": 1, "s": "t"},
            {"ph": "I", "name": "I-legacy", "pid": 1, "tid": 1, "ts": 2},
            {"ph": "R", "name": "R-mark", "pid": 1, "tid": 1, "ts": 3},
        ],
    )
    ev = _by_name(t)
    assert ev["req"]["dur"] == 10_000 and ev["req2"]["dur"] == 19_000
    assert ev["mark"]["dur"] == 0
    assert {ev[n]["dur"] for n in ("i-thread", "I-legacy", "R-mark")} == {0}
    # req and req2 overlap partially: they may not share a lane
    assert ev["req"]["track"] != ev["req2"]["track"]
    assert t.problems() == []


def test_counters_one_series_per_key(tmp_path: Path) -> None:
    t = _load(
        tmp_path,
        [
            {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"used": 5, "free": 7.5}},
            {"ph": "C", "name": "freq", "pid": 1, "ts": 2, "args": {"value": 1800}},
            {"ph": "C", "name": "q", "id": 3, "pid": 1, "ts": 3, "args": {"depth": 2}},
        ],
    )
    got = {(r["name"], r["ts"], r["value"]) for r in t.counters.to_dicts()}
    assert got == {
        ("mem used", 1000, 5.0),
        ("mem free", 1000, 7.5),
        ("freq", 2000, 1800.0),
        ("q id: 3 depth", 3000, 2.0),
    }


def test_flow_v1_binding_rules(tmp_path: Path) -> None:
    t = _load(
        tmp_path,
        [
            {"ph": "X", "name": "send", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
            {"ph": "X", "name": "send-child", "pid": 1, "tid": 1, "ts": 2, "dur": 2},
            {
                "ph": "s",
                "name": "f",
                "cat": "c",
                "id": 1,
                "pid": 1,
                "tid": 1,
                "ts": 5,
            },  # enclosing: send
            {"ph": "X", "name": "hop", "pid": 1, "tid": 2, "ts": 20, "dur": 10},
            {
                "ph": "t",
                "name": "f",
                "cat": "c",
                "id": 1,
                "pid": 1,
                "tid": 2,
                "ts": 25,
            },  # step on hop
            {
                "ph": "f",
                "name": "f",
                "cat": "c",
                "id": 1,
                "pid": 1,
                "tid": 3,
                "ts": 40,
            },  # next slice: recv
            {"ph": "X", "name": "early", "pid": 1, "tid": 3, "ts": 35, "dur": 10},
            {"ph": "X", "name": "recv", "pid": 1, "tid": 3, "ts": 50, "dur": 5},
            # bp e binds to the enclosing slice instead of the next one
            {
                "ph": "s",
                "name": "g",
                "cat": "c",
                "id": 1,
                "pid": 1,
                "tid": 1,
                "ts": 3,
            },  # deepest: send-child
            {
                "ph": "f",
                "name": "g",
                "cat": "c",
                "id": 1,
                "pid": 1,
                "tid": 3,
                "ts": 40,
                "bp": "e",
            },  # early
            # same id, other name: a different flow (key = cat, name, id); no start -> dangling
            {"ph": "f", "name": "h", "cat": "c", "id": 1, "pid": 1, "tid": 3, "ts": 51},
        ],
    )
    names = dict(zip(t.events["id"].to_list(), t.events["name"].to_list(), strict=True))
    edges = sorted((names[s], names[d]) for s, d in t.deps.select("src", "dst").iter_rows())
    assert edges == [("hop", "recv"), ("send", "hop"), ("send-child", "early")]


def test_metadata_names_and_sort_indices(tmp_path: Path) -> None:
    t = _load(
        tmp_path,
        [
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "second"}},
            {"ph": "M", "name": "process_sort_index", "pid": 2, "args": {"sort_index": -1}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "first"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 5, "args": {"name": "five"}},
            {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 5, "args": {"sort_index": 0}},
            {
                "ph": "M",
                "name": "thread_sort_index",
                "pid": 1,
                "tid": 9,
                "args": {"sort_index": -3},
            },
            {"ph": "X", "name": "a", "pid": 1, "tid": 5, "ts": 0, "dur": 1},
            {"ph": "X", "name": "b", "pid": 1, "tid": 9, "ts": 0, "dur": 1},
            {"ph": "X", "name": "c", "pid": 2, "tid": 1, "ts": 0, "dur": 1},
        ],
    )
    order = t.tracks.sort("sort_index").select("pid", "tid", "process_name", "thread_name").rows()
    assert order == [
        ("2", "1", "second", None),
        ("1", "9", "first", None),
        ("1", "5", "first", "five"),
    ]


def test_timestamps_exact_from_int_float_and_string(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        '[{"ph":"X","name":"a","pid":1,"tid":1,"ts":"1736408883688177.930","dur":0.5},'
        '{"ph":"X","name":"b","pid":1,"tid":2,"ts":1736408883688177.931,"dur":"2"},'
        '{"ph":"X","name":"c","pid":1,"tid":3,"ts":4458676522690,"dur":1e-3},'
        '{"ph":"X","name":"d","pid":"4376751100","tid":"stream 7","ts":-1.5,"dur":0}]'
    )
    t = read_chrome(path)
    got = dict(
        zip(
            t.events["name"].to_list(),
            zip(t.events["ts"].to_list(), t.events["dur"].to_list(), strict=True),
            strict=True,
        )
    )
    assert got == {
        "a": (1736408883688177930, 500),
        "b": (1736408883688177931, 2000),
        "c": (4458676522690000, 1),
        "d": (-1500, 0),
    }
    assert 1736408883688177.931 * 1000 != 1736408883688177931  # float64 would be wrong
    assert ("4376751100", "stream 7") in t.tracks.select("pid", "tid").rows()
    assert t.tracks.schema["pid"] == pl.String


def test_flat_fast_path_agrees_with_nesting_depth() -> None:
    """overflow_lanes' shortcut for flat tracks must give exactly what the general
    lane loop over nesting_depth gives (the independent reference), on flat, nested,
    touching, zero-length, equal-start and overlapping inputs."""
    import numpy as np

    from moetrace.trace import nesting as cp

    rng = np.random.default_rng(3)
    for case in range(300):
        n = int(rng.integers(1, 40))
        track = rng.integers(0, 3, n)
        if case % 3 == 0:  # flat streams: starts increase, each after the previous end
            gaps = rng.integers(0, 3, n)
            dur = rng.integers(0, 4, n)
            ts = np.zeros(n, dtype=np.int64)
            clock = {0: 0, 1: 0, 2: 0}
            for i in range(n):
                clock[track[i]] += int(gaps[i]) + (1 if i else 0)
                ts[i] = clock[track[i]]
                clock[track[i]] += int(dur[i])
        else:
            ts = rng.integers(0, 20, n)
            dur = rng.integers(0, 6, n)
        ts, dur = ts.astype(np.int64), dur.astype(np.int64)
        fast = cp.overflow_lanes(track, ts, dur, cp.MAX_OVERFLOW_LANE)
        saved = cp.all_flat
        cp.all_flat = lambda *a: False
        try:
            slow = cp.overflow_lanes(track, ts, dur, cp.MAX_OVERFLOW_LANE)
        finally:
            cp.all_flat = saved
        assert np.array_equal(fast[0], slow[0]) and np.array_equal(fast[1], slow[1]), case
