"""The ground floor: the `Trace` data model, the formats that read and write it, the producers
("flavors") whose meaning it carries, and loading (several files, cache, processes).

`model` (Trace, schemas, validation) and `nesting` (depths, overflow lanes) at the bottom;
`formats/` (Chrome JSON, Perfetto protobuf, a registry choosing by content), `flavors/`
(Kineto, Ascend, moetrace, generic) above them; `io` (load, write_trace, find_traces),
`cache`, `parallel`, `atomic`, `summary` on top. Importing the package installs the writer
behind `Trace.write`.
"""

from __future__ import annotations

from moetrace.trace.io import find_traces, load, merge, write_trace
from moetrace.trace.model import Trace, TraceFormatError, TraceValidationError

__all__ = [
    "Trace",
    "TraceFormatError",
    "TraceValidationError",
    "find_traces",
    "load",
    "merge",
    "write_trace",
]
