"""Real profiler traces (Kineto, Ascend, Chrome, TraceLens MoE) survive Trace -> .pftrace ->
Trace exactly, and the fast encoder writes the official builder's bytes on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from moetrace.testing.compare import assert_trace_equal
from moetrace.testing.pftrace_official import encode_official
from moetrace.trace.formats.pftrace.read import read_pftrace
from moetrace.trace.formats.pftrace.write import encode_pftrace

TRACES = [
    pytest.param(  # NCCL kernels, ac2g flows; 27k events
        "kineto/hta__nccl_parser_config__nccl_data.json.gz", marks=pytest.mark.slow
    ),
    "kineto/hta__trace_filter__sampled_rank-0.json.gz",  # 5 GPU streams, world 128
    "kineto/hta__critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto/hta__cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "ascend/level0__rank0_ascend_pt__trace_view.json",  # HCCL lanes, epoch ns, counters
    "ascend/mstt_advisor__trace_view.json",  # pid 4376751100 > 2^32
    "chrome/perfetto__flow_events_json_v1.json",
    "kineto_moe/mi300x_gptoss20b_decode/graph_execution.json.gz",
]


@pytest.mark.parametrize("name", TRACES)
def test_real_trace_round_trips_through_pftrace(
    real_traces: Path, tmp_path: Path, name: str
) -> None:
    from moetrace.trace.io import load

    trace = load(real_traces / name)
    assert trace.events.height > 0
    data = encode_pftrace(trace)
    assert data == encode_official(trace)
    path = tmp_path / "t.pftrace"
    path.write_bytes(data)
    back = read_pftrace(path)
    assert_trace_equal(back, trace, reorder=True)
    assert back.meta["flavor"] == trace.meta.get("flavor")
    assert back.ranks == trace.ranks
