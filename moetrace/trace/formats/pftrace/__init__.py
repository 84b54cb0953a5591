"""Perfetto protobuf traces (.pftrace), read and written without trace_processor.

Writing: `layout` (process and lane track descriptors), `plan` (the packets as columns),
`encode` + `records` (the vectorised byte encoder), `write` (byte-identical to the official
builder, which is a test oracle in `moetrace.testing.pftrace_official`). Reading: `read`
chooses `read_vectorised` (numpy over `scan`'s field columns) or the per-packet
`read_packets` (the fallback and reference; its track map and `finish` are shared).
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import polars as pl

from moetrace.trace.formats.chrome import looks_like_json
from moetrace.trace.model import Trace, TraceFormatError

_DAMAGE = (ValueError, TypeError, KeyError, IndexError, OverflowError, pl.exceptions.PolarsError)


class Pftrace:
    """The Perfetto protobuf format plug-in (see formats.registry.Format)."""

    name = "pftrace"
    extensions = (".pftrace",)

    def sniff(self, head: bytes) -> bool:
        """Starts with 0x0a, the tag of `Trace.packet` (field 1, length-delimited), and is not
        also JSON after it (a newline then `{`: then the extension decides)."""
        return head[:1] == b"\n" and not looks_like_json(head)

    def read(self, path: Path, *, flavor: str | None = None) -> Trace:
        """Damaged protobuf content (a flipped byte makes a name invalid UTF-8 or a kind
        unknown) becomes one TraceFormatError line, not a traceback. `flavor` is ignored: a
        .pftrace says what its events are."""
        # Imported on first use, not for an import loop (there is none): the protobuf
        # classes and the readers cost ~0.25 s of start-up that only .pftrace users pay.
        from moetrace.trace.formats.pftrace.read import read_pftrace

        try:
            return read_pftrace(path)
        except TraceFormatError:
            raise
        except _DAMAGE as exc:
            reason = (str(exc).strip().splitlines() or [""])[0][:200]
            raise TraceFormatError(
                path, f"damaged .pftrace ({type(exc).__name__}: {reason})"
            ) from None

    def write(self, trace: Trace, out: Path | BinaryIO, *, force: bool) -> None:
        """`trace` as .pftrace on a stream, or atomically at a path (replaced with `force`)."""
        from moetrace.trace.formats.pftrace.write import write_pftrace  # first use: see read

        write_pftrace(trace, out, force=force)


PFTRACE = Pftrace()
