"""Graph replay on a real vLLM decode (MI300X, one hipGraphLaunch): every device event whose
runtime call was recorded has a `launch` row in Trace.deps (the graph launch's ac2g flow has
no start, so no flow binds; the correlation id does)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl

from moetrace.trace.io import load


def test_graph_replay_launch_edges_cover_device_events(real_traces: Path) -> None:
    """Expected: the device events whose `correlation` names a runtime call, counted from the
    raw JSON (independent of the reader)."""
    path = real_traces / "kineto_moe" / "mi300x_gptoss20b_decode" / "graph_execution.json.gz"
    with gzip.open(path) as fh:
        raw = json.load(fh)["traceEvents"]
    calls = {e["args"]["correlation"] for e in raw if e.get("cat") == "cuda_runtime"}
    device = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    linked = sum(1 for e in device if e["args"].get("correlation") in calls)
    t = load(path)
    dst = t.deps.filter(pl.col("kind") == "launch")["dst"].unique()
    assert dst.len() == linked
    assert linked >= 0.95 * len(device)


def _x(
    name: str, cat: str, ts: float, dur: float, pid: int, tid: int, **args: object
) -> dict[str, object]:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}  # fmt: skip


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt") as fh:
        json.dump({"schemaVersion": 1, "distributedInfo": {"rank": 0}, "traceEvents": events}, fh)
    return path


def test_capture_launch_calls_map_replayed_kernels(tmp_path: Path) -> None:
    """A capture trace as Kineto writes one (TraceLens trace_capture_merge.py): launch calls
    with `args.kernel` between hipStreamBeginCapture and hipStreamEndCapture, no kernels.
    Window 0 (batch 1) has 2 calls, window 1 (batch 2) has 3: attention launches attn_k, moe
    launches gemm1 and gemm2. The replay's graph launch replays attn_k, gemm1, gemm2. By
    construction: the 3-call window, attn_k -> attention, gemm1/gemm2 -> moe."""
    from moetrace.analysis.launches import capture_map

    cap = [
        _x("hipStreamBeginCapture", "cuda_runtime", 0, 1, 1, 1, correlation=1),
        _x("norm", "cpu_op", 2, 5, 1, 1),
        _x("hipLaunchKernel", "cuda_runtime", 3, 1, 1, 1, correlation=2, kernel="x"),
        _x("hipLaunchKernel", "cuda_runtime", 5, 1, 1, 1, correlation=3, kernel="y"),
        _x("hipStreamEndCapture", "cuda_runtime", 8, 1, 1, 1, correlation=4),
        _x("hipStreamBeginCapture", "cuda_runtime", 10, 1, 1, 1, correlation=5),
        _x("attention", "cpu_op", 12, 4, 1, 1),
        _x("hipLaunchKernel", "cuda_runtime", 13, 1, 1, 1, correlation=6, kernel="attn_k"),
        _x("moe", "cpu_op", 17, 6, 1, 1),
        _x("hipLaunchKernel", "cuda_runtime", 18, 1, 1, 1, correlation=7, kernel="gemm1"),
        _x("hipLaunchKernel", "cuda_runtime", 20, 1, 1, 1, correlation=8, kernel="gemm2"),
        _x("hipStreamEndCapture", "cuda_runtime", 25, 1, 1, 1, correlation=9),
    ]
    rep = [
        _x("hipGraphLaunch", "cuda_runtime", 5, 5, 1, 1, correlation=9),
        _x("attn_k", "kernel", 20, 3, 0, 7, stream=7, correlation=9),
        _x("gemm1", "kernel", 23, 3, 0, 7, stream=7, correlation=9),
        _x("gemm2", "kernel", 26, 3, 0, 7, stream=7, correlation=9),
    ]
    capture = load(_write(tmp_path / "cap.pt.trace.json.gz", cap))
    replay = load(_write(tmp_path / "rep.pt.trace.json.gz", rep))
    got = capture_map(replay, capture)
    names = dict(zip(replay.events["id"], replay.events["name"], strict=True))
    assert {names[e]: op for e, op in zip(got["event_id"], got["op"], strict=True)} == {
        "attn_k": "attention",
        "gemm1": "moe",
        "gemm2": "moe",
    }
