"""Fixtures for the viewer tests: seeded synthetic traces, a headless app runner, helpers."""

from __future__ import annotations

import pytest

from moetrace.testing.synthetic import synthetic_trace
from moetrace.trace.model import Trace


@pytest.fixture
def small_trace() -> Trace:
    return synthetic_trace(ranks=2, events_per_lane=30, seed=1)
