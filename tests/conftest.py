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
