"""The flavor registry: detection precedence between producers whose evidence overlaps, forced
flavors, and `flavor_of` for the layers above."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from moetrace.trace.flavors import ASCEND, GENERIC, KINETO, MOETRACE, flavor_named, flavor_of
from moetrace.trace.io import load

KERNEL = {"ph": "X", "name": "gemm", "cat": "kernel", "pid": 0, "tid": 7, "ts": 1, "dur": 2}
PLAIN = {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
ASCEND_PROCESS = {"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "HCCL"}}
NPU_LAUNCH = {
    "ph": "s",
    "name": "launch",
    "cat": "HostToDevice",
    "id": 1,
    "pid": 0,
    "tid": 7,
    "ts": 1,
}


def _flavor(tmp_path: Path, events: list[dict[str, Any]], name: str = "t.json", **top: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return str(load(path, cache=False).meta["flavor"])


@pytest.mark.parametrize(
    ("events", "top", "name", "expected"),
    [
        ([PLAIN], {}, "t.json", "chrome"),
        ([KERNEL], {}, "t.json", "kineto"),
        ([PLAIN, ASCEND_PROCESS], {}, "t.json", "ascend"),
        # Kineto's own top-level keys win over Ascend process names.
        ([PLAIN, ASCEND_PROCESS], {"schemaVersion": 1}, "t.json", "kineto"),
        # Kineto categories with torch_npu's launch category: Ascend.
        ([KERNEL, NPU_LAUNCH], {}, "t.json", "ascend"),
        # The file name counts only without Kineto categories.
        ([PLAIN], {}, "trace_view.json", "ascend"),
        ([KERNEL], {}, "trace_view.json", "kineto"),
        ([KERNEL, ASCEND_PROCESS], {"moetrace": {"version": 1}}, "t.json", "moetrace"),
    ],
)
def test_detection_precedence(
    tmp_path: Path, events: list[dict[str, Any]], top: dict[str, Any], name: str, expected: str
) -> None:
    assert _flavor(tmp_path, events, name, **top) == expected


def test_forced_and_unknown_flavor_names() -> None:
    assert flavor_named("kineto") is KINETO
    assert flavor_named("ascend") is ASCEND
    assert flavor_named("moetrace") is MOETRACE and MOETRACE.restore is not None
    assert flavor_named("chrome") is GENERIC
    assert flavor_named("no-such-producer") is GENERIC


def test_flavor_of_a_loaded_trace(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"traceEvents": [KERNEL]}))
    trace = load(path, cache=False)
    assert flavor_of(trace) is KINETO
    assert flavor_of(trace.with_meta(flavor="mixed")) is None


def _kinds(tmp_path: Path, events: list[dict[str, Any]]) -> dict[str, str]:
    path = tmp_path / "kinds.json"
    rows = [
        {"ph": "X", "pid": 1, "tid": i, "ts": i * 10, "dur": 5, **e} for i, e in enumerate(events)
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": rows}))
    trace = load(path, cache=False)
    assert trace.meta["flavor"] == "kineto"
    return dict(zip(trace.events["name"].to_list(), trace.events["kind"].to_list(), strict=True))


def test_kineto_kinds_by_category_and_comm(tmp_path: Path) -> None:
    """Each category's kind, in the rule order of the Kineto flavor (comm kernels first, then
    kernels compute, memory copies, GPU annotations markers, host categories, else other),
    written out by hand; a CPU-only trace's gloo op is comm, a GPU trace's is host."""
    gpu = _kinds(
        tmp_path,
        [
            {"name": "ncclDevKernel_AllReduce", "cat": "kernel"},
            {"name": "gemm", "cat": "kernel", "args": {"Collective name": "x"}},
            {"name": "gemm2", "cat": "Kernel"},
            {"name": "copy", "cat": "gpu_memcpy"},
            {"name": "set", "cat": "Memset"},
            {"name": "note", "cat": "gpu_user_annotation"},
            {"name": "aten::mm", "cat": "cpu_op"},
            {"name": "gloo:all_reduce", "cat": "cpu_op"},
            {"name": "cudaLaunchKernel", "cat": "cuda_runtime"},
            {"name": "odd", "cat": "something_else"},
            {"name": "no_cat"},
        ],
    )
    assert gpu == {
        "ncclDevKernel_AllReduce": "comm",
        "gemm": "comm",
        "gemm2": "compute",
        "copy": "memory",
        "set": "memory",
        "note": "marker",
        "aten::mm": "host",
        "gloo:all_reduce": "host",
        "cudaLaunchKernel": "host",
        "odd": "other",
        "no_cat": "other",
    }
    cpu = _kinds(
        tmp_path,
        [
            {"name": "gloo:all_reduce", "cat": "cpu_op"},
            {"name": "record_param_comms", "cat": "odd"},
            {"name": "aten::mm", "cat": "cpu_op"},
            {"name": "no_cat"},
        ],
    )
    assert cpu == {
        "gloo:all_reduce": "comm",
        "record_param_comms": "comm",
        "aten::mm": "host",
        "no_cat": "other",
    }
