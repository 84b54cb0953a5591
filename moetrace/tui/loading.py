"""Loading and analysing a trace off the interface: daemon threads and read progress.

Textual's thread workers run in asyncio's default executor, which the app waits for when it
exits: quitting during a 15 s load would freeze the screen for 15 s. These jobs run in daemon
threads instead; `abandon_background_jobs` ends the process at once when the viewer closes
with one still running. Progress comes from the kernel's file position of the file being read
(/proc/self/fdinfo), so it needs nothing from the readers: bytes/s and an ETA from them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moetrace.analysis.report import Report
    from moetrace.analysis.session import AnalysisSession
    from moetrace.trace.model import Trace
    from moetrace.trace.options import LoadOptions
    from moetrace.trace.progress import ProgressReport

_jobs: list[threading.Thread] = []
_processes: list[Any] = []  # analysis processes still running (ended when the viewer quits)

# Above this many events the analysis runs in its own process: in a thread it holds the GIL
# for seconds at a time and keys would wait for it (bench_tui: 1 key in 4 s at 256 ranks).
PROCESS_ANALYSIS_EVENTS = 100_000


# Several files: while the job so far has fewer events than this, it is redrawn after every
# file; above, only once the files read since took twice as long as the last redraw (so the
# partial views cost at most a third of the load).
PARTIAL_EVERY_FILE_EVENTS = 500_000


# One big file: previews of the events read so far (moetrace.trace.formats.partial) for files
# of at least this many bytes on disk (~0.5M events as .json.gz: ~2 s to read); smaller files
# load in about the time a preview would take.
PREVIEW_MIN_BYTES = 8 << 20
# The watch's policy (seconds, share of the reading time): the first preview after 0.5 s of
# reading, then at most every 1.5 s while all previews cost ≤ 10% of the reading. A preview
# costs ~1/4 of reading its events (building the trace), so after the first, small one the
# budget admits few: growing intervals.
PREVIEW_POLICY: dict[str, float] = {"budget": 0.10, "first_after": 0.5, "min_interval": 1.5}
# The watch of the last previewed load: how many previews it showed and the seconds they cost
# (bench_tui prints them: the previews' own cost, steadier than two loads' wall clocks).
last_preview_stats: tuple[int, float] | None = None


def load_with_previews(
    paths: list[Path], show: Callable[[Trace], None], options: LoadOptions | None = None
) -> Trace:
    """`moetrace.trace.io.load(paths, options=options)` (exactly its result), while the file
    being read offers `show` previews of what it has read so far (a file from the cache offers
    none: it is in at once)."""
    from moetrace.trace import io
    from moetrace.trace.formats import partial
    from moetrace.trace.formats.chrome.partial import BUILDERS

    policy = PREVIEW_POLICY
    watch = partial.PreviewWatch(
        show,
        BUILDERS,
        budget=policy["budget"],
        first_after=policy["first_after"],
        min_interval=policy["min_interval"],
    )
    global last_preview_stats
    try:
        with partial.watching(watch):
            return io.load(paths, options=options)
    finally:
        last_preview_stats = (watch.shown, watch.spent)


def load_in_steps(
    paths: list[Path],
    files: list[Path],
    show: Callable[[Trace, int], None],
    options: LoadOptions | None = None,
) -> Trace:
    """`moetrace.trace.io.load(paths, options=options)`, showing the job as its rank files
    arrive: with several files (and the cache on) they are first read one by one, and
    `show(job so far, files read)` is called as each arrives; one big file calls
    `show(events read so far, 0)` now and then (`load_with_previews`). The result is `load`'s
    own (rank numbers of files that name none, duplicate-rank warnings), read back from the
    cache (~8% of a first read)."""
    from dataclasses import replace

    from moetrace.trace import io
    from moetrace.trace.formats import registry
    from moetrace.trace.options import LoadOptions

    options = options or LoadOptions()
    if len(files) == 1 and _size(files[0]) >= PREVIEW_MIN_BYTES:
        return load_with_previews(paths, lambda trace: show(trace, 0), options)
    if len(files) < 2 or not options.cache:
        return io.load(paths, options=options)
    read: list[Trace] = []
    owed = 0.0  # seconds of reading since the last redraw, less twice what that redraw took
    for k, path in enumerate(files):
        started = time.perf_counter()
        read.append(registry.read_file_cached(path, None, use_cache=True))
        owed += time.perf_counter() - started
        events = sum(t.events.height for t in read)
        if k + 1 < len(files) and (events < PARTIAL_EVERY_FILE_EVENTS or owed >= 0):
            started = time.perf_counter()
            show(io.merge(read), k + 1)
            owed = -2 * (time.perf_counter() - started)
    # Every file is in the cache now: this process reads it back.
    return io.load(paths, options=replace(options, jobs=1, engine="local"))


def _position_of(path: Path) -> int | None:
    """The read position (bytes) of this process's open file `path`, None if not open."""
    target = str(path.resolve())
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != target:
                continue
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as info:
                for line in info:
                    if line.startswith("pos:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            continue
    return None


class ReadProgress:
    """The readers' latest report per file (`moetrace.trace.progress.Sink`), written by the
    loading thread and read by the interface's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[Path, ProgressReport] = {}

    def update(self, report: ProgressReport) -> None:
        """Keep `report` as the latest of its file."""
        with self._lock:
            self._latest[report.path] = report

    def latest(self) -> dict[Path, ProgressReport]:
        """The latest report of each file reported so far."""
        with self._lock:
            return dict(self._latest)


@dataclass
class LoadProgress:
    """How far the reading of `files` has got, in bytes of the files: a file's own reports
    (`moetrace.trace.progress`: the .pftrace reader's passes, a worker's file done) where it
    makes them, else its read position; the share shown never goes back."""

    files: list[Path]
    started: float = field(default_factory=time.perf_counter)
    reported: ReadProgress = field(default_factory=lambda: ReadProgress())
    sizes: list[int] = field(default_factory=list)
    _last_file: int = 0
    _best: float = 0.0  # the highest share (0..1) shown so far

    def __post_init__(self) -> None:
        self.sizes = [_size(p) for p in self.files]
        self._index = {os.path.abspath(p): k for k, p in enumerate(self.files)}

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes)

    def _by_position(self) -> list[float]:
        """Share (0..1) of each file read, by the read position of the one open (the files
        before it are read: the loader reads them in order)."""
        shares = [0.0] * len(self.files)
        for k in range(self._last_file, len(self.files)):
            pos = _position_of(self.files[k])
            if pos is not None:
                self._last_file = k
                shares[k] = min(pos / self.sizes[k], 1.0) if self.sizes[k] else 0.0
                break
        shares[: self._last_file] = [1.0] * self._last_file
        return shares

    def bytes_read(self) -> int:
        """Bytes of the files read so far (reports and read positions; never fewer than
        shown before)."""
        shares = self._by_position()
        self._stage = ""
        for path, report in self.reported.latest().items():
            k = self._index.get(os.path.abspath(path))
            if k is not None:  # a file that reports is measured by its reports alone
                shares[k] = report.fraction
                if report.stage and report.fraction < 1:
                    self._stage = report.stage
        total = self.total_bytes
        done = sum(size * share for size, share in zip(self.sizes, shares, strict=True))
        if total:
            self._best = max(self._best, done / total)
        return round(self._best * total)

    def files_done(self) -> int:
        """Files reported done (by a worker) or read past (in order)."""
        done = {
            self._index.get(os.path.abspath(p))
            for p, r in self.reported.latest().items()
            if r.fraction >= 1
        }
        return max(len(done - {None}), self._last_file)

    def elapsed(self) -> float:
        """Seconds since the load started."""
        return time.perf_counter() - self.started

    def text(self) -> str:
        """'reading file 2 of 8 · 41% of 120 MB · 35 MB/s · ETA 2 s · 1.4 s' (or just
        elapsed), with the reader's stage when it reports one."""
        elapsed = time.perf_counter() - self.started
        done, total = self.bytes_read(), self.total_bytes
        parts = [f"reading {len(self.files)} file{'s' if len(self.files) != 1 else ''}"]
        if len(self.files) > 1:
            parts[0] = f"reading {len(self.files)} files, {self.files_done()} done"
        if self._stage:
            parts[0] += f" ({self._stage})"
        if total and done:
            rate = done / max(elapsed, 1e-6)
            parts.append(f"{100 * done / total:.0f}% of {_mb(total)}")
            parts.append(f"{_mb(rate)}/s")
            if done < total:
                parts.append(f"ETA {max(total - done, 0) / rate:.0f} s")
            else:
                parts.append("ETA 0 s · building the trace…")
        parts.append(f"{elapsed:.1f} s")
        return " · ".join(parts)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


def run_in_background(name: str, job: Callable[[], None]) -> threading.Thread:
    """Run `job` in a daemon thread (the viewer can quit without waiting for it)."""
    thread = threading.Thread(target=job, name=f"moetrace-{name}", daemon=True)
    _jobs[:] = [t for t in _jobs if t.is_alive()]
    _jobs.append(thread)
    thread.start()
    return thread


# The peak RSS (bytes) of the last analysis process (bench_tui prints it; the parent's
# RUSAGE_CHILDREN would count the viewer's own peak too: ru_maxrss survives the fork and exec).
last_analysis_rss = 0


def _peak_rss() -> int:
    """This process's peak resident set (VmHWM, bytes; reset by exec, unlike ru_maxrss)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def analysis_process_main() -> None:
    """In the analysis process: read a pickled (trace, kwargs) from stdin, write a pickled
    ("ok", report, peak RSS) or ("error", text, peak RSS) to stdout (bytes)."""
    import pickle

    with contextlib.suppress(OSError):
        os.nice(10)  # on a busy machine the interface's keys come first
    trace, kwargs = pickle.load(sys.stdin.buffer)
    try:
        from moetrace.analysis.report import analyze

        result: tuple[str, Any, int] = ("ok", analyze(trace, **kwargs), _peak_rss())
    except Exception as exc:  # reported in the metrics pane
        result = ("error", f"{type(exc).__name__}: {exc}", _peak_rss())
    pickle.dump(result, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.flush()


def analyze_off_interface(session: AnalysisSession, kwargs: dict[str, Any]) -> Report:
    """`session.analyze(**kwargs)` (an AnalysisSession: earlier graphs reused); big traces in
    a child Python process so the interface keeps the GIL. Call it from a background thread.
    Raises RuntimeError on failure."""
    trace = session.trace
    if trace.events.height < PROCESS_ANALYSIS_EVENTS:
        return session.analyze(**kwargs)
    import pickle
    import subprocess

    # A plain child process (not multiprocessing: spawn would re-run the caller's __main__,
    # fork would inherit Polars' thread pool).
    process = subprocess.Popen(
        [sys.executable, "-c", "from moetrace.tui.loading import analysis_process_main as m; m()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    _processes.append(process)
    try:
        assert process.stdin is not None and process.stdout is not None
        try:
            pickle.dump((trace, kwargs), process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            process.stdin.close()
            status, payload, peak = pickle.load(process.stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            raise RuntimeError("the analysis process ended without a result") from None
    finally:
        process.wait()
        _processes.remove(process)
    global last_analysis_rss
    last_analysis_rss = peak
    if status != "ok":
        raise RuntimeError(payload)
    report: Report = payload
    return report


def busy() -> bool:
    """Whether a load or analysis thread is still running."""
    return any(t.is_alive() for t in _jobs)


def abandon_background_jobs(status: int = 0) -> None:
    """After the viewer closed: if a load/analysis is still running, end the process now
    (flushing stdout/stderr first) instead of waiting for it."""
    for process in list(_processes):
        if process.poll() is None:
            process.kill()
    if busy():
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)
