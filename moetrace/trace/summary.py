"""What a trace holds, as plain data: the `--json` of `moetrace info` (counts, units, kinds,
window in ns, sources, warnings). Stable keys: scripts read them."""

from __future__ import annotations

from typing import Any

import polars as pl

from moetrace.trace.model import Trace


def describe(trace: Trace) -> dict[str, Any]:
    """Plain, stable summary of a Trace (the --json output of `moetrace info`)."""
    window = trace.window()
    units = dict(
        sorted(
            trace.tracks.group_by(pl.col("unit").cast(pl.String)).len().iter_rows(),
            key=lambda r: str(r[0]),
        )
    )
    kinds = dict(
        sorted(
            trace.events.group_by(pl.col("kind").cast(pl.String)).len().iter_rows(),
            key=lambda r: str(r[0]),
        )
    )
    deps = dict(
        sorted(
            trace.deps.group_by(pl.col("kind").cast(pl.String)).len().iter_rows(),
            key=lambda r: str(r[0]),
        )
    )
    return {
        "source": [str(s) for s in trace.meta.get("source", [])],
        "format": trace.meta.get("format"),
        "flavor": trace.meta.get("flavor"),
        "events": trace.events.height,
        "tracks": trace.tracks.height,
        "ranks": trace.ranks,
        "units": {str(k): int(v) for k, v in units.items()},
        "kinds": {str(k): int(v) for k, v in kinds.items()},
        "window_ns": None
        if window is None
        else {"start": window[0], "end": window[1], "duration": window[1] - window[0]},
        "deps": {str(k): int(v) for k, v in deps.items()},
        "counters": {
            "samples": trace.counters.height,
            "series": int(trace.counters["name"].n_unique()) if trace.counters.height else 0,
        },
        "warnings": trace.warnings,
    }
