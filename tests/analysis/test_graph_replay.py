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
    raw = json.load(gzip.open(path))["traceEvents"]
    calls = {e["args"]["correlation"] for e in raw if e.get("cat") == "cuda_runtime"}
    device = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    linked = sum(1 for e in device if e["args"].get("correlation") in calls)
    t = load(path)
    dst = t.deps.filter(pl.col("kind") == "launch")["dst"].unique()
    assert dst.len() == linked
    assert linked >= 0.95 * len(device)
