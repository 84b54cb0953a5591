"""`moetrace metrics`, `compare` and `query`: the analyzer on the command line.

Tables for people are drawn with rich (every cell is plain Text: event names never act as
markup); `--json` / `--csv` are plain and stable for scripts. Heavy imports stay inside the
command bodies so `moetrace --help` is fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import UserError, handle_errors, load_options

if TYPE_CHECKING:
    import polars as pl

    from moetrace.analysis.report import Report

BY_CHOICES = ("rank", "step", "track", "unit")


def _warn(message: str) -> None:
    """One warning line on stderr, control characters made visible."""
    safe = message.encode("unicode_escape", "backslashreplace").decode("ascii")
    click.echo(f"moetrace: warning: {safe}", err=True)


def _analyze_paths(
    paths: Sequence[str], peak_tflops: float | None, patterns: Sequence[str]
) -> list[tuple[str, Report]]:
    """Load and analyze each trace (warnings are printed by the caller)."""
    from moetrace.analysis.classify import check_patterns
    from moetrace.analysis.report import analyze
    from moetrace.trace.io import load
    from moetrace.trace.model import TraceFormatError, TraceValidationError

    try:
        pats = check_patterns(patterns)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    out = []
    failed: list[str] = []
    for path in paths:
        try:
            trace = load(path)
        except (TraceFormatError, TraceValidationError, OSError) as exc:
            if len(paths) == 1:
                raise
            # several traces: one bad file does not stop the others (exit 2 only if all fail)
            failed.append(str(exc) if not isinstance(exc, OSError) else f"{path}: {exc}")
            continue
        report = analyze(trace, peak_tflops=peak_tflops, comm_patterns=pats)
        out.append((path, report))
    if not out:
        raise UserError(failed[0] if failed else "no traces")
    for message in failed:
        _warn(f"skipped: {message}")
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
            _warn(f"{path}: {w}")


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


def _frame_by(report: Report, by: str) -> pl.DataFrame:
    """The frame `--by` selects: per (rank, step), per step over ranks, per track, per unit."""
    import polars as pl

    if by == "track":
        return report.tracks
    if by == "unit":
        return report.units
    if by == "step":
        ns = [
            "window_ns",
            "compute_ns",
            "comm_ns",
            "overlapped_ns",
            "exposed_comm_ns",
            "free_ns",
            "cp_span_ns",
            "cp_comm_ns",
        ]
        return (
            report.ranks.group_by("step")
            .agg(pl.len().alias("ranks"), *[pl.col(c).sum() for c in ns])
            .with_columns(
                (pl.col("overlapped_ns") / pl.col("comm_ns")).alias("overlap_ratio"),
                (pl.col("exposed_comm_ns") / pl.col("comm_ns")).alias("exposed_ratio"),
                (pl.col("cp_span_ns") / pl.col("window_ns")).alias("cp_coverage"),
            )
            .sort("step", nulls_last=False)
        )
    return report.ranks


def _fmt(value: Any, column: str) -> str:
    """A cell for people: ns as ms with 3 decimals, ratios as percent."""
    if value is None:
        return "-"
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
        header = col[:-3] if col.endswith("_ns") else col
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


@click.command("metrics")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON (ns and ratios).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV of the --by table.")
@click.option(
    "--by",
    type=click.Choice(BY_CHOICES),
    default="rank",
    show_default=True,
    help="Rows: rank (per rank and step), step (over ranks), track, unit.",
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
@load_options
@handle_errors
def metrics(
    traces: tuple[str, ...],
    as_json: bool,
    as_csv: bool,
    by: str,
    peak_tflops: float | None,
    comm_patterns: tuple[str, ...],
) -> None:
    """Exposed communication, idle cores and the critical path of TRACE(s), per rank and step.

    \b
    Definitions: docs/metrics.md (they match msprof's step_trace_time.csv and HTA).
    Times in the tables are ms; --json gives ns.
    """
    import polars as pl

    if as_json and as_csv:
        raise UserError("--json and --csv are exclusive")
    results = _analyze_paths(traces, peak_tflops, comm_patterns)
    _check_computed(results)
    if as_json:
        doc: dict[str, Any] = {"traces": [{"source": p, **r.to_dict()} for p, r in results]}
        if len(results) == 1 and results[0][1].job is not None:  # several ranks: the job
            doc["job"] = doc["traces"][0].pop("job")
        elif len(results) > 1:  # several files: one job of all their ranks
            from moetrace.commands.job_cmds import job_of_files

            doc["job"] = job_of_files([p for p, _ in results], peak_tflops, comm_patterns)
        click.echo(json.dumps(doc, indent=1))
        return
    if as_csv:
        frames = [_frame_by(r, by).with_columns(pl.lit(p).alias("trace")) for p, r in results]
        sys.stdout.write(pl.concat(frames, how="diagonal_relaxed").write_csv())
        return
    for path, report in results:
        frame = _people_frame(report) if by == "rank" else _frame_by(report, by)
        _print_table(frame, f"{path}  (per {by}; times in ms)")


@click.command("compare")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
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
@load_options
@handle_errors
def compare(
    a: str,
    b: str,
    as_json: bool,
    as_csv: bool,
    peak_tflops: float | None,
    comm_patterns: tuple[str, ...],
) -> None:
    """Totals of two traces side by side with ratios B/A (e.g. sequential vs tile schedule)."""
    from moetrace.analysis.report import compare as compare_reports

    results = _analyze_paths([a, b], peak_tflops, comm_patterns)
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
@click.argument("trace", type=click.Path(dir_okay=False))
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
def query(trace: str, sql: str, as_json: bool, as_csv: bool, limit: int) -> None:
    """Run Polars SQL over the tables events, tracks, deps and counters of TRACE.

    \b
    Example: moetrace query t.json "SELECT name, sum(dur) AS ns FROM events GROUP BY name
             ORDER BY ns DESC LIMIT 10"
    """
    import polars as pl

    from moetrace.trace.io import load

    tr = load(trace)
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
