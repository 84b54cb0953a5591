"""The tile schedule's offline planner: HyperParallel-MoE pre-generates each core's task order
before the run; this module builds the candidate plans (transfer order x HBM split x per-core
order), times them and keeps the fastest. Choosing among pre-generated plans is offline work,
so it is fair to the static schedule; the candidates are listed in docs/executor.md.

The search is bound-pruned: every candidate's durations first, then timed in order of a cheap
lower bound of its makespan (`lane_work_bound`); a plan whose bound cannot beat the best so far
is skipped. The winner is the one an exhaustive search keeps (least makespan, ties to the
earlier candidate), so the pruning changes only the time spent, never the answer.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np

from moetrace.executor.engine import run_schedule
from moetrace.executor.hardware import Hardware
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
from moetrace.executor.tiles import TaskGraph
from moetrace.executor.workload import Workload

# tile: weight of the AIC pool's bytes when the planner splits HBM between AIC and vector AIV
# (below 1 favours the HBM-bound vector work: permute, unpermute); fewer on large graphs
HBM_BIASES = (0.25, 0.5, 1.0)
HBM_BIASES_LARGE = (1.0,)
EVENT_PLAN_LIMIT = 200_000  # tasks: above this the event-loop plans cost more than they are worth


@dataclass
class Plan:
    """The plan the planner kept: its options, durations, start (ns) and lane of every task."""

    options: ScheduleOptions
    timed: Timed
    start: np.ndarray
    lane: np.ndarray
    name: str

    @property
    def makespan_ns(self) -> int:
        return int((self.start + self.timed.dur).max())


def best_plan(
    graph: TaskGraph,
    wl: Workload,
    hw: Hardware,
    opts: ScheduleOptions,
    exhaustive: bool = False,
) -> Plan:
    """The fastest candidate plan of `opts` (one candidate unless the schedule is tile).

    exhaustive: time every candidate, none skipped by its lower bound (the same result, slower;
    the reference the tests compare the pruned search with)."""
    layout = lane_layout(hw, opts)
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
    small = graph.full_tasks <= EVENT_PLAN_LIMIT  # a folded graph: the size of the whole run
    biases = (HBM_BIASES if small else HBM_BIASES_LARGE) if tile else (1.0,)
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
        bounds.append((bound, index, cand, timed.n - graph.n + graph.full_tasks))
        del timed
    bounds.sort(key=lambda c: (c[0], c[1]))
    best: Plan | None = None
    best_key = (0, 0)
    for bound, index, cand, n_timed in bounds:
        current, kept = kept, None
        for sub, name in enumerate(plan_names(cand, n_timed <= EVENT_PLAN_LIMIT)):
            key = (index, sub)
            if best is not None and not exhaustive and (bound, key) >= (best.makespan_ns, best_key):
                continue  # its makespan is at least the bound: it cannot be kept
            if current is None:
                current = schedule(graph, wl, hw, cand)
            start, lane = time_plan(name, current, layout)
            label = f"{cand.order}/{name}/hbm-bias {cand.aic_hbm_bias:g}"
            plan = Plan(cand, current, start, lane, label)
            if best is None or (plan.makespan_ns, key) < (best.makespan_ns, best_key):
                best, best_key = plan, key
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


def plan_names(cand: ScheduleOptions, small_graph: bool) -> list[str]:
    """The per-core orders the planner tries for one candidate (see `best_plan`)."""
    if cand.dynamic:
        return ["fifo queue"]
    if cand.schedule == "tile" and small_graph:
        return ["static", "stage priority", "fifo"]
    return ["static"]


def time_plan(
    name: str, timed: Timed, layout: dict[int, tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, lane) of one plan of `plan_names`."""
    if name == "static":
        start, lane, _ = run_schedule(timed, layout)
        return start, lane
    return list_schedule(timed, layout, by_stage=name == "stage priority")
