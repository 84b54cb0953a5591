"""The executor's one error type: bad input detected before any work is done."""

from __future__ import annotations

from moetrace.errors import MoetraceError


class ExecutorInputError(MoetraceError, ValueError):
    """An impossible or unknown input (preset, hardware key, shape, size); one line of text."""
