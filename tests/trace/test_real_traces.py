"""Every real profiler trace loads with the expected ranks, units, comm events and exact times.

References are computed independently here with the standard `json` module (Decimal for
numbers), not with moetrace's reader.
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from moetrace.trace.io import load


def _events(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        data = json.load(fh, parse_float=Decimal)
    events: list[dict[str, Any]] = data["traceEvents"] if isinstance(data, dict) else data
    return events


def _ns(value: Any) -> int:
    return int((Decimal(str(value)) * 1000).to_integral_value(rounding="ROUND_HALF_UP"))


@pytest.mark.slow
def test_every_real_trace_loads_valid(real_trace_files: list[Path]) -> None:
    paths = real_trace_files
    assert len(paths) >= 20
    for path in paths:
        trace = load(path)
        assert trace.problems() == [], path
        raw = _events(path)
        slices = [e for e in raw if e.get("ph") in ("X", "i", "I", "R")]
        # Every complete event with a dur and every instant becomes exactly one event.
        assert trace.events.height >= len(
            [e for e in slices if e.get("ph") != "X" or "dur" in e]
        ), path
        assert trace.meta["format"] == "chrome-json"


def test_nccl_data_comm_kernels_ranks_units(real_traces: Path) -> None:
    path = real_traces / "kineto" / "hta__nccl_parser_config__nccl_data.json.gz"
    trace = load(path)
    raw = _events(path)
    expected_comm = sorted(
        _ns(e["ts"])
        for e in raw
        if e.get("ph") == "X"
        and e.get("cat") == "kernel"
        and (re.match(r"^nccl(Dev)?Kernel_", e["name"]) or "Collective name" in e.get("args", {}))
    )
    assert len(expected_comm) > 0
    comm = trace.events.filter(pl.col("kind") == "comm")
    assert sorted(comm["ts"].to_list()) == expected_comm
    assert all(n.startswith("ncclKernel_") for n in comm["name"].to_list())
    assert trace.ranks == [0]
    ev = trace.events_with_tracks()
    assert set(ev.filter(pl.col("cat") == "kernel")["unit"].unique().to_list()) == {"stream"}
    assert set(ev.filter(pl.col("cat") == "cpu_op")["unit"].unique().to_list()) == {"cpu"}
    # ac2g flows become launch deps from a cuda_runtime call to a GPU event
    launch = trace.deps.filter(pl.col("kind") == "launch")
    assert launch.height > 1000
    src = launch.join(
        trace.events.select(pl.col("id").alias("src"), pl.col("cat").alias("src_cat")), on="src"
    )
    dst = src.join(
        trace.events.select(pl.col("id").alias("dst"), pl.col("cat").alias("dst_cat")), on="dst"
    )
    assert set(dst["src_cat"].unique().to_list()) <= {"cuda_runtime", "cuda_driver"}
    assert set(dst["dst_cat"].unique().to_list()) <= {"kernel", "gpu_memcpy", "gpu_memset"}
    # Kineto float timestamps exact to the ns
    first_kernel = next(e for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel")
    got = trace.events.filter(pl.col("cat") == "kernel")["ts"].min()
    assert got == min(_ns(e["ts"]) for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel")
    assert first_kernel is not None


def test_profiler_steps_are_markers(real_traces: Path) -> None:
    trace = load(real_traces / "kineto" / "hta__call_stack__backward_thread.json")
    steps = trace.events.filter(pl.col("name").str.starts_with("ProfilerStep#"))
    assert steps.height == 1 and steps["kind"].to_list() == ["marker"]


@pytest.mark.parametrize("rank", [0, 1])
def test_ascend_level0_lanes_ranks_exact_ts(real_traces: Path, rank: int) -> None:
    path = real_traces / "ascend" / f"level0__rank{rank}_ascend_pt__trace_view.json"
    trace = load(path)
    raw = _events(path)
    assert trace.ranks == [rank]
    procs = {
        e["pid"]: e["args"]["name"]
        for e in raw
        if e.get("ph") == "M" and e["name"] == "process_name"
    }
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in raw
        if e.get("ph") == "M" and e["name"] == "thread_name"
    }
    group = [
        e
        for e in raw
        if e.get("ph") == "X"
        and procs.get(e["pid"]) == "HCCL"
        and threads.get((e["pid"], e["tid"]), "").endswith("Communication")
    ]
    assert len(group) == 4
    comm = trace.events.filter(pl.col("kind") == "comm")
    assert sorted(comm["ts"].to_list()) == sorted(_ns(e["ts"]) for e in group)
    assert sorted(comm["dur"].to_list()) == sorted(_ns(e["dur"]) for e in group)
    ev = trace.events_with_tracks()
    assert set(ev.filter(pl.col("kind") == "comm")["unit"].to_list()) == {"link"}
    hw = ev.filter(pl.col("process_name") == "Ascend Hardware")
    assert set(hw["unit"].unique().to_list()) == {"stream"}
    assert set(
        ev.filter(pl.col("process_name") == "Overlap Analysis")["kind"].unique().to_list()
    ) == {"marker"}
    # compute = kernel task types only
    compute_types = {"AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU"}
    expected = sum(
        1 for e in raw if e.get("ph") == "X" and e.get("args", {}).get("Task Type") in compute_types
    )
    assert trace.events.filter(pl.col("kind") == "compute").height == expected
    # every timestamp exact to the nanosecond (strings with 3 decimals, never through float)
    want = sorted(_ns(e["ts"]) for e in raw if e.get("ph") == "X")
    assert sorted(trace.events["ts"].to_list()) == want
    assert "1736405443909176934" in {str(v) for v in trace.events["ts"].to_list()} or rank == 1
    # launch deps from HostToDevice / async_npu flows land on device tasks
    launch = trace.deps.filter(pl.col("kind") == "launch").join(
        ev.select(pl.col("id").alias("dst"), "unit"), on="dst"
    )
    assert launch.height > 100
    assert set(launch["unit"].unique().to_list()) <= {"stream", "link"}


def test_ascend_hccl_plane_lanes_are_links_and_not_comm(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "HCCL"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": 7,
            "tid": 0,
            "args": {"name": "Group 0 Communication"},
        },
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 1, "args": {"name": "Plane 0"}},
        {"ph": "X", "name": "hcom_allReduce__1", "pid": 7, "tid": 0, "ts": "10.000", "dur": 5},
        {"ph": "X", "name": "Memcpy", "pid": 7, "tid": 1, "ts": "11.000", "dur": 1},
        {"ph": "X", "name": "Notify_Wait", "pid": 7, "tid": 1, "ts": "12.000", "dur": 1},
    ]
    path = tmp_path / "rank3_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(events))
    trace = load(path)
    ev = trace.events_with_tracks().sort("ts")
    assert ev["kind"].to_list() == ["comm", "memory", "other"]
    assert set(ev["unit"].to_list()) == {"link"}
    assert trace.ranks == [3]


def test_mstt_advisor_keeps_pid_above_2_32(real_traces: Path) -> None:
    trace = load(real_traces / "ascend" / "mstt_advisor__trace_view.json")
    pids = set(trace.tracks["pid"].to_list())
    assert "4376751100" in pids
    overlap = trace.tracks.filter(pl.col("pid") == "4376751100")
    assert set(overlap["process_name"].to_list()) == {"Overlap Analysis"}


def test_cpu_only_gloo_trace(real_traces: Path) -> None:
    trace = load(
        real_traces / "kineto" / "hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    )
    assert trace.ranks == [34]
    comm = trace.events.filter(pl.col("kind") == "comm")
    assert comm.height == 10 and set(comm["name"].to_list()) == {"gloo:all_reduce"}
    assert "stream" not in trace.tracks["unit"].to_list()


def test_rccl_kernels_are_comm(real_traces: Path) -> None:
    path = real_traces / "kineto_moe" / "mi300x_resnet_rccl" / "resnet_act_checkpoint.json.gz"
    trace = load(path)
    comm = trace.events.filter(pl.col("kind") == "comm")
    assert comm.height == 17  # MANIFEST: 17 RCCL all-reduce kernels
    assert all(n.startswith("ncclDevKernel_Generic") for n in comm["name"].to_list())


def test_perfetto_flow_examples(real_traces: Path) -> None:
    v1 = load(real_traces / "chrome" / "perfetto__flow_events_json_v1.json")
    v2 = load(real_traces / "chrome" / "perfetto__flow_events_json_v2.json")
    names = dict(zip(v2.events["id"].to_list(), v2.events["name"].to_list(), strict=True))
    edges = {(names[s], names[d]) for s, d in v2.deps.select("src", "dst").iter_rows()}
    # Perfetto's FlowTracker: out(A) -> in/out(Other) -> in(Some); B -> Blergh;
    # SomeOtherSlice's flow_in finds no open flow (Some ended it).
    assert edges == {("SenderA", "OtherSlice"), ("OtherSlice", "SomeSlice"), ("SenderB", "Blergh")}
    assert v1.deps.height >= 1


def test_load_directory_of_ascend_ranks(real_traces: Path, tmp_path: Path) -> None:
    for rank in (0, 1):
        target = tmp_path / f"job_rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        target.mkdir(parents=True)
        (target / "trace_view.json").symlink_to(
            real_traces / "ascend" / f"level0__rank{rank}_ascend_pt__trace_view.json"
        )
        (target / "communication.json").write_text("{}")
    trace = load(tmp_path)
    assert trace.ranks == [0, 1]
    assert trace.problems() == []
    assert len(trace.meta["source"]) == 2
