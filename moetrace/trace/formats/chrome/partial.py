"""Previews of a big Chrome JSON file while it is decoded: the pieces decoded so far, built
into a `Trace` by the normal path (typed columns, slices, flavor).

The decoder offers its raw columns after each piece (`decode._decode_stream`, through
`moetrace.trace.formats.partial`); `preview_of_raw` is the builder a watch uses for them.
A cut between a B and its E leaves an open slice (or an unmatched-E warning) in the preview
only: the final trace is built from every piece, as without previews.
"""

from __future__ import annotations

from pathlib import Path

from moetrace.trace.formats.chrome.decode import RawTrace
from moetrace.trace.formats.chrome.read import trace_from_raw
from moetrace.trace.model import Trace


def preview_of_raw(path: Path, raw: RawTrace) -> Trace:
    """The `Trace` of the events decoded so far (`raw`: the pieces' columns, the top-level
    keys seen so far); built as `read_chrome` builds the whole file."""
    return trace_from_raw(raw, path)


BUILDERS = {"chrome": preview_of_raw}
"""The builders a `PreviewWatch` needs for Chrome JSON (the .pftrace previews are Traces)."""
