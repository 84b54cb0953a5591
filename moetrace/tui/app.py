"""The moetrace viewer: timeline, details and metrics panes, tables, overlays and search.

Loading and metrics run in daemon threads that post messages back (`loading.py`), so the
first frame (with read progress) appears at once, a job's lanes fill in as its rank files
arrive, and Ctrl+C or q quit at any moment. Every number shown comes from `moetrace.analysis`;
this package only lays it out. This module imports neither numpy nor Polars (nor the
analysis): `moetrace view` draws its first frame before they are imported, in the loader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Header, Input, Static

from moetrace.text import visible as safe_text

from .app_actions import ViewerActions
from .commands import ViewerCommands
from .keys import APP_BINDINGS
from .loading import LoadProgress, run_in_background
from .widgets.details import DetailsPane
from .widgets.footer import FittingFooter
from .widgets.metrics import MetricsPane
from .widgets.timeline import TimelineView

if TYPE_CHECKING:
    from moetrace.analysis.report import Report
    from moetrace.analysis.session import AnalysisSession
    from moetrace.trace.model import Trace
    from moetrace.trace.options import LoadOptions

    from .lanes import LaneModel
    from .overlays import Overlays


class TraceLoaded(Message):
    """The load finished: the whole trace (and its lane model when the loader built it)."""

    def __init__(self, trace: Trace, model: LaneModel | None = None) -> None:
        self.trace = trace
        self.model = model
        super().__init__()


class RanksLoaded(Message):
    """Part of a job is in: the first `done` of `total` rank files, merged, and their lanes;
    `done` 0: a preview of the events read so far of one big file."""

    def __init__(self, trace: Trace, model: LaneModel, done: int, total: int) -> None:
        self.trace, self.model, self.done, self.total = trace, model, done, total
        super().__init__()


class FilesFound(Message):
    """The loader expanded the folders given: the files it reads (progress counts them)."""

    def __init__(self, files: list[Path]) -> None:
        self.files = files
        super().__init__()


class LoadFailed(Message):
    def __init__(self, error: str) -> None:
        self.error = error
        super().__init__()


class MetricsReady(Message):
    """An analysis finished: the report of `scope`; for the whole trace (`whole`) also the
    overlays, idle notes and step windows, all computed in the worker."""

    def __init__(
        self,
        report: Report,
        scope: str,
        whole: bool,
        request: int = 0,
        overlays: Overlays | None = None,
        notes: dict[tuple[object, ...], str] | None = None,
        steps: list[tuple[int, int, int]] | None = None,
    ) -> None:
        self.report, self.scope, self.whole, self.request = report, scope, whole, request
        self.overlays, self.notes, self.steps = overlays, notes, steps
        super().__init__()


class MetricsFailed(Message):
    def __init__(self, error: str) -> None:
        self.error = error
        super().__init__()


class MoetraceApp(ViewerActions):
    """Browse a trace: `MoetraceApp(trace)` for an in-memory Trace, or `paths=[...]` to load."""

    CSS_PATH = "moetrace.tcss"
    TITLE = "moetrace"
    COMMANDS = ViewerActions.COMMANDS | {ViewerCommands}
    BINDINGS: ClassVar[list[BindingType]] = list(APP_BINDINGS)

    def __init__(
        self,
        trace: Trace | None = None,
        *,
        paths: Sequence[str | Path] = (),
        metrics: bool = True,
        title: str | None = None,
        loading: LoadOptions | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        # How `paths` are read (the CLI's --no-cache, --jobs...): LoadOptions, or its fields
        # (`moetrace view` passes those: LoadOptions is built by the loader, off the interface).
        self.loading = loading
        self.analysis: AnalysisSession | None = None  # the shown trace's analyses
        self.trace: Trace | None = None
        self.model: LaneModel | None = None
        self.report: Report | None = None
        self.overlays: Overlays | None = None
        self.paths = [Path(p) for p in paths]
        self.metrics_enabled = metrics
        self.search_hits = None
        self.search_text = ""
        self.prompt_mode = ""
        self.steps: list[tuple[int, int, int]] = []
        self._initial = trace
        self._title = title
        self.side_wanted: bool | None = None  # None: decided by the terminal width
        self.load_progress: LoadProgress | None = None
        self._metrics_request = 0
        self._files: list[Path] = []

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≡")
        with Horizontal(id="main"):
            yield TimelineView(id="timeline")
            with Vertical(id="side"):
                yield DetailsPane(id="details")
                yield MetricsPane(id="metrics")
        yield Input(id="prompt")
        yield Static(Text(""), id="status")
        yield FittingFooter()

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

    # ------------------------------------------------------------- workers
    def load_paths(self) -> None:
        """Read the trace files in a daemon thread; show read progress until they are in."""
        self.load_progress = LoadProgress(list(self.paths))  # folders: expanded by the loader
        self._show_progress()
        self._progress_timer = self.set_interval(0.25, self._show_progress)
        # Start reading once the first frame is on screen: the reader holds the GIL in long
        # stretches and would otherwise delay it.
        self.call_after_refresh(lambda: self.set_timer(0.02, self._start_load))

    def _start_load(self) -> None:
        """The load itself, in a daemon thread that posts RanksLoaded as rank files arrive,
        then TraceLoaded or LoadFailed. numpy, Polars and the lane painter are first imported
        here, off the interface."""
        paths = list(self.paths)
        assert self.load_progress is not None
        sink = self.load_progress.reported  # the readers' own progress reports go here

        def show(trace: Trace, done: int) -> None:
            from .lanes import LaneModel

            self.post_message(RanksLoaded(trace, LaneModel(trace), done, len(self._files)))

        def job() -> None:
            try:
                from moetrace.trace.io import expand_paths

                files = expand_paths(paths)
            except Exception:  # the loader reports it properly below
                files = paths
            self._files = files
            if files != paths:
                self.post_message(FilesFound(files))
            try:
                from moetrace.trace import progress
                from moetrace.trace.options import LoadOptions

                from .loading import load_in_steps

                options = self.loading
                if options is not None and not isinstance(options, LoadOptions):
                    options = LoadOptions(**options)
                with progress.watching(sink):
                    trace = load_in_steps(paths, files, show, options)
            except Exception as exc:  # shown in the app, not as a traceback
                self.post_message(LoadFailed(f"{type(exc).__name__}: {exc}"))
                return
            from .lanes import LaneModel
            from .widgets import lane_painter  # noqa: F401  (imported here, not in the interface)

            self.post_message(TraceLoaded(trace, LaneModel(trace)))

        run_in_background("load", job)

    def on_files_found(self, message: FilesFound) -> None:
        if self.load_progress is not None:
            self.load_progress = LoadProgress(
                message.files,
                started=self.load_progress.started,
                reported=self.load_progress.reported,
            )

    def _show_progress(self) -> None:
        if self.load_progress is not None:
            text = self.load_progress.text()
            self.set_status(text)
            self.timeline.placeholder = f"{text}  (q or Ctrl+C quits)"
            if self.model is None:  # drawn only until lanes (a preview, a rank file) are in
                self.timeline.refresh()

    def _loading_done(self) -> None:
        self.load_progress = None
        timer = getattr(self, "_progress_timer", None)
        if timer is not None:
            timer.stop()

    def on_ranks_loaded(self, message: RanksLoaded) -> None:
        """Part of the job is in (rank files, or a preview of one big file): draw its lanes
        now (the view kept as more arrives)."""
        if self.load_progress is None:
            return  # the whole trace is already shown
        first = self.model is None
        self.trace, self.model = message.trace, message.model
        self.timeline.set_model(message.model, keep_view=not first)
        # "partial" first: the header cuts the end at 80 columns
        if message.done == 0:  # a preview of one big file
            self.sub_title = (
                f"partial preview: {message.trace.events.height:,} events read so far · loading…"
            )
            return
        from .format import count_text

        ranks = count_text(len(message.trace.ranks), "rank")
        self.sub_title = (
            f"partial: {ranks} so far ({message.done} of {message.total} files) · loading…"
        )

    def on_trace_loaded(self, message: TraceLoaded) -> None:
        progress = self.load_progress
        self._loading_done()
        self.show_trace(message.trace, message.model)
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

    def show_trace(self, trace: Trace, model: LaneModel | None = None) -> None:
        """Display a trace now (its lane model built here unless given); start the metrics
        worker in the background. A job whose first ranks are already drawn keeps its view."""
        from .format import count_text, fmt_ns
        from .lanes import LaneModel

        keep_view = self.model is not None
        self.trace = trace
        self.model = model if model is not None else LaneModel(trace)
        self.timeline.set_model(self.model, keep_view=keep_view)
        meta = trace.meta
        source = meta.get("source") or []
        name = self._title or (
            job_name([Path(p) for p in source]) if source else meta.get("flavor") or "trace"
        )
        self.title = f"moetrace — {safe_text(name)}"
        window = trace.window()
        span = (window[1] - window[0]) if window else 0
        self.sub_title = (
            f"{meta.get('format', '?')}/{meta.get('flavor', '?')} · "
            f"{count_text(len(trace.ranks), 'rank')} · "
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
        from .format import fmt_ns

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
            o = self.model.origin
            scope = f"area {fmt_ns(time_range[0] - o)} – {fmt_ns(time_range[1] - o)}"
            if ranks:
                scope += (
                    f", ranks {ranks[0]}–{ranks[-1]}" if len(ranks) > 1 else f", rank {ranks[0]}"
                )
        whole = time_range is None and ranks is None
        if not whole or self.model is None:
            self.post_message(MetricsReady(report, scope, whole, request))
            return
        # Indexing the overlays takes ~0.5 s at 256 ranks: here, not in the interface.
        from .overlays import build_overlays
        from .report_view import idle_notes, step_windows

        overlays = build_overlays(report, self.model)
        notes, steps = idle_notes(report), step_windows(report)
        self.post_message(MetricsReady(report, scope, whole, request, overlays, notes, steps))

    def on_metrics_ready(self, message: MetricsReady) -> None:
        if message.request != self._metrics_request and not message.whole:
            return  # an area selection that was replaced by a newer one
        self.query_one(MetricsPane).show(message.report, message.scope)
        if message.whole:
            self.report = message.report
            if self.model is not None:
                self.overlays = message.overlays
                self.timeline.set_overlays(self.overlays)
            self.timeline.set_row_notes(message.notes or {})
            self.steps = message.steps or []
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

    if isinstance(source, Sequence):  # file names (a Trace is not a sequence)
        MoetraceApp(paths=list(source), **options).run()
    else:
        MoetraceApp(source, **options).run()
    abandon_background_jobs()  # quit during a load/analysis: do not wait for it
