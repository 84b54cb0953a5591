"""Shared test fixtures: where the real traces live, and a skip when they are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# ../shared/real_traces next to the checkout (CI lays shared/ beside the clone).
REAL_TRACES = (REPO.parent / "shared" / "real_traces").resolve()


@pytest.fixture
def real_traces() -> Path:
    """The folder of real profiler traces; the test is skipped when it is absent."""
    if not REAL_TRACES.is_dir():
        pytest.skip(f"real traces not found at {REAL_TRACES}")
    return REAL_TRACES


# Side files that sit next to real traces but are not traces (run metadata, routing tables).
NOT_TRACES = frozenset({"run_meta.json"})


@pytest.fixture
def real_trace_files(real_traces: Path) -> list[Path]:
    """Every Chrome/Kineto/Ascend trace file (.json, .json.gz) under the real-trace folder."""
    return sorted(
        p
        for p in real_traces.rglob("*")
        if p.name.endswith((".json", ".json.gz")) and p.name not in NOT_TRACES
    )
