"""Run the executor on an extracted layer: as measured, then under a requested change.

The extracted layer becomes an executor `Workload` (a shape named "measured", the measured
tokens per rank, routing `balanced` when every expert got the same rows, else the measured
rows per expert as routing weights, and the measured placement when it is round-robin or the
executor's balanced placement; anything else is approximated and listed as assumed).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis.report import analyze
from moetrace.executor.config import SimulationConfig
from moetrace.executor.hardware import Hardware
from moetrace.executor.run import execute, prepare, to_trace
from moetrace.executor.workload import (
    MoEShape,
    make_workload,
    place,
    route,
    rows_per_source_expert,
)
from moetrace.trace.model import Trace
from moetrace.whatif.extract import LayerWorkload
from moetrace.whatif.placement import as_round_robin


@dataclass
class Scenario:
    """One simulated variant of the layer: its trace and figures (ns)."""

    label: str
    schedule: str
    placement: str
    trace: Trace
    makespan_ns: int
    exposed_comm_ns: float
    idle_ns: float
    assumed: dict[str, str] = field(default_factory=dict)


def shape_of(wl: LayerWorkload) -> MoEShape:
    """The extracted sizes as an executor layer shape."""
    return MoEShape(
        "measured",
        wl.hidden,
        wl.intermediate,
        wl.experts,
        wl.top_k,
        1 if wl.shared_expert else 0,
        "extracted from the trace",
    )


ROUTING_ROUNDS = 12
"""Most rounds of the routing-weight fit (`routing_of`); it stops once every expert is within
ROUTING_TOL of its measured rows."""
ROUTING_TOL = 0.005


def routing_of(wl: LayerWorkload, folder: Path) -> tuple[str, dict[str, str]]:
    """`balanced` when each expert got T·k·ranks/E rows, else `counts:FILE` of routing weights
    fitted so that the executor's draw (top-k of log weight + Gumbel noise, seed 0, the seed
    the replay runs with) gives every expert its measured rows: the measured rows as weights
    under-load the hottest experts (k distinct experts per token flattens them), so each round
    scales every weight by measured / drawn rows. Listed as assumed: the rows per expert
    match, the tokens behind them are drawn."""
    rows = np.asarray(wl.expert_rows, dtype=np.float64)
    even = wl.tokens * wl.top_k * wl.ranks / wl.experts
    if rows.size and np.all(rows == even):
        return "balanced", {}
    path = folder / "expert_rows.txt"
    from moetrace.trace.atomic import write_bytes_atomic

    target = np.maximum(rows, 0.0)
    weights = target.copy()
    worst = 0.0
    for _ in range(ROUTING_ROUNDS):
        text = " ".join(repr(float(w)) for w in weights) + "\n"
        write_bytes_atomic(path, text.encode(), force=True)  # complete or not at all
        probe = make_workload(shape_of(wl), wl.ranks, wl.tokens, f"counts:{path}", "round-robin")
        drawn = rows_per_source_expert(probe, route(probe)).sum(axis=0).astype(np.float64)
        off = np.abs(drawn - target) / np.maximum(target, 1.0)
        worst = float(off.max())
        if worst <= ROUTING_TOL:
            break
        weights = np.where(drawn > 0, weights * target / np.maximum(drawn, 1.0), weights)
    return f"counts:{path}", {
        "routing": "assumed: top-k drawn from routing weights fitted to the measured rows per "
        f"expert (rows within {100 * worst:.1f}% of the measured ones, not token for token)"
    }


def placement_of(wl: LayerWorkload, routing: str) -> tuple[str, dict[str, str]]:
    """The executor placement that reproduces the measured expert -> rank map, if any."""
    measured = np.asarray(wl.expert_rank)
    if np.array_equal(measured, np.arange(wl.experts) % wl.ranks):
        return "round-robin", {}
    probe = make_workload(shape_of(wl), wl.ranks, wl.tokens, routing, "balanced")
    if np.array_equal(measured, place(probe, route(probe))):
        return "balanced", {}
    contiguous = np.arange(wl.experts) // (wl.experts // max(wl.ranks, 1))
    if np.array_equal(measured, contiguous):
        # same experts per rank as round-robin; with routing weights relabelled the loads match
        return "contiguous", {}
    return "round-robin", {
        "placement": "assumed: the measured expert -> rank map is neither round-robin nor "
        "balanced; replayed round-robin"
    }


def _relabel(wl: LayerWorkload) -> LayerWorkload:
    """Contiguous placement (expert e on rank e // per) as round-robin: relabel the experts so
    that the rows each rank receives stay the measured ones."""
    per = wl.experts // wl.ranks
    return as_round_robin(wl, [e // per for e in range(wl.experts)])


def figures(trace: Trace) -> tuple[float, float]:
    """(exposed communication, idle) in ns summed over ranks: the analyzer's exposed comm and
    its free time (no compute or communication running on the rank)."""
    summary = analyze(trace).summary()
    return float(summary.get("exposed_comm_ns") or 0.0), float(summary.get("free_ns") or 0.0)


def simulate_layer(
    wl: LayerWorkload,
    hw: Hardware,
    schedule: str,
    placement: str | None = None,
    label: str = "",
    chunks: int | None = None,
    options: dict[str, Any] | None = None,
) -> Scenario:
    """The layer on `hw` under `schedule` (and `placement`, default: as measured); `options`
    are the executor's schedule knobs (one_sided, l2, dynamic, order)."""
    with tempfile.TemporaryDirectory(prefix="moetrace-whatif-") as folder:
        routing, assumed = routing_of(wl, Path(folder))
        measured_placement, more = placement_of(wl, routing)
        if measured_placement == "contiguous":
            wl = _relabel(wl)
            routing, assumed = routing_of(wl, Path(folder))
            measured_placement = "round-robin"
        assumed.update(more)
        chosen = placement or measured_placement
        config = SimulationConfig(
            preset=shape_of(wl),
            hardware=hw,
            ranks=wl.ranks,
            tokens=wl.tokens,
            schedule=schedule,
            routing=routing,
            placement=chosen,
            seed=0,
            chunks=chunks or (wl.chunks if schedule == "chunked" and wl.chunks > 1 else 4),
            dispatch_dtype=wl.dispatch_dtype,
            shared_expert=wl.shared_expert,
            tile_rows=wl.tile_rows,
            n_tile=wl.n_tile,
            **(options or {}),
        )
        workload, hardware, opts, _ = prepare(config)
        run = execute(workload, hardware, opts)
        trace = to_trace(run)
    exposed, idle = figures(trace)
    return Scenario(
        label or schedule, schedule, chosen, trace, run.makespan_ns, exposed, idle, assumed
    )


def measured_figures(trace: Trace, windows: pl.DataFrame | None) -> tuple[float, float]:
    """Exposed comm and idle (ns) of the measured trace, inside the layer windows if given."""
    if windows is None or windows.height == 0:
        return figures(trace)
    ev = trace.events_with_tracks().join(
        windows.select("rank", "start", pl.col("end").alias("w_end")),
        on="rank",
        how="inner",
    )
    keep = ev.filter(
        (pl.col("ts") >= pl.col("start")) & (pl.col("ts") + pl.col("dur") <= pl.col("w_end"))
    )["id"]
    clipped = Trace(
        trace.events.filter(pl.col("id").is_in(keep.implode())),
        trace.tracks,
        trace.deps.filter(
            pl.col("src").is_in(keep.implode()) & pl.col("dst").is_in(keep.implode())
        ),
        trace.counters.head(0),
        trace.meta,
    )
    return figures(clipped)


def summary_row(s: Scenario, measured_ns: int) -> dict[str, Any]:
    return {
        "label": s.label,
        "schedule": s.schedule,
        "placement": s.placement,
        "makespan_ns": s.makespan_ns,
        "error_vs_measured": s.makespan_ns / measured_ns - 1 if measured_ns else None,
        "exposed_comm_ns": s.exposed_comm_ns,
        "idle_ns": s.idle_ns,
    }
