"""`simulate()`: workload + hardware + schedule -> a `Trace` of every rank's tiles."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from moetrace.executor.engine import run_schedule
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.floors import floors
from moetrace.executor.hardware import Hardware, get_hardware, link_warnings
from moetrace.executor.listsched import list_schedule
from moetrace.executor.schedules import (
    POOL_AIC,
    POOL_AIV,
    POOL_AIVC,
    POOL_RX,
    POOL_TX,
    ScheduleOptions,
    Timed,
    lane_layout,
    schedule,
)
from moetrace.executor.tiles import TaskGraph, build_graph
from moetrace.executor.workload import DTYPE_BYTES, Workload, make_workload, place, route
from moetrace.trace.model import Trace

Progress = Callable[[str, float], None]
MAX_TASKS = 6_000_000
# tile: weight of the AIC pool's bytes when the planner splits HBM between AIC and vector AIV
# (below 1 favours the HBM-bound vector work: permute, unpermute); fewer on large graphs
HBM_BIASES = (0.25, 0.5, 1.0)
HBM_BIASES_LARGE = (1.0,)
EVENT_PLAN_LIMIT = 200_000  # tasks: above this the event-loop plans cost more than they are worth
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
    sh = wl.shape
    per_expert = np.bincount(assign.ravel(), minlength=sh.experts)  # rows routed to each expert
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
    need = weights + own + received * per_row
    if need > hw.hbm_bytes:
        raise ExecutorInputError(
            f"the busiest rank needs {need / 1e9:.1f} GB of HBM for weights and buffers; "
            f"{hw.name} has {hw.hbm_bytes / 1e9:.1f} GB (fewer tokens or more ranks)"
        )


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
    for what in ("dispatch", "combine"):
        hw.link_rate(what, wl.ranks)  # refuses an EP beyond the measured link tables
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
) -> Run:
    """Build the graph, schedule it and time it on all ranks together.

    exhaustive: time every candidate plan of the tile planner, none skipped by its lower bound
    (the same result, slower; the reference the tests compare the pruned search with)."""
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
    )
    say("engine", 0.4)
    layout = lane_layout(hw, opts)
    best: Run | None = None
    # the tile planner times each of its candidate plans offline and keeps the fastest: two
    # transfer orders (arrival rotation, expert-major) x per-core orders (the vectorised static
    # scheduler; on graphs small enough for the Python event loop also the stage-priority and
    # the FIFO list schedules, frozen into static orders)
    tile = opts.schedule == "tile"
    orders = (
        ("arrival", "expert")
        if tile and opts.order == "auto"
        else ("arrival" if opts.order == "auto" else opts.order,)
    )
    if (
        len(orders) == 2
        and not exhaustive
        and wl.experts_per_rank <= 2
        and np.array_equal(graph.seq_expert, graph.seq)
    ):
        # the expert-major order is the arrival order here (same transfer order, same live
        # weights): its candidates would tie with the arrival ones, which win ties
        orders = ("arrival",)
    small = graph.n <= EVENT_PLAN_LIMIT
    biases = (HBM_BIASES if small else HBM_BIASES_LARGE) if tile else (1.0,)
    # every candidate's durations first, then timed in order of a cheap lower bound of its
    # makespan (`lane_work_bound`); a plan whose bound cannot beat the best so far is skipped.
    # The winner is the one an exhaustive search keeps: least makespan, ties to the earlier
    # candidate (index), so skipping only what could at best tie later is exact.
    # only the arrays of the candidate timed first are kept (a Timed holds ~20 arrays per
    # task); the others are rebuilt if their bound does not skip them
    bounds: list[tuple[int, int, ScheduleOptions, int]] = []
    kept: Timed | None = None
    for index, (order, bias) in enumerate(itertools.product(orders, biases)):
        cand = dataclasses.replace(opts, order=order, aic_hbm_bias=bias)
        timed = schedule(graph, wl, hw, cand)
        bound = lane_work_bound(timed, layout)
        if not bounds or (bound, index) < min(c[:2] for c in bounds):
            kept = timed
        bounds.append((bound, index, cand, timed.n))
        del timed
    bounds.sort(key=lambda c: (c[0], c[1]))
    best_key = (0, 0)
    for bound, index, cand, n_timed in bounds:
        current, kept = kept, None
        for sub, name in enumerate(_plan_names(cand, n_timed <= EVENT_PLAN_LIMIT)):
            key = (index, sub)
            if best is not None and not exhaustive and (bound, key) >= (best.makespan_ns, best_key):
                continue  # its makespan is at least the bound: it cannot be kept
            if current is None:
                current = schedule(graph, wl, hw, cand)
            start, lane = _time_plan(name, current, layout)
            plan = f"{cand.order}/{name}/hbm-bias {cand.aic_hbm_bias:g}"
            run = Run(wl, hw, cand, graph, current, start, lane, plan)
            if best is None or (run.makespan_ns, key) < (best.makespan_ns, best_key):
                best, best_key = run, key
    assert best is not None
    return best


def lane_work_bound(t: Timed, layout: dict[int, tuple[int, int]]) -> int:
    """A lower bound (ns) of the makespan of any plan with these durations: per rank, the work
    of each core pool (AIC, vector AIV, comm AIV) over its cores, and of each link port (one
    lane each), since a lane runs one task at a time from time 0 on."""
    cores = np.zeros(8)
    for pool in (POOL_AIC, POOL_AIV, POOL_AIVC, POOL_TX, POOL_RX):
        if pool in layout:
            cores[pool] = layout[pool][1]
    on_lane = cores[t.pool] > 0
    work = np.bincount(t.rank[on_lane] * 8 + t.pool[on_lane], weights=t.dur[on_lane])
    cell = np.flatnonzero(work)
    if not cell.size:
        return 0
    return int(np.floor((work[cell] / cores[cell % 8]).max()))


def _plan_names(cand: ScheduleOptions, small_graph: bool) -> list[str]:
    """The per-core orders the planner tries for one candidate (see `execute`)."""
    if cand.dynamic:
        return ["fifo queue"]
    if cand.schedule == "tile" and small_graph:
        return ["static", "stage priority", "fifo"]
    return ["static"]


def _time_plan(
    name: str, timed: Timed, layout: dict[int, tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, lane) of one plan of `_plan_names`."""
    if name == "static":
        start, lane, _ = run_schedule(timed, layout)
        return start, lane
    return list_schedule(timed, layout, by_stage=name == "stage priority")


def to_trace(run: Run) -> Trace:
    """The `Trace` of a finished run, with the workload, hardware and schedule in meta."""
    from moetrace.executor.trace_out import build_trace

    wl, hw, opts = run.workload, run.hardware, run.options
    makespan = run.makespan_ns
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
        "dispatch_bw": hw.link_rate("dispatch", wl.ranks),
        "combine_bw": hw.link_rate("combine", wl.ranks),
        "warnings": link_warnings(hw, wl.ranks),
        "tasks": run.timed.n_graph,
        "launches": run.timed.n - run.timed.n_graph,
        "tokens_per_s": wl.ranks * wl.tokens / (makespan * 1e-9),
        "makespan_ns": makespan,
        **floors(run.timed, hw, wl.ranks),
    }
    # MFU over the layer's makespan on every rank (not each rank's own busy window)
    meta["mfu_makespan"] = meta["flops"] / (meta["peak_flops"] * makespan * 1e-9)
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
    run = execute(wl, hw, opts, options.get("progress"))
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
