"""moetrace: trace viewer, analyzer and tile-level executor for MoE workloads.

The public API (imported lazily so `import moetrace` stays light, yet typed: mypy and `dir()`
see every name):

- `load(path_or_paths) -> Trace`: read Chrome JSON / Kineto / Ascend / moetrace / .pftrace files.
- `simulate(...) -> Trace`: run an MoE layer on the modelled accelerator (the executor).
- `analyze(trace) -> Report`: critical path, idle cores, exposed communication (Polars frames).
- `export(trace, path)`: write .json, .json.gz or .pftrace.

>>> import moetrace
>>> trace = moetrace.simulate(ranks=8, tokens=512, schedule="tile")
>>> sorted(trace.tracks["rank"].unique().to_list())
[0, 1, 2, 3, 4, 5, 6, 7]
>>> report = moetrace.analyze(trace)
>>> report.ranks.select("rank", "step").height  # one row per (rank, step)
8
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Report",
    "Trace",
    "TraceFormatError",
    "__version__",
    "analyze",
    "export",
    "load",
    "simulate",
]

# name -> (module, attribute): resolved on first use by __getattr__ below.
_LAZY = {
    "Trace": ("moetrace.trace.model", "Trace"),
    "TraceFormatError": ("moetrace.trace.model", "TraceFormatError"),
    "load": ("moetrace.trace.io", "load"),
    "export": ("moetrace.trace.io", "write_trace"),
    "simulate": ("moetrace.executor.run", "simulate"),
    "analyze": ("moetrace.analysis.report", "analyze"),
    "Report": ("moetrace.analysis.report", "Report"),
}

if TYPE_CHECKING:
    from moetrace.analysis.report import Report, analyze
    from moetrace.executor.run import simulate
    from moetrace.trace.io import load
    from moetrace.trace.io import write_trace as export
    from moetrace.trace.model import Trace, TraceFormatError


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access (keeps `import moetrace` at ~0 ms)."""
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'moetrace' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, so `dir(moetrace)` and completion list them before first use."""
    return sorted(set(globals()) | set(__all__))
