"""`simulate()`: workload + hardware + schedule -> a `Trace` of every rank's tiles."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.floors import floors
from moetrace.executor.fold import Expansion, expand
from moetrace.executor.hardware import (
    Hardware,
    get_hardware,
    link_extrapolation,
    link_notes,
    link_warnings,
)
from moetrace.executor.planner import best_plan
from moetrace.executor.schedules import ScheduleOptions, Timed
from moetrace.executor.taskgraph import TaskGraph
from moetrace.executor.tiles import build_graph
from moetrace.executor.workload import (
    DTYPE_BYTES,
    Workload,
    make_workload,
    place,
    route,
    rows_per_source_expert,
)
from moetrace.trace.model import Trace

Progress = Callable[[str, float], None]
MAX_TASKS = 6_000_000
_OPTIONS = {
    "one_sided",
    "l2",
    "dynamic",
    "chunks",
    "dispatch_dtype",
    "shared_expert",
    "tile_rows",
    "n_tile",
    "progress",
    "max_tasks",
    "order",
}


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


def estimate_tasks(wl: Workload) -> int:
    """Upper estimate of the task count, computed before any allocation."""
    sh = wl.shape
    rows = wl.ranks * wl.tokens * sh.top_k
    row_tiles = rows // wl.tile_rows + sh.experts
    n1 = -(-2 * sh.intermediate // wl.n_tile)
    n2 = -(-sh.hidden // wl.n_tile)
    comm = rows // wl.tile_rows + wl.ranks * wl.ranks
    token_tiles = wl.ranks * -(-wl.tokens // wl.tile_rows)
    return row_tiles * (n1 + n2 + 1) + 8 * comm + token_tiles * (4 + n1 + n2)


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


def prepare(
    preset: Any = "deepseek-v3",
    hardware: str | Hardware = "ascend-a3",
    ranks: int = 64,
    tokens: int = 4096,
    schedule_name: str = "tile",
    routing: str = "balanced",
    placement: str = "round-robin",
    seed: int = 0,
    hw_overrides: dict[str, Any] | None = None,
    **options: Any,
) -> tuple[Workload, Hardware, ScheduleOptions, int]:
    """Validate every input (no heavy work): raises `ExecutorInputError` with one line."""
    unknown = set(options) - _OPTIONS
    if unknown:
        raise ExecutorInputError(f"unknown option(s): {', '.join(sorted(unknown))}")
    hw = get_hardware(hardware, hw_overrides)
    wl = make_workload(
        preset,
        ranks,
        tokens,
        routing,
        placement,
        seed,
        options.get("dispatch_dtype"),
        bool(options.get("shared_expert", False)),
        int(options.get("tile_rows", 128)),
        int(options.get("n_tile", 512)),
    )
    opts = ScheduleOptions(
        schedule=schedule_name,
        chunks=int(options.get("chunks", 4)),
        one_sided=bool(options.get("one_sided", True)),
        l2=bool(options.get("l2", True)),
        dynamic=bool(options.get("dynamic", False)),
        order=str(options.get("order", "auto")),
    )
    opts.check()
    if opts.schedule == "tile" and opts.l2:
        tile_bytes = wl.tile_rows * 3 * wl.shape.intermediate * 2.0
        if hw.l2_bytes < tile_bytes:
            raise ExecutorInputError(
                f"L2 of {hw.l2_bytes / 2**20:.2f} MiB cannot hold one row tile's intermediates "
                f"({tile_bytes / 2**20:.2f} MiB); use --no-l2 or smaller tiles"
            )
    est = estimate_tasks(wl)
    limit = int(options.get("max_tasks", MAX_TASKS))
    if est > limit:
        raise ExecutorInputError(
            f"run too large: about {est:,} tasks (limit {limit:,}); "
            "use fewer ranks/tokens or larger tiles"
        )
    if wl.ranks * wl.tokens * wl.shape.top_k > 100_000_000:
        raise ExecutorInputError("run too large: more than 100M routed rows")
    return wl, hw, opts, est


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
    graph = build_graph(
        wl,
        chunks=opts.chunks if opts.schedule == "chunked" else 1,
        aiv_comm=opts.schedule == "tile",
        two_sided=opts.schedule == "tile" and not opts.one_sided,
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
            "chunks": opts.chunks if opts.schedule == "chunked" else 1,
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


def simulate(
    preset: Any = "deepseek-v3",
    hardware: str | Hardware = "ascend-a3",
    ranks: int = 64,
    tokens: int = 4096,
    schedule: str = "tile",
    routing: str = "balanced",
    placement: str = "round-robin",
    seed: int = 0,
    hw_overrides: dict[str, Any] | None = None,
    **options: Any,
) -> Trace:
    """Simulate one MoE layer on `ranks` EP ranks and return its trace (deterministic).

    options: one_sided, l2, dynamic (tile ablations), chunks (chunked), dispatch_dtype
    (bf16/fp16/fp8/int8), shared_expert, tile_rows, n_tile, progress(stage, fraction), max_tasks.
    """
    wl, hw, opts, _ = prepare(
        preset, hardware, ranks, tokens, schedule, routing, placement, seed, hw_overrides, **options
    )
    run = execute(wl, hw, opts, options.get("progress"), fold=True)
    progress = options.get("progress")
    if progress:
        progress("trace", 0.8)
    trace = to_trace(run)
    if progress:
        progress("done", 1.0)
    return trace


def simulate_run(**kwargs: Any) -> Run:
    """Like `simulate` but returns the raw `Run` (graph, durations, starts, lanes)."""
    sched = kwargs.pop("schedule", "tile")
    wl, hw, opts, _ = prepare(schedule_name=sched, **kwargs)
    return execute(wl, hw, opts, kwargs.get("progress"))
