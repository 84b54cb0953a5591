"""Read a `.pftrace` into a `Trace`: the vectorised reader when it understands the file, else
the per-packet one (same result, slower)."""

from __future__ import annotations

from pathlib import Path

from moetrace.trace import progress
from moetrace.trace.formats.pftrace.partial import prefix_previews
from moetrace.trace.formats.pftrace.read_packets import read_slow
from moetrace.trace.formats.pftrace.read_vectorised import decode_vectorised
from moetrace.trace.model import Trace, TraceFormatError


def read_pftrace(path: str | Path) -> Trace:
    """Parse a Perfetto protobuf trace into a `Trace` (meta["format"] = "pftrace").

    Rows come back in canonical order: events by id, tracks by track id, deps in the
    written order, counters by (track, name, ts). The vectorised reader (`read_vectorised`)
    takes the files it fully understands (every file moetrace writes, and plain TrackEvent
    traces); anything else goes through the per-packet reader (`read_packets`), with the
    same result.
    """
    path = Path(path)
    # The viewer's progress (moetrace.trace.progress): three stated passes, weighted by their
    # usual share of the read (the bytes ~5%, the previews ≤ 10%: their budget, the rest the
    # decoding), so that the ETA is about right as the decoding starts.
    progress.report(path, 0, 100, "pass 1 of 3: reading the file")
    data = _read_bytes(path)
    progress.report(path, 5, 100, "pass 2 of 3: previews")
    prefix_previews(path, data)  # the viewer's previews of a big file (formats/partial.py)
    progress.report(path, 15, 100, "pass 3 of 3: decoding the packets")
    decoded = decode_vectorised(path, data)
    if decoded is None:
        slow = read_slow(path, data)
        progress.report(path, 100, 100)
        return slow
    del data  # the columns hold no view of the file: its bytes go before the Trace is finished
    fast = decoded()
    progress.report(path, 100, 100)
    return fast


def _read_bytes(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise TraceFormatError(path, "is a directory, not a .pftrace file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror}") from None
    if not data:
        raise TraceFormatError(path, "empty file", "byte 0")
    return data
