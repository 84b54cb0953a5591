"""The per (rank, step) metrics as data: one `Metric` record each, read by the Report (frame
schema, aggregates, summary, JSON), the CLI tables, the viewer's metrics pane and the metric
table of docs/metrics.md (tests/analysis/test_metric_spec.py checks the page against it).

Adding a metric: one `Metric` below, its computation in `report._rank_rows` (or the analyzer
that yields it), and a test; docs/development.md "Add a metric" walks through one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

Total = Literal["sum", "pooled", "weighted", "none"]
"""How a metric is totalled over ranks and steps (`Report.summary`):
sum (ns added up), pooled (Σ numerator ÷ Σ denominator, never a sum of ratios),
weighted (mean weighted by window_ns), none (a key or bound, not totalled)."""


@dataclass(frozen=True)
class Metric:
    """One column of `Report.ranks`: name, unit (ns or ratio), how it is totalled."""

    name: str
    unit: Literal["ns", "ratio"]
    total: Total
    description: str
    pooled: tuple[str, str] | None = None
    """(numerator, denominator) of a pooled ratio: both ns metrics of this spec."""
    per_step: bool = False
    """In `Report.aggregate()` (per step across ranks: sum or pooled, then min/mean/max)."""
    json: bool = False
    """A top-level key of each per-rank item of `metrics --json`."""
    optional: bool = False
    """Null when unknown (MFU without a peak): left out of JSON and people's tables then."""
    label: str = ""
    """Column header of the viewer's rank table ('' = not shown there)."""

    @property
    def dtype(self) -> pl.DataType:
        """Polars type of the column: Int64 for ns, Float64 for ratios."""
        return pl.Float64() if self.unit == "ratio" else pl.Int64()


METRICS: tuple[Metric, ...] = (
    Metric("window_ns", "ns", "sum", "`|W|`, the window (step) length", per_step=True, json=True),
    Metric("compute_ns", "ns", "sum", "`|C|`", per_step=True, json=True, label="compute"),
    Metric("comm_ns", "ns", "sum", "`|M|`", per_step=True, json=True),
    Metric("overlapped_ns", "ns", "sum", "`|M ∩ C|`", per_step=True, json=True),
    Metric(
        "exposed_comm_ns",
        "ns",
        "sum",
        "`|M \\ C|` = comm − overlapped",
        per_step=True,
        json=True,
        label="exp.comm",
    ),
    Metric(
        "free_ns",
        "ns",
        "sum",
        "`|W \\ (C ∪ M)|`, so compute + exposed + free = window",
        per_step=True,
        json=True,
        label="free",  # the viewer says what `metrics` says
    ),
    Metric(
        "busy_ns",
        "ns",
        "sum",
        "union of all the rank's device work in the window (every unit)",
        per_step=True,
        json=True,
    ),
    Metric("idle_ns", "ns", "sum", "window − busy", per_step=True, json=True, label="idle"),
    Metric("cp_span_ns", "ns", "sum", "the critical path's length in the window", per_step=True),
    Metric("cp_comm_ns", "ns", "sum", "communication on the critical path", per_step=True),
    Metric("a2a_comm_ns", "ns", "sum", "all-to-all (dispatch/combine) part of comm"),
    Metric("a2a_exposed_ns", "ns", "sum", "all-to-all part of exposed comm"),
    Metric(
        "overlap_ratio",
        "ratio",
        "pooled",
        'overlapped / comm (null without comm): HTA\'s "comm/comp overlap"',
        pooled=("overlapped_ns", "comm_ns"),
        per_step=True,
        json=True,
    ),
    Metric(
        "exposed_ratio",
        "ratio",
        "pooled",
        "exposed / comm",
        pooled=("exposed_comm_ns", "comm_ns"),
        per_step=True,
        json=True,
        label="exp%",
    ),
    Metric(
        "cp_coverage",
        "ratio",
        "pooled",
        "critical-path span / window",
        pooled=("cp_span_ns", "window_ns"),
        per_step=True,
        label="CPcov",
    ),
    Metric(
        "cp_comm_ratio",
        "ratio",
        "pooled",
        "critical-path comm / job comm (null without comm)",
        pooled=("cp_comm_ns", "job_comm_ns"),
        per_step=True,
        label="CPcomm",
    ),
    Metric(
        "mfu",
        "ratio",
        "weighted",
        "model FLOPs / (window × peak FLOP/s); null without a peak",
        per_step=True,
        optional=True,
    ),
    Metric("window_start_ns", "ns", "none", "where the window starts"),
    Metric("window_end_ns", "ns", "none", "where the window ends"),
    Metric("cp_start_ns", "ns", "none", "where the unclipped critical path begins (a launch)"),
    Metric(
        "job_comm_ns",
        "ns",
        "none",
        "union of every rank's comm in the window: cp_comm's bound",
    ),
)
"""Every metric of a (rank, step) row, in the order totals and aggregates list them."""

BY_NAME: dict[str, Metric] = {m.name: m for m in METRICS}

RANKS_LAYOUT = (
    "rank",
    "step",
    "window_start_ns",
    "window_end_ns",
    "window_ns",
    "compute_ns",
    "comm_ns",
    "overlapped_ns",
    "exposed_comm_ns",
    "free_ns",
    "overlap_ratio",
    "exposed_ratio",
    "cp_span_ns",
    "cp_coverage",
    "cp_comm_ns",
    "cp_comm_ratio",
    "mfu",
    "cp_start_ns",
    "a2a_comm_ns",
    "a2a_exposed_ns",
    "job_comm_ns",
    "busy_ns",
    "idle_ns",
)
"""Column order of `Report.ranks` (scripts read it by position too); a metric of `METRICS`
not named here is appended after these."""

RANKS_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "step": pl.Int64(),
    **{n: BY_NAME[n].dtype for n in RANKS_LAYOUT[2:]},
    **{m.name: m.dtype for m in METRICS if m.name not in RANKS_LAYOUT},
}
"""Column names and types of `Report.ranks`."""

SUMMED = tuple(m.name for m in METRICS if m.total == "sum")
"""ns metrics `Report.summary` adds up over ranks and steps."""
POOLED: dict[str, tuple[str, str]] = {m.name: m.pooled for m in METRICS if m.pooled}
"""Ratios and their (numerator, denominator): aggregated as Σ num / Σ den, never summed."""
WEIGHTED = tuple(m.name for m in METRICS if m.total == "weighted")
"""Ratios totalled as their mean weighted by window_ns (MFU)."""
AGG_NS = tuple(m.name for m in METRICS if m.per_step and m.total == "sum")
"""ns metrics the cross-rank aggregates sum (and give min/mean/max of)."""
AGG_RANGE = tuple(m.name for m in METRICS if m.per_step)
"""Metrics the cross-rank aggregates give min/mean/max of."""
JSON_METRICS = tuple(m.name for m in METRICS if m.json)
"""Top-level metrics of each per-rank item of `metrics --json`."""
OPTIONAL = tuple(m.name for m in METRICS if m.optional)
"""Metrics that are null when unknown (left out of JSON and people's tables then)."""
AGG_HOWS = ("sum", "pooled", "min", "mean", "max")
"""The aggregates of `Report.aggregate()`, as its column suffixes (`comm_ns:sum`)."""


def is_ratio(column: str) -> bool:
    """Whether `column` (an aggregate like `cp_coverage:max` too) is a ratio of the spec."""
    metric = BY_NAME.get(column.split(":")[0])
    return metric is not None and metric.unit == "ratio"


def markdown_table() -> str:
    """The metric table of docs/metrics.md: name, unit, total, definition."""
    lines = ["| column | unit | total | definition |", "|---|---|---|---|"]
    for m in METRICS:
        total = f"pooled: Σ {m.pooled[0]} / Σ {m.pooled[1]}" if m.pooled else m.total
        lines.append(f"| `{m.name}` | {m.unit} | {total} | {m.description} |")
    return "\n".join(lines)
