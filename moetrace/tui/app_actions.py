"""The viewer's screen and key actions: layout, panes, overlays, dependency/critical-path
following, search, filter, go to, tables.

`ViewerActions` is the App that `MoetraceApp` extends with loading and analysis: it owns the
widgets' layout and every key action, and reads the viewer's state (trace, lane model,
report…) that `MoetraceApp` fills in. numpy and Polars are imported by the actions that need
them (there is a trace by then), not with the app: the first frame is drawn before they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import App
from textual.widgets import Input, Static

from moetrace.text import visible as safe_text

from .format import parse_time
from .widgets.details import DetailsPane
from .widgets.footer import FittingFooter
from .widgets.timeline import TimelineView

if TYPE_CHECKING:
    import numpy as np

    from moetrace.analysis.report import Report
    from moetrace.trace.model import Trace

    from .lanes import LaneModel
    from .overlays import Overlays


OVERLAY_NAMES = {"critical": "critical path", "gaps": "idle gaps", "exposed": "exposed comm"}


class ViewerActions(App[None]):
    """The viewer's layout and key actions over the state `MoetraceApp` keeps current."""

    trace: Trace | None
    model: LaneModel | None
    report: Report | None
    overlays: Overlays | None
    search_hits: np.ndarray | None  # event ids of the last search's hits
    search_text: str
    prompt_mode: str
    steps: list[tuple[int, int, int]]
    side_wanted: bool | None  # None: decided by the terminal width

    SIDE_MIN_TERMINAL = 120  # below this many columns the side pane starts hidden (p shows it)
    SIDE_WIDTH = 58  # side pane columns when there is room
    SIDE_MAX_SHARE = 0.4  # the timeline always keeps at least 60% of the width
    DETAILS_ALONE_BELOW = 30  # rows: below, Enter opens the details alone (p: with metrics)

    @property
    def timeline(self) -> TimelineView:
        view: TimelineView = self.query_one("#timeline", TimelineView)
        return view

    # ------------------------------------------------------------- layout
    def on_resize(self, event: events.Resize) -> None:
        self.fit_layout(event.size.width)

    def fit_layout(self, width: int) -> None:
        """Side pane: 58 columns when it fits in 40% of the terminal, else narrower; hidden
        by default below 120 columns (p toggles it). The timeline keeps ≥ 60% of the width."""
        side = self.query_one("#side")
        show = self.side_wanted if self.side_wanted is not None else width >= self.SIDE_MIN_TERMINAL
        side.styles.width = max(min(self.SIDE_WIDTH, int(width * self.SIDE_MAX_SHARE)), 1)
        side.display = bool(show)
        self.query_one(FittingFooter).fit(width)
        self.timeline.refresh()

    def action_toggle_side(self) -> None:
        """p: show or hide the details and metrics panes."""
        self.side_wanted = not self.query_one("#side").display
        self.query_one("#metrics").display = True
        self.fit_layout(self.size.width)

    def set_status(self, text: str, style: str = "") -> None:
        self.query_one("#status", Static).update(Text(safe_text(text), style=style))

    def refresh_details(self) -> None:
        origin = self.model.origin if self.model else 0
        overlays = self.overlays if self.report is not None else None
        self.query_one(DetailsPane).show(self.trace, self.timeline.selected, origin, overlays)

    # -------------------------------------------------------------- panes
    def action_details(self) -> None:
        """Enter: select the event under the cursor (on a rank or unit row: on its lanes)
        and show it in the details pane. Space, not Enter, expands/collapses groups."""
        tl = self.timeline
        if not tl.rows:
            return
        self.show_side()
        if self.size.height < self.DETAILS_ALONE_BELOW:  # the details get the whole side
            self.query_one("#metrics").display = False
        if not tl.select_at_cursor():
            row = tl.rows[tl.cursor_row]
            self.set_status(
                f"no event under the cursor on {row.label}"
                + (" (Space expands the group)" if row.lane is None else "")
            )
        self.refresh_details()

    def show_side(self) -> None:
        """Open the side pane (the user asked for details)."""
        if not self.query_one("#side").display:
            self.action_toggle_side()

    def action_metrics_sort(self) -> None:
        """o: sort the metrics pane's rank table by the next key."""
        from .widgets.metrics import MetricsPane

        self.show_side()
        name = self.query_one(MetricsPane).cycle_sort()
        self.set_status(f"metrics: ranks sorted by {name}")

    def metrics_unavailable(self, what: str) -> bool:
        """Say why `what` cannot be shown yet (metrics off, failed or computing)."""
        from .widgets.metrics import MetricsPane

        if self.report is not None:
            return False
        state = self.query_one(MetricsPane).state
        message = {
            "disabled": "metrics are off (started with --no-metrics)",
            "error": "the analysis failed (see the metrics pane)",
        }.get(state, "metrics are still being computed")
        self.notify(message, title=what, severity="warning")
        return True

    def action_close_or_quit(self) -> None:
        """q: close the side pane if open, else quit."""
        side = self.query_one("#side")
        if side.display:
            side.display = False
            self.timeline.refresh()
        else:
            self.exit()

    def action_reset_view(self) -> None:
        self.timeline.action_reset_view()

    def action_collapse_all(self, collapse: bool) -> None:
        """Collapse (or expand) every rank group."""
        tl = self.timeline
        if tl.model is None:
            return
        keys = {("rank", r) for r in tl.model.ranks}
        if collapse:
            tl.collapsed |= keys
        else:
            tl.collapsed -= keys
        tl.rebuild_rows()

    def action_next_step(self, direction: int) -> None:
        """g / G: show the next / previous step's window (steps as the analyzer found them)."""
        tl = self.timeline
        if not self.steps or self.model is None:
            self.set_status("no steps known (yet)")
            return
        origin = self.model.origin
        centre = origin + (tl.t0 + tl.t1) / 2
        width = tl.t1 - tl.t0
        # The step being looked at: it holds the view's centre and the view is about its size.
        current = next(
            (
                i
                for i, (_, a, b) in enumerate(self.steps)
                if a <= centre < b and width <= 1.5 * (b - a)
            ),
            None,
        )
        if current is None:
            k = 0 if direction > 0 else len(self.steps) - 1
        else:
            k = min(max(current + direction, 0), len(self.steps) - 1)
        self.action_goto_step(self.steps[k][0])

    def action_goto_step(self, step: int) -> None:
        """Fit the view to one step's window."""
        for number, a, b in self.steps:
            if number == step:
                self.zoom_to(a, b, f"step {step}")
                return

    def zoom_to(self, start_ns: int, end_ns: int, label: str) -> None:
        """Fit the view to [start_ns, end_ns) (absolute ns, 2% padding) and say `label`."""
        if self.model is None:
            return
        pad = (end_ns - start_ns) * 0.02
        origin = self.model.origin
        self.timeline.set_view(start_ns - origin - pad, end_ns - origin + pad)
        self.set_status(label)

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        self.push_screen(HelpScreen())

    # ------------------------------------------------------------ overlays
    def action_overlay(self, name: str) -> None:
        """Toggle the critical path (c), idle gaps (i) or exposed comm (x) overlay."""
        tl = self.timeline
        if self.metrics_unavailable(OVERLAY_NAMES[name]):
            return
        tl.active_overlays = tl.active_overlays ^ {name}
        state = "on" if name in tl.active_overlays else "off"
        self.set_status(f"overlay {OVERLAY_NAMES[name]}: {state}")
        tl.refresh()

    # --------------------------------------------------------- following
    def action_follow(self, direction: int) -> None:
        """] / [: next/previous critical-path event when the selection is on the path,
        else follow the first dependency out of (in to) the selected event."""
        tl = self.timeline
        if self.trace is None or tl.selected is None:
            self.set_status("select an event first (click, Enter, . or ,)")
            return
        sel = tl.selected
        ov = self.overlays
        found = ov.cp_position(sel) if ov is not None else None
        if ov is not None and found is not None:
            k, pos, total = found
            if 0 <= pos + direction < total:
                tl.select_event(int(ov.cp_events[k + direction]))
                self.set_status(f"critical path: event {pos + direction + 1} of {total}")
            else:
                self.set_status(
                    "end of the critical path" if direction > 0 else "start of the critical path"
                )
            return
        import polars as pl

        deps, events = self.trace.deps, self.trace.events.select("id", "ts", "dur")
        if direction > 0:
            nxt = (
                deps.filter(pl.col("src") == sel)
                .join(events, left_on="dst", right_on="id")
                .sort(["ts", "dst"])
            )
            target = int(nxt["dst"][0]) if nxt.height else None
        else:
            prev = deps.filter(pl.col("dst") == sel).join(events, left_on="src", right_on="id")
            prev = prev.with_columns((pl.col("ts") + pl.col("dur")).alias("end")).sort(
                ["end", "src"]
            )
            target = int(prev["src"][-1]) if prev.height else None  # the gating (latest-ending) one
        if target is None:
            self.set_status(
                "no dependency " + ("out of" if direction > 0 else "into") + " this event"
            )
            return
        tl.select_event(target)
        self.set_status(
            ("followed dependency to " if direction > 0 else "back to dependency ")
            + f"event {target}"
        )

    # ------------------------------------------------------ search/filter
    def action_prompt(self, mode: str) -> None:
        """Open the one-line prompt for a search (/) or a lane filter (\\)."""
        prompt = self.query_one("#prompt", Input)
        self.prompt_mode = mode
        prompt.placeholder = {
            "search": "search names and args: text, or key=value (Enter, then n/N)",
            "filter": "filter lanes: text in rank/unit/lane, or 'rank N' exactly (empty: all)",
            "goto": "go to: rank N · step N · time (e.g. 1.5ms)",
        }[mode]
        prompt.value = {"search": self.search_text, "filter": self.timeline.lane_filter}.get(
            mode, ""
        )
        prompt.display = True
        prompt.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        prompt = self.query_one("#prompt", Input)
        prompt.display = False
        self.timeline.focus()
        if self.prompt_mode == "filter":
            self.timeline.lane_filter = event.value
            self.timeline.rebuild_rows()
            self.timeline.ensure_row_visible()  # the cursor's row (if kept) stays in view
            self.set_status(
                f"lane filter: {event.value!r} ({len(self.timeline.rows)} rows)"
                if event.value
                else "lane filter cleared"
            )
            return
        if self.prompt_mode == "goto":
            self.goto(event.value)
            return
        from .lanes import search_events

        self.search_text = event.value
        self.search_hits = (
            search_events(self.trace, event.value) if self.trace is not None else None
        )
        if self.search_hits is None or len(self.search_hits) == 0:
            self.set_status(f"no event name or args match {event.value!r}")
            return
        self._show_hit(0)

    def goto(self, text: str) -> None:
        """`:rank N` (exactly rank N), `:step N`, or `:1.5ms` (a time from the trace start)."""
        words = text.strip().lower().removeprefix("goto").split()
        tl = self.timeline
        if len(words) == 2 and words[0] == "rank" and words[1].lstrip("-").isdigit():
            rank = int(words[1])
            for i, row in enumerate(tl.rows):
                if row.kind in ("rank", "braille") and row.rank == rank:
                    tl.cursor_row = i
                    tl.ensure_row_visible()
                    tl.refresh()
                    self.set_status(f"rank {rank}")
                    return
            self.set_status(f"no rank {rank} among the visible rows")
            return
        if len(words) == 2 and words[0] == "step" and words[1].isdigit():
            if not any(n == int(words[1]) for n, _, _ in self.steps):
                self.set_status(f"no step {words[1]} known")
                return
            self.action_goto_step(int(words[1]))
            return
        ns = parse_time(" ".join(words))
        if ns is None:
            self.set_status(f"cannot go to {text!r}: try 'rank 3', 'step 2' or '1.5ms'")
            return
        half = (tl.t1 - tl.t0) / 2
        tl.cursor_t = ns
        tl.set_view(ns - half, ns + half)
        self.set_status(f"time {text.strip()}")

    def on_key(self, event: Any) -> None:
        prompt = self.query_one("#prompt", Input)
        if event.key == "escape" and prompt.display:
            prompt.display = False
            self.timeline.focus()
            event.stop()

    SEARCH_CONTEXT = 2.0  # a search hit is shown with this many times its length either side

    def _show_hit(self, k: int) -> None:
        """Select hit `k` and zoom to it with context: the hit is the middle fifth of the view
        (an instant: the narrowest view)."""
        assert self.search_hits is not None
        tl = self.timeline
        if tl.select_event(int(self.search_hits[k])) and tl.selected_span is not None:
            _, start, end = tl.selected_span
            pad = (end - start) * self.SEARCH_CONTEXT
            tl.set_view(start - pad, end + pad)
            tl.cursor_t = start
        self.refresh_details()
        self.set_status(f"hit {k + 1} of {len(self.search_hits)} for {self.search_text!r}")

    def action_search_step(self, direction: int) -> None:
        """n / N: next / previous search hit after the selected event."""
        import numpy as np

        hits = self.search_hits
        if hits is None or len(hits) == 0:
            self.set_status("no search: press / first")
            return
        sel = self.timeline.selected
        where = np.flatnonzero(hits == sel) if sel is not None else np.empty(0)
        k = (
            (int(where[0]) + direction) % len(hits)
            if len(where)
            else (0 if direction > 0 else len(hits) - 1)
        )
        self._show_hit(k)

    # -------------------------------------------------------------- tables
    def action_table(self, name: str) -> None:
        """Open a table screen of the registry (`table_registry.TABLES`: 1 critical path,
        2 idle gaps, …, 9 steps); Enter there selects an event or zooms to a window."""
        from .screens.tables import TableScreen
        from .table_registry import BY_NAME
        from .table_targets import Window

        if self.trace is None:
            return
        if BY_NAME[name].needs_report and self.metrics_unavailable("table"):
            return
        screen = TableScreen(name, self.trace, self.report, self.model, self.timeline.selected)

        def jump(target: int | Window | None) -> None:
            if isinstance(target, Window):
                self.zoom_to(target.start_ns, target.end_ns, target.label)
            elif target is not None:
                self.timeline.select_event(target)
                self.refresh_details()
                if screen.note:
                    self.set_status(screen.note)

        self.push_screen(screen, jump)
