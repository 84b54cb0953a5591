"""Issue 8 cases, each a hand-made trace with the expected numbers derived by hand: annotations
over work, overlapping kernels on one stream, a lagging GPU, an async wait on a gloo job,
graph launches, windows (step / trace / annotation), bounded ratios and aggregates."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from moetrace.analysis import analyze
from moetrace.trace.model import Trace

pytest.importorskip("moetrace.trace.io")


def build(
    events: list[tuple[Any, ...]],
    tracks: list[tuple[int | None, str, str, str]],
    deps: Sequence[tuple[int, int, str]] = (),
) -> Trace:
    """events: (track, name, cat, kind, ts, dur); tracks: (rank, unit, pid, tid)."""
    ev = {
        "id": list(range(len(events))),
        "track": [e[0] for e in events],
        "name": [e[1] for e in events],
        "cat": [e[2] for e in events],
        "kind": [e[3] for e in events],
        "ts": [e[4] for e in events],
        "dur": [e[5] for e in events],
    }
    tr = {
        "track": list(range(len(tracks))),
        "rank": [t[0] for t in tracks],
        "unit": [t[1] for t in tracks],
        "pid": [t[2] for t in tracks],
        "tid": [t[3] for t in tracks],
    }
    dp = {"src": [d[0] for d in deps], "dst": [d[1] for d in deps], "kind": [d[2] for d in deps]}
    return Trace.from_frames(ev, tr, dp, compute_depth=True)


def one(report: Any, **where: Any) -> dict[str, Any]:
    frame = report.ranks
    for k, v in where.items():
        frame = frame.filter(pl.col(k).eq_missing(v))
    assert frame.height == 1, frame
    return dict(frame.row(0, named=True))


# ------------------------------------------------------------------ 1. work vs annotation
def test_annotations_over_kernels_never_hide_the_work() -> None:
    """A gpu_user_annotation mirror [0, 100) over two kernels [10, 40) and [50, 90) at
    depth 1, a ProfilerStep and a user annotation over the host thread. By hand: window
    [10, 90) = 80, busy = 30 + 40 = 70, one gap [40, 50), util 70/80."""
    t = build(
        [
            (0, "ProfilerStep#1", "user_annotation", "host", 0, 120),
            (0, "forward", "user_annotation", "host", 1, 110),
            (0, "cudaLaunchKernel", "cuda_runtime", "host", 2, 3),
            (0, "cudaLaunchKernel", "cuda_runtime", "host", 6, 3),
            (1, "forward", "gpu_user_annotation", "marker", 0, 100),
            (1, "gemm", "kernel", "compute", 10, 30),
            (1, "swiglu", "kernel", "compute", 50, 40),
        ],
        [(0, "cpu", "1", "1"), (0, "stream", "0", "7")],
        [(2, 5, "launch"), (3, 6, "launch")],
    )
    r = analyze(t)
    got = one(r)
    assert got["step"] == 1
    assert (got["window_ns"], got["compute_ns"], got["busy_ns"], got["idle_ns"]) == (80, 70, 70, 10)
    track = r.tracks.row(0, named=True)
    assert (track["track"], track["busy_ns"], track["idle_ns"]) == (1, 70, 10)
    assert track["util"] == pytest.approx(70 / 80)
    assert r.gaps.select("start_ns", "end_ns", "before_id", "after_id").rows() == [(40, 50, 5, 6)]
    # the critical path joins the two kernels (depth 1) by track order: no annotation on it
    cp = r.critical_path.sort("seq")
    assert cp.select("event_id", "start_ns", "end_ns").rows() == [
        (5, 10, 40),
        (None, 40, 50),
        (6, 50, 90),
    ]


def test_cpu_only_main_thread_is_busy_under_its_annotations() -> None:
    """gloo job, one rank: ProfilerStep [0, 100) and a record_function range [0, 95) over
    aten ops [0, 40) (with a child [5, 20)) and [50, 90). By hand: main thread busy
    40 + 40 = 80 of the window [0, 90), util 8/9 (the old depth-0 rule gave 0)."""
    t = build(
        [
            (0, "ProfilerStep#3", "user_annotation", "host", 0, 100),
            (0, "moe/expert_ffn", "user_annotation", "host", 0, 95),
            (0, "aten::linear", "cpu_op", "host", 0, 40),
            (0, "aten::addmm", "cpu_op", "host", 5, 15),
            (0, "aten::silu", "cpu_op", "host", 50, 40),
        ],
        [(0, "cpu", "1", "1")],
    )
    r = analyze(t)
    got = one(r)
    assert (got["window_ns"], got["compute_ns"], got["busy_ns"]) == (90, 80, 80)
    assert r.tracks["util"].to_list() == [pytest.approx(80 / 90)]


# ------------------------------------------------------------------ overlapping kernels
def _kineto_file(path: Path, events: list[dict[str, Any]], rank: int = 0) -> Path:
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": rank}, "traceEvents": events}
    with gzip.open(path, "wt") as fh:
        json.dump(doc, fh)
    return path


def _x(
    name: str, cat: str, ts: float, dur: float, pid: int, tid: int, **args: Any
) -> dict[str, Any]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def test_overlapping_kernels_stay_on_their_stream(tmp_path: Path) -> None:
    """Programmatic dependent launch: K2 [40, 80) µs starts before K1 [0, 50) ends on the same
    stream; the reader puts K2 on an overflow lane, the analysis joins it back. By hand: one
    stream, busy = |[0, 80) ∪ [90, 100)| = 90 µs of the window [0, 100), one gap [80, 90);
    the path runs K3 <- K2 (the latest end before K3 starts), K2 waited for nothing there."""
    p = _kineto_file(
        tmp_path / "pdl.pt.trace.json.gz",
        [
            _x("k1", "kernel", 0, 50, 0, 7, stream=7),
            _x("k2", "kernel", 40, 40, 0, 7, stream=7),
            _x("k3", "kernel", 90, 10, 0, 7, stream=7),
        ],
    )
    from moetrace.trace.io import load

    t = load(p)
    assert t.tracks.filter(pl.col("unit") == "stream").height == 2  # the viewer's lane
    r = analyze(t)
    assert r.tracks.height == 1  # the analysis never invents a track
    got = one(r)
    assert (got["window_ns"], got["busy_ns"], got["compute_ns"]) == (100_000, 90_000, 90_000)
    assert r.gaps.select("start_ns", "end_ns").rows() == [(80_000, 90_000)]
    names = dict(zip(t.events["id"], t.events["name"], strict=True))
    cp = r.critical_path.sort("seq")
    assert [names.get(e) for e in cp["event_id"]] == ["k2", None, "k3"]
    assert cp["dur_ns"].to_list() == [40_000, 10_000, 10_000]


# ------------------------------------------------------------------ lagging GPU, windows
def _lagging() -> Trace:
    """Host steps 1 [0, 100), 2 [100, 200), 3 [200, 300); the GPU lags: step 1's kernel B
    runs to 170 while step 2's C starts at 120 (another stream); step 3's E runs after a
    data-loader stall."""
    host, s0, s1 = 0, 1, 2
    return build(
        [
            (host, "ProfilerStep#1", "user_annotation", "host", 0, 100),
            (host, "ProfilerStep#2", "user_annotation", "host", 100, 100),
            (host, "ProfilerStep#3", "user_annotation", "host", 200, 100),
            (host, "cudaLaunchKernel", "cuda_runtime", "host", 10, 2),  # 3 -> A
            (host, "cudaLaunchKernel", "cuda_runtime", "host", 20, 2),  # 4 -> B
            (host, "cudaLaunchKernel", "cuda_runtime", "host", 110, 2),  # 5 -> C
            (host, "cudaLaunchKernel", "cuda_runtime", "host", 115, 2),  # 6 -> D
            (host, "cudaLaunchKernel", "cuda_runtime", "host", 210, 2),  # 7 -> E
            (s0, "A", "kernel", "compute", 30, 30),
            (s0, "B", "kernel", "compute", 60, 110),
            (s1, "C", "kernel", "compute", 120, 20),
            (s0, "D", "kernel", "compute", 170, 60),
            (s0, "E", "kernel", "compute", 300, 20),
        ],
        [(0, "cpu", "1", "1"), (0, "stream", "0", "7"), (0, "stream", "0", "8")],
        [(call, call + 5, "launch") for call in range(3, 8)],
    )


def test_lagging_gpu_windows_partition_time() -> None:
    """By hand: raw step windows 1 [30, 170), 2 [120, 230) overlap; step 1 is cut at 120.
    Step 1: busy [30, 120) = 90, idle 0. Step 2 [120, 230): B's tail [120, 170), C, D
    -> busy 110, idle 0. Step 3 [300, 320): 20. Σ windows 220 <= trace window [30, 320)
    = 290, whose idle (the stall) is 290 - 220 = 70."""
    t = _lagging()
    r = analyze(t)
    got = {row["step"]: row for row in r.ranks.iter_rows(named=True)}
    assert [(got[s]["window_start_ns"], got[s]["window_end_ns"]) for s in (1, 2, 3)] == [
        (30, 120),
        (120, 230),
        (300, 320),
    ]
    assert [(got[s]["busy_ns"], got[s]["idle_ns"]) for s in (1, 2, 3)] == [
        (90, 0),
        (110, 0),
        (20, 0),
    ]
    assert [got[s]["compute_ns"] for s in (1, 2, 3)] == [90, 110, 20]
    assert any("step window(s) ran past" in w for w in r.warnings)
    whole = one(analyze(t, window="trace"))
    assert (whole["step"], whole["window_ns"], whole["busy_ns"], whole["idle_ns"]) == (
        None,
        290,
        220,
        70,
    )
    assert sum(row["window_ns"] for row in got.values()) <= whole["window_ns"]


def test_window_annotation_instance() -> None:
    """`annotation:NAME#K` picks instance K (0-based) of the slices named NAME: its window
    spans the device work launched inside it, like a step."""
    t = _lagging()
    r = analyze(t, window="annotation:ProfilerStep#2")  # the name itself, every instance
    assert one(r)["step"] == 0 and one(r)["window_ns"] == 110
    events = t.events.to_dicts()
    events += [
        {**events[0], "id": 13, "name": "fwd", "ts": 5, "dur": 20},
        {**events[0], "id": 14, "name": "fwd", "ts": 105, "dur": 20},
    ]
    t2 = Trace.from_frames(pl.DataFrame(events), t.tracks, t.deps, compute_depth=True)
    both = analyze(t2, window="annotation:fwd")
    assert both.ranks.select("step", "window_start_ns", "window_end_ns").rows() == [
        (0, 30, 120),  # A and B, launched inside fwd#0; cut where fwd#1's work begins
        (1, 120, 230),  # C and D, launched inside fwd#1
    ]
    second = analyze(t2, window="annotation:fwd#1")
    assert second.ranks.select("step", "window_start_ns", "window_end_ns").rows() == [(1, 120, 230)]
    with pytest.raises(ValueError, match="annotation:NAME"):
        analyze(t2, window="annotations")


# ------------------------------------------------------------------ async wait (gloo)
def test_async_wait_is_communication_not_compute() -> None:
    """CPU-only rank: the async all_to_all is launched at 0 (c10d op [0, 5)), runs on the gloo
    thread [2, 80); the main thread computes [5, 45) (aten::mm), then blocks in the work's
    wait() [45, 80) (only a record_function range marks it), then computes [80, 100).
    By hand: comm = |[0, 80)| = 80, compute = 40 + 20 = 60, overlapped = 40 (only the mm
    hides it), exposed = 40; the wait is not compute (it was: overlapped 75)."""
    t = build(
        [
            (0, "ProfilerStep#1", "user_annotation", "host", 0, 100),
            (0, "c10d::alltoall_base_", "cpu_op", "host", 0, 5),
            (0, "aten::mm", "cpu_op", "host", 5, 40),
            (0, "moe/dispatch_wait", "user_annotation", "host", 45, 35),
            (0, "aten::add", "cpu_op", "host", 80, 20),
            (1, "gloo:all_to_all", "user_annotation", "comm", 2, 78),
        ],
        [(0, "cpu", "1", "1"), (0, "cpu", "1", "2")],
    )
    got = one(analyze(t))
    assert (got["window_ns"], got["comm_ns"], got["compute_ns"]) == (100, 80, 60)
    assert (got["overlapped_ns"], got["exposed_comm_ns"], got["free_ns"]) == (40, 40, 0)
    assert got["overlap_ratio"] == pytest.approx(0.5)


# ------------------------------------------------------------------ graph replay
def test_graph_launched_kernels_get_launch_edges_and_step(tmp_path: Path) -> None:
    """cudaGraphLaunch (correlation 7) inside ProfilerStep#1 and op `model.forward`; the
    replayed kernels share correlation 7 and run after the host moved on to step 2. By hand:
    three launch edges from the graph launch, all kernels in step 1, window [1200, 1450) µs;
    step 2 (a plain kernel) is its own window."""
    p = _kineto_file(
        tmp_path / "graph.pt.trace.json.gz",
        [
            _x("ProfilerStep#1", "user_annotation", 0, 1000, 1, 1),
            _x("model.forward", "cpu_op", 10, 490, 1, 1),
            _x("cudaGraphLaunch", "cuda_runtime", 20, 10, 1, 1, correlation=7),
            _x("ProfilerStep#2", "user_annotation", 1000, 1000, 1, 1),
            _x("cudaLaunchKernel", "cuda_runtime", 1100, 10, 1, 1, correlation=8),
            _x("attn", "kernel", 1200, 100, 0, 7, stream=7, correlation=7),
            _x("moe_gemm1", "kernel", 1300, 100, 0, 7, stream=7, correlation=7),
            _x("moe_gemm2", "kernel", 1400, 50, 0, 7, stream=7, correlation=7),
            _x("sample", "kernel", 1500, 20, 0, 7, stream=7, correlation=8),
        ],
    )
    from moetrace.analysis.launches import launching_ops
    from moetrace.trace.io import load

    t = load(p)
    r = analyze(t)
    assert r.ranks.select("step", "window_start_ns", "window_end_ns").rows() == [
        (1, 1_200_000, 1_450_000),
        (2, 1_500_000, 1_520_000),
    ]
    ops = launching_ops(t)
    names = dict(zip(t.events["id"], t.events["name"], strict=True))
    got = {
        names[row["event_id"]]: (names[row["launch_id"]], names.get(row["op_id"]))
        for row in ops.iter_rows(named=True)
    }
    assert got == {
        "attn": ("cudaGraphLaunch", "model.forward"),
        "moe_gemm1": ("cudaGraphLaunch", "model.forward"),
        "moe_gemm2": ("cudaGraphLaunch", "model.forward"),
        "sample": ("cudaLaunchKernel", None),  # launched outside any op
    }


# ------------------------------------------------------------------ ratios, aggregates
def test_cp_comm_ratio_counts_other_ranks_comm_and_stays_in_range() -> None:
    """Rank 0's path runs through rank 1's comm (a data edge): cp_comm 50 ns while rank 0
    has no comm of its own. By hand: job comm in rank 0's window [0, 150) = [50, 100) = 50,
    so cp_comm_ratio = 50 / 50 = 1 (it was 50 / 0, or >1 with a little own comm)."""
    t = build(
        [
            (0, "mm0", "", "compute", 0, 50),
            (1, "a2a", "", "comm", 50, 50),
            (0, "mm1", "", "compute", 100, 50),
        ],
        [(0, "aic", "0", "a"), (1, "link", "1", "b")],
        [(0, 1, "data"), (1, 2, "data")],
    )
    r = analyze(t)
    got = one(r, rank=0)
    assert (got["comm_ns"], got["cp_comm_ns"], got["job_comm_ns"]) == (0, 50, 50)
    assert got["cp_comm_ratio"] == 1.0
    agg = r.aggregate_dicts()[0]
    assert agg["pooled"]["cp_comm_ratio"] == pytest.approx((50 + 50) / (50 + 50))
    assert "cp_comm_ratio" not in agg["sum"] and agg["mean"]["mfu"] is None
    assert agg["min"]["window_ns"] == 50 and agg["max"]["window_ns"] == 150


def test_overlapping_kernel_keeps_its_own_launch_edge(tmp_path: Path) -> None:
    """The ac2g flow of a kernel that overlaps its predecessor on the stream ends inside the
    predecessor (the reader binds a flow end to the slice enclosing it): that edge names two
    correlation ids and is replaced by the kernel's own call. By hand: k1 <- call 1, k2 <-
    call 2, nothing else."""
    events = [
        _x("cudaLaunchKernel", "cuda_runtime", 0, 2, 1, 1, correlation=1),
        _x("cudaLaunchKernel", "cuda_runtime", 3, 2, 1, 1, correlation=2),
        _x("k1", "kernel", 10, 50, 0, 7, correlation=1, stream=7),
        _x("k2", "kernel", 40, 40, 0, 7, correlation=2, stream=7),
    ]
    for flow, (t_call, t_kernel) in enumerate([(0, 10), (3, 40)], start=1):
        events.append({"ph": "s", "id": flow, "pid": 1, "tid": 1, "ts": t_call, "cat": "ac2g",
                       "name": "ac2g"})  # fmt: skip
        events.append({"ph": "f", "id": flow, "pid": 0, "tid": 7, "ts": t_kernel, "cat": "ac2g",
                       "name": "ac2g", "bp": "e"})  # fmt: skip
    from moetrace.analysis.launches import launching_ops
    from moetrace.trace.io import load

    t = load(_kineto_file(tmp_path / "flows.pt.trace.json.gz", events))
    names = dict(zip(t.events["id"], t.events["name"], strict=True))
    ops = launching_ops(t).sort("event_id")
    pairs = zip(ops["event_id"], ops["launch_id"], strict=True)
    calls = {names[e]: t.events["ts"][s] for e, s in pairs}
    assert calls == {"k1": 0, "k2": 3_000}
    r = analyze(t)
    assert any("relinked by correlation" in w for w in r.warnings)


def test_replayed_kernels_map_back_to_captured_ops(tmp_path: Path) -> None:
    """Capture trace: op `warmup` launches `fill`; op `attention` launches `attn_k`; op `moe`
    launches `gemm1`, `gemm2`. Replay: one cudaGraphLaunch replays attn_k, gemm1, gemm2. By
    hand: attn_k -> attention, gemm1 and gemm2 -> moe (the run starts after `fill`)."""
    from moetrace.analysis.launches import capture_map
    from moetrace.trace.io import load

    capture = load(
        _kineto_file(
            tmp_path / "capture.pt.trace.json.gz",
            [
                _x("warmup", "cpu_op", 0, 10, 1, 1),
                _x("cudaLaunchKernel", "cuda_runtime", 1, 2, 1, 1, correlation=1),
                _x("attention", "cpu_op", 20, 10, 1, 1),
                _x("cudaLaunchKernel", "cuda_runtime", 21, 2, 1, 1, correlation=2),
                _x("moe", "cpu_op", 40, 20, 1, 1),
                _x("cudaLaunchKernel", "cuda_runtime", 41, 2, 1, 1, correlation=3),
                _x("cudaLaunchKernel", "cuda_runtime", 45, 2, 1, 1, correlation=4),
                _x("fill", "kernel", 5, 3, 0, 7, stream=7, correlation=1),
                _x("attn_k", "kernel", 25, 3, 0, 7, stream=7, correlation=2),
                _x("gemm1", "kernel", 50, 3, 0, 7, stream=7, correlation=3),
                _x("gemm2", "kernel", 55, 3, 0, 7, stream=7, correlation=4),
            ],
        )
    )
    replay = load(
        _kineto_file(
            tmp_path / "replay.pt.trace.json.gz",
            [
                _x("model.forward", "cpu_op", 0, 50, 1, 1),
                _x("cudaGraphLaunch", "cuda_runtime", 5, 5, 1, 1, correlation=9),
                _x("attn_k", "kernel", 20, 3, 0, 7, stream=7, correlation=9),
                _x("gemm1", "kernel", 23, 3, 0, 7, stream=7, correlation=9),
                _x("gemm2", "kernel", 26, 3, 0, 7, stream=7, correlation=9),
            ],
        )
    )
    got = capture_map(replay, capture)
    names = dict(zip(replay.events["id"], replay.events["name"], strict=True))
    assert {names[e]: op for e, op in zip(got["event_id"], got["op"], strict=True)} == {
        "attn_k": "attention",
        "gemm1": "moe",
        "gemm2": "moe",
    }
    # on the command line: kernel time per captured op (µs in the files, ns here)
    from click.testing import CliRunner

    from moetrace.cli import main

    args = ["metrics", str(tmp_path / "replay.pt.trace.json.gz"), "--json"]
    res = CliRunner().invoke(main, [*args, "--capture", str(tmp_path / "capture.pt.trace.json.gz")])
    assert res.exit_code == 0, res.stderr
    cap = json.loads(res.stdout)["traces"][0]["capture"]
    assert (cap["replayed"], cap["mapped"]) == (3, 3)
    assert cap["ops"] == [
        {"op": "moe", "kernel_ns": 6_000},
        {"op": "attention", "kernel_ns": 3_000},
    ]
