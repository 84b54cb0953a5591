"""What a viewer table's row goes to on Enter, and the rows' type (no Polars, no Textual)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from rich.text import Text


class Window(NamedTuple):
    """A time window to zoom to (absolute ns), and what to call it in the status line."""

    start_ns: int
    end_ns: int
    label: str


Target = int | Window | tuple[int, ...] | None
"""What Enter on a row goes to: an event id, a window, the next of several events (in order),
or nothing."""
Rows = list[tuple[Target, list["Text"]]]
