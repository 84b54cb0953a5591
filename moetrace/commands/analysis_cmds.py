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

from moetrace.commands._common import UserError, handle_errors

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
    """Load and analyze each trace; warnings go to stderr."""
    from moetrace.analysis.classify import check_patterns
    from moetrace.analysis.report import analyze
    from moetrace.trace.io import load

    try:
        pats = check_patterns(patterns)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    out = []
    for path in paths:
        trace = load(path)
        report = analyze(trace, peak_tflops=peak_tflops, comm_patterns=pats)
        for w in report.warnings:
            _warn(f"{path}: {w}")
        out.append((path, report))
    return out


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
    if isinstance(value, float) and (
        column.endswith("ratio") or column in ("util", "mfu", "cp_coverage")
    ):
        return f"{100 * value:.2f}%"
    if column.endswith("_ns") and isinstance(value, int):
        return f"{value / 1e6:.3f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _print_table(frame: pl.DataFrame, title: str) -> None:
    """A rich table of `frame`; headers say ms for ns columns; cells are never markup."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    for col in frame.columns:
        header = col[:-3] + " (ms)" if col.endswith("_ns") else col
        table.add_column(Text(header), justify="left" if frame[col].dtype == str else "right")
    for row in frame.iter_rows():
        table.add_row(*[Text(_fmt(v, c)) for v, c in zip(row, frame.columns, strict=True)])
    Console(highlight=False).print(table)


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
    if all(r.ranks.height == 0 for _, r in results):
        raise UserError(
            f"{traces[0]}: nothing to analyze (no compute or communication events on any track)"
        )
    if as_json:
        doc = {"traces": [{"source": p, **r.to_dict()} for p, r in results]}
        click.echo(json.dumps(doc, indent=1))
        return
    if as_csv:
        frames = [_frame_by(r, by).with_columns(pl.lit(p).alias("trace")) for p, r in results]
        sys.stdout.write(pl.concat(frames, how="diagonal_relaxed").write_csv())
        return
    for path, report in results:
        frame = _frame_by(report, by)
        if by == "rank":
            frame = frame.drop("window_start_ns", "window_end_ns")
        _print_table(frame, f"{path}  ({by})")


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

    (_, ra), (_, rb) = _analyze_paths([a, b], peak_tflops, comm_patterns)
    if ra.ranks.height == 0 and rb.ranks.height == 0:
        raise UserError(f"{a}, {b}: nothing to compare (no compute or communication events)")
    frame = compare_reports(ra, rb)
    if as_json:
        click.echo(json.dumps({"a": a, "b": b, "metrics": frame.to_dicts()}, indent=1))
    elif as_csv:
        sys.stdout.write(frame.write_csv())
    else:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=Text(f"A = {a}\nB = {b}"), title_justify="left")
        for col in ("metric", "A", "B", "B/A"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for m, va, vb, ratio in frame.iter_rows():
            table.add_row(
                Text(m),
                Text(_fmt(va, m if m.endswith("_ns") else "x")),
                Text(_fmt(vb, m if m.endswith("_ns") else "x")),
                Text("-" if ratio is None else f"{ratio:.3f}x"),
            )
        Console(highlight=False).print(table)


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
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(caption=Text(f"{frame.height} rows"), caption_justify="left")
        for col in frame.columns:
            table.add_column(Text(col))
        for row in frame.head(limit).iter_rows():
            table.add_row(*[Text("null" if v is None else str(v)) for v in row])
        Console(highlight=False).print(table)


COMMANDS: list[click.Command] = [metrics, compare, query]
