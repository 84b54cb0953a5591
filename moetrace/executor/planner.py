"""The tile schedule's offline planner: HyperParallel-MoE pre-generates each core's task order
before the run; this module builds the candidate plans (transfer order x HBM split x per-core
order), times them and keeps the fastest. Choosing among pre-generated plans is offline work,
so it is fair to the static schedule; the candidates are listed in docs/executor.md.

Candidates (each schedule lists its own: `Schedule.transfer_orders`, `hbm_biases` and
`rival_plans` in `executor/schedules/`): for the tile schedule, two transfer orders (arrival
rotation, expert-major) x the split of HBM between the cube and vector pools
(`schedules.tile.HBM_BIASES`) x per-core orders (the vectorised static scheduler; where the
planner times at most `EVENT_PLAN_LIMIT` tasks per candidate also the stage-priority and FIFO
list schedules, frozen into static orders) and, on runs of at most `CHUNKED_PLAN_LIMIT` tasks,
the chunked operator-level plans (`schedules.tile.CHUNKED_PLANS`). Other schedules have one
candidate.

What a candidate costs is the tasks timed for it (`planned_tasks`): a rotation-symmetric run
(`symmetry.symmetry`) is timed on the tasks of one block of `period` ranks alone (`executor.fold`,
exact), so its tile candidates cost EP / period times fewer tasks than the whole run and get
every per-core order and HBM split up to that many times `EVENT_PLAN_LIMIT` tasks. The limit
depends on the run, not on whether it is folded: the full and the folded simulation of one run
try the same candidates and keep the same plan. The chunked graphs are not rotation-symmetric
(several micro-batches, no comm AIV), so they cost the whole run's tasks and keep the limit on
it.

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

from moetrace.executor.credits import CreditDeadlock, retime_with_credits
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
    get_schedule,
    lane_layout,
    schedule,
)
from moetrace.executor.taskgraph import TaskGraph
from moetrace.executor.workload import Workload

EVENT_PLAN_LIMIT = 200_000  # tasks: above this the event-loop plans cost more than they are worth
# tasks: the chunked plans are candidates on runs of at most this many (their graphs are never
# folded: the whole run's tasks; docs/executor.md gives what a larger limit would win and cost)
CHUNKED_PLAN_LIMIT = EVENT_PLAN_LIMIT
CHUNKED_MARGIN = 0.02  # a chunked plan is kept only if this much faster than the best tile plan


@dataclass
class Plan:
    """The plan the planner kept: its options, durations, start (ns) and lane of every task."""

    options: ScheduleOptions
    timed: Timed
    start: np.ndarray
    lane: np.ndarray
    name: str
    graph: TaskGraph  # the candidate's task graph (a chunked plan has its own)

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
    """The fastest candidate plan of `opts` (its schedule's candidates and rival plans).

    exhaustive: time every candidate, none skipped by its lower bound (the same result, slower;
    the reference the tests compare the pruned search with)."""
    sched = get_schedule(opts.schedule)
    orders = sched.transfer_orders(opts)
    if (
        len(orders) == 2
        and not exhaustive
        and wl.experts_per_rank <= 2
        and np.array_equal(graph.seq_expert, graph.seq)
    ):
        # the expert-major order is the arrival order here (same transfer order, same live
        # weights): its candidates would tie with the arrival ones, which win ties
        orders = ("arrival",)
    small = planned_tasks(graph) <= EVENT_PLAN_LIMIT
    biases = sched.hbm_biases(small)
    cands: list[tuple[TaskGraph, ScheduleOptions]] = [
        (graph, dataclasses.replace(opts, order=order, aic_hbm_bias=bias))
        for order, bias in itertools.product(orders, biases)
    ]
    best = _search(cands, wl, hw, exhaustive, None)
    # rival plans (tile: the operator-level chunked plans, `CHUNKED_PLANS`; their graphs: the
    # whole run's size): kept only if more than `CHUNKED_MARGIN` faster than the best of the
    # schedule's own plans, so a tile run stays a tile run unless the chunked plan clearly wins
    # (and tile never loses to it by more)
    rivals = sched.rival_plans(graph, wl, opts, graph.full_tasks <= CHUNKED_PLAN_LIMIT)
    if rivals:
        limit = None if best is None else best.makespan_ns / (1 + CHUNKED_MARGIN)
        rival = _search(rivals, wl, hw, exhaustive, limit)
        if rival is not None and (limit is None or rival.makespan_ns < limit):
            best = rival
    if best is None:
        raise CreditDeadlock(
            "no candidate plan can honour the receive buffer (recv_buffer_bytes): its static "
            "orders would wait for room only a later task frees; give a larger window"
        )
    return best


def _search(
    cands: list[tuple[TaskGraph, ScheduleOptions]],
    wl: Workload,
    hw: Hardware,
    exhaustive: bool,
    limit: float | None,
) -> Plan | None:
    """The fastest of `cands` (least makespan, ties to the earlier candidate), or None if none
    can honour the receive window. limit: candidates whose lower bound is at least this (ns)
    are of no interest (skipped unless exhaustive); None if no limit."""
    # only the arrays of the candidate timed first are kept (a Timed holds ~20 arrays per
    # task); the others are rebuilt if their bound does not skip them
    bounds: list[tuple[int, int, int]] = []
    kept: Timed | None = None
    for index, (g, cand) in enumerate(cands):
        timed = schedule(g, wl, hw, cand)
        bound = lane_work_bound(timed, lane_layout(hw, cand))
        if not bounds or (bound, index) < min(c[:2] for c in bounds):
            kept = timed
        bounds.append((bound, index, planned_tasks(g)))
        del timed
    bounds.sort(key=lambda c: (c[0], c[1]))
    best: Plan | None = None
    best_key = (0, 0)
    for bound, index, n_planned in bounds:
        current, kept = kept, None
        g, cand = cands[index]
        layout = lane_layout(hw, cand)
        for sub, name in enumerate(plan_names(cand, n_planned <= EVENT_PLAN_LIMIT)):
            key = (index, sub)
            if not exhaustive and limit is not None and bound >= limit:
                continue  # it cannot matter
            if best is not None and not exhaustive and (bound, key) >= (best.makespan_ns, best_key):
                continue  # its makespan is at least the bound: it cannot be kept
            if current is None:
                current = schedule(g, wl, hw, cand)
            try:
                start, lane = time_plan(name, current, layout)
            except CreditDeadlock:  # this order cannot honour the receive window
                continue
            label = get_schedule(cand.schedule).plan_label(cand, name)
            plan = Plan(cand, current, start, lane, label, g)
            if best is None or (plan.makespan_ns, key) < (best.makespan_ns, best_key):
                best, best_key = plan, key
    return best


def planned_tasks(graph: TaskGraph) -> int:
    """Tasks the planner times per candidate of this run: those of ranks 0 .. period-1 alone in
    a rotation-symmetric run (the same whether or not `graph` is folded), else the whole run's."""
    sym = graph.symmetric
    return graph.full_tasks // sym.copies if sym is not None else graph.full_tasks


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
    if get_schedule(cand.schedule).static_orders and small_graph:
        return ["static", "stage priority", "fifo"]
    return ["static"]


def time_plan(
    name: str, timed: Timed, layout: dict[int, tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, lane) of one plan of `plan_names`."""
    if name == "static":
        start, lane, _ = run_schedule(timed, layout)
        return start, lane
    start, lane = list_schedule(timed, layout, by_stage=name == "stage priority")
    return retime_with_credits(timed, lane, start), lane
