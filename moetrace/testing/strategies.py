"""Hypothesis strategies that draw traces and trace inputs (needs the dev extra: hypothesis).

Import this module only from tests: it is the one part of moetrace that imports hypothesis,
which `pip install moetrace[dev]` brings. Each strategy says what it draws; times are ns.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from moetrace.trace.model import DEP_KINDS, EVENT_KINDS, UNITS, Trace

_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_PID = st.one_of(st.integers(-(2**40), 2**62).map(str), _TEXT.filter(lambda s: s != ""))


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    """Random moetrace traces: any names, nesting or partial overlaps, epoch-sized or negative
    times, nullable flops/bytes/args, deps with fan-in/fan-out, counters."""
    n_tracks = draw(st.integers(1, 5))
    pids = draw(st.lists(_PID, min_size=n_tracks, max_size=n_tracks))
    tids = draw(st.lists(_PID, min_size=n_tracks, max_size=n_tracks))
    tracks = {
        "track": list(range(n_tracks)),
        "rank": draw(
            st.lists(
                st.one_of(st.none(), st.integers(0, 1000)), min_size=n_tracks, max_size=n_tracks
            )
        ),
        "pid": pids,
        "tid": tids,
        "process_name": draw(
            st.lists(st.one_of(st.none(), _TEXT), min_size=n_tracks, max_size=n_tracks)
        ),
        "thread_name": draw(
            st.lists(st.one_of(st.none(), _TEXT), min_size=n_tracks, max_size=n_tracks)
        ),
        "unit": draw(st.lists(st.sampled_from(UNITS), min_size=n_tracks, max_size=n_tracks)),
        "sort_index": draw(st.lists(st.integers(-5, 50), min_size=n_tracks, max_size=n_tracks)),
    }
    n = draw(st.integers(0, 25))
    base = draw(st.sampled_from([0, 1_736_405_443_909_176_934, -5_000]))
    ts = [base + draw(st.integers(0, 10_000)) for _ in range(n)]
    args_values = st.one_of(
        st.none(),
        st.dictionaries(
            _TEXT,
            st.one_of(
                st.integers(-(2**63), 2**63 - 1),
                _TEXT,
                st.floats(allow_nan=False, allow_infinity=False),
            ),
            max_size=3,
        ).map(json.dumps),
    )
    finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
    ids: list[int] = draw(st.permutations(list(range(n * 3))))[:n] if n else []
    events: dict[str, list[Any]] = {
        "id": ids,
        "track": draw(st.lists(st.integers(0, n_tracks - 1), min_size=n, max_size=n)),
        "name": draw(st.lists(_TEXT, min_size=n, max_size=n)),
        "cat": draw(st.lists(st.one_of(st.none(), _TEXT), min_size=n, max_size=n)),
        "kind": draw(st.lists(st.sampled_from(EVENT_KINDS), min_size=n, max_size=n)),
        "ts": ts,
        "dur": draw(st.lists(st.integers(0, 3_000), min_size=n, max_size=n)),
        "flops": draw(st.lists(st.one_of(st.none(), finite), min_size=n, max_size=n)),
        "bytes": draw(st.lists(st.one_of(st.none(), finite), min_size=n, max_size=n)),
        "args": draw(st.lists(args_values, min_size=n, max_size=n)),
    }
    m = draw(st.integers(0, 2 * n)) if n > 1 else 0
    deps = {
        "src": [draw(st.sampled_from(ids)) for _ in range(m)],
        "dst": [draw(st.sampled_from(ids)) for _ in range(m)],
        "kind": [draw(st.sampled_from(DEP_KINDS)) for _ in range(m)],
    }
    k = draw(st.integers(0, 6))
    counters = {
        "track": draw(st.lists(st.integers(0, n_tracks - 1), min_size=k, max_size=k)),
        "name": draw(st.lists(_TEXT, min_size=k, max_size=k)),
        "ts": draw(st.lists(st.integers(-(10**12), 10**18), min_size=k, max_size=k)),
        "value": draw(st.lists(finite, min_size=k, max_size=k)),
    }
    meta = {
        "format": "executor",
        "flavor": "moetrace",
        "executor": {"workload": {"experts": 8}},
        "peak_flops": 1.5e15,
    }
    return Trace.from_frames(events, tracks, deps, counters, meta, compute_depth=True)


@st.composite
def chrome_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random plain Chrome JSON event lists: X, B/E, i, C, flows v1, M names."""
    out: list[dict[str, Any]] = []
    n = draw(st.integers(0, 20))
    for i in range(n):
        pid = draw(st.sampled_from([1, 2, "Spans", 4_376_751_100]))
        tid = draw(st.sampled_from([1, 7, "stream 7"]))
        ts = draw(st.one_of(st.integers(0, 10**6), st.decimals(0, 10**6, places=3).map(str)))
        ph = draw(st.sampled_from(["X", "X", "B", "E", "i", "C", "s", "f", "M"]))
        ev: dict[str, Any] = {
            "ph": ph,
            "pid": pid,
            "tid": tid,
            "ts": ts,
            "name": draw(_TEXT),
            "cat": "c",
        }
        if ph == "X":
            ev["dur"] = draw(st.integers(0, 5_000))
        if ph == "C":
            ev["args"] = {"value": draw(st.integers(-100, 100))}
        if ph in ("s", "f"):
            ev["id"] = draw(st.integers(0, 3))
            if draw(st.booleans()):
                ev["bp"] = "e"
        if ph == "M":
            ev["name"] = draw(st.sampled_from(["thread_name", "process_name"]))
            ev["args"] = {"name": draw(_TEXT)}
        elif ph in ("X", "B", "i") and draw(st.booleans()):
            ev["args"] = {"i": i, "s": draw(_TEXT)}
        out.append(ev)
    return out


_ANY_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=10)
_CONTROL = st.text(st.characters(max_codepoint=0x9F, categories=["Cc"]), min_size=1, max_size=4)
_ODD_DIGITS = st.sampled_from(["07", "00", "-07", "-0", "0", "+7", " 7", "7 ", "0x1f", "1e3"])
_HOSTILE_PID = st.one_of(
    st.integers(-(2**70), 2**70),  # JSON integers of any size
    st.integers(-(2**70), 2**70).map(str),  # the same as strings
    _ODD_DIGITS,
    _ANY_TEXT,
    _CONTROL,
)
_HOSTILE_NAME = st.one_of(
    _ANY_TEXT, _CONTROL, st.sampled_from(["[bold]x[/]", "\x1b[31mred", "é✓中"])
)
_ARG_VALUE = st.one_of(
    st.integers(-(2**80), 2**80),
    _HOSTILE_NAME,
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)


@st.composite
def hostile_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Chrome JSON events with hostile values: string pids such as "07", "-0" or "0x1f",
    integers beyond 64 bits, control characters, markup and non-ASCII in names and args."""
    n = draw(st.integers(1, 12))
    pids = draw(st.lists(_HOSTILE_PID, min_size=1, max_size=3))
    tids = draw(st.lists(_HOSTILE_PID, min_size=1, max_size=3))
    base = draw(st.sampled_from([0, 1_736_408_883_688_177, -5_000]))
    events: list[dict[str, Any]] = []
    for _i in range(n):
        ev: dict[str, Any] = {
            "ph": draw(st.sampled_from(["X", "X", "i", "C"])),
            "name": draw(_HOSTILE_NAME),
            "pid": draw(st.sampled_from(pids)),
            "tid": draw(st.sampled_from(tids)),
            "ts": base + draw(st.integers(0, 10_000)),
        }
        if ev["ph"] == "X":
            ev["dur"] = draw(st.integers(0, 500))
        if ev["ph"] == "C":
            ev["args"] = {"value": draw(st.integers(-(2**40), 2**40))}
        elif draw(st.booleans()):
            ev["args"] = draw(st.dictionaries(_HOSTILE_NAME, _ARG_VALUE, max_size=3))
        if draw(st.booleans()):
            ev["cat"] = draw(_HOSTILE_NAME)
        events.append(ev)
    for pid in pids:
        events.append(
            {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": draw(_HOSTILE_NAME)}}
        )
    return events


_NESTED_NAMES = st.sampled_from(["mm", "all_reduce", "aten::mm", "ü✓", "[bold]x[/]", "", "a b"])
_STACK_OPS = st.lists(
    st.tuples(st.sampled_from(["open", "close", "instant"]), st.integers(0, 5)),
    max_size=25,
)


def slices_from_ops(ops: list[tuple[str, int]], base: int) -> list[tuple[int, int]]:
    """Well-nested (ts, dur) from a stack program: open/close/instant, each after a delay
    (0 makes equal timestamps, the hard cases for packet order)."""
    out: list[tuple[int, int]] = []
    stack: list[int] = []
    now = base
    for op, delay in ops:
        now += delay
        if op == "open":
            stack.append(now)
        elif op == "close" and stack:
            start = stack.pop()
            out.append((start, now - start))
        elif op == "instant":
            out.append((now, 0))
    while stack:
        start = stack.pop()
        out.append((start, now + 1 - start))
    return out


@st.composite
def nested_traces(draw: st.DrawFn) -> Trace:
    """Random well-nested traces (stack programs per track, equal timestamps included), ids
    permuted and offset up to 2^32, nullable ranks/pids/args, deps and counters."""
    n_tracks = draw(st.integers(1, 4))
    base = draw(st.sampled_from([0, -1_000, 1_700_000_000_000_000_000, 2**40]))
    rows: list[dict[str, Any]] = []
    for track in range(n_tracks):
        for ts, dur in slices_from_ops(draw(_STACK_OPS), base + draw(st.integers(0, 3))):
            rows.append({"track": track, "ts": ts, "dur": dur})
    n = len(rows)
    ids = draw(st.permutations(list(range(n)))) if n else []
    offset = draw(st.sampled_from([0, 1000, 2**32 - 1 - n]))
    events = {
        "id": [i + offset for i in ids],
        "track": [r["track"] for r in rows],
        "name": [draw(_NESTED_NAMES) for _ in rows],
        "cat": [draw(st.sampled_from([None, "kernel", "cpu_op"])) for _ in rows],
        "kind": [draw(st.sampled_from(EVENT_KINDS)) for _ in rows],
        "ts": [r["ts"] for r in rows],
        "dur": [r["dur"] for r in rows],
        "flops": [draw(st.one_of(st.none(), st.floats(allow_nan=False))) for _ in rows],
        "bytes": [draw(st.one_of(st.none(), st.floats(0, 1e12))) for _ in rows],
        "args": [
            draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.integers())))
            for _ in rows
        ],
    }
    events["args"] = [None if a is None else json.dumps(a) for a in events["args"]]
    tracks = {
        "track": list(range(n_tracks)),
        "rank": [draw(st.one_of(st.none(), st.integers(0, 3))) for _ in range(n_tracks)],
        "pid": [
            draw(st.sampled_from([None, "0", "12", "4376751100", "Spans"])) for _ in range(n_tracks)
        ],
        "tid": [draw(st.sampled_from([None, "1", "stream 7"])) for _ in range(n_tracks)],
        "process_name": [draw(st.sampled_from([None, "p", "GPU 0"])) for _ in range(n_tracks)],
        "thread_name": [draw(st.sampled_from([None, "t", "same"])) for _ in range(n_tracks)],
        "unit": [draw(st.sampled_from(UNITS)) for _ in range(n_tracks)],
        "sort_index": [draw(st.one_of(st.none(), st.integers(-3, 3))) for _ in range(n_tracks)],
    }
    all_ids = events["id"]
    n_deps = draw(st.integers(0, 2 * n)) if n else 0
    deps = {
        "src": [draw(st.sampled_from(all_ids)) for _ in range(n_deps)],
        "dst": [draw(st.sampled_from(all_ids)) for _ in range(n_deps)],
        "kind": [draw(st.sampled_from(DEP_KINDS)) for _ in range(n_deps)],
    }
    n_counters = draw(st.integers(0, 6))
    counters = {
        "track": [draw(st.integers(0, n_tracks - 1)) for _ in range(n_counters)],
        "name": [draw(st.sampled_from(["mem", "util", None])) for _ in range(n_counters)],
        "ts": [draw(st.integers(-5, 50)) + base for _ in range(n_counters)],
        "value": [draw(st.floats(allow_nan=False)) for _ in range(n_counters)],
    }
    return Trace.from_frames(events, tracks, deps, counters, {"flavor": "x"}, compute_depth=True)


@st.composite
def nested_slices(draw: st.DrawFn) -> tuple[list[int], list[int], list[int]]:
    """(track, ts, dur) lists of random well-nested slices on a few tracks (recursive splits)."""
    track, ts, dur = [], [], []

    def fill(t: int, lo: int, hi: int, level: int) -> None:
        if level > 4 or hi - lo < 1:
            return
        k = draw(st.integers(0, 3))
        cuts = sorted(draw(st.lists(st.integers(lo, hi), min_size=2 * k, max_size=2 * k)))
        for a, b in zip(cuts[::2], cuts[1::2], strict=True):
            track.append(t)
            ts.append(a)
            dur.append(b - a)
            fill(t, a, b, level + 1)

    for t in range(draw(st.integers(1, 3))):
        fill(t, 0, 1000, 0)
    return track, ts, dur
