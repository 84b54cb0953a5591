"""Details of the selected event: name, times, where it ran, args, dependencies in and out.

Names and args are data: shown as `Text` (never markup) with control characters escaped.
Dependencies are options; choosing one posts `DetailsPane.Jump` so the app selects it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from moetrace.text import visible as safe_text

from ..format import fmt_ns

if TYPE_CHECKING:
    from moetrace.trace.model import Trace

    from ..overlays import Overlays

MAX_ARGS_LINES = 14


def event_row(trace: Trace, event_id: int) -> dict[str, Any] | None:
    """One event joined with its track, as a dict (None if the id is unknown)."""
    import polars as pl  # here: the pane is drawn before Polars is imported

    ev = trace.events.filter(pl.col("id") == event_id)
    if ev.height == 0:
        return None
    row = ev.row(0, named=True)
    tr = trace.tracks.filter(pl.col("track") == row["track"])
    if tr.height:
        row.update({f"track_{k}": v for k, v in tr.row(0, named=True).items()})
    return row


def _args_text(args: str | None) -> list[str]:
    if not args:
        return []
    try:
        parsed = json.loads(args)
    except (ValueError, TypeError):
        return [safe_text(args)[:200]]
    if isinstance(parsed, dict):
        lines = [
            f"  {safe_text(k)}: {safe_text(json.dumps(v) if not isinstance(v, str) else v)[:80]}"
            for k, v in parsed.items()
        ]
    else:
        lines = [f"  {safe_text(parsed)[:200]}"]
    if len(lines) > MAX_ARGS_LINES:
        lines = [*lines[:MAX_ARGS_LINES], f"  … {len(lines) - MAX_ARGS_LINES} more"]
    return lines


def describe(
    trace: Trace, event_id: int, origin: int, cp_position: tuple[int, int] | None, cp_known: bool
) -> Text:
    """The details text of one event (literal, no markup)."""
    row = event_row(trace, event_id)
    if row is None:
        return Text(f"event {event_id} not found")
    out = Text()
    out.append(safe_text(row["name"]) + "\n", style="bold")
    start = int(row["ts"]) - origin
    dur = int(row["dur"])
    rank = row.get("track_rank")
    lines = [
        f"id {event_id}  kind {row['kind']}  depth {row['depth']}",
        f"start {fmt_ns(start)}  dur {fmt_ns(dur)}",
        f"end   {fmt_ns(start + dur)}",
        f"rank {'–' if rank is None else rank}  unit {row.get('track_unit') or '–'}",
        f"lane {safe_text(row.get('track_thread_name') or row.get('track_tid') or row['track'])}",
    ]
    if row.get("cat"):
        lines.append(f"cat {safe_text(row['cat'])}")
    if row.get("flops") is not None:
        lines.append(f"flops {row['flops']:.4g}")
    if row.get("bytes") is not None:
        lines.append(f"bytes {row['bytes']:.4g}")
    out.append("\n".join(lines) + "\n")
    if not cp_known:
        out.append("critical path: computing…\n", style="dim")
    elif cp_position is not None:
        out.append(
            f"ON the critical path (event {cp_position[0] + 1} of {cp_position[1]})\n",
            style="bold #ffd700",
        )
    else:
        out.append("not on the critical path\n", style="dim")
    args = _args_text(row.get("args"))
    if args:
        out.append("args\n", style="bold")
        out.append("\n".join(args) + "\n")
    return out


def dependency_options(trace: Trace, event_id: int) -> list[Option]:
    """Options for the dependencies into (←) and out of (→) an event, earliest first."""
    import polars as pl

    deps = trace.deps
    if deps.height == 0:
        return []
    names = trace.events.select("id", "name", "ts")
    incoming = deps.filter(pl.col("dst") == event_id).join(names, left_on="src", right_on="id")
    outgoing = deps.filter(pl.col("src") == event_id).join(names, left_on="dst", right_on="id")
    options: list[Option] = []
    for arrow, frame, col in (("←", incoming.sort("ts"), "src"), ("→", outgoing.sort("ts"), "dst")):
        for row in frame.iter_rows(named=True):
            label = Text(f"{arrow} {safe_text(row['name'])[:40]} ({row['kind']})")
            options.append(Option(label, id=f"{arrow}{row[col]}"))
    return options


class DetailsPane(VerticalScroll):
    """The selected event and its dependencies; scrolls when they are taller than the pane."""

    DEFAULT_CSS = """
    DetailsPane { height: 1fr; border: round $primary 50%; border-title-color: $text; }
    DetailsPane #details-text { height: auto; }
    DetailsPane OptionList { height: auto; max-height: 10; border: none; padding: 0; }
    """

    class Jump(Message):
        """Select this event on the timeline."""

        def __init__(self, event_id: int) -> None:
            self.event_id = event_id
            super().__init__()

    def compose(self) -> ComposeResult:
        yield Static(
            Text("No event selected. Click an event or press . / ,", style="dim"), id="details-text"
        )
        yield OptionList(id="deps")

    def on_mount(self) -> None:
        self.border_title = "event"

    def show(
        self,
        trace: Trace | None,
        event_id: int | None,
        origin: int,
        overlays: Overlays | None,
    ) -> None:
        """Fill in the pane for `event_id` (None clears it)."""
        text = self.query_one("#details-text", Static)
        deps = self.query_one("#deps", OptionList)
        deps.clear_options()
        if trace is None or event_id is None:
            text.update(Text("No event selected. Click an event or press . / ,", style="dim"))
            return
        found = overlays.cp_position(event_id) if overlays is not None else None
        position = (found[1], found[2]) if found is not None else None
        text.update(describe(trace, event_id, origin, position, overlays is not None))
        options = dependency_options(trace, event_id)
        if options:
            deps.add_options(options)
        deps.display = bool(options)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Jump(int(event.option.id[1:])))
