"""moetrace: trace viewer, analyzer and tile-level executor for MoE workloads.

The public API (imported lazily so `import moetrace` stays light):

- `load(path_or_paths) -> Trace`: read Chrome JSON / Kineto / Ascend / moetrace / .pftrace files.
- `simulate(...) -> Trace`: run an MoE layer on the modelled accelerator (the executor).
- `analyze(trace) -> Report`: critical path, idle cores, exposed communication (Polars frames).
- `export(trace, path)`: write .json, .json.gz or .pftrace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Trace", "TraceFormatError", "__version__", "analyze", "export", "load", "simulate"]

_LAZY = {
    "Trace": ("moetrace.trace.model", "Trace"),
    "TraceFormatError": ("moetrace.trace.model", "TraceFormatError"),
    "load": ("moetrace.trace.io", "load"),
    "export": ("moetrace.trace.io", "write_trace"),
    "simulate": ("moetrace.executor.run", "simulate"),
    "analyze": ("moetrace.analysis.report", "analyze"),
}

if TYPE_CHECKING:
    from moetrace.trace.model import Trace, TraceFormatError


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'moetrace' has no attribute {name!r}")
