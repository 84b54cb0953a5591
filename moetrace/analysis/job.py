"""One job, many ranks: collectives matched, clocks aligned, stragglers and the job's path.

`analyze_job(trace)` runs collectives.py → clocks.py → stragglers.py → job_path.py and
returns a `Job`; the per-rank report (report.py) attaches it as `Report.collectives`,
`Report.stragglers` and the `job` object of `metrics --json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import polars as pl

from moetrace.analysis.clocks import align, clock_offsets
from moetrace.analysis.collectives import collective_ops, event_frame, match, world_size
from moetrace.analysis.job_path import job_critical_path
from moetrace.analysis.stragglers import job_stragglers, stragglers, waits
from moetrace.trace.model import Trace


@dataclass
class Job:
    """Cross-rank figures of one trace (all times ns, on the reference rank's clock).

    ops: every rank's part of every collective (own clock). collectives: matched instances.
    offsets: clock offset and residual per rank. stragglers: per (rank, step).
    critical_path: the job's path segments. missing_ranks: ranks of the job not in the trace.
    """

    ops: pl.DataFrame
    collectives: pl.DataFrame
    offsets: pl.DataFrame
    stragglers: pl.DataFrame
    critical_path: pl.DataFrame
    ranks: list[int]
    missing_ranks: list[int]
    warnings: list[str] = field(default_factory=list)

    def steps(self) -> list[dict[str, Any]]:
        """Per step: the top straggler (rank, caused_wait_ns, late_count)."""
        return _top_per_step(self.stragglers)

    def to_dict(self) -> dict[str, Any]:
        """The `job` object of `metrics --json`."""
        path = self.critical_path
        span = int(path["dur_ns"].sum()) if path.height else 0
        comm = int(path.filter(pl.col("category") == "comm")["dur_ns"].sum()) if path.height else 0
        on_path = (
            path.group_by("rank").agg(pl.col("dur_ns").sum()).sort("rank").rows()
            if path.height
            else []
        )
        return {
            "ranks": self.ranks,
            "missing_ranks": self.missing_ranks,
            "collectives": self.collectives.height,
            "stragglers": job_stragglers(self.stragglers).to_dicts()
            if self.stragglers.height
            else [],
            "stragglers_by_step": self.steps(),
            "clock_offsets_ns": {
                str(r): o for r, o in self.offsets.select("rank", "offset_ns").rows()
            },
            "clock_residuals_ns": {
                str(r): o for r, o in self.offsets.select("rank", "residual_ns").rows()
            },
            "clock_bounds_ns": {
                str(r): {"lower": lo, "upper": hi, "one_clock": one}
                for r, lo, hi, one in self.offsets.select(
                    "rank", "lower_ns", "upper_ns", "one_clock"
                ).rows()
            },
            "critical_path": {
                "span_ns": span,
                "comm_ns": comm,
                "comm_share": comm / span if span else None,
                "ns_by_rank": {str(r): int(d) for r, d in on_path},
                "segments": path.height,
                "start_ns": int(path["start_ns"].min()) if path.height else None,  # type: ignore[arg-type]
                "end_ns": int(path["end_ns"].max()) if path.height else None,  # type: ignore[arg-type]
            },
            "warnings": list(self.warnings),
        }


def _top_per_step(per_step: pl.DataFrame) -> list[dict[str, Any]]:
    """Per step: the rank that caused the most waiting, with caused_wait_ns and late_count."""
    if per_step.height == 0:
        return []
    top = (
        per_step.sort(["caused_wait_ns", "rank"], descending=[True, False])
        .group_by("step", maintain_order=True)
        .first()
        .sort("step", nulls_last=False)
    )
    return top.select("step", "rank", "caused_wait_ns", "late_count").to_dicts()


def work_windows(ev: pl.DataFrame) -> pl.DataFrame:
    """Per rank: lo / hi of its compute and comm events (rank's own clock)."""
    return (
        ev.filter(pl.col("kind").is_in(["compute", "comm"]) & pl.col("rank").is_not_null())
        .group_by("rank")
        .agg(pl.col("ts").min().alias("lo"), pl.col("end").max().alias("hi"))
    )


def analyze_job(
    trace: Trace,
    *,
    exposed: pl.DataFrame | None = None,
    exposed_totals: pl.DataFrame | None = None,
    windows: pl.DataFrame | None = None,
    same_clock: bool = False,
) -> Job:
    """Match collectives, estimate clock offsets, find stragglers and the job's critical path.

    exposed / exposed_totals: the per-rank report's exposed-comm intervals and totals
    (Report.exposed, Report.ranks) to split into wait vs transfer. windows: per rank lo/hi
    (own clock); default: first start / last end of its compute and comm events.
    same_clock: the ranks share one clock (one host): offsets are estimated and reported
    but not applied (`offsets.applied` is false)."""
    ev = event_frame(trace)
    ops = collective_ops(trace, ev)
    present = sorted(int(r) for r in ev["rank"].drop_nulls().unique().to_list())
    size = world_size(trace)
    expected = list(range(size)) if size else None
    offsets = clock_offsets(ops).with_columns(
        pl.col("offset_ns").alias("estimate_ns"), pl.lit(not same_clock).alias("applied")
    )
    if same_clock:
        offsets = offsets.with_columns(pl.lit(0, pl.Int64).alias("offset_ns"))
    aligned = align(ops, offsets, ("arrival_ns", "end_ns"))
    inst = match(aligned, expected_ranks=expected)
    waited = waits(aligned, inst)
    per_step = stragglers(waited, offsets, exposed, exposed_totals)
    win = work_windows(ev) if windows is None else windows
    win = align(win.select(pl.col("rank").cast(pl.Int64), "lo", "hi"), offsets, ("lo", "hi"))
    path = job_critical_path(waited, win)
    missing = sorted(set(expected or present) - set(present))
    warnings: list[str] = []
    if missing:
        shown = ", ".join(str(r) for r in missing[:8]) + (" ..." if len(missing) > 8 else "")
        warnings.append(
            f"partial job: {len(present)} of {len(present) + len(missing)} ranks present; "
            f"missing ranks {shown}"
        )
    if size is None:
        unstated = ops.group_by("group").agg(pl.col("group_ranks").drop_nulls().len().alias("n"))
        for group in sorted(unstated.filter(pl.col("n") == 0)["group"].to_list()):
            warnings.append(
                f"group {group}: the trace does not say which ranks it has; matched over "
                f"the {len(present)} ranks present (missing ranks unknown; busbw uses "
                f"n = {len(present)})"
            )
    # a note only where the ends' median would have invented an offset
    shared = offsets.filter(
        pl.col("one_clock") & (pl.col("rank") != pl.col("reference")) & (pl.col("mid_ns") != 0)
    )
    if shared.height and not same_clock:
        names = shared["rank"].to_list()
        warnings.append(
            ("note: rank " if len(names) == 1 else "note: ranks ")
            + ", ".join(str(r) for r in names)
            + (" shares" if len(names) == 1 else " share")
            + " the reference rank's clock as far as the collectives can tell (causal "
            "offset bounds include 0): offset 0"
        )
    lone = offsets.filter((pl.col("instances") == 0) & (pl.col("rank") != pl.col("reference")))
    if lone.height:
        warnings.append(
            "no collective shared with the reference rank, clocks not aligned: ranks "
            + ", ".join(str(r) for r in lone["rank"].to_list())
        )
    return Job(ops, inst, offsets, per_step, path, present, missing, warnings)


class _ReportLike(Protocol):
    ranks: pl.DataFrame
    exposed: pl.DataFrame
    warnings: list[str]
    collectives: pl.DataFrame
    stragglers: pl.DataFrame
    job_path: pl.DataFrame
    job: dict[str, Any] | None


def attach_job(report: _ReportLike, trace: Trace) -> None:
    """Fill `report.collectives`, `.stragglers` and `.job` when the trace has several ranks,
    splitting the report's exposed comm into wait vs transfer."""
    if len(trace.ranks) < 2:
        return
    ranks = report.ranks.filter(pl.col("rank").is_not_null())
    windows = ranks.group_by("rank").agg(
        pl.col("window_start_ns").min().alias("lo"), pl.col("window_end_ns").max().alias("hi")
    )
    job = analyze_job(
        trace,
        exposed=report.exposed,
        exposed_totals=ranks.select("rank", "step", "exposed_comm_ns"),
        windows=windows if windows.height else None,
    )
    report.collectives = job.collectives
    report.stragglers = job.stragglers
    report.job_path = job.critical_path
    report.job = job.to_dict()
    report.warnings.extend(job.warnings)
