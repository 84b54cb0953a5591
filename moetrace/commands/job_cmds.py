"""`moetrace collectives` and `moetrace moe`: the job-level views of several ranks.

FILES are loaded as one job (one rank per file, or a directory). Tables for people are rich
tables of plain Text (names never act as markup); `--json` / `--csv` are stable for scripts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import UserError, handle_errors, load_options, warn
from moetrace.commands.report_tables import cell, wide_console, write_csv
from moetrace.text import human_bytes

if TYPE_CHECKING:
    import polars as pl

    from moetrace.trace.options import LoadOptions

COLLECTIVE_KEYS = (
    "group",
    "seq",
    "collective",
    "step",
    "bytes",
    "ranks",
    "missing_ranks",
    "first_arrival_ns",
    "last_arrival_ns",
    "last_rank",
    "skew_ns",
    "transfer_ns",
    "algbw_gbps",
    "busbw_gbps",
    "algorithm",
)
MOE_TABLES = ("categories", "experts", "traffic", "received", "load", "load_stats")


def _flat(frame: pl.DataFrame) -> pl.DataFrame:
    """List columns as space-separated text, for CSV and tables."""
    import polars as pl

    return frame.with_columns(
        [
            pl.col(c).cast(pl.List(pl.String)).list.join(" ").alias(c)
            for c, t in frame.schema.items()
            if isinstance(t, pl.List)
        ]
    )


def _cell(value: Any, column: str) -> str:
    if value is None:
        return "-"
    if column.endswith("bytes") and isinstance(value, int | float):
        return human_bytes(value)
    if column.endswith("_ns") and isinstance(value, int | float):
        return f"{value / 1e6:.3f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _table(frame: pl.DataFrame, title: str) -> None:
    """A rich table: ns columns in ms; every cell plain Text."""
    from rich.table import Table

    frame = _flat(frame)
    table = Table(title=cell(title), title_justify="left")
    for col in frame.columns:
        table.add_column(cell(col[:-3] + " ms" if col.endswith("_ns") else col), overflow="fold")
    for row in frame.iter_rows():
        table.add_row(*[cell(_cell(v, c)) for v, c in zip(row, frame.columns, strict=True)])
    wide_console().print(table)


def _load(files: tuple[str, ...], loading: LoadOptions) -> Any:
    from moetrace.trace.io import load

    trace = load(list(files) if len(files) > 1 else files[0], options=loading)
    for w in trace.warnings:
        warn(w)
    return trace


@click.command("collectives")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON (ns, bytes, GB/s).")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV of the matched instances.")
@click.option(
    "--same-clock",
    is_flag=True,
    help="The ranks share one clock (one host): report clock offsets but do not apply them.",
)
@load_options
@handle_errors
def collectives(
    files: tuple[str, ...], as_json: bool, as_csv: bool, same_clock: bool, loading: LoadOptions
) -> None:
    """Collectives matched across the ranks of FILES (one job): skew, transfer, bandwidth.

    \b
    skew = last - first arrival; transfer = end - last arrival; algbw = bytes / transfer;
    busbw = algbw x the NCCL-tests factor (all-reduce 2(n-1)/n; all-gather, reduce-scatter,
    all-to-all (n-1)/n; broadcast, reduce 1). Times are aligned to the lowest rank's clock
    with offsets estimated from the collectives (see docs/metrics.md).
    """
    import polars as pl

    from moetrace.analysis.job import analyze_job
    from moetrace.analysis.report import analyze

    if as_json and as_csv:
        raise UserError("--json and --csv are exclusive")
    trace = _load(files, loading)
    report = analyze(trace)  # the per-rank exposed comm, split into wait vs transfer
    job = analyze_job(
        trace,
        exposed=report.exposed,
        exposed_totals=report.ranks.filter(pl.col("rank").is_not_null()).select(
            "rank", "step", "exposed_comm_ns"
        ),
        same_clock=same_clock,
    )
    for w in job.warnings:
        warn(w)
    inst = job.collectives.select(COLLECTIVE_KEYS)
    job_dict = job.to_dict()
    if as_json:
        doc = {
            "collectives": inst.to_dicts(),
            "clock_offsets": job.offsets.to_dicts(),
            "ranks": job.ranks,
            "missing_ranks": job.missing_ranks,
            "stragglers": job_dict["stragglers"],
            "critical_path": job_dict["critical_path"],
            "warnings": job.warnings,
        }
        click.echo(json.dumps(doc, indent=1))
    elif as_csv:
        write_csv(_flat(inst))
    else:
        if inst.height == 0:
            raise UserError(f"{files[0]}: no collectives found")
        start = inst["first_arrival_ns"].min()
        shown = inst.drop("missing_ranks").with_columns(
            pl.col("first_arrival_ns", "last_arrival_ns") - start
        )
        _table(shown, "collectives (ms; arrivals from the job's first arrival, aligned clocks)")
        _table(job.offsets, "clock offsets per rank (ms)")
        if job_dict["stragglers"]:
            _table(pl.DataFrame(job_dict["stragglers"]), "stragglers over the job (ms)")
        cp = job_dict["critical_path"]
        share = cp["comm_share"]
        click.echo(
            f"job critical path {cp['span_ns'] / 1e6:.3f} ms, communication "
            f"{cp['comm_ns'] / 1e6:.3f} ms ({'-' if share is None else f'{100 * share:.1f}%'})"
        )


def _by_category(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (rank, step[, layer]), one column per category (time_ns), plus the total."""
    import polars as pl

    from moetrace.analysis.moe_rules import CATEGORIES

    if frame.height == 0:
        return frame
    index = ["rank", "step"] + (["layer"] if frame["layer"].null_count() < frame.height else [])
    wide = frame.pivot(on="category", index=index, values="time_ns")
    cols = [c for c in CATEGORIES if c in wide.columns]
    return wide.select(
        *index,
        *[pl.col(c).fill_null(0).alias(f"{c}_ns") for c in cols],
        pl.sum_horizontal([pl.col(c).fill_null(0) for c in cols]).alias("total_ns"),
    ).sort(index, nulls_last=False)


rules_option = click.option(
    "--rules",
    "rule_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Extra TOML name rules (tried before the built-in ones; repeatable).",
)
"""--rules FILE: the user's rule files, for every command that classifies events."""


@click.command("moe")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print JSON of every table.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV of the --table table.")
@click.option(
    "--table",
    type=click.Choice(MOE_TABLES),
    default="categories",
    show_default=True,
    help="Which table --csv prints.",
)
@click.option(
    "--routing-from",
    "routing_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="An expert-distribution dump (SGLang CSV/.pt, vLLM EPLB .pt, Megatron router "
    "trace .jsonl) for tokens per expert (repeatable).",
)
@rules_option
@load_options
@handle_errors
def moe(
    files: tuple[str, ...],
    as_json: bool,
    as_csv: bool,
    table: str,
    routing_files: tuple[str, ...],
    rule_files: tuple[str, ...],
    loading: LoadOptions,
) -> None:
    """The MoE view of FILES: time per op category (attention, router, top-k/permute, dispatch,
    expert GEMM, activation, combine, shared expert, norm, other) per rank and step, per-expert
    time, bytes between ranks and token imbalance (max/mean of received bytes), and the measured
    load: tokens per expert and per rank, overload = max / mean per layer, percentiles."""
    from moetrace.analysis.moe import moe_view
    from moetrace.analysis.moe_rules import load_rules

    if as_json and as_csv:
        raise UserError("--json and --csv are exclusive")
    rules = load_rules(rule_files)  # a RulesError is one line (handle_errors)
    trace = _load(files, loading)
    if trace.events.height == 0:  # as metrics: one line and exit 2, not an empty table
        raise UserError(f"{', '.join(files)}: nothing to analyze (no events)")
    view = moe_view(trace, rules, routing_files)
    from moetrace.analysis.labels import unclassified_warning

    line = unclassified_warning(view.unclassified_share, list(view.unclassified_top))
    if line:
        warn(line)
    if as_json:
        click.echo(json.dumps(view.to_dict(), indent=1))
        return
    if as_csv:
        write_csv(_flat(getattr(view, table)))
        return
    _table(_by_category(view.categories), "time per category (ms)")
    if view.experts.height:
        _table(view.experts, "time per expert (ms)")
    if view.received.height:
        _table(view.received, "bytes received per rank; imbalance = max / mean")
    if view.load_stats.height:
        _table(
            view.load_stats,
            "tokens per expert / per rank (token slots); overload = max / mean "
            "(--table load for every expert)",
        )
    click.echo(f"unclassified (no rule): {view.unclassified_share:.1%} of device time")


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--top", default=25, show_default=True, help="How many kernels to list.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@rules_option
@click.option(
    "--write-rules",
    "write_rules",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Start a rules file with one rule per kernel no rule names.",
)
@load_options
@handle_errors
def classify(
    files: tuple[str, ...],
    top: int,
    as_json: bool,
    rule_files: tuple[str, ...],
    write_rules: str | None,
    loading: LoadOptions,
) -> None:
    """How FILES' device kernels are classified: for the kernels that hold the most time, the
    short name, role, MoE stage, comm family and collective, and the rule that gave them."""
    from pathlib import Path

    import polars as pl

    from moetrace.analysis.labels import (
        classify_table,
        starter_rules,
        unclassified,
        unclassified_warning,
    )
    from moetrace.analysis.moe_rules import load_rules
    from moetrace.analysis.steps import prepare_steps
    from moetrace.trace.atomic import write_bytes_atomic

    rules = load_rules(rule_files)  # a RulesError is one line (handle_errors)
    trace = _load(files, loading)
    if trace.events.height == 0:
        raise UserError(f"{', '.join(files)}: nothing to classify (no events)")
    prep = prepare_steps(trace, rules=rules)
    table = classify_table(prep.ev)
    share, top_names = unclassified(prep.ev)
    if write_rules:
        write_bytes_atomic(Path(write_rules), (starter_rules(table) + "\n").encode(), force=True)
    if as_json:
        click.echo(
            json.dumps(
                {"kernels": table.head(top).to_dicts(), "unclassified_share": share}, indent=1
            )
        )
        return
    shown = table.head(top).select(
        "short_name", "role", "stage", "comm_family", "collective", "rule", "count",
        (pl.col("total_ns") / 1e6).alias("total_ms"), "share",
    )  # fmt: skip
    _table(shown, "kernels by time: role, stage and the rule that gave them")
    click.echo(f"unclassified (no rule): {share:.1%} of device time")
    line = unclassified_warning(share, top_names)
    if line:
        warn(line)


COMMANDS: list[click.Command] = [collectives, moe, classify]
