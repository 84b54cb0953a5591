"""Event-driven list scheduling (a Python event loop): the --dynamic ablation's run-time ready
queue, and the stage-priority list scheduler that the vectorised offline scheduler
(staticsched.py) replaced, kept as its test reference.

When a core of a pool (AIC, vector AIV, comm AIV of one rank) is free it takes the best ready
task of that pool. Link ports, streams and the step lane are FIFO servers that take a task as
soon as it is released (its start may lie before the event that released it: a transfer's RX
starts one latency after its TX started). Heap entries are packed into single Python ints
(time | kind | id, and priority | release | static rank) because tuple comparisons dominate
the cost of a pure-Python event loop.
"""

from __future__ import annotations

import heapq

import numpy as np

from moetrace.executor.dag import CycleError
from moetrace.executor.schedules import POOL_AIC, POOL_AIV, POOL_AIVC, Timed
from moetrace.executor.taskgraph import T

_TIME_BITS = 48  # release times up to 2.8e14 ns


def priorities(t: Timed, by_stage: bool) -> np.ndarray:
    """Smaller runs first. by_stage: the latest pipeline stage first (combine before GEMM2
    before GEMM1 ...), except the final unpermute, which feeds nothing and yields to all."""
    if not by_stage:
        return np.zeros(t.n, dtype=np.int64)
    return np.where(t.type == T["unpermute"], 1, -t.type) + 32


def list_schedule(
    t: Timed, layout: dict[int, tuple[int, int]], by_stage: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) of every task.

    by_stage=True is the tile schedule's offline scheduler: priority by stage (see
    `priorities`), then release time, then the rotation order of transfers (seq: sender s sends
    to s+1, s+2, ... so receivers are not hit by incast), then id. It drains row tiles, so
    intermediates stay in L2 and combine overlaps the GEMMs. by_stage=False is a run-time ready
    queue: FIFO by release time (then seq, id).
    """
    n = t.n
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    id_bits = max(21, n.bit_length() + 1)
    id_mask = (1 << (id_bits - 1)) - 1
    ready_flag = 1 << (id_bits - 1)
    order = np.lexsort((np.arange(n), t.seq))
    srank = np.empty(n, dtype=np.int64)
    srank[order] = np.arange(n)
    by_rank = order.tolist()
    # events at the same time are taken in (seq, id) order, not id order: in a rotation-
    # symmetric run seq breaks ties as rank 0 does (tiles.build_graph), so every rank's
    # schedule is rank 0's rotated and the one-rank simulation (executor.fold) is exact
    tie = srank.tolist()
    rank_bits = n.bit_length()
    rank_mask = (1 << rank_bits) - 1
    prio = priorities(t, by_stage)
    shift = _TIME_BITS + rank_bits
    base_key = [(p << shift) | r for p, r in zip(prio.tolist(), srank.tolist(), strict=True)]

    src_order = np.argsort(t.src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(t.src, minlength=n), out=ptr[1:])
    sptr = ptr.tolist()
    sdst = t.dst[src_order].tolist()
    sw = t.w[src_order].tolist()
    indeg = np.bincount(t.dst, minlength=n).tolist()
    group = (t.rank * 8 + t.pool).tolist()
    fifo_pool = ~np.isin(t.pool, [POOL_AIC, POOL_AIV, POOL_AIVC])
    fifo = fifo_pool.tolist()
    dur = t.dur.tolist()
    ranks = int(t.rank.max()) + 1
    lpr = t.lanes_per_rank
    free: list[list[int]] = [[] for _ in range(ranks * 8)]
    first_lane = [0] * (ranks * 8)
    for r in range(ranks):
        for pool, (b0, size) in layout.items():
            free[r * 8 + pool] = [r * lpr + b0 + i for i in range(size)]
            first_lane[r * 8 + pool] = r * lpr + b0
    queue: list[list[int]] = [[] for _ in range(ranks * 8)]
    lane_free = [0] * (ranks * 8)
    ready = [0] * n
    start = [0] * n
    lane = [0] * n
    events: list[int] = []
    push, pop = heapq.heappush, heapq.heappop

    for i in range(n):
        if indeg[i] == 0:
            if fifo[i]:
                g = group[i]
                start[i] = lane_free[g]
                lane[i] = first_lane[g]
                lane_free[g] += dur[i]
                push(events, ((start[i] + dur[i]) << id_bits) | tie[i])
            else:
                push(events, ready_flag | tie[i])
    while events:
        now = events[0] >> id_bits
        touched: list[int] = []
        while events and (events[0] >> id_bits) == now:
            e = pop(events)
            i = by_rank[e & id_mask]
            g = group[i]
            if e & ready_flag:
                push(queue[g], base_key[i] | (ready[i] << rank_bits))
                touched.append(g)
                continue
            end = start[i] + dur[i]
            if not fifo[i]:
                push(free[g], lane[i])
                touched.append(g)
            for k in range(sptr[i], sptr[i + 1]):
                j = sdst[k]
                tj = end + sw[k]
                if tj > ready[j]:
                    ready[j] = tj
                indeg[j] -= 1
                if indeg[j]:
                    continue
                gj = group[j]
                if fifo[j]:
                    s0 = ready[j]
                    if lane_free[gj] > s0:
                        s0 = lane_free[gj]
                    start[j] = s0
                    lane[j] = first_lane[gj]
                    lane_free[gj] = s0 + dur[j]
                    push(events, ((s0 + dur[j]) << id_bits) | tie[j])
                elif ready[j] <= now:
                    push(queue[gj], base_key[j] | (ready[j] << rank_bits))
                    touched.append(gj)
                else:
                    push(events, (ready[j] << id_bits) | ready_flag | tie[j])
        for g in sorted(set(touched)):
            q, f = queue[g], free[g]
            while q and f:
                j = by_rank[pop(q) & rank_mask]
                start[j] = now
                lane[j] = pop(f)
                push(events, ((now + dur[j]) << id_bits) | tie[j])
    if any(indeg):
        raise CycleError("scheduled graph has a cycle")
    return np.array(start, dtype=np.int64), np.array(lane, dtype=np.int64)
