"""`moetrace info` and `moetrace convert`: what is in a trace, and changing its format."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import (
    UserError,
    check_output_path,
    handle_errors,
    load_options,
)
from moetrace.commands.output import OutputFormat, emit, output_options
from moetrace.commands.report_tables import ranges
from moetrace.text import visible

if TYPE_CHECKING:
    from moetrace.trace.model import Trace
    from moetrace.trace.options import LoadOptions

_FLAVORS = click.Choice(["auto", "kineto", "ascend", "moetrace", "chrome"])


def _safe(text: str) -> str:
    """Data shown to people: no Rich markup, no terminal escapes."""
    from rich.markup import escape

    return escape(visible(text))


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _print_table(info: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=False)
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("source", _safe(", ".join(info["source"])))
    table.add_row("format", _safe(f"{info['format']} ({info['flavor']})"))
    table.add_row(
        "events",
        f"{info['events']:,}  " + _safe(", ".join(f"{k} {v:,}" for k, v in info["kinds"].items())),
    )
    table.add_row(
        "tracks",
        f"{info['tracks']:,}  " + _safe(", ".join(f"{k} {v}" for k, v in info["units"].items())),
    )
    ranks = info["ranks"]
    table.add_row("ranks", "unknown" if not ranks else _safe(f"{len(ranks)}: {ranges(ranks)}"))
    w = info["window_ns"]
    table.add_row(
        "window",
        "empty" if w is None else f"{_ms(w['duration'])} (from {w['start']} to {w['end']} ns)",
    )
    table.add_row(
        "deps",
        f"{sum(info['deps'].values()):,}  "
        + _safe(", ".join(f"{k} {v:,}" for k, v in info["deps"].items())),
    )
    c = info["counters"]
    table.add_row("counters", f"{c['samples']:,} samples in {c['series']} series")
    share = info["unclassified_share"]
    if share is not None:
        table.add_row("unclassified", f"{share:.1%} of device time matches no name rule")
    table.add_row("warnings", str(len(info["warnings"])))
    console.print(table)
    for warning in info["warnings"]:
        console.print(f"  [yellow]warning:[/] {_safe(warning)}")


def _classification(trace: Trace, warnings: list[str]) -> dict[str, Any]:
    """`unclassified_share` (of device work time, null without device work) and its top
    kernels, from the same classification stage `metrics` and `moe` use; the >10% warning
    joins the reader's warnings."""
    import polars as pl

    from moetrace.analysis.labels import unclassified, unclassified_warning
    from moetrace.analysis.steps import prepare_steps

    prep = prepare_steps(trace)
    has_device = bool(prep.ev.filter(pl.col("work") & pl.col("device")).height)
    share, top = unclassified(prep.ev)
    warning = unclassified_warning(share, top) if has_device else None
    return {
        "unclassified_share": share if has_device else None,
        "unclassified_top_ns": dict(top),
        "warnings": [*warnings, *([warning] if warning else [])],
    }


@click.command("info")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=True, allow_dash=False))
@output_options("Print plain JSON (stable keys) instead of a table.")
@click.option(
    "--flavor",
    type=_FLAVORS,
    default="auto",
    show_default=True,
    help="How to interpret Chrome JSON.",
)
@load_options
@handle_errors
def info(traces: tuple[str, ...], fmt: OutputFormat, flavor: str, loading: LoadOptions) -> None:
    """Show what is in a trace: format, flavor, events, tracks, ranks, units, window,
    dependencies, counters and the warnings raised while reading.

    Several files (or a directory) are read as one job, one rank per file.

    \b
    Examples:
      moetrace info trace.json
      moetrace info rank0.json.gz rank1.json.gz --json
      moetrace info ./profiler_output/        # all *_ascend_pt ranks inside
    """
    import msgspec

    from moetrace.trace.io import load
    from moetrace.trace.summary import describe  # here: `moetrace view` imports no Polars

    trace = load(list(traces), flavor=None if flavor == "auto" else flavor, options=loading)
    summary = describe(trace)
    warnings = summary.pop("warnings")  # stays the last key
    summary.update(_classification(trace, warnings))
    emit(
        fmt,
        json=lambda: msgspec.json.format(msgspec.json.encode(summary), indent=2).decode(),
        table=lambda: _print_table(summary),
    )


_MAX_WARNINGS_SHOWN = 20


def _report_warnings(warnings: list[str]) -> None:
    """The reader's warnings (what was dropped or repaired) on stderr, as `info` lists them."""
    for warning in warnings[:_MAX_WARNINGS_SHOWN]:
        click.echo(f"warning: {visible(warning)}", err=True)
    if len(warnings) > _MAX_WARNINGS_SHOWN:
        click.echo(f"warning: ... and {len(warnings) - _MAX_WARNINGS_SHOWN} more", err=True)


@click.command("convert")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option(
    "-o",
    "--output",
    required=True,
    help="Output file: .json, .json.gz or .pftrace; '-' = Chrome JSON on stdout.",
)
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
@click.option(
    "--flavor",
    type=_FLAVORS,
    default="auto",
    show_default=True,
    help="How to interpret Chrome JSON inputs.",
)
@load_options
@handle_errors
def convert(
    inputs: tuple[str, ...], output: str, force: bool, flavor: str, loading: LoadOptions
) -> None:
    """Convert traces between formats; the output format follows its extension.

    Several inputs are merged (one rank per file). moetrace's Chrome JSON keeps every
    track's unit and rank, event kinds and dependencies, so converting back loses nothing.
    What the reader dropped or repaired is printed as warnings; when every event was
    dropped nothing is written (exit status 2). The output is written atomically.

    \b
    Examples:
      moetrace convert trace_view.json -o trace.pftrace      # open in ui.perfetto.dev
      moetrace convert rank*.json.gz -o job.json.gz
      moetrace convert run.json -o - | gzip > run.json.gz
    """
    from moetrace.trace.io import TRACE_SUFFIXES, load, write_trace

    target = check_output_path(output, force)
    if target is not None and not target.name.lower().endswith(TRACE_SUFFIXES):
        raise UserError(f"{target}: unknown output format: use .json, .json.gz or .pftrace")
    trace = load(list(inputs), flavor=None if flavor == "auto" else flavor, options=loading)
    _report_warnings(trace.warnings)
    if trace.events.height == 0 and trace.counters.height == 0 and trace.warnings:
        raise UserError(
            f"{', '.join(inputs)}: every event was dropped (see the warnings above); "
            "nothing written"
        )
    if target is None:
        write_trace(trace, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    written = write_trace(trace, target, force=force)
    click.echo(
        f"wrote {trace.events.height:,} events on {trace.tracks.height} tracks to {written}",
        err=True,
    )


COMMANDS = [info, convert]
