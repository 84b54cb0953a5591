"""The metrics pane: per rank and unit utilisation, exposed comm, critical-path breakdown.

Every number comes from `moetrace.analysis` (a `Report`); this module only lays them out.
It follows the area selection: the app re-runs the analysis on the selected range/ranks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..format import fmt_ns, fmt_pct, where_text

if TYPE_CHECKING:
    import polars as pl

    from moetrace.analysis.report import Report

MAX_RANK_ROWS = 4096  # the pane scrolls; beyond this many (rank, step) rows it says so

# What the rank table can be sorted by (o cycles): title, column, descending.
SORT_KEYS: list[tuple[str, str, bool]] = [
    ("exposed comm", "exposed_comm_ns", True),
    ("free", "free_ns", True),
    ("idle", "idle_ns", True),
    ("compute", "compute_ns", True),
    ("rank", "rank", False),
]

RANK_COLUMNS = (
    "compute_ns",
    "exposed_comm_ns",
    "exposed_ratio",
    "free_ns",
    "idle_ns",
    "cp_coverage",
    "cp_comm_ratio",
)
"""The rank table's metrics after rank (and step); headers are the spec's labels."""

LEGEND = (
    "per rank and step: compute = time some compute runs (ns); exp.comm = comm not hidden "
    "under compute; exp% = exp.comm ÷ comm time; free = window time with neither compute nor "
    "comm (metrics free_ns); idle = window time with no device work on any unit (idle_ns); "
    "CPcov = critical-path span ÷ window; CPcomm = share of comm time on the critical path. "
    "util = busy ÷ (lanes × window) per unit. Critical path: compute-X = events on unit X, "
    "comm = communication, wait = the path waits for a dependency (wait:X: for one on X)."
)


def _frame(report: Report, name: str) -> pl.DataFrame | None:
    import polars as pl  # here, not at import: the pane is on screen before Polars loads

    frame = getattr(report, name, None)
    return frame if isinstance(frame, pl.DataFrame) else None


def _get(row: dict[str, Any], key: str) -> Any:
    return row.get(key)


def sorted_ranks(ranks: pl.DataFrame, sort_key: int) -> pl.DataFrame:
    """The (rank, step) rows in the order the user chose (ties by rank, step)."""
    _, column, descending = SORT_KEYS[sort_key % len(SORT_KEYS)]
    keys = [k for k in (column, "rank", "step") if k in ranks.columns]
    keys = list(dict.fromkeys(keys))
    return ranks.sort(keys, descending=[descending] + [False] * (len(keys) - 1), nulls_last=True)


def text_table(headers: list[str], rows: list[list[str]], caption: str = "") -> Text:
    """Right-aligned columns as plain Text: a Rich Table of 256 ranks takes ~0.3 s to lay
    out on every repaint, this a few ms."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = Text(
        " ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)) + "\n", no_wrap=True
    )
    out.stylize("bold", 0, len(out) - 1)
    out.append(
        "\n".join(" ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    )
    if caption:
        out.append("\n" + caption, style="dim")
    return out


def ranks_table(report: Report, sort_key: int = 0) -> Text | None:
    """Per rank/step: compute, exposed comm and its share, free, critical-path coverage."""
    ranks = _frame(report, "ranks")
    if ranks is None or ranks.height == 0:
        return None
    from moetrace.analysis.metric_spec import BY_NAME

    title, _, _ = SORT_KEYS[sort_key % len(SORT_KEYS)]
    steps = "step" in ranks.columns and ranks["step"].n_unique() > 1
    metrics = [BY_NAME[c] for c in RANK_COLUMNS]
    headers = ["rank", *(["step"] if steps else []), *(m.label for m in metrics)]
    shown = sorted_ranks(ranks, sort_key).head(MAX_RANK_ROWS)
    rows = [
        [
            str(_get(row, "rank")),
            *([str(_get(row, "step"))] if steps else []),
            *((fmt_pct if m.unit == "ratio" else fmt_ns)(_get(row, m.name)) for m in metrics),
        ]
        for row in shown.iter_rows(named=True)
    ]
    caption = f"{ranks.height} rows (rank × step), by {title} (o: sort)"
    if ranks.height > MAX_RANK_ROWS:
        caption += f" · first {MAX_RANK_ROWS} shown"
    return text_table(headers, rows, caption)


def units_table(report: Report) -> Text | None:
    """Utilisation per rank (rows) and unit (columns), as the analyzer computed it."""
    units = _frame(report, "units")
    if units is None or units.height == 0:
        return None
    keys = [k for k in ("rank", "step") if k in units.columns]
    wide = units.pivot(on="unit", index=keys, values="util", aggregate_function="first").sort(keys)
    unit_cols = [c for c in wide.columns if c not in keys]
    rows = [
        [str(row[k]) for k in keys] + [fmt_pct(row[c]) for c in unit_cols]
        for row in wide.head(MAX_RANK_ROWS).iter_rows(named=True)
    ]
    return text_table([*keys, *unit_cols], rows)


def critical_path_table(report: Report) -> Table | None:
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


def totals_text(report: Report) -> Text | None:
    """The job's figures with their scope: sums over ranks and steps, the maximum over
    (rank, step) rows, and pooled ratios (Σ numerator ÷ Σ denominator), from the analyzer."""
    summary = getattr(report, "summary", None)
    ranks = _frame(report, "ranks")
    if not callable(summary):
        return None
    try:
        s = summary()
    except Exception:  # an older/partial report: the tables below still show
        return None

    def worst(column: str) -> str:
        if ranks is None or ranks.height == 0 or column not in ranks.columns:
            return "–"
        top = ranks.sort(column, descending=True, nulls_last=True).row(0, named=True)
        return f"{fmt_ns(top[column])} ({where_text(top.get('rank'), top.get('step'))})"

    util = [f"{k[5:]} {fmt_pct(v)}" for k, v in s.items() if k.startswith("util:")]
    units = "\n  ".join("  ".join(util[i : i + 3]) for i in range(0, len(util), 3))
    # Short lines (≤ 46 cells, the pane's inside at 120 columns): none wraps.
    lines = [
        f"job span (first start→last end) {fmt_ns(s.get('makespan_ns'))}",
        f"exposed comm: max {worst('exposed_comm_ns')}",
        f"  Σ ranks·steps {fmt_ns(s.get('exposed_comm_ns'))}"
        f" = {fmt_pct(s.get('exposed_ratio'))} of comm",
        f"free: max {worst('free_ns')}",
        f"  Σ ranks·steps {fmt_ns(s.get('free_ns'))}",
        f"idle: max {worst('idle_ns')}",
        f"  Σ ranks·steps {fmt_ns(s.get('idle_ns'))}",
        f"critical path: covers {fmt_pct(s.get('cp_coverage'))} of windows,",
        f"  holds {fmt_pct(s.get('cp_comm_ratio'))} of comm (pooled)",
        f"util (busy ÷ lanes·window, pooled):\n  {units}",
    ]
    mfu = s.get("mfu")
    if mfu is not None:
        lines.append(f"MFU (time-weighted over ranks): {fmt_pct(mfu)}")
    return Text("\n".join(lines), no_wrap=True)


def render_report(report: Report | None, scope: str, sort_key: int = 0) -> RenderableType:
    """The pane's content for a report (None while computing)."""
    parts: list[RenderableType] = [Text(scope, style="bold")]
    if report is None:
        parts.append(Text("computing…", style="dim italic"))
        return Group(*parts)
    totals = totals_text(report)
    if totals is not None:
        parts.append(totals)
    for title, table in (
        ("per rank and step", ranks_table(report, sort_key)),
        ("utilisation per unit (per rank and step)", units_table(report)),
        ("critical path by segment (sum over ranks·steps)", critical_path_table(report)),
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
    parts.append(Text(""))
    parts.append(Text(LEGEND, style="dim"))
    return Group(*parts)


class MetricsPane(VerticalScroll):
    """Shows a `Report`; 'computing…' until the metrics worker delivers one."""

    DEFAULT_CSS = """
    MetricsPane { height: 1fr; border: round $primary 50%; }
    MetricsPane > Static { width: auto; }
    MetricsPane { overflow-x: auto; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.report: Report | None = None
        self.scope = "whole trace"
        self.sort_key = 0
        self.state = "computing"  # computing | ready | disabled | error

    def compose(self) -> Any:
        yield Static(render_report(None, "whole trace"), id="metrics-body")

    def on_mount(self) -> None:
        self.border_title = "metrics"

    def show(self, report: Report | None, scope: str) -> None:
        """Show `report` (None: computing) for `scope` (whole trace or a selection)."""
        self.report, self.scope = report, scope
        self.state = "ready" if report is not None else "computing"
        self._draw()

    def cycle_sort(self) -> str:
        """o: sort the rank table by the next key; returns its name."""
        self.sort_key = (self.sort_key + 1) % len(SORT_KEYS)
        self._draw()
        return SORT_KEYS[self.sort_key][0]

    def _draw(self) -> None:
        self.query_one("#metrics-body", Static).update(
            render_report(self.report, self.scope, self.sort_key)
        )

    def show_disabled(self) -> None:
        """Say the metrics are off (--no-metrics)."""
        self.state = "disabled"
        self.query_one("#metrics-body", Static).update(
            Text("metrics are off (--no-metrics): lanes only", style="dim")
        )

    def show_error(self, message: str) -> None:
        """Say the analysis failed, with its one-line `message`."""
        self.state = "error"
        self.query_one("#metrics-body", Static).update(
            Text(f"metrics unavailable: {message}", style="red")
        )
