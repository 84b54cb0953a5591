"""All metrics of METRICS.md for one trace, per rank and step, as Polars frames; compare two.

`analyze(trace)` runs: prepare (classification, steps, windows) → gating predecessors →
exposed comm → idle tracks/gaps → critical paths → one `Report`. Every number the CLI and
the TUI show comes from here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.comm import exposed_comm
from moetrace.analysis.critical_path import Gates, critical_paths, edges, gating
from moetrace.analysis.cycles import find_cycle
from moetrace.analysis.idle import GAP_COLUMNS, idle
from moetrace.analysis.job import attach_job
from moetrace.analysis.labels import unclassified, unclassified_warning
from moetrace.analysis.metric_spec import (
    AGG_HOWS,
    AGG_NS,
    AGG_RANGE,
    JSON_METRICS,
    OPTIONAL,
    POOLED,
    RANKS_SCHEMA,
    SUMMED,
    WEIGHTED,
)
from moetrace.analysis.moe import MoeView, moe_view
from moetrace.analysis.peer_window import peer_dict, peer_note, peer_windows
from moetrace.analysis.steps import NO_RANK, Prepared, prepare_steps, with_windows
from moetrace.analysis.sync_edges import producer_sync_edges
from moetrace.trace.model import Trace


@dataclass
class Report:
    """Metrics of one trace. Frames are keyed by (rank, step); times in ns.

    ranks: one row per (rank, step) with the overlap, critical-path and MFU figures.
    units / tracks: utilisation per unit and per device track. gaps: idle gaps with causes.
    critical_path: the path's segments. comm: each comm event and its exposed ns.
    exposed: the intervals of exposed comm (M \\ C). warnings: what limited the analysis.
    """

    ranks: pl.DataFrame
    units: pl.DataFrame
    tracks: pl.DataFrame
    gaps: pl.DataFrame
    critical_path: pl.DataFrame
    comm: pl.DataFrame
    exposed: pl.DataFrame
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # several ranks (analysis/job.py): matched collectives, stragglers per (rank, step), the
    # job's critical path (reference clock) and the `job` object of `metrics --json`;
    # `moe` (analysis/moe.py) is computed on first use
    collectives: pl.DataFrame = field(default_factory=pl.DataFrame)
    stragglers: pl.DataFrame = field(default_factory=pl.DataFrame)
    job_path: pl.DataFrame = field(default_factory=pl.DataFrame)
    job: dict[str, Any] | None = None
    # the peers' per-rank window beside moetrace's (analysis/peer_window.py); empty on CPU-only
    # traces and under a time range
    peer_window: pl.DataFrame = field(default_factory=pl.DataFrame)
    trace: Trace | None = field(default=None, repr=False)
    _moe: MoeView | None = field(default=None, repr=False)

    @property
    def moe_view(self) -> MoeView | None:
        """The MoE view of the whole trace (what `moetrace moe` prints); None without it."""
        if self._moe is None and self.trace is not None:
            self._moe = moe_view(self.trace)
        return self._moe

    @property
    def moe(self) -> pl.DataFrame:
        """The MoE view's time per (rank, step, layer, category) of the whole trace."""
        view = self.moe_view
        return view.categories if view is not None else pl.DataFrame()

    def summary(self) -> dict[str, float | None]:
        """Totals over all ranks and steps: ns summed, ratios pooled (Σ num / Σ denominator)."""
        r = self.ranks
        out: dict[str, float | None] = {}
        for col in SUMMED:
            out[col] = float(r[col].sum()) if r.height else 0.0
        for col, (num, den) in POOLED.items():
            total = float(r[den].sum()) if r.height else 0.0
            out[col] = (float(r[num].sum()) if r.height else 0.0) / total if total else None
        for col in WEIGHTED:  # mean weighted by window_ns over the rows that know it
            known = r.filter(pl.col(col).is_not_null())
            out[col] = (
                float((known[col] * known["window_ns"]).sum()) / float(known["window_ns"].sum())
                if known.height and known["window_ns"].sum()
                else None
            )
        if r.height:
            span = r.select(pl.col("window_end_ns").max() - pl.col("window_start_ns").min())
            out["makespan_ns"] = float(span.item())
        u = self.units.join(
            r.select("rank", "step", "window_ns"), on=["rank", "step"], how="left", nulls_equal=True
        )
        for unit, sub in u.group_by("unit", maintain_order=True):
            denom = float((sub["tracks"] * sub["window_ns"]).sum())
            out[f"util:{unit[0]}"] = float(sub["busy_ns"].sum()) / denom if denom else None
        return out

    @property
    def cp_breakdown(self) -> pl.DataFrame:
        """Critical-path time per category (compute-aic, comm, wait, ...) over all ranks and
        steps: category, dur_ns, share of the summed path; longest first."""
        by = (
            self.critical_path.group_by("category")
            .agg(pl.col("dur_ns").sum())
            .sort(["dur_ns", "category"], descending=[True, False])
        )
        total = by["dur_ns"].sum()
        return by.with_columns((pl.col("dur_ns") / total if total else pl.lit(None)).alias("share"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON structure of issue 4: per rank and step, then aggregates over ranks."""
        util: dict[tuple[Any, Any], dict[str, float]] = {}
        for row in self.units.iter_rows(named=True):
            util.setdefault((row["rank"], row["step"]), {})[row["unit"]] = _num(row["util"])
        breakdown: dict[tuple[Any, Any], dict[str, int]] = {}
        cp = self.critical_path.group_by("rank", "step", "category").agg(pl.col("dur_ns").sum())
        for row in cp.sort("category").iter_rows(named=True):
            breakdown.setdefault((row["rank"], row["step"]), {})[row["category"]] = int(
                row["dur_ns"]
            )
        per_rank = []
        for row in self.ranks.iter_rows(named=True):
            key = (row["rank"], row["step"])
            item: dict[str, Any] = {k: _num(row[k]) for k in ("rank", "step", *JSON_METRICS)}
            item["util"] = util.get(key, {})
            item["critical_path"] = {
                "span_ns": _num(row["cp_span_ns"]),
                "coverage": _num(row["cp_coverage"]),
                "cp_comm_ns": _num(row["cp_comm_ns"]),
                "cp_comm_ratio": _num(row["cp_comm_ratio"]),
                "breakdown_ns": breakdown.get(key, {}),
            }
            for k in OPTIONAL:  # unknown (mfu without a peak): left out
                if row[k] is not None:
                    item[k] = _num(row[k])
            per_rank.append(item)
        out: dict[str, Any] = {
            "ranks": per_rank,
            "aggregate": self.aggregate_dicts(),
            "summary": {k: _num(v) for k, v in self.summary().items()},
            "warnings": list(self.warnings),
        }
        out["peer_window"] = peer_dict(self.peer_window) if self.peer_window.height else None
        if self.job is not None:
            out["job"] = self.job
        return out

    def aggregate(self) -> pl.DataFrame:
        """Per step, across ranks: min, mean and max of every metric; `sum` of the ns metrics
        only, and for ratios the `pooled` ratio (Σ numerator / Σ denominator) instead: a sum
        of ratios means nothing. A metric no rank knows (mfu without a peak) stays null."""
        aggs = [pl.len().alias("ranks")]
        for c in AGG_NS:
            aggs.append(pl.col(c).sum().alias(f"{c}:sum"))
        for c, (num, den) in POOLED.items():
            total = pl.col(den).filter(pl.col(c).is_not_null()).sum()
            pooled = pl.col(num).filter(pl.col(c).is_not_null()).sum() / total
            aggs.append(pl.when(total > 0).then(pooled).otherwise(None).alias(f"{c}:pooled"))
        for c in AGG_RANGE:
            aggs += [
                pl.col(c).min().alias(f"{c}:min"),
                pl.col(c).mean().alias(f"{c}:mean"),
                pl.col(c).max().alias(f"{c}:max"),
            ]
        return self.ranks.group_by("step").agg(aggs).sort("step", nulls_last=False)

    def aggregate_dicts(self) -> list[dict[str, Any]]:
        """`aggregate()` as [{step, ranks, sum: {...}, pooled: {...}, min, mean, max}]."""
        out = []
        for row in self.aggregate().iter_rows(named=True):
            item: dict[str, Any] = {"step": row["step"], "ranks": row["ranks"]}
            for how in AGG_HOWS:
                item[how] = {
                    k.split(":")[0]: _num(v) for k, v in row.items() if k.endswith(f":{how}")
                }
            out.append(item)
        return out


def _num(value: Any) -> Any:
    """JSON-safe number: NaN/inf become None, numpy scalars become Python ones."""
    if value is None:
        return None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    return value


GraphKey = tuple[tuple[str, ...], tuple[int, ...] | None, str, str]
"""(comm_patterns, ranks, window, window_span): the settings a `Graph` was prepared with."""


@dataclass(frozen=True)
class Graph:
    """Step assignment, gating predecessors and a named dependency cycle (if any) of one trace
    under one set of settings. They do not depend on the time range, so a caller analysing
    many ranges of one trace (the viewer's area selections) prepares them once and passes
    them to `analyze(graph=...)` (see `analysis.session.AnalysisSession`)."""

    trace: Trace
    key: GraphKey
    base: Prepared
    gates: Gates
    cycle: str | None


def graph_key(
    comm_patterns: Sequence[str],
    ranks: Sequence[int] | None,
    window: str = "step",
    window_span: str = "compute-comm",
) -> GraphKey:
    """The settings `prepare_graph` depends on, as a hashable key."""
    return (tuple(comm_patterns), None if ranks is None else tuple(ranks), window, window_span)


def prepare_graph(trace: Trace, key: GraphKey) -> Graph:
    """Steps, gating predecessors and a named cycle (if any) of `trace` under `key`."""
    comm_patterns, ranks, window, window_span = key
    base = prepare_steps(
        trace, comm_patterns=comm_patterns, ranks=ranks, window=window, window_span=window_span
    )
    extra = producer_sync_edges(trace, base)
    edge_set = edges(base, extra)
    cycle = find_cycle(base, edge_set)
    gates = gating(base, edge_set)
    return Graph(trace, key, base, gates, cycle)


def analyze(
    trace: Trace,
    *,
    peak_tflops: float | None = None,
    comm_patterns: Sequence[str] = (),
    time_range: tuple[int, int] | None = None,
    ranks: Sequence[int] | None = None,
    window: str = "step",
    window_span: str = "compute-comm",
    graph: Graph | None = None,
) -> Report:
    """Every metric of METRICS.md for `trace`, per rank and step.

    peak_tflops: peak TFLOP/s of one device (else `meta["peak_flops"]`), for MFU.
    comm_patterns: extra regexes of kernel names that are communication.
    time_range: clip every window to [t0, t1) ns (an area selected in the TUI).
    ranks: analyze only these ranks.
    window: `step` (one window per rank and step), `trace` (one per rank, the whole trace,
    idle between steps included) or `annotation:NAME[#K]` (one per instance of the slices
    named NAME, or only instance K, 0-based), like HTA's annotation and instance_id.
    window_span: `compute-comm` (msprof's Stage) or `work` (copies and sets too, as
    TraceLens and HTA span the GPU timeline). Raises ValueError for a bad window or span.
    graph: what `prepare_graph` computed for this trace and these settings (else computed
    here; one for another trace or other settings is not used).
    """
    key = graph_key(comm_patterns, ranks, window, window_span)
    if graph is None or graph.trace is not trace or graph.key != key:
        graph = prepare_graph(trace, key)
    base, gates, cycle = graph.base, graph.gates, graph.cycle
    prep = with_windows(base, time_range)
    warnings = [*trace.warnings, *prep.warnings]
    if cycle:
        warnings.append(f"dependency cycle: {cycle}")
    share, top_names = (0.0, []) if prep.cpu_mode else unclassified(prep.ev)
    line = unclassified_warning(share, top_names)
    if line:
        warnings.append(line)
    per_window, exposed, comm_events, _compute = exposed_comm(prep)
    tracks, units, gaps, device = idle(prep, gates)
    cp, path_start, cp_warnings = critical_paths(prep, gates)
    warnings += cp_warnings
    cp_sum = cp.group_by("gid").agg(
        pl.col("dur_ns").sum().alias("cp_span_ns"),
        pl.col("dur_ns").filter(pl.col("category") == "comm").sum().alias("cp_comm_ns"),
    )
    peak = peak_tflops * 1e12 if peak_tflops else trace.meta.get("peak_flops")
    flops = _window_flops(prep)
    keys = prep.windows.select(
        "gid",
        pl.when(pl.col("rank") == NO_RANK).then(None).otherwise(pl.col("rank")).alias("rank"),
        "step",
        pl.col("lo").alias("window_start_ns"),
        pl.col("hi").alias("window_end_ns"),
    )
    keys = keys.with_columns(
        pl.Series("cp_start_ns", path_start, dtype=pl.Int64).replace(np.iinfo(np.int64).min, None)
    )
    ranks_frame = _rank_rows(keys, per_window, device, _job_comm(prep), cp_sum, flops, peak)

    def keyed(frame: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
        return frame.join(
            keys.select("gid", "rank", "step"), on="gid", how="left", maintain_order="left"
        ).select("rank", "step", *cols)

    report = Report(
        ranks=ranks_frame.select([pl.col(k).cast(v) for k, v in RANKS_SCHEMA.items()]),
        units=keyed(units, ["unit", "tracks", "busy_ns", "util"]),
        tracks=keyed(tracks, ["track", "unit", "busy_ns", "idle_ns", "util"]),
        gaps=keyed(gaps, list(GAP_COLUMNS)),
        critical_path=keyed(
            cp, ["seq", "segment", "event_id", "start_ns", "end_ns", "dur_ns", "category"]
        ),
        comm=comm_events.join(
            keys.select("gid", "rank", "step"), on="gid", how="left", maintain_order="left"
        ).select("event_id", "rank", "step", "ts_ns", "dur_ns", "exposed_ns", "collective"),
        exposed=keyed(exposed, ["start_ns", "end_ns"]),
        warnings=warnings,
        meta={
            "cpu_mode": prep.cpu_mode,
            "source": trace.meta.get("source"),
            "unclassified_share": share,
        },
    )
    if time_range is None:
        report.peer_window = peer_windows(prep, report.ranks)
        report.meta["peer_note"] = peer_note(report.peer_window)
    report.trace = trace
    attach_job(report, trace)
    return report


def _window_flops(prep: Prepared) -> pl.DataFrame:
    """FLOPs of the compute events on devices per window (gid), each counted for the share
    of it inside its (possibly clipped) window; `has_flops`: any event gave a FLOP count."""
    return (
        prep.ev.filter(
            pl.col("device") & (pl.col("kind") == "compute") & pl.col("gid").is_not_null()
        )
        .join(prep.windows.select("gid", "lo", "hi"), on="gid", how="left")
        .with_columns(  # the share of each event inside the (possibly clipped) window
            pl.when(pl.col("end") > pl.col("ts"))
            .then(
                (pl.min_horizontal("end", "hi") - pl.max_horizontal("ts", "lo")).clip(0)
                / (pl.col("end") - pl.col("ts"))
            )
            .otherwise(1.0)
            .alias("share")
        )
        .group_by("gid")
        .agg(
            (pl.col("flops") * pl.col("share")).sum().alias("flops"),
            pl.col("flops").is_not_null().any().alias("has_flops"),
        )
    )


def _rank_rows(
    keys: pl.DataFrame,
    per_window: pl.DataFrame,
    device: pl.DataFrame,
    job_comm: pl.DataFrame,
    cp_sum: pl.DataFrame,
    flops: pl.DataFrame,
    peak: float | None,
) -> pl.DataFrame:
    """One row per window (gid): the analyzers' figures joined, then the ratios made of
    them (idle, critical-path coverage and comm share, MFU against `peak` FLOP/s)."""
    return (
        keys.join(per_window, on="gid", how="left")
        .join(device, on="gid", how="left")
        .join(job_comm, on="gid", how="left")
        .with_columns((pl.col("window_ns") - pl.col("busy_ns")).alias("idle_ns"))
        .join(cp_sum, on="gid", how="left")
        .join(flops, on="gid", how="left")
        .with_columns(
            pl.col("cp_span_ns", "cp_comm_ns").fill_null(0),
        )
        .with_columns(
            (pl.col("cp_span_ns") / pl.col("window_ns")).alias("cp_coverage"),
            pl.when(pl.col("job_comm_ns") > 0)
            .then(pl.col("cp_comm_ns") / pl.col("job_comm_ns"))
            .otherwise(None)
            .alias("cp_comm_ratio"),
            (
                pl.when(pl.col("has_flops") & pl.lit(bool(peak)))
                .then(pl.col("flops") / (pl.col("window_ns") * 1e-9 * float(peak or 1.0)))
                .otherwise(None)
            ).alias("mfu"),
        )
        .sort("gid")
    )


def _job_comm(prep: Prepared) -> pl.DataFrame:
    """gid, job_comm_ns: |union of every rank's comm events ∩ the window|. A rank's critical
    path may run through other ranks' communication (the executor's data edges), never
    through two comm pieces at once, so cp_comm <= job_comm and cp_comm_ratio stays in
    [0, 1]; on one rank it is comm_ns."""
    sel = prep.ev.filter(pl.col("kind") == "comm").select("ts", "end")
    job = iv.union(
        iv.make(np.zeros(sel.height, np.int64), sel["ts"].to_numpy(), sel["end"].to_numpy())
    )
    lo, hi = prep.lo_hi()
    covered = iv.covered_length(job, np.zeros(len(lo), np.int64), lo, hi)
    return pl.DataFrame(
        {"gid": np.arange(len(lo), dtype=np.int64), "job_comm_ns": covered},
        schema={"gid": pl.Int64, "job_comm_ns": pl.Int64},
    )


def compare(a: Report, b: Report) -> pl.DataFrame:
    """Side by side totals of two reports: metric, a, b, ratio (b / a; null when a is 0)."""
    sa, sb = a.summary(), b.summary()
    names = [k for k in sa if k in sb] + [k for k in sb if k not in sa]
    names += [k for k in sa if k not in sb and k not in names]
    rows = []
    for k in names:
        va, vb = sa.get(k), sb.get(k)
        ratio = vb / va if va not in (None, 0) and vb is not None else None
        rows.append({"metric": k, "a": va, "b": vb, "ratio": ratio})
    return pl.DataFrame(
        rows, schema={"metric": pl.String, "a": pl.Float64, "b": pl.Float64, "ratio": pl.Float64}
    )
