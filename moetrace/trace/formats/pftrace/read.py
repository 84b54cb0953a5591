"""Read a `.pftrace` into a `Trace`: the vectorised reader when it understands the file, else
the per-packet one (same result, slower)."""

from __future__ import annotations

from pathlib import Path

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
    data = _read_bytes(path)
    prefix_previews(path, data)  # the viewer's previews of a big file (formats/partial.py)
    decoded = decode_vectorised(path, data)
    if decoded is None:
        return read_slow(path, data)
    del data  # the columns hold no view of the file: its bytes go before the Trace is finished
    return decoded()


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
