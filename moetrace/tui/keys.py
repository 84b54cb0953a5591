"""The viewer's own keys (the timeline's are on `TimelineView`), as data: the app binds them
and the help screen lists them, without either importing the other. The tables' keys come
from the table registry."""

from __future__ import annotations

from textual.binding import Binding

from .table_registry import table_bindings

APP_BINDINGS: tuple[Binding, ...] = (
    Binding("enter", "details", "Details", id="app.details"),
    Binding("c", "overlay('critical')", "CritPath", id="app.overlay_critical"),
    Binding("i", "overlay('gaps')", "Idle", id="app.overlay_gaps"),
    Binding("x", "overlay('exposed')", "Exposed", id="app.overlay_exposed"),
    Binding("right_square_bracket", "follow(1)", "Follow dep", show=False, id="app.follow_next"),
    Binding("left_square_bracket", "follow(-1)", "Back dep", show=False, id="app.follow_prev"),
    Binding("slash", "prompt('search')", "Search", id="app.search"),
    Binding("n", "search_step(1)", "Next hit", show=False, id="app.search_next"),
    Binding("N", "search_step(-1)", "Prev hit", show=False, id="app.search_prev"),
    Binding("backslash", "prompt('filter')", "Filter lanes", show=False, id="app.filter"),
    *table_bindings(),
    Binding("g", "next_step(1)", "Next step", show=False, id="app.next_step"),
    Binding("G", "next_step(-1)", "Prev step", show=False, id="app.prev_step"),
    Binding("question_mark,f1", "help", "Help", id="app.help"),
    Binding("p", "toggle_side", "Panes", id="app.toggle_side"),
    Binding("o", "metrics_sort", "Sort ranks", show=False, id="app.metrics_sort"),
    Binding("colon", "prompt('goto')", "Go to", show=False, id="app.goto"),
    Binding("q", "close_or_quit", "Close", id="app.close_or_quit"),
    # Ctrl+C quits at once, even while loading or analysing (Textual only hints at Ctrl+Q).
    Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="app.quit"),
)
