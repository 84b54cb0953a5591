"""The moetrace viewer: timeline, details and metrics panes, tables, overlays and search.

Loading and metrics run in daemon threads that post messages back (`loading.py`), so the
first frame (with read progress) appears at once, the lanes before the analysis finishes, and
Ctrl+C or q quit at any moment. Every number shown comes from `moetrace.analysis`; this
package only lays it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Footer, Header, Input, Static

from moetrace.trace.model import Trace
from moetrace.trace.options import LoadOptions

from .app_actions import ViewerActions, idle_notes, step_windows
from .commands import ViewerCommands
from .lanes import LaneModel, safe_text
from .loading import LoadProgress, expand_paths, run_in_background
from .overlays import Overlays, build_overlays
from .widgets.details import DetailsPane
from .widgets.metrics import MetricsPane
from .widgets.timeline import TimelineView

if TYPE_CHECKING:
    from moetrace.analysis.session import AnalysisSession


class TraceLoaded(Message):
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        super().__init__()


class LoadFailed(Message):
    def __init__(self, error: str) -> None:
        self.error = error
        super().__init__()


class MetricsReady(Message):
    def __init__(
        self, report: Any, scope: str, whole: bool, request: int = 0, overlays: Any = None
    ) -> None:
        self.report, self.scope, self.whole, self.request = report, scope, whole, request
        self.overlays = overlays
        super().__init__()


class MetricsFailed(Message):
    def __init__(self, error: str) -> None:
        self.error = error
        super().__init__()


class MoetraceApp(ViewerActions, App[None]):
    """Browse a trace: `MoetraceApp(trace)` for an in-memory Trace, or `paths=[...]` to load."""

    CSS_PATH = "moetrace.tcss"
    TITLE = "moetrace"
    COMMANDS = App.COMMANDS | {ViewerCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "details", "Details", id="app.details"),
        Binding("c", "overlay('critical')", "CritPath", id="app.overlay_critical"),
        Binding("i", "overlay('gaps')", "Idle", id="app.overlay_gaps"),
        Binding("x", "overlay('exposed')", "Exposed", id="app.overlay_exposed"),
        Binding(
            "right_square_bracket", "follow(1)", "Follow dep", show=False, id="app.follow_next"
        ),
        Binding("left_square_bracket", "follow(-1)", "Back dep", show=False, id="app.follow_prev"),
        Binding("slash", "prompt('search')", "Search", id="app.search"),
        Binding("n", "search_step(1)", "Next hit", show=False, id="app.search_next"),
        Binding("N", "search_step(-1)", "Prev hit", show=False, id="app.search_prev"),
        Binding("backslash", "prompt('filter')", "Filter lanes", show=False, id="app.filter"),
        Binding("1", "table('critical')", "CP table", show=False, id="app.table_critical"),
        Binding("2", "table('gaps')", "Gaps table", show=False, id="app.table_gaps"),
        Binding("3", "table('comm')", "Comm table", show=False, id="app.table_comm"),
        Binding("4", "table('names')", "Names table", show=False, id="app.table_names"),
        Binding("5", "table('idle')", "Idle table", show=False, id="app.table_idle"),
        Binding("6", "table('collectives')", "Collectives", show=False, id="app.table_collectives"),
        Binding("7", "table('stragglers')", "Stragglers", show=False, id="app.table_stragglers"),
        Binding("8", "table('moe')", "MoE view", show=False, id="app.table_moe"),
        Binding("g", "next_step(1)", "Next step", show=False, id="app.next_step"),
        Binding("G", "next_step(-1)", "Prev step", show=False, id="app.prev_step"),
        Binding("question_mark,f1", "help", "Help", id="app.help"),
        Binding("p", "toggle_side", "Panes", id="app.toggle_side"),
        Binding("o", "metrics_sort", "Sort ranks", show=False, id="app.metrics_sort"),
        Binding("colon", "prompt('goto')", "Go to", show=False, id="app.goto"),
        Binding("q", "close_or_quit", "Close", id="app.close_or_quit"),
        # Ctrl+C quits at once, even while loading or analysing (Textual only hints at Ctrl+Q).
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="app.quit"),
    ]

    SIDE_MIN_TERMINAL = 120  # below this many columns the side pane starts hidden (p shows it)
    SIDE_WIDTH = 58  # side pane columns when there is room
    SIDE_MAX_SHARE = 0.4  # the timeline always keeps at least 60% of the width

    def __init__(
        self,
        trace: Trace | None = None,
        *,
        paths: Sequence[str | Path] = (),
        metrics: bool = True,
        title: str | None = None,
        loading: LoadOptions | None = None,
    ) -> None:
        super().__init__()
        self.loading = loading  # how `paths` are read (the CLI's --no-cache, --jobs...)
        self.analysis: AnalysisSession | None = None  # the shown trace's analyses
        self.trace: Trace | None = None
        self.model: LaneModel | None = None
        self.report: Any = None
        self.overlays: Overlays | None = None
        self.paths = [Path(p) for p in paths]
        self.metrics_enabled = metrics
        self.search_hits = np.empty(0, dtype=np.int64)
        self.search_text = ""
        self.prompt_mode = ""
        self.steps: list[tuple[int, int, int]] = []
        self._initial = trace
        self._title = title
        self.side_wanted: bool | None = None  # None: decided by the terminal width
        self.load_progress: LoadProgress | None = None
        self._metrics_request = 0

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with Horizontal(id="main"):
            yield TimelineView(id="timeline")
            with Vertical(id="side"):
                yield DetailsPane(id="details")
                yield MetricsPane(id="metrics")
        yield Input(id="prompt")
        yield Static(Text(""), id="status")
        yield Footer()

    @property
    def timeline(self) -> TimelineView:
        return self.query_one("#timeline", TimelineView)

    def on_mount(self) -> None:
        self.query_one("#prompt", Input).display = False
        self.query_one("#prompt", Input).cursor_blink = False
        self.fit_layout(self.size.width)
        self.timeline.focus()
        if self._initial is not None:
            self.show_trace(self._initial)
        elif self.paths:
            self.title = f"moetrace — {job_name(self.paths)}"
            self.sub_title = "loading…"
            self.load_paths()
        else:
            self.set_status("nothing to show: no trace given")

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
        self.timeline.refresh()

    def action_toggle_side(self) -> None:
        """p: show or hide the details and metrics panes."""
        self.side_wanted = not self.query_one("#side").display
        self.fit_layout(self.size.width)

    def set_status(self, text: str, style: str = "") -> None:
        self.query_one("#status", Static).update(Text(safe_text(text), style=style))

    # ------------------------------------------------------------- workers
    def load_paths(self) -> None:
        """Read the trace files in a daemon thread; show read progress until they are in."""
        try:
            files = expand_paths(self.paths)
        except Exception:  # the loader reports it properly below
            files = list(self.paths)
        self.load_progress = LoadProgress(files)
        self._show_progress()
        self._progress_timer = self.set_interval(0.25, self._show_progress)
        # Start reading once the first frame is on screen: the reader holds the GIL in long
        # stretches and would otherwise delay it.
        self.call_after_refresh(lambda: self.set_timer(0.02, self._start_load))

    def _start_load(self) -> None:
        """The load itself, in a daemon thread that posts TraceLoaded or LoadFailed."""

        def job() -> None:
            try:
                from moetrace.trace.io import load

                trace = load(self.paths, options=self.loading)
            except Exception as exc:  # shown in the app, not as a traceback
                self.post_message(LoadFailed(f"{type(exc).__name__}: {exc}"))
                return
            self.post_message(TraceLoaded(trace))

        run_in_background("load", job)

    def _show_progress(self) -> None:
        if self.load_progress is not None:
            text = self.load_progress.text()
            self.set_status(text)
            self.timeline.placeholder = f"{text}  (q or Ctrl+C quits)"
            self.timeline.refresh()

    def _loading_done(self) -> None:
        self.load_progress = None
        timer = getattr(self, "_progress_timer", None)
        if timer is not None:
            timer.stop()

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        progress = self.load_progress
        self._loading_done()
        self.show_trace(message.trace)
        if progress is not None and not message.trace.warnings and message.trace.events.height:
            seconds = max(progress.elapsed(), 1e-6)
            n = message.trace.events.height
            self.set_status(f"loaded {n} events in {seconds:.1f} s ({n / seconds:,.0f} events/s)")

    def on_load_failed(self, message: LoadFailed) -> None:
        self._loading_done()
        self.timeline.placeholder = "could not load the trace (see the status line)"
        self.sub_title = "load failed"
        self.set_status(f"could not load: {message.error}", "bold red")
        self.query_one("#details", DetailsPane).query_one("#details-text", Static).update(
            Text(f"could not load the trace:\n{safe_text(message.error)}", style="red")
        )
        self.query_one(MetricsPane).show_error("no trace")

    def show_trace(self, trace: Trace) -> None:
        """Display a trace now; start the metrics worker in the background."""
        self.trace = trace
        self.model = LaneModel(trace)
        self.timeline.set_model(self.model)
        meta = trace.meta
        source = meta.get("source") or []
        name = self._title or (
            job_name([Path(p) for p in source]) if source else meta.get("flavor") or "trace"
        )
        self.title = f"moetrace — {safe_text(name)}"
        window = trace.window()
        span = (window[1] - window[0]) if window else 0
        from .format import fmt_ns

        self.sub_title = (
            f"{meta.get('format', '?')}/{meta.get('flavor', '?')} · {len(trace.ranks)} ranks · "
            f"{trace.events.height} events · {fmt_ns(span)}"
        )
        warnings = trace.warnings
        self.set_status(
            f"{len(warnings)} warnings while reading: {warnings[0]}" if warnings else "ready",
            "yellow" if warnings else "",
        )
        if trace.events.height == 0:
            self.set_status("this trace has no events")
        if self.metrics_enabled:
            # Start the analysis once the lanes are on screen: the first frame never waits.
            self.timeline.after_first_paint(lambda: self.compute_metrics(None, None))
        else:
            self.query_one(MetricsPane).show_disabled()

    def compute_metrics(self, time_range: tuple[int, int] | None, ranks: list[int] | None) -> None:
        """Run the analysis in a daemon thread; a newer request supersedes an older one."""
        self._metrics_request += 1
        request = self._metrics_request
        run_in_background("metrics", lambda: self._metrics_job(time_range, ranks, request))

    def _metrics_job(
        self, time_range: tuple[int, int] | None, ranks: list[int] | None, request: int
    ) -> None:
        trace = self.trace
        if trace is None:
            return
        try:
            from moetrace.analysis.session import AnalysisSession

            from .loading import analyze_off_interface

            kwargs: dict[str, Any] = {}
            if time_range is not None:
                kwargs["time_range"] = time_range
            if ranks is not None:
                kwargs["ranks"] = ranks
            if self.analysis is None or self.analysis.trace is not trace:
                self.analysis = AnalysisSession(trace)
            report = analyze_off_interface(self.analysis, kwargs)
        except Exception as exc:
            self.post_message(MetricsFailed(f"{type(exc).__name__}: {exc}"))
            return
        scope = "whole trace"
        if time_range is not None and self.model is not None:
            from .format import fmt_ns

            o = self.model.origin
            scope = f"area {fmt_ns(time_range[0] - o)} – {fmt_ns(time_range[1] - o)}"
            if ranks:
                scope += (
                    f", ranks {ranks[0]}–{ranks[-1]}" if len(ranks) > 1 else f", rank {ranks[0]}"
                )
        whole = time_range is None and ranks is None
        overlays = None
        if whole and self.model is not None:
            # Indexing the overlays takes ~0.5 s at 256 ranks: here, not in the interface.
            overlays = build_overlays(report, self.model)
        self.post_message(MetricsReady(report, scope, whole, request, overlays))

    def on_metrics_ready(self, message: MetricsReady) -> None:
        if message.request != self._metrics_request and not message.whole:
            return  # an area selection that was replaced by a newer one
        self.query_one(MetricsPane).show(message.report, message.scope)
        if message.whole:
            self.report = message.report
            if self.model is not None:
                self.overlays = message.overlays or build_overlays(message.report, self.model)
                self.timeline.set_overlays(self.overlays)
            self.timeline.set_row_notes(idle_notes(message.report))
            self.steps = step_windows(message.report)
            if len(self.steps) > 1:
                self.sub_title += f" · steps {self.steps[0][0]}–{self.steps[-1][0]} (g: next step)"
            self.refresh_details()

    def on_metrics_failed(self, message: MetricsFailed) -> None:
        self.query_one(MetricsPane).show_error(message.error)

    def on_timeline_view_area_selected(self, message: TimelineView.AreaSelected) -> None:
        if not self.metrics_enabled or self.trace is None:
            return
        self.query_one(MetricsPane).show(None, "area selection")
        self.compute_metrics(message.time_range, message.ranks)

    def on_timeline_view_selected(self, message: TimelineView.Selected) -> None:
        self.refresh_details()

    def on_details_pane_jump(self, message: DetailsPane.Jump) -> None:
        self.timeline.select_event(message.event_id)
        self.timeline.focus()

    def refresh_details(self) -> None:
        origin = self.model.origin if self.model else 0
        overlays = self.overlays if self.report is not None else None
        self.query_one(DetailsPane).show(self.trace, self.timeline.selected, origin, overlays)


def job_name(paths: Sequence[Path]) -> str:
    """What the title calls the job: the file, or the common folder and how many files."""
    if not paths:
        return "trace"
    if len(paths) == 1:
        return safe_text(paths[0].name)
    import os

    common = os.path.commonpath([str(p.resolve()) for p in paths])
    return safe_text(f"{Path(common).name or common}/ ({len(paths)} files)")


def launch(source: Sequence[str | Path] | Trace, **options: Any) -> None:
    """Run the viewer on a Trace or on trace files (several files = one rank per file)."""
    from .loading import abandon_background_jobs

    if isinstance(source, Trace):
        MoetraceApp(source, **options).run()
    else:
        MoetraceApp(paths=list(source), **options).run()
    abandon_background_jobs()  # quit during a load/analysis: do not wait for it
