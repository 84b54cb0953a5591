"""The family of moetrace's own errors: bad input or an impossible request, one line each.

`MoetraceError` carries the file and the position (byte offset, event index) it is about,
so the CLI can catch the whole family and print one line with exit status 2. Existing
classes (`TraceFormatError`, ...) subclass it without being renamed. This module imports
nothing from moetrace, so every floor (trace/ included) may use it.
"""

from __future__ import annotations

from pathlib import Path


class MoetraceError(Exception):
    """A problem with moetrace's input or output; `str()` is the one line shown to people.

    `path` is the file concerned and `position` where in it (`byte N`, `event #N`), when known.
    """

    path: str | None = None
    position: str | None = None


class OutputError(MoetraceError):
    """An output file could not be written: exists without --force, disk full, bad name..."""

    def __init__(self, path: str | Path, message: str):
        self.path = str(path)
        self.message = message
        super().__init__(f"{path}: {message}")
