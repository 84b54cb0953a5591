"""`simulate()`: workload + hardware + schedule -> a `Trace` of every rank's tiles."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from moetrace.executor.config import Prepared, SimulationConfig
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.floors import floors
from moetrace.executor.fold import Expansion, expand
from moetrace.executor.hardware import Hardware, link_extrapolation, link_notes, link_warnings
from moetrace.executor.planner import best_plan
from moetrace.executor.schedules import ScheduleOptions, Timed, get_schedule
from moetrace.executor.taskgraph import TaskGraph
from moetrace.executor.tiles import build_graph
from moetrace.executor.workload import (
    DTYPE_BYTES,
    Workload,
    place,
    route,
    rows_per_source_expert,
)
from moetrace.trace.model import Trace

Progress = Callable[[str, float], None]


@dataclass
class Run:
    """Everything a simulation produced, for the functional proof and for tests."""

    workload: Workload
    hardware: Hardware
    options: ScheduleOptions
    graph: TaskGraph
    timed: Timed
    start: np.ndarray
    lane: np.ndarray
    plan: str = ""  # which candidate plan the planner kept (tile: order/per-core scheduler)
    # a folded run (`executor.fold`): graph, timed, start and lane hold rank 0's tasks alone
    expansion: Expansion | None = None

    @property
    def makespan_ns(self) -> int:
        return int((self.start + self.timed.dur).max())


def check_memory(wl: Workload, hw: Hardware, assign: np.ndarray, expert_rank: np.ndarray) -> None:
    """Refuse a run whose busiest rank would not fit its weights and buffers in HBM."""
    need = hbm_need(wl, assign, expert_rank)
    if need > hw.hbm_bytes:
        raise ExecutorInputError(
            f"the busiest rank needs {need / 1e9:.1f} GB of HBM for weights and buffers; "
            f"{hw.name} has {hw.hbm_bytes / 1e9:.1f} GB (fewer tokens or more ranks)"
        )


def hbm_need(wl: Workload, assign: np.ndarray, expert_rank: np.ndarray) -> float:
    """Bytes of HBM the busiest rank needs for its weights and buffers."""
    sh = wl.shape
    per_expert = rows_per_source_expert(wl, assign).sum(axis=0)  # rows routed to each expert
    received = np.bincount(expert_rank, weights=per_expert, minlength=wl.ranks).max()
    weights = (
        wl.experts_per_rank * 3.0 * sh.hidden * sh.intermediate * 2 + sh.hidden * sh.experts * 2
    )
    if wl.shared_expert:
        weights += sh.shared_experts * 3.0 * sh.hidden * sh.intermediate * 2
    own = wl.tokens * sh.hidden * 2.0 * 2 + wl.tokens * sh.top_k * (
        wl.dispatch_row_bytes + wl.combine_row_bytes
    )
    per_row = sh.hidden * DTYPE_BYTES[wl.dispatch_dtype] + 3 * sh.intermediate * 2 + sh.hidden * 2
    return float(weights + own + received * per_row)


def prepare(config: SimulationConfig) -> Prepared:
    """The workload, hardware, schedule options and task estimate of a checked `config`."""
    return config.prepared


def execute(
    wl: Workload,
    hw: Hardware,
    opts: ScheduleOptions,
    progress: Progress | None = None,
    exhaustive: bool = False,
    fold: bool = False,
) -> Run:
    """Build the graph, schedule it and time it on all ranks together.

    exhaustive: time every candidate plan of the tile planner, none skipped by its lower bound
    (the same result, slower; the reference the tests compare the pruned search with).
    fold: a rotation-symmetric tile run is simulated on one block of `period` ranks alone
    (`executor.fold`; the same result, EP / period times fewer tasks to time); `Run.expansion`
    then maps it to every rank. Not with a finite receive window: the credit timing
    (`credits.py`) breaks ties between equal times by task id, which a rotation does not
    preserve, so its folded timing could differ from the full one."""
    say = progress or (lambda stage, frac: None)
    say("routing", 0.05)
    assign = route(wl)
    check_memory(wl, hw, assign, place(wl, assign))
    say("task graph", 0.15)
    sched = get_schedule(opts.schedule)
    graph = build_graph(
        wl,
        chunks=sched.micro_batches(opts),
        aiv_comm=sched.comm_aiv,
        two_sided=sched.two_sided(opts),
        assign=assign,
        fold=fold and not math.isfinite(hw.recv_buffer_bytes),
    )
    say("engine", 0.4)
    plan = best_plan(graph, wl, hw, opts, exhaustive)
    # a chunked plan kept by the tile planner carries its own (whole) graph
    exp = expand(plan.graph, plan.timed) if plan.graph.folded_ranks > 1 else None
    return Run(wl, hw, plan.options, plan.graph, plan.timed, plan.start, plan.lane, plan.name, exp)


def to_trace(run: Run) -> Trace:
    """The `Trace` of a finished run, with the workload, hardware and schedule in meta."""
    from moetrace.executor.trace_out import build_folded_trace, build_trace

    wl, hw, opts = run.workload, run.hardware, run.options
    makespan = run.makespan_ns
    figures = floors(run.timed, hw, wl.ranks)
    if run.expansion is not None:  # the block stands for every rank: totals over all of them
        figures["flops"] *= run.expansion.copies
        figures["hbm_bytes"] *= run.expansion.copies
    meta = {
        "workload": wl.to_dict(),
        "hardware": hw.to_dict(),
        "schedule": {
            "name": opts.schedule,
            "chunks": get_schedule(opts.schedule).micro_batches(opts),
            "one_sided": opts.one_sided,
            "l2": opts.l2,
            "dynamic": opts.dynamic,
            "order": opts.order,
            "plan": run.plan,
        },
        "l2_intermediates": run.timed.l2_intermediates,
        # expert weights: read once from HBM, or re-read where L2 eviction is modelled (which)
        "weight_reads": run.timed.weight_reads,
        "dispatch_bw": hw.link_rate("dispatch", wl.ranks),
        "combine_bw": hw.link_rate("combine", wl.ranks),
        "warnings": link_warnings(hw, wl.ranks),
        # beyond the measured link tables: which fields were extrapolated, how, to what
        "link_extrapolation": link_extrapolation(hw, wl.ranks),
        "notes": link_notes(hw, wl.ranks),
        "tasks": run.graph.full_tasks,
        "launches": run.timed.n - run.timed.n_graph,
        "tokens_per_s": wl.ranks * wl.tokens / (makespan * 1e-9),
        "makespan_ns": makespan,
        **figures,
    }
    # MFU over the layer's makespan on every rank (not each rank's own busy window)
    meta["mfu_makespan"] = meta["flops"] / (meta["peak_flops"] * makespan * 1e-9)
    if run.expansion is not None:
        return build_folded_trace(
            run.graph, run.timed, run.start, run.lane, run.expansion, hw, opts, meta
        )
    return build_trace(run.graph, run.timed, run.start, run.lane, hw, opts, meta)


def _config(args: tuple[Any, ...], keywords: dict[str, Any]) -> SimulationConfig:
    """A `SimulationConfig` given alone, or one built from the API's arguments (its fields, in
    order: preset, hardware, ranks, tokens, schedule, routing, placement, seed, hw_overrides)."""
    if args and isinstance(args[0], SimulationConfig):
        if len(args) > 1 or keywords:
            extra = [*map(repr, args[1:]), *sorted(keywords)]
            raise ExecutorInputError(
                f"give a SimulationConfig or keywords, not both: {', '.join(extra)}"
            )
        return args[0]
    return SimulationConfig.build(*args, **keywords)


def simulate(*args: Any, progress: Progress | None = None, **keywords: Any) -> Trace:
    """Simulate one MoE layer on its EP ranks and return its trace (deterministic).

    args: a `SimulationConfig`, or its fields (preset, hardware, ranks, tokens, schedule,
    routing, placement, seed, hw_overrides in this order, then by keyword: chunks, one_sided,
    l2, dynamic, order, dispatch_dtype, shared_expert, tile_rows, n_tile, max_tasks);
    progress(stage, fraction).
    """
    wl, hw, opts, _ = prepare(_config(args, keywords))
    run = execute(wl, hw, opts, progress, fold=True)
    if progress:
        progress("trace", 0.8)
    trace = to_trace(run)
    if progress:
        progress("done", 1.0)
    return trace


def simulate_run(*args: Any, progress: Progress | None = None, **keywords: Any) -> Run:
    """Like `simulate` but returns the raw `Run` (graph, durations, starts, lanes)."""
    wl, hw, opts, _ = prepare(_config(args, keywords))
    return execute(wl, hw, opts, progress)
