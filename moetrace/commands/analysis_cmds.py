"""`moetrace metrics`, `compare` and `query`: the analyzer on the command line.

Tables for people are drawn with rich (every cell is plain Text: event names never act as
markup); `--json` / `--csv` are plain and stable for scripts. Heavy imports stay inside the
command bodies so `moetrace --help` is fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import UserError, handle_errors, load_options, warn

if TYPE_CHECKING:
    import polars as pl

    from moetrace.analysis.report import Report
    from moetrace.trace.model import Trace

BY_CHOICES = ("rank-step", "rank", "step", "track", "unit")
"""--by: rank-step (one row per rank and step), rank (one row per rank over the whole trace),
step (per step across ranks: min/mean/max), track, unit."""


def _job_files(paths: Sequence[str]) -> list[str]:
    """The trace files the arguments name: files as given, directories expanded (Ascend
    `*_ascend_pt` folders, Kineto `*.pt.trace.json[.gz]`, ...). Raises UserError."""
    from moetrace.trace.io import find_traces

    files: list[str] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found = find_traces(p)
            if not found:
                raise UserError(f"{arg}: directory holds no traces")
            files += [str(f) for f in found]  # find_traces skips side files (run metadata)
        else:
            files.append(arg)
    return files


def _load_job(files: list[str], skipped: list[str]) -> Trace:
    """All files as one job (one rank each, merged by the shared loader); a file that cannot
    be read is skipped (its error appended to `skipped`) while at least one remains."""
    from moetrace.trace.io import load
    from moetrace.trace.model import TraceFormatError, TraceValidationError

    todo = list(files)
    while True:
        try:
            return load(todo if len(todo) > 1 else todo[0])
        except (TraceFormatError, TraceValidationError, OSError) as exc:
            bad = getattr(exc, "path", None) or getattr(exc, "filename", None)
            if len(todo) == 1 or bad is None or str(bad) not in todo:
                raise
            todo.remove(str(bad))
            skipped.append(str(exc) if not isinstance(exc, OSError) else f"{bad}: {exc}")


def _analyze_paths(
    paths: Sequence[str],
    peak_tflops: float | None,
    patterns: Sequence[str],
    *,
    separate: bool = False,
    window: str = "step",
    window_span: str = "compute-comm",
) -> list[tuple[str, Report]]:
    """Load and analyze the arguments as ONE job (every file a rank of it), or with
    `separate` each file on its own (warnings are printed by the caller)."""
    from moetrace.analysis.classify import check_patterns
    from moetrace.commands.numbers import check_peak_tflops

    peak_tflops = check_peak_tflops(peak_tflops)  # MFU from -1 TFLOP/s would be nonsense
    from moetrace.analysis.report import analyze
    from moetrace.analysis.steps import WINDOW_SPANS, parse_window
    from moetrace.trace.model import TraceFormatError, TraceValidationError

    try:
        pats = check_patterns(patterns)
        parse_window(window)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if window_span not in WINDOW_SPANS:
        raise UserError(f"--window-span {window_span}: expected {' or '.join(WINDOW_SPANS)}")
    files = _job_files(paths)
    jobs = [[f] for f in files] if separate else [files]
    out = []
    failed: list[str] = []
    for job in jobs:
        try:
            trace = _load_job(job, failed)
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


def _check_computed(results: list[tuple[str, Report]]) -> None:
    """Exit 2 (one line) when no trace gave a single window; else print the warnings."""
    if all(r.ranks.height == 0 for _, r in results):
        path, report = results[0]
        why = [w for w in report.warnings if "cross-track" not in w]
        detail = "; ".join(why[:2]) if why else "no compute or communication events"
        raise UserError(f"{path}: nothing to analyze ({detail})")
    for path, report in results:
        for w in report.warnings:
            warn(f"{path}: {w}")


def _people_frame(report: Report) -> pl.DataFrame:
    """The per (rank, step) table for people: key figures plus util per unit as columns."""
    import polars as pl

    frame = report.ranks.select(
        "rank",
        "step",
        "window_ns",
        "compute_ns",
        "comm_ns",
        "exposed_comm_ns",
        "free_ns",
        "busy_ns",
        "idle_ns",
        "overlap_ratio",
        "cp_span_ns",
        "cp_coverage",
        "cp_comm_ratio",
        "mfu",
    )
    if frame["mfu"].null_count() == frame.height:  # MFU unknown: no column of dashes
        frame = frame.drop("mfu")
    if report.units.height:
        util = report.units.with_columns(("util " + pl.col("unit")).alias("u")).pivot(
            on="u", index=["rank", "step"], values="util"
        )
        frame = frame.join(util, on=["rank", "step"], how="left", nulls_equal=True)
    return frame


STEP_TABLE = (
    "window_ns:max",
    "busy_ns:min",
    "busy_ns:mean",
    "busy_ns:max",
    "compute_ns:mean",
    "exposed_comm_ns:min",
    "exposed_comm_ns:mean",
    "exposed_comm_ns:max",
    "overlap_ratio:pooled",
    "cp_comm_ratio:pooled",
)
"""Columns of the per-step cross-rank table for people (CSV/JSON give every aggregate)."""


def _frame_by(report: Report, by: str, *, people: bool = False) -> pl.DataFrame:
    """The frame `--by` selects: per (rank, step) or per rank (the report's rows), per step
    across ranks (min/mean/max, ns summed, ratios pooled), per track, per unit."""
    if by == "track":
        return report.tracks
    if by == "unit":
        return report.units
    if by == "step":
        agg = report.aggregate()
        return agg.select("step", "ranks", *STEP_TABLE) if people else agg
    return _people_frame(report) if people else report.ranks


def _fmt(value: Any, column: str) -> str:
    """A cell for people: ns as ms with 3 decimals, ratios as percent."""
    if value is None:
        return "-"
    column = column.split(":")[0]  # an aggregate (exposed_comm_ns:max) formats as its metric
    is_ratio = (
        column.endswith("ratio")
        or column.startswith("util")
        or column in ("mfu", "cp_coverage", "x%")
    )
    if isinstance(value, float) and is_ratio:
        return f"{100 * value:.2f}%"
    if column.endswith("_ns") and isinstance(value, int | float):
        return f"{value / 1e6:.3f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _print_table(frame: pl.DataFrame, title: str) -> None:
    """A rich table of `frame`: ns columns in ms, ratios in %; cells are never markup."""
    import polars as pl
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    for col in frame.columns:
        header = col.replace("_ns", "")
        table.add_column(
            Text(header),
            justify="left" if frame[col].dtype == pl.String else "right",
            overflow="fold",
        )
    for row in frame.iter_rows():
        table.add_row(*[Text(_fmt(v, c)) for v, c in zip(row, frame.columns, strict=True)])
    _console().print(table)


def _console():  # type: ignore[no-untyped-def]
    """A console that never truncates: wide when stdout is not a terminal."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 240)


def _window_options(func: Any) -> Any:
    """--window, --window-span and --separate, shared by metrics and compare."""
    func = click.option(
        "--separate",
        is_flag=True,
        help="Analyse each file on its own instead of all of them as one job.",
    )(func)
    func = click.option(
        "--window-span",
        type=click.Choice(["compute-comm", "work"]),
        default="compute-comm",
        show_default=True,
        help="What spans a window: compute and comm (msprof's Stage) or all device work "
        "(copies too: TraceLens's and HTA's GPU span).",
    )(func)
    func = click.option(
        "--window",
        default="step",
        show_default=True,
        metavar="step|trace|annotation:NAME[#K]",
        help="Windows: one per rank and step, one per rank over the whole trace, or one per "
        "instance of the annotation NAME (only instance K, 0-based).",
    )(func)
    return func


@click.command("metrics")
@click.argument("traces", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON (ns and ratios).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV of the --by table.")
@click.option(
    "--by",
    type=click.Choice(BY_CHOICES),
    default="rank-step",
    show_default=True,
    help="Rows: rank-step (per rank and step), rank (per rank, whole trace), step (per step "
    "across ranks: min/mean/max), track, unit.",
)
@click.option(
    "--peak-tflops", type=float, default=None, help="Peak TFLOP/s of one device, for MFU."
)
@click.option(
    "--comm-pattern",
    "comm_patterns",
    multiple=True,
    metavar="REGEX",
    help="Kernel names that are communication too (repeatable).",
)
@click.option(
    "--capture",
    type=click.Path(dir_okay=False),
    default=None,
    help="A CUDA/HIP-graph capture trace (with its kernels): map replayed kernels back to "
    "the ops that launched them at capture time (time per captured op).",
)
@_window_options
@load_options
@handle_errors
def metrics(
    traces: tuple[str, ...],
    as_json: bool,
    as_csv: bool,
    by: str,
    peak_tflops: float | None,
    comm_patterns: tuple[str, ...],
    capture: str | None,
    window: str,
    window_span: str,
    separate: bool,
) -> None:
    """Exposed communication, idle cores and the critical path of a job, per rank and step.

    \b
    TRACES: files and directories (Ascend *_ascend_pt folders, Kineto *.pt.trace.json[.gz]),
    all ranks of ONE job (--separate: each file on its own).
    Definitions: docs/metrics.md (they match msprof's step_trace_time.csv, HTA, TraceLens).
    Times in the tables are ms; --json gives ns.
    """
    import polars as pl

    if as_json and as_csv:
        raise UserError("--json and --csv are exclusive")
    if by == "rank":
        if window not in ("step", "trace"):
            raise UserError("--by rank is one whole-trace window per rank; use --by rank-step")
        window = "trace"
    results = _analyze_paths(
        traces,
        peak_tflops,
        comm_patterns,
        separate=separate,
        window=window,
        window_span=window_span,
    )
    _check_computed(results)
    captured = {p: _captured_ops(r, capture) for p, r in results} if capture else {}
    if as_json:
        doc: dict[str, Any] = {"traces": [{"source": p, **r.to_dict()} for p, r in results]}
        if len(results) == 1 and results[0][1].job is not None:  # several ranks: the job
            doc["job"] = doc["traces"][0].pop("job")
        for item, (path, _) in zip(doc["traces"], results, strict=True):
            if path in captured:
                item["capture"] = captured[path]
        click.echo(json.dumps(doc, indent=1))
        return
    if as_csv:
        frames = [_frame_by(r, by).with_columns(pl.lit(p).alias("trace")) for p, r in results]
        sys.stdout.write(pl.concat(frames, how="diagonal_relaxed").write_csv())
        return
    for path, report in results:
        frame = _frame_by(report, by, people=True)
        _print_table(frame, f"{path}  (per {by}; times in ms)")
        if by == "rank-step" and report.ranks["rank"].n_unique() > 1:
            step = _frame_by(report, "step", people=True)
            _print_table(step, f"{path}  (per step across ranks; times in ms)")
        if report.job is not None and by in ("rank-step", "rank"):
            for line in _job_lines(report.job):
                click.echo(line)
        if path in captured:
            got = captured[path]
            ops = pl.DataFrame(got["ops"], schema={"op": pl.String, "kernel_ns": pl.Int64})
            title = (
                f"{path}  (graph-replayed kernels by captured op: "
                f"{got['mapped']} of {got['replayed']} mapped; ms)"
            )
            _print_table(ops, title)


def _job_lines(job: dict[str, Any]) -> list[str]:
    """The job in two or three lines for people: who held the others back, and the job's path."""
    lines: list[str] = []
    top = job.get("stragglers") or []
    if top and top[0]["caused_wait_ns"] > 0:
        worst = top[0]
        others = ", ".join(f"rank {s['rank']} {s['caused_wait_ns'] / 1e6:.1f} ms" for s in top[1:3])
        lines.append(
            f"straggler: rank {worst['rank']} made the others wait "
            f"{worst['caused_wait_ns'] / 1e6:.1f} ms (last to arrive {worst['late_count']} times)"
            + (f"; next: {others}" if others else "")
        )
    cp = job.get("critical_path") or {}
    if cp.get("span_ns"):
        share = cp.get("comm_share")
        by_rank = sorted(cp.get("ns_by_rank", {}).items(), key=lambda kv: -kv[1])[:3]
        ranks = ", ".join(f"rank {r} {ns / 1e6:.1f} ms" for r, ns in by_rank)
        lines.append(
            f"job critical path: {cp['span_ns'] / 1e6:.3f} ms across ranks, communication "
            f"{'-' if share is None else f'{100 * share:.1f}%'}; on the path: {ranks}"
        )
    missing = job.get("missing_ranks") or []
    if missing:
        lines.append(f"partial job: ranks {_ranges(missing)} missing")
    if lines:
        lines.append("(moetrace collectives FILES: every matched collective, skews, bandwidth)")
    return lines


def _ranges(ranks: Sequence[int]) -> str:
    """[2, 3, 4, 7] -> '2-4, 7'."""
    out: list[str] = []
    start = prev = None
    for r in sorted(ranks):
        if start is None:
            start = prev = r
        elif prev is not None and r == prev + 1:
            prev = r
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = r
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def _captured_ops(report: Report, capture: str) -> dict[str, Any]:
    """Replayed kernels mapped to the capture trace's ops: how many, and kernel ns per op."""
    import polars as pl

    from moetrace.analysis.launches import GRAPH_LAUNCH, capture_map, launching_ops
    from moetrace.trace.io import load

    replay = report.trace
    if replay is None:
        return {"replayed": 0, "mapped": 0, "ops": []}
    mapped = capture_map(replay, load(capture))
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


@click.command("compare")
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV.")
@click.option("--peak-tflops", type=float, default=None, help="Peak TFLOP/s, for MFU.")
@click.option(
    "--comm-pattern",
    "comm_patterns",
    multiple=True,
    metavar="REGEX",
    help="Kernel names that are communication too (repeatable).",
)
@click.option(
    "--window",
    default="step",
    show_default=True,
    metavar="step|trace|annotation:NAME[#K]",
    help="Windows of both sides (see `moetrace metrics --help`).",
)
@load_options
@handle_errors
def compare(
    a: str,
    b: str,
    as_json: bool,
    as_csv: bool,
    peak_tflops: float | None,
    comm_patterns: tuple[str, ...],
    window: str,
) -> None:
    """Totals of two jobs side by side with ratios B/A (e.g. sequential vs tile schedule).

    A and B are trace files or directories; a directory is one job (every rank)."""
    from moetrace.analysis.report import compare as compare_reports

    results = [_analyze_paths([x], peak_tflops, comm_patterns, window=window)[0] for x in (a, b)]
    _check_computed(results)
    (_, ra), (_, rb) = results
    frame = compare_reports(ra, rb)
    if as_json:
        click.echo(json.dumps({"a": a, "b": b, "metrics": frame.to_dicts()}, indent=1))
    elif as_csv:
        sys.stdout.write(frame.write_csv())
    else:
        from rich.table import Table
        from rich.text import Text

        console = _console()
        console.print(Text(f"A = {a}"))
        console.print(Text(f"B = {b}"))
        table = Table()
        for col in ("metric", "A", "B", "B/A"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for m, va, vb, ratio in frame.iter_rows():
            label = f"{m[:-3]} (ms)" if m.endswith("_ns") else m
            table.add_row(
                Text(label),
                Text(_fmt(va, m)),
                Text(_fmt(vb, m)),
                Text("-" if ratio is None else f"{ratio:.3f}x"),
            )
        console.print(table)


@click.command("query")
@click.argument("trace", nargs=-1, required=True, type=click.Path())
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV.")
@click.option(
    "--limit",
    type=int,
    default=50,
    show_default=True,
    help="Rows shown in the table (CSV/JSON print all).",
)
@load_options
@handle_errors
def query(trace: tuple[str, ...], sql: str, as_json: bool, as_csv: bool, limit: int) -> None:
    """Run Polars SQL over the tables events, tracks, deps and counters of TRACE (files and
    directories: one job, every rank; tracks.rank tells them apart).

    \b
    Example: moetrace query t.json "SELECT name, sum(dur) AS ns FROM events GROUP BY name
             ORDER BY ns DESC LIMIT 10"
    """
    import polars as pl

    skipped: list[str] = []
    tr = _load_job(_job_files(trace), skipped)
    for message in skipped:
        warn(f"skipped: {message}")
    ctx = pl.SQLContext(events=tr.events, tracks=tr.tracks, deps=tr.deps, counters=tr.counters)
    try:
        frame = ctx.execute(sql, eager=True)
    except Exception as exc:  # polars raises several types for bad SQL
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"SQL: {first}") from exc
    if as_json:
        click.echo(frame.write_json())
    elif as_csv:
        sys.stdout.write(frame.write_csv())
    else:
        from rich.table import Table
        from rich.text import Text

        table = Table(caption=Text(f"{frame.height} rows"), caption_justify="left")
        for col in frame.columns:
            table.add_column(Text(col))
        for row in frame.head(limit).iter_rows():
            table.add_row(*[Text("null" if v is None else str(v)) for v in row])
        _console().print(table)


COMMANDS: list[click.Command] = [metrics, compare, query]
