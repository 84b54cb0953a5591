"""Property tests and realistic shapes for the .pftrace round trip.

Random well-nested traces (hypothesis), an executor-shaped trace (many ranks, aic/aiv/link
lanes, data deps with fan-in and fan-out) and a Kineto-shaped one (string and >2^32 pids,
nested host slices, launch flows) must come back from .pftrace unchanged, and the fast
encoder must write the same bytes as the official builder on all of them.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moetrace.trace.formats.pftrace.read import read_pftrace
from moetrace.trace.formats.pftrace.write import encode_pftrace
from moetrace.trace.model import DEP_KINDS, EVENT_KINDS, UNITS, Trace


def round_trip(trace: Trace) -> Trace:
    """Write with the fast path (checked equal to the official bytes) and read back."""
    fast = encode_pftrace(trace, fast=True)
    assert fast == encode_pftrace(trace, fast=False)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.pftrace"
        path.write_bytes(fast)
        return read_pftrace(path)


def assert_same(trace: Trace, back: Trace) -> None:
    assert back.tracks.equals(trace.tracks.sort("track"))
    assert back.events.equals(trace.events.sort("id"))
    assert back.deps.equals(trace.deps)
    key = ["track", pl.col("name").is_null(), "name", "ts"]
    assert back.counters.equals(trace.counters.sort(key, maintain_order=True))


# ------------------------------------------------------------------ hypothesis
NAMES = st.sampled_from(["mm", "all_reduce", "aten::mm", "ü✓", "[bold]x[/]", "", "a b"])
OPS = st.lists(
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
def traces(draw: Any) -> Trace:
    n_tracks = draw(st.integers(1, 4))
    base = draw(st.sampled_from([0, -1_000, 1_700_000_000_000_000_000, 2**40]))
    rows: list[dict[str, Any]] = []
    for track in range(n_tracks):
        for ts, dur in slices_from_ops(draw(OPS), base + draw(st.integers(0, 3))):
            rows.append({"track": track, "ts": ts, "dur": dur})
    n = len(rows)
    ids = draw(st.permutations(list(range(n)))) if n else []
    offset = draw(st.sampled_from([0, 1000, 2**32 - 1 - n]))
    events = {
        "id": [i + offset for i in ids],
        "track": [r["track"] for r in rows],
        "name": [draw(NAMES) for _ in rows],
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


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_random_traces_round_trip(trace: Trace) -> None:
    assert trace.problems() == []
    back = round_trip(trace)
    assert_same(trace, back)
    # (exact ties nest by row order in the model, so compare with the source in id order)
    canonical = Trace(trace.events.sort("id"), trace.tracks, trace.deps, trace.counters)
    assert back.problems() == canonical.problems()


# ------------------------------------------------------------ executor-shaped
def executor_like(ranks: int = 16, tiles: int = 40, seed: int = 1) -> Trace:
    """Per rank: a step marker lane, 4 aic + 2 aiv cores and 2 links; tile tasks back to back
    per lane, data deps fanning out from each aic tile to aiv/link tasks and back in."""
    rng = np.random.default_rng(seed)
    lanes = [("marker", "cpu")] + [(f"aic {i}", "aic") for i in range(4)]
    lanes += [(f"aiv {i}", "aiv") for i in range(2)] + [(f"link {i}", "link") for i in range(2)]
    track_rows: dict[str, list[Any]] = {
        k: []
        for k in (
            "track",
            "rank",
            "pid",
            "tid",
            "thread_name",
            "unit",
            "sort_index",
            "process_name",
        )
    }
    ev: dict[str, list[Any]] = {
        k: [] for k in ("id", "track", "name", "kind", "ts", "dur", "flops", "bytes")
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}
    for rank in range(ranks):
        for index, (lane, unit) in enumerate(lanes):
            track = rank * len(lanes) + index
            for key, value in (
                ("track", track),
                ("rank", rank),
                ("pid", str(rank)),
                ("tid", str(index)),
                ("thread_name", lane),
                ("unit", unit),
                ("sort_index", index),
                ("process_name", f"rank {rank}"),
            ):
                track_rows[key].append(value)
            if unit == "cpu":
                continue
            durs = rng.integers(100, 1000, tiles)
            starts = np.concatenate([[0], np.cumsum(durs)[:-1]])
            for t in range(tiles):
                ev["id"].append(len(ev["id"]))
                ev["track"].append(track)
                ev["name"].append(f"{unit} tile {t}")
                ev["kind"].append("comm" if unit == "link" else "compute")
                ev["ts"].append(int(starts[t]))
                ev["dur"].append(int(durs[t]))
                ev["flops"].append(float(durs[t]) * 1e6 if unit != "link" else None)
                ev["bytes"].append(float(durs[t]) * 64 if unit == "link" else None)
        end = max(e + d for e, d in zip(ev["ts"], ev["dur"], strict=True))
        ev["id"].append(len(ev["id"]))
        ev["track"].append(rank * len(lanes))
        ev["name"].append("step 0")
        ev["kind"].append("marker")
        ev["ts"].append(0)
        ev["dur"].append(end)
        ev["flops"].append(None)
        ev["bytes"].append(None)
    n = len(ev["id"])
    src = rng.integers(0, n, 3 * n)
    fan_out = np.repeat(src[: n // 4], 3)  # each of these sources feeds three tasks
    fan_in_dst = np.repeat(rng.integers(0, n, n // 4), 3)  # ...and these wait for three
    deps["src"] = np.concatenate([fan_out, rng.integers(0, n, len(fan_in_dst))]).tolist()
    deps["dst"] = np.concatenate([rng.integers(0, n, len(fan_out)), fan_in_dst]).tolist()
    deps["kind"] = ["data"] * len(deps["src"])
    meta = {
        "format": "executor",
        "flavor": "moetrace",
        "peak_flops": 3.5e14,
        "executor": {"workload": {"experts": 256}, "schedule": "tile"},
    }
    return Trace.from_frames(ev, track_rows, deps, None, meta, compute_depth=True)


def test_executor_shaped_trace_round_trips() -> None:
    trace = executor_like()
    assert trace.problems() == []
    assert trace.deps.height > 1000 and len(trace.ranks) == 16
    back = round_trip(trace)
    assert_same(trace, back)
    assert back.meta["executor"] == trace.meta["executor"]
    assert back.meta["peak_flops"] == 3.5e14
    assert back.ranks == list(range(16))
    # fan-in and fan-out survive as such
    out_degree = back.deps.group_by("src").len()["len"].max()
    in_degree = back.deps.group_by("dst").len()["len"].max()
    assert out_degree is not None and in_degree is not None
    assert int(out_degree) >= 3 and int(in_degree) >= 3


# -------------------------------------------------------------- Kineto-shaped
def kineto_like() -> Trace:
    """Host thread with ProfilerStep#N > aten ops > cudaLaunchKernel, GPU kernels on a
    stream (launch flows), a gpu_user_annotation marker lane, a "Spans" pid, an Ascend-style
    pid above 2^32, and a memory counter."""
    steps = 3
    ev: dict[str, list[Any]] = {
        k: [] for k in ("id", "track", "name", "cat", "kind", "ts", "dur", "args")
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}

    def add(
        track: int, name: str, cat: str, kind: str, ts: int, dur: int, args: str | None = None
    ) -> int:
        ev["id"].append(len(ev["id"]))
        for key, value in (
            ("track", track),
            ("name", name),
            ("cat", cat),
            ("kind", kind),
            ("ts", ts),
            ("dur", dur),
            ("args", args),
        ):
            ev[key].append(value)
        return ev["id"][-1]

    base = 1_700_000_000_000_000_000
    for step in range(steps):
        t = base + step * 10_000
        add(0, f"ProfilerStep#{step}", "user_annotation", "marker", t, 9_000)
        add(0, "aten::linear", "cpu_op", "host", t + 100, 3_000, '{"Input Dims": [[8, 16]]}')
        add(0, "aten::addmm", "cpu_op", "host", t + 100, 2_000)
        launch = add(
            0, "cudaLaunchKernel", "cuda_runtime", "host", t + 500, 200, '{"correlation": 7}'
        )
        kernel = add(
            1,
            "ampere_sgemm_128x64",
            "kernel",
            "compute",
            t + 1_000,
            4_000,
            '{"stream": 7, "grid": [1, 2, 3]}',
        )
        add(2, "forward", "gpu_user_annotation", "marker", t + 900, 5_000)
        add(3, "ncclDevKernel_AllReduce", "kernel", "comm", t + 5_500, 1_000)
        add(4, "span", "python_function", "host", t, 50)
        deps["src"].append(launch)
        deps["dst"].append(kernel)
        deps["kind"].append("launch")
    tracks = {
        "track": [0, 1, 2, 3, 4],
        "rank": [0, 0, 0, 0, None],
        "pid": ["2718", "0", "0", "4376751100", "Spans"],
        "tid": ["2718", "stream 7", "stream 7 annotations", "stream 13", "Spans"],
        "process_name": ["python3", "GPU 0", "GPU 0", "HCCL", "Spans"],
        "thread_name": ["python3", "stream 7", "stream 7 annotations", "stream 13", None],
        "unit": ["cpu", "stream", "stream", "stream", "cpu"],
        "sort_index": [0, 10, 11, 12, None],
    }
    counters = {
        "track": [1] * 4,
        "name": ["Memory"] * 4,
        "ts": [base + i * 5_000 for i in range(4)],
        "value": [1.0, 2e9, 3.5, 0.0],
    }
    meta = {
        "format": "chrome-json",
        "flavor": "kineto",
        "source": ["x.json"],
        "distributedInfo": {"rank": 0, "world_size": 8},
    }
    return Trace.from_frames(ev, tracks, deps, counters, meta, compute_depth=True)


def test_kineto_shaped_trace_round_trips() -> None:
    trace = kineto_like()
    assert trace.problems() == []
    assert trace.events["depth"].max() == 3  # step > linear > addmm > launch
    back = round_trip(trace)
    assert_same(trace, back)
    assert back.meta["flavor"] == "kineto"
    assert back.meta["distributedInfo"] == {"rank": 0, "world_size": 8}
    assert back.tracks["pid"].to_list() == ["2718", "0", "0", "4376751100", "Spans"]
    # epoch-sized nanosecond timestamps stay exact
    assert back.events.sort("id")["ts"][0] == 1_700_000_000_000_000_000


def test_the_executors_own_trace_round_trips() -> None:
    """A real simulated run (4 ranks): NaN flops, JSON args, data deps, step markers."""
    from moetrace.executor.run import simulate

    trace = simulate(ranks=4, tokens=128)
    assert trace.deps.height > 1000
    back = round_trip(trace)
    assert_same(trace, back)
    assert back.meta["executor"] == trace.meta["executor"]
    assert back.meta["peak_flops"] == trace.meta["peak_flops"]
