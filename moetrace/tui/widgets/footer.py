"""The key bar: all shown bindings when the terminal is wide, the few a user needs first
(and in Textual's compact form) when it is narrow, so it is never cut at 80 columns. Keys
left out still work; `?` lists them all."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.reactive import reactive
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

NARROW_BELOW = 120
"""Terminals narrower than this many columns get the short key bar."""

NARROW_ACTIONS = frozenset(
    {
        "zoom(1)",
        "zoom(-1)",
        "step_event(1)",
        "details",
        "prompt('search')",
        "help",
        "toggle_side",
        "close_or_quit",
    }
)
"""What the short key bar shows: zoom, next event, details, search, help, panes, close."""


class FittingFooter(Footer):
    """Textual's Footer, cut down to `NARROW_ACTIONS` (compact, no palette key) when
    `narrow`."""

    narrow: reactive[bool] = reactive(False, recompose=True)

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        if self.narrow:
            keys = [k for k in keys if isinstance(k, FooterKey) and k.action in NARROW_ACTIONS]
            self.styles.grid_size_columns = len(keys)
        yield from keys

    def fit(self, width: int) -> None:
        """Short or full key bar for a terminal `width` columns wide."""
        self.narrow = width < NARROW_BELOW
        self.compact = self.narrow
