"""Loading a job for the analysis commands: the files the arguments name, every file a rank of
one job (unreadable ones skipped while one remains), analysed, with its warnings printed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moetrace.commands._common import UserError, warn, warn_or_note

if TYPE_CHECKING:
    from moetrace.analysis.report import Report
    from moetrace.trace.model import Trace
    from moetrace.trace.options import LoadOptions


def job_files(paths: Sequence[str]) -> list[str]:
    """The trace files the arguments name, in order: files exactly as given (a missing one is
    reported when it is read, so the others still load; the text is the label the output
    shows), directories expanded by the loader's own rule (`moetrace.trace.io.expand_paths`,
    which raises TraceFormatError for a directory without traces)."""
    from moetrace.trace.io import expand_paths

    files: list[str] = []
    for arg in paths:
        files += [str(p) for p in expand_paths(arg)] if Path(arg).is_dir() else [arg]
    return files


def load_job(files: list[str], skipped: list[str], loading: LoadOptions) -> Trace:
    """All files as one job (one rank each, merged by the shared loader); a file that cannot
    be read is skipped (its error appended to `skipped`) while at least one remains."""
    from moetrace.trace.io import load
    from moetrace.trace.model import TraceFormatError, TraceValidationError

    todo = list(files)
    while True:
        try:
            return load(todo if len(todo) > 1 else todo[0], options=loading)
        except (TraceFormatError, TraceValidationError, OSError) as exc:
            bad = getattr(exc, "path", None) or getattr(exc, "filename", None)
            if len(todo) == 1 or bad is None or str(bad) not in todo:
                raise
            todo.remove(str(bad))
            skipped.append(str(exc) if not isinstance(exc, OSError) else f"{bad}: {exc}")


def analyze_paths(
    paths: Sequence[str],
    peak_tflops: float | None,
    patterns: Sequence[str],
    *,
    separate: bool = False,
    window: str = "step",
    window_span: str = "compute-comm",
    loading: LoadOptions,
) -> list[tuple[str, Report]]:
    """Load and analyze the arguments as ONE job (every file a rank of it), or with
    `separate` each file on its own (warnings are printed by the caller)."""
    from moetrace.analysis.classify import check_patterns
    from moetrace.commands.numbers import check_peak_tflops

    peak_tflops = check_peak_tflops(peak_tflops)  # MFU from -1 TFLOP/s would be nonsense
    from moetrace.analysis.report import analyze
    from moetrace.analysis.windows import WINDOW_SPANS, parse_window
    from moetrace.trace.model import TraceFormatError, TraceValidationError

    try:
        pats = check_patterns(patterns)
        parse_window(window)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if window_span not in WINDOW_SPANS:
        raise UserError(f"--window-span {window_span}: expected {' or '.join(WINDOW_SPANS)}")
    files = job_files(paths)
    jobs = [[f] for f in files] if separate else [files]
    out = []
    failed: list[str] = []
    for job in jobs:
        try:
            trace = load_job(job, failed, loading)
        except (TraceFormatError, TraceValidationError, OSError) as exc:
            if len(jobs) == 1:
                raise
            # --separate: one bad file does not stop the others (exit 2 only if all fail)
            failed.append(str(exc) if not isinstance(exc, OSError) else f"{job[0]}: {exc}")
            continue
        report = analyze(
            trace,
            peak_tflops=peak_tflops,
            comm_patterns=pats,
            window=window,
            window_span=window_span,
        )
        label = job[0] if len(job) == 1 else ", ".join(paths)
        out.append((label, report))
    if not out:
        raise UserError(failed[0] if failed else "no traces")
    for message in failed:
        warn(f"skipped: {message}")
    return out


def check_computed(results: list[tuple[str, Report]]) -> None:
    """Exit 2 (one line) when no trace gave a single window; else print the warnings."""
    if all(r.ranks.height == 0 for _, r in results):
        path, report = results[0]
        why = [w for w in report.warnings if "cross-track" not in w]
        detail = "; ".join(why[:2]) if why else "no compute or communication events"
        raise UserError(f"{path}: nothing to analyze ({detail})")
    for path, report in results:
        for w in report.warnings:
            warn_or_note(w, path)


def captured_ops(report: Report, capture: str, loading: LoadOptions) -> dict[str, Any]:
    """Replayed kernels mapped to the capture trace's ops: how many, and kernel ns per op."""
    import polars as pl

    from moetrace.analysis.launches import GRAPH_LAUNCH, capture_map, launching_ops
    from moetrace.trace.io import load

    replay = report.trace
    if replay is None:
        return {"replayed": 0, "mapped": 0, "ops": []}
    mapped = capture_map(replay, load(capture, options=loading))
    calls = replay.events.select(pl.col("id").alias("launch_id"), pl.col("name").alias("call"))
    replayed = launching_ops(replay).join(calls, on="launch_id")
    n_replayed = replayed.filter(pl.col("call").str.contains(GRAPH_LAUNCH)).height
    per_op = (
        mapped.join(replay.events.select(pl.col("id").alias("event_id"), "dur"), on="event_id")
        .group_by("op")
        .agg(pl.col("dur").sum().alias("kernel_ns"))
        .sort("kernel_ns", "op", descending=[True, False])
    )
    ops = [{"op": op, "kernel_ns": int(ns)} for op, ns in per_op.iter_rows()]
    return {"replayed": n_replayed, "mapped": mapped.height, "ops": ops}
