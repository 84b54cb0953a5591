"""The metrics pane: per rank and unit utilisation, exposed comm, critical-path breakdown.

Every number comes from `moetrace.analysis` (a `Report`); this module only lays them out.
It follows the area selection: the app re-runs the analysis on the selected range/ranks.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..format import fmt_ns, fmt_pct

MAX_RANK_ROWS = 16


def _frame(report: Any, name: str) -> pl.DataFrame | None:
    frame = getattr(report, name, None)
    return frame if isinstance(frame, pl.DataFrame) else None


def _get(row: dict[str, Any], key: str) -> Any:
    return row.get(key)


def ranks_table(report: Any) -> Table | None:
    """Per rank/step: compute, comm, exposed comm and its share, critical-path coverage."""
    ranks = _frame(report, "ranks")
    if ranks is None or ranks.height == 0:
        return None
    table = Table(box=None, pad_edge=False, expand=False, header_style="bold", title_justify="left")
    for col in ("rank", "step", "compute", "exp.comm", "exp%", "CPcov", "CPcomm"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in ranks.head(MAX_RANK_ROWS).iter_rows(named=True):
        table.add_row(
            Text(str(_get(row, "rank"))),
            Text(str(_get(row, "step"))),
            Text(fmt_ns(_get(row, "compute_ns"))),
            Text(fmt_ns(_get(row, "exposed_comm_ns"))),
            Text(fmt_pct(_get(row, "exposed_ratio"))),
            Text(fmt_pct(_get(row, "cp_coverage"))),
            Text(fmt_pct(_get(row, "cp_comm_ratio"))),
        )
    if ranks.height > MAX_RANK_ROWS:
        table.caption = f"… {ranks.height - MAX_RANK_ROWS} more rows"
    return table


def units_table(report: Any) -> Table | None:
    """Utilisation per rank (rows) and unit (columns), as the analyzer computed it."""
    units = _frame(report, "units")
    if units is None or units.height == 0:
        return None
    keys = [k for k in ("rank", "step") if k in units.columns]
    wide = units.pivot(on="unit", index=keys, values="util", aggregate_function="first").sort(keys)
    unit_cols = [c for c in wide.columns if c not in keys]
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in [*keys, *unit_cols]:
        table.add_column(col if col in keys else f"{col}", justify="right", no_wrap=True)
    for row in wide.head(MAX_RANK_ROWS).iter_rows(named=True):
        cells = [Text(str(row[k])) for k in keys] + [Text(fmt_pct(row[c])) for c in unit_cols]
        table.add_row(*cells)
    return table


def critical_path_table(report: Any) -> Table | None:
    """Critical-path time by segment category (event kinds/units and waits)."""
    breakdown = _frame(report, "cp_breakdown")
    if breakdown is None or breakdown.height == 0:
        return None
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("segment", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    for row in breakdown.iter_rows(named=True):
        table.add_row(
            Text(str(row["category"])),
            Text(fmt_ns(row["dur_ns"])),
            Text(fmt_pct(row["share"])),
        )
    return table


def totals_text(report: Any) -> Text | None:
    """The analyzer's totals over all ranks and steps (Report.summary), in two lines."""
    summary = getattr(report, "summary", None)
    if not callable(summary):
        return None
    try:
        s = summary()
    except Exception:  # an older/partial report: the tables below still show
        return None
    units = "  ".join(f"{k[5:]} {fmt_pct(v)}" for k, v in s.items() if k.startswith("util:"))
    line1 = (
        f"all: exposed comm {fmt_ns(s.get('exposed_comm_ns'))} "
        f"({fmt_pct(s.get('exposed_ratio'))}), CPcov {fmt_pct(s.get('cp_coverage'))}"
    )
    mfu = s.get("mfu")
    line2 = f"util {units}" + (f"  MFU {fmt_pct(mfu)}" if mfu is not None else "")
    return Text(f"{line1}\n{line2}")


def render_report(report: Any, scope: str) -> RenderableType:
    """The pane's content for a report (None while computing)."""
    parts: list[RenderableType] = [Text(scope, style="bold")]
    if report is None:
        parts.append(Text("computing…", style="dim italic"))
        return Group(*parts)
    totals = totals_text(report)
    if totals is not None:
        parts.append(totals)
    for title, table in (
        ("ranks", ranks_table(report)),
        ("utilisation per unit", units_table(report)),
        ("critical path", critical_path_table(report)),
    ):
        if table is not None:
            parts.append(Text(""))
            parts.append(Text(title, style="bold underline"))
            parts.append(table)
    warnings = getattr(report, "warnings", None)
    if warnings:
        parts.append(Text(""))
        for w in list(warnings)[:5]:
            parts.append(Text(f"! {w}", style="yellow"))
    return Group(*parts)


class MetricsPane(VerticalScroll):
    """Shows a `Report`; 'computing…' until the metrics worker delivers one."""

    DEFAULT_CSS = """
    MetricsPane { height: 1fr; border: round $primary 50%; }
    MetricsPane > Static { width: auto; }
    """

    def compose(self) -> Any:
        yield Static(render_report(None, "whole trace"), id="metrics-body")

    def on_mount(self) -> None:
        self.border_title = "metrics"

    def show(self, report: Any, scope: str) -> None:
        self.query_one("#metrics-body", Static).update(render_report(report, scope))

    def show_error(self, message: str) -> None:
        self.query_one("#metrics-body", Static).update(
            Text(f"metrics unavailable: {message}", style="red")
        )
