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
