"""`moetrace metrics`, `compare` and `query`: the analyzer on the command line.

Tables for people are drawn with rich (every cell is plain Text: event names never act as
markup); `--json` / `--csv` are plain and stable for scripts. Heavy imports stay inside the
command bodies so `moetrace --help` is fast.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import UserError, handle_errors, load_options, warn
from moetrace.commands.job_cmds import rules_option
from moetrace.commands.job_loading import (
    analyze_paths,
    captured_ops,
    check_computed,
    job_files,
    load_job,
)
from moetrace.commands.report_tables import (
    cell,
    fmt_cell,
    frame_by,
    job_lines,
    print_table,
    wide_console,
    write_csv,
)

if TYPE_CHECKING:
    import polars as pl

    from moetrace.trace.options import LoadOptions

COMPARE_TABLES = ("totals", "stages", "kernels")
"""compare --table: what --csv prints."""

BY_CHOICES = ("rank-step", "rank", "step", "track", "unit")
"""--by: rank-step (one row per rank and step), rank (one row per rank over the whole trace),
step (per step across ranks: min/mean/max), track, unit."""


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
    loading: LoadOptions,
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
    results = analyze_paths(
        traces,
        peak_tflops,
        comm_patterns,
        separate=separate,
        window=window,
        window_span=window_span,
        loading=loading,
    )
    check_computed(results)
    captured = {p: captured_ops(r, capture, loading) for p, r in results} if capture else {}
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
        frames = [frame_by(r, by).with_columns(pl.lit(p).alias("trace")) for p, r in results]
        write_csv(pl.concat(frames, how="diagonal_relaxed"))
        return
    for path, report in results:
        frame = frame_by(report, by, people=True)
        print_table(frame, f"{path}  (per {by}; times in ms)")
        if by == "rank-step" and report.ranks["rank"].n_unique() > 1:
            step = frame_by(report, "step", people=True)
            print_table(step, f"{path}  (per step across ranks; times in ms)")
        if report.job is not None and by in ("rank-step", "rank"):
            for line in job_lines(report.job):
                click.echo(line)
        if path in captured:
            got = captured[path]
            ops = pl.DataFrame(got["ops"], schema={"op": pl.String, "kernel_ns": pl.Int64})
            title = (
                f"{path}  (graph-replayed kernels by captured op: "
                f"{got['mapped']} of {got['replayed']} mapped; ms)"
            )
            print_table(ops, title)


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
@click.option(
    "--by",
    "by",
    multiple=True,
    type=click.Choice(["step", "layer", "microbatch", "rank"]),
    help="Break the per-stage diff down by these too (repeatable).",
)
@click.option(
    "--table",
    "csv_table",
    type=click.Choice(COMPARE_TABLES),
    default="totals",
    show_default=True,
    help="Which table --csv prints: totals, stages (per MoE stage) or kernels (per family).",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=15,
    show_default=True,
    help="Kernel-family rows shown in the table (CSV/JSON print all).",
)
@rules_option
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
    by: tuple[str, ...],
    csv_table: str,
    top: int,
    rule_files: tuple[str, ...],
    loading: LoadOptions,
) -> None:
    """Two jobs side by side: totals with ratios B/A, then where the time moved per MoE stage
    and per kernel family (e.g. tile vs chunked schedule, balanced vs skewed routing).

    \b
    A and B are trace files or directories; a directory is one job (every rank). Steps are
    matched by position, layers, micro-batches and ranks by number; kernels by family (the
    normalised short name), then by position within the layer's stage. Stage and family times
    are unions of the events' self intervals per rank (overlaps count once), in ns."""
    from moetrace.analysis.diff import diff_side, kernel_diff, moved_most, stage_diff
    from moetrace.analysis.moe_rules import load_rules
    from moetrace.analysis.report import compare as compare_reports

    if as_json and as_csv:
        raise UserError("--json and --csv are exclusive")
    rules = load_rules(rule_files)  # a RulesError is one line (handle_errors)
    results = [
        analyze_paths([x], peak_tflops, comm_patterns, window=window, loading=loading)[0]
        for x in (a, b)
    ]
    check_computed(results)
    (_, ra), (_, rb) = results
    frame = compare_reports(ra, rb)
    sides = [diff_side(r.trace, rules) for r in (ra, rb) if r.trace is not None]
    stages = stage_diff(sides[0], sides[1], by=by) if len(sides) == 2 else None
    kernels = kernel_diff(sides[0], sides[1]) if len(sides) == 2 else None
    if as_json:
        doc: dict[str, Any] = {"a": a, "b": b, "metrics": frame.to_dicts()}
        if stages is not None and kernels is not None:
            doc |= {"stages": stages.to_dicts(), "kernels": kernels.to_dicts()}
        click.echo(json.dumps(doc, indent=1))
    elif as_csv:
        chosen = {"stages": stages, "kernels": kernels}.get(csv_table)
        write_csv(frame if chosen is None else chosen)
    else:
        from rich.table import Table

        console = wide_console()
        console.print(cell(f"A = {a}"))
        console.print(cell(f"B = {b}"))
        table = Table()
        for col in ("metric", "A", "B", "B/A"):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for m, va, vb, ratio in frame.iter_rows():
            label = f"{m[:-3]} (ms)" if m.endswith("_ns") else m
            table.add_row(
                cell(label),
                cell(fmt_cell(va, m)),
                cell(fmt_cell(vb, m)),
                cell("-" if ratio is None else f"{ratio:.3f}x"),
            )
        console.print(table)
        if stages is not None and kernels is not None:
            _print_moved(stages, kernels, top, moved_most(stages))


def _print_moved(stages: pl.DataFrame, kernels: pl.DataFrame, top: int, line: str | None) -> None:
    """The per-stage and per-family diff tables (ms; B/A as a factor) and the headline."""
    import polars as pl

    def people(frame: pl.DataFrame) -> pl.DataFrame:
        ratio = pl.col("ratio").map_elements(lambda r: f"{r:.3f}x", return_dtype=pl.String)
        return frame.with_columns(ratio.alias("B/A")).drop("ratio")

    if line:
        click.echo(line)
    print_table(people(stages), "where the time moved per MoE stage (ms)")
    title = f"per kernel family (ms; {min(top, kernels.height)} of {kernels.height} most moved)"
    print_table(people(kernels.head(top)), title)


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
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="Seconds the query may run before it is stopped (exit status 2).",
)
@load_options
@handle_errors
def query(
    trace: tuple[str, ...],
    sql: str,
    as_json: bool,
    as_csv: bool,
    limit: int,
    timeout: float,
    loading: LoadOptions,
) -> None:
    """Run Polars SQL over the tables events, tracks, deps and counters of TRACE (files and
    directories: one job, every rank; tracks.rank tells them apart).

    \b
    Example: moetrace query t.json "SELECT name, sum(dur) AS ns FROM events GROUP BY name
             ORDER BY ns DESC LIMIT 10"
    """
    import polars as pl

    from moetrace.commands.query_sandbox import check_sql, run_bounded

    check_sql(sql)  # before loading: a refused query costs nothing
    skipped: list[str] = []
    tr = load_job(job_files(trace), skipped, loading)
    for message in skipped:
        warn(f"skipped: {message}")
    ctx = pl.SQLContext(events=tr.events, tracks=tr.tracks, deps=tr.deps, counters=tr.counters)
    try:
        frame = run_bounded(lambda: ctx.execute(sql, eager=True), timeout)
    except UserError:
        raise
    except Exception as exc:  # polars raises several types for bad SQL
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"SQL: {first}") from exc
    if as_json:
        click.echo(frame.write_json())
    elif as_csv:
        write_csv(frame)
    else:
        from rich.table import Table
        from rich.text import Text

        table = Table(caption=Text(f"{frame.height} rows"), caption_justify="left")
        for col in frame.columns:
            table.add_column(cell(col))
        for row in frame.head(limit).iter_rows():
            table.add_row(*[cell("null" if v is None else v) for v in row])
        wide_console().print(table)


COMMANDS: list[click.Command] = [metrics, compare, query]
