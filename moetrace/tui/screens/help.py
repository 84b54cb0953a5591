"""The help screen: help.md plus a table of every key binding, read from the bindings."""

from __future__ import annotations

from importlib.resources import files
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, Static

from ..keys import APP_BINDINGS
from ..widgets.timeline import TimelineView

KEY_NAMES = {
    "full_stop": ".",
    "comma": ",",
    "plus": "+",
    "minus": "-",
    "slash": "/",
    "backslash": "\\",
    "question_mark": "?",
    "right_square_bracket": "]",
    "left_square_bracket": "[",
    "space": "Space",
    "escape": "Esc",
    "enter": "Enter",
}


def binding_rows() -> list[tuple[str, str, str]]:
    """(keys, description, id) of the app's and the timeline's bindings."""
    rows: list[tuple[str, str, str]] = []
    for source in (TimelineView.BINDINGS, APP_BINDINGS):
        for b in source:
            if isinstance(b, Binding):
                keys = ", ".join(KEY_NAMES.get(k.strip(), k.strip()) for k in b.key.split(","))
                rows.append((keys, b.description, b.id or ""))
    return rows


def bindings_table() -> Table:
    table = Table(title="keys", title_justify="left", box=None, header_style="bold", pad_edge=False)
    table.add_column("key", style="bold #ffd700", no_wrap=True)
    table.add_column("action")
    table.add_column("binding id", style="dim")
    for keys, desc, bid in binding_rows():
        table.add_row(Text(keys), Text(desc), Text(bid))
    return table


class HelpScreen(ModalScreen[None]):
    """? / F1: what the screen shows and every key."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close")
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%; height: 90%; border: round $primary; background: $surface;
    }
    """

    def compose(self) -> ComposeResult:
        text = files("moetrace.tui").joinpath("help.md").read_text(encoding="utf-8")
        with VerticalScroll():
            yield Markdown(text)
            yield Static(bindings_table())
