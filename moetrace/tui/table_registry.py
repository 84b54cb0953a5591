"""The viewer's tables as data: one `TableSpec` per table (name, key, title, palette entry,
the Report frame it lists, the rows builder). The key bindings, the command palette, the help
screen and the table screen all read `TABLES`, so a new table is one entry here plus its
builder in `screens/table_rows.py`.

No Polars here: the app imports this module before the first frame; the builders (which need
Polars) are looked up by name when a table opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.binding import Binding

from .table_targets import Rows

if TYPE_CHECKING:
    from moetrace.analysis.report import Report
    from moetrace.trace.model import Trace


@dataclass(frozen=True)
class TableSpec:
    """One viewer table: `key` opens it, `short` is its footer/help text, `palette` its
    command-palette entry, `builder` the function of `screens.table_rows` that makes its
    columns and rows from the trace and the Report, `needs_report` whether it waits for the
    analysis."""

    name: str
    key: str
    title: str
    short: str
    palette: str
    builder: str
    needs_report: bool = True

    @property
    def action(self) -> str:
        """The app action that opens the table."""
        return f"table('{self.name}')"

    def build(
        self, trace: Trace, report: Report | None, origin: int
    ) -> tuple[list[str], Rows, int]:
        """Column titles, (target, cells) rows and the row count before the cut (origin: the
        trace start, ns)."""
        from .screens import table_rows

        if self.needs_report and report is None:
            raise ValueError(f"the {self.name} table needs the analysis report")
        build = getattr(table_rows, self.builder)
        cols, rows, total = build(trace, report, origin)
        return cols, rows, total


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "critical", "1", "critical path segments (in path order)", "CP table",
        "Table: critical path segments", "critical_segments",
    ),
    TableSpec(
        "gaps", "2", "top idle gaps (longest first)", "Gaps table",
        "Table: top idle gaps", "idle_gaps",
    ),
    TableSpec(
        "comm", "3", "communication events (most exposed first)", "Comm table",
        "Table: communication events", "comm_events",
    ),
    TableSpec(
        "names", "4", "events by name (total time, longest first)", "Names table",
        "Table: events by name", "events_by_name_rows", needs_report=False,
    ),
    TableSpec(
        "idle", "5", "idle per rank and core (per rank·step; most idle first)", "Idle table",
        "Table: idle per rank and core", "idle_per_track",
    ),
    TableSpec(
        "collectives", "6",
        "collectives matched across ranks (most skewed first; aligned clocks)", "Collectives",
        "Table: collectives matched across ranks", "collectives_rows",
    ),
    TableSpec(
        "stragglers", "7",
        "stragglers per rank·step (who made the others wait longest first)", "Stragglers",
        "Table: stragglers per rank and step", "stragglers_rows",
    ),
    TableSpec(
        "moe", "8", "MoE view: time per rank·step·layer·micro-batch·category (longest first)",
        "MoE view", "Table: MoE time per rank, step, layer, micro-batch and category",
        "moe_rows",
    ),
    TableSpec(
        "steps", "9", "steps per rank (slowest first; Enter zooms to the step)", "Steps",
        "Table: steps per rank (duration, compute, exposed comm, free, idle)", "steps_rows",
    ),
    TableSpec(
        "path_kernels", "K",
        "critical path by kernel (most time on the path first; Enter: next instance)",
        "CP by kernel", "Table: critical path by kernel", "path_kernel_rows",
    ),
    TableSpec(
        "experts", "E", "MoE time per expert (most time first)", "Experts",
        "Table: MoE time per expert", "expert_rows",
    ),
)  # fmt: skip

BY_NAME: dict[str, TableSpec] = {spec.name: spec for spec in TABLES}


def table_bindings() -> tuple[Binding, ...]:
    """The key of every table (ids `app.table_<name>`, for Textual's keymap)."""
    return tuple(
        Binding(spec.key, spec.action, spec.short, show=False, id=f"app.table_{spec.name}")
        for spec in TABLES
    )


def table_commands() -> list[tuple[str, str, str]]:
    """(palette entry, action, key) of every table."""
    return [(spec.palette, spec.action, spec.key) for spec in TABLES]
