"""Executor traces with hidden hardware: the meta fields a calibration must recover removed.

The executor writes its whole hardware into the trace's meta (`executor.hardware`), and
`calibrate` takes every field it finds there; a self-check hides the fields under test so
that they can only come back from the events.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from moetrace.trace.model import Trace


def hide_hardware(trace: Trace, fields: Iterable[str] | None = None) -> Trace:
    """`trace` with `fields` removed from its meta's executor hardware (all of it if None)."""
    meta = copy.deepcopy(trace.meta)
    executor = meta.get("executor") or {}
    if fields is None:
        executor.pop("hardware", None)
    else:
        for key in fields:
            executor.get("hardware", {}).pop(key, None)
    return Trace(trace.events, trace.tracks, trace.deps, trace.counters, meta)
