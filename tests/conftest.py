"""Shared test fixtures: where the real traces live, and a skip when they are absent."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# No wall-clock limits in tests: hypothesis's default 200 ms deadline per example fails on a
# loaded machine; tests assert behaviour, benchmarks/ measure time.
settings.register_profile("moetrace", deadline=None)
settings.load_profile("moetrace")

# The columnar trace cache (moetrace.trace.cache) goes to a throwaway directory for the whole
# run, subprocesses included: tests never read or write the user's ~/.cache/moetrace.
_CACHE_HOME = tempfile.mkdtemp(prefix="moetrace-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE_HOME

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


def _is_trace_name(name: str) -> bool:
    """A .json/.json.gz trace: not run metadata, nor torch_npu's profiler_info_N.json."""
    if name in NOT_TRACES or name.startswith("profiler_info"):
        return False
    return name.endswith((".json", ".json.gz"))


@pytest.fixture
def real_trace_files(real_traces: Path) -> list[Path]:
    """Every Chrome/Kineto/Ascend trace file (.json, .json.gz) under the real-trace folder."""
    return sorted(
        p
        for p in real_traces.rglob("*")
        # rocprof/ holds rocprofv3's own JSON (not Chrome): tests/trace/test_rocprof_json.py.
        if _is_trace_name(p.name) and p.parent.name != "rocprof"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the run's cache directory."""
    shutil.rmtree(_CACHE_HOME, ignore_errors=True)
