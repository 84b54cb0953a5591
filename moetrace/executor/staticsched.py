"""The tile schedule's offline scheduler (HyperParallel-MoE pre-generates each core's task
sequence), vectorised across ranks and core pools: no per-task Python loop.

1. Plan: every task timed with unlimited cores (data edges, FIFO link ports), one numpy
   longest-path sweep. The time its inputs are ready in that plan is its priority: earlier runs
   first, on cores and on link ports alike; ties in the transfers' rotation order (sender s
   sends to s+1, s+2, ... so receivers are not hit by incast).
2. Each pool of each rank (AIC, vector AIV, comm AIV) takes its tasks in that order, each onto
   the core that frees first, never before its planned ready time (`ordered_list_schedule`:
   each numpy step places a batch of up to one task per core in every (rank, pool) group at
   once; the one-task-per-step version it replaced is kept in moetrace.testing.
   schedule_reference).
3. The engine times the per-core orders (`dag.chain_longest_path` over data edges + lane
   order).

The order (planned ready time, rotation) increases strictly along every data edge and every lane, so
the per-core orders can never deadlock. On the test cases this reproduces the makespan of a
stage-priority event-driven list scheduler (`listsched.list_schedule`, kept for `--dynamic` and
as the test reference) to within a few per cent, in a fraction of its time.
"""

from __future__ import annotations

import heapq

import numpy as np

from moetrace.executor.contention import lex_order
from moetrace.executor.dag import DataEdges, chain_longest_path, chain_starts, lane_order
from moetrace.executor.schedules import POOL_AIC, POOL_AIV, POOL_AIVC, POOL_RX, POOL_TX, Timed

_BIG = np.iinfo(np.int64).max // 4
FEW_GROUPS = 8  # (rank, pool) groups up to which a heap per group beats the numpy steps


def ordered_list_schedule(
    group: np.ndarray, release: np.ndarray, dur: np.ndarray, cores: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(start, core index within its group) of tasks given in priority order (index order).

    Group g has `cores[g]` identical cores; each task, in index order within its group, goes to
    the core that frees first (lowest index on ties) and starts at max(that time, release).

    Each numpy step places a batch of every group's next tasks at once: with its cores sorted
    by (free time, index), its j-th next task takes the j-th of them as long as that core
    frees strictly before every task of the batch placed ahead of it ends (so no core freed by
    the batch is the one that frees first). A backlogged pool places a task per core per step,
    so the steps are about the largest pool's tasks over its cores (not its tasks).
    """
    n = group.size
    start = np.zeros(n, dtype=np.int64)
    core_of = np.zeros(n, dtype=np.int64)
    if n == 0:
        return start, core_of
    n_groups = int(group.max()) + 1
    if n_groups <= FEW_GROUPS:
        return _heap_list_schedule(group, release, dur, cores)
    order = lex_order(group)  # task positions grouped, priority order within each group
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    width = int(cores.max())
    core_free = np.where(np.arange(width)[None, :] < cores[:, None], 0, _BIG).astype(np.int64)
    # pad every group's tasks by `width` placeholders so a batch can always read `width` ahead
    rel = np.concatenate([release[order], np.zeros(width, dtype=np.int64)])
    dur_o = np.concatenate([dur[order], np.zeros(width, dtype=np.int64)])
    start_o = np.zeros(n + width, dtype=np.int64)
    core_o = np.zeros(n + width, dtype=np.int64)
    nxt = bounds[:-1].copy()  # next task position of every group
    end = bounds[1:]
    active = np.flatnonzero(nxt < end)
    ahead = np.arange(width)
    while active.size:
        free = core_free[active]
        # cores by (free time, index): the order a heap of (free, core) would hand them out
        by_free = np.argsort(free, axis=1, kind="stable")
        sorted_free = np.take_along_axis(free, by_free, axis=1)
        pos = nxt[active, None] + ahead
        t = np.maximum(sorted_free, rel[pos])
        t_end = t + dur_o[pos]
        # the j-th takes the j-th core iff that core frees before the batch's earlier ends
        earlier_end = np.minimum.accumulate(t_end, axis=1)
        fits = np.empty_like(t_end, dtype=bool)
        fits[:, 0] = True
        np.less(sorted_free[:, 1:], earlier_end[:, :-1], out=fits[:, 1:])
        fits &= pos < end[active, None]
        count = np.where(fits.all(axis=1), width, fits.argmin(axis=1))
        take = ahead[None, :] < count[:, None]
        rows = np.broadcast_to(active[:, None], take.shape)[take]
        placed = pos[take]
        start_o[placed] = t[take]
        core_o[placed] = by_free[take]
        core_free[rows, by_free[take]] = t_end[take]
        nxt[active] += count
        active = active[nxt[active] < end[active]]
    start[order] = start_o[:n]
    core_of[order] = core_o[:n]
    return start, core_of


def _heap_list_schedule(
    group: np.ndarray, release: np.ndarray, dur: np.ndarray, cores: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`ordered_list_schedule` one task at a time, a heap of (free time, core) per group: with
    few groups (one rank's pools, as in a folded graph) the numpy version's steps would be one
    per task, each costing ten heap operations."""
    heaps = [[(0, c) for c in range(k)] for k in cores.tolist()]  # sorted: already heaps
    start = []
    core_of = []
    replace = heapq.heapreplace
    for g, ready, d in zip(group.tolist(), release.tolist(), dur.tolist(), strict=True):
        heap = heaps[g]
        free, core = heap[0]  # the core that frees first, lowest index on ties
        t = free if free > ready else ready
        replace(heap, (t + d, core))
        start.append(t)
        core_of.append(core)
    return np.array(start, dtype=np.int64), np.array(core_of, dtype=np.int64)


def static_schedule(
    t: Timed, layout: dict[int, tuple[int, int]], edges: DataEdges | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(lane order key, global lane) of the tile schedule's static per-core orders.
    edges: `t`'s data edges indexed (`DataEdges.build`), if the caller has them."""
    n = t.n
    if edges is None:
        edges = DataEdges.build(n, t.src, t.dst, t.w)
    # the plan: data edges + FIFO TX/RX ports in seq order (the step lane's nodes carry no seq)
    link_lane = np.where(np.isin(t.pool, [POOL_TX, POOL_RX]), t.rank * 8 + t.pool, -1)
    chains = lane_order(link_lane, t.seq)
    planned = chain_longest_path(t.dur, edges, chains, chain_starts(link_lane, chains))
    # when each task's inputs are ready in the plan (for links: before their FIFO wait there)
    plan = np.zeros(n, dtype=np.int64)
    np.maximum.at(plan, t.dst, planned[t.src] + t.dur[t.src] + t.w)
    by_seq = lex_order(t.seq)
    rotation = np.empty(n, dtype=np.int64)
    rotation[by_seq] = np.arange(n)
    key = plan * (n + 1) + rotation  # the priority
    base = np.zeros(8, dtype=np.int64)
    size = np.zeros(8, dtype=np.int64)
    for pool, (b0, s0) in layout.items():
        base[pool], size[pool] = b0, s0
    lane = t.rank * t.lanes_per_rank + base[t.pool]  # FIFO pools: their single lane
    on_core = np.isin(t.pool, [POOL_AIC, POOL_AIV, POOL_AIVC])
    ids = np.flatnonzero(on_core)
    ids = ids[lex_order(key[ids])]
    # np.unique(cell, return_inverse=True) by counting: (rank, pool) cells are few and dense
    cell = t.rank[ids] * 8 + t.pool[ids]
    present = np.bincount(cell) > 0
    groups = np.flatnonzero(present)
    group = (np.cumsum(present) - 1)[cell]
    start0, core = ordered_list_schedule(group, plan[ids], t.dur[ids], size[groups % 8])
    lane[ids] += core
    # lane order: cores by their scheduled start, link ports by planned ready time, made
    # strictly increasing along every data edge (so the orders cannot deadlock); ties by rotation
    floor = plan.copy()
    floor[ids] = start0
    # longest path over the data edges alone (unit durations, no delays, from `floor`)
    one = np.ones(n, dtype=np.int64)
    no_lanes = np.zeros(0, dtype=np.int64)
    no_delay = edges.with_delays(np.zeros(t.src.size, dtype=np.int64))
    order = chain_longest_path(one, no_delay, no_lanes, no_lanes.astype(bool), floor)
    return order * (n + 1) + rotation, lane
