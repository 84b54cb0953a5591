"""Printing the analysis for people: rich tables (ns as ms, ratios as %; every cell plain Text
with control characters shown as escapes, so event names act neither as markup nor on the
terminal), CSV on stdout, and the job's summary lines.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from moetrace.text import HIDDEN_CHARACTERS, escape, visible

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console
    from rich.text import Text

    from moetrace.analysis.report import Report


def people_frame(report: Report) -> pl.DataFrame:
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
    from moetrace.analysis.metric_spec import OPTIONAL

    # a metric no row knows (MFU without a peak): no column of dashes
    frame = frame.drop([c for c in OPTIONAL if frame[c].null_count() == frame.height])
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


def frame_by(report: Report, by: str, *, people: bool = False) -> pl.DataFrame:
    """The frame `--by` selects: per (rank, step) or per rank (the report's rows), per step
    across ranks (min/mean/max, ns summed, ratios pooled), per track, per unit."""
    if by == "track":
        return report.tracks
    if by == "unit":
        return report.units
    if by == "step":
        agg = report.aggregate()
        return agg.select("step", "ranks", *STEP_TABLE) if people else agg
    return people_frame(report) if people else report.ranks


def fmt_cell(value: Any, column: str) -> str:
    """A cell for people: ns as ms with 3 decimals, ratios (of the metric spec, util, any
    `*ratio` column) as percent."""
    from moetrace.analysis.metric_spec import is_ratio

    if value is None:
        return "-"
    column = column.split(":")[0]  # an aggregate (exposed_comm_ns:max) formats as its metric
    ratio = (
        is_ratio(column) or column.endswith("ratio") or column.startswith("util") or column == "x%"
    )
    if isinstance(value, float) and ratio:
        return f"{100 * value:.2f}%"
    if column.endswith("_ns") and isinstance(value, int | float):
        return f"{value / 1e6:.3f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def cell(text: object) -> Text:
    """A table cell for people: plain Text (never markup), control characters as escapes."""
    from rich.text import Text

    return Text(visible(text))


def write_csv(frame: pl.DataFrame) -> None:
    """`frame` as CSV on stdout. Piped, the data as it is (scripts get the names unchanged);
    on a terminal, control characters in text cells are shown as escapes, as in tables."""
    import polars as pl

    if sys.stdout.isatty():
        frame = frame.with_columns(
            pl.col(pl.String).str.replace_many(
                list(HIDDEN_CHARACTERS), [escape(c) for c in HIDDEN_CHARACTERS]
            )
        )
    sys.stdout.write(frame.write_csv())


def print_table(frame: pl.DataFrame, title: str) -> None:
    """A rich table of `frame`: ns columns in ms, ratios in %; cells are never markup."""
    import polars as pl
    from rich.table import Table

    table = Table(title=cell(title), title_justify="left")
    for col in frame.columns:
        header = col.replace("_ns", "")
        table.add_column(
            cell(header),
            justify="left" if frame[col].dtype == pl.String else "right",
            overflow="fold",
        )
    for row in frame.iter_rows():
        table.add_row(*[cell(fmt_cell(v, c)) for v, c in zip(row, frame.columns, strict=True)])
    wide_console().print(table)


def wide_console() -> Console:
    """A console that never truncates: wide when stdout is not a terminal."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 240)


def job_lines(job: dict[str, Any]) -> list[str]:
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
        lines.append(f"partial job: ranks {ranges(missing)} missing")
    if lines:
        lines.append("(moetrace collectives FILES: every matched collective, skews, bandwidth)")
    return lines


def ranges(ranks: Sequence[int]) -> str:
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
