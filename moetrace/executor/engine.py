"""Timing engine: start times of every task of every rank, simulated together.

Static schedules (what HyperParallel-MoE's scheduler pre-generates) fix each core's task order,
so the run is a longest-path problem on a DAG whose edges are the data dependencies (with a
delay each) plus "next task on the same lane". `longest_path` solves it level by level with numpy
across all ranks and tiles at once (a vectorised Kahn sweep). The static order itself comes from
a plan: the same graph with only the link ports and streams as FIFO servers (cores unlimited);
each pool's tasks are then dealt round-robin to its cores in planned-start order.

`dynamic` instead serves a ready queue at run time (earliest-free core, FIFO by release), with a
heap: the ablation of the static order. `heap_longest_path` is the plain heapq event loop used as
the reference in tests and as the baseline in benchmarks/bench_simulate.py.
"""

from __future__ import annotations

import heapq

import numpy as np

from moetrace.executor.schedules import POOL_AIC, POOL_AIV, POOL_AIVC, Timed
from moetrace.executor.tiles import T


class CycleError(RuntimeError):
    """The scheduled graph has a cycle (a bug in a schedule, never bad user input)."""


def longest_path(
    n: int, dur: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray
) -> np.ndarray:
    """Earliest start (int64 ns) of every node, with start[d] >= start[s] + dur[s] + w per edge."""
    order = np.argsort(src, kind="stable")
    s_dst, s_w = dst[order], w[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    start = np.zeros(n, dtype=np.int64)
    frontier = np.flatnonzero(indeg == 0)
    done = 0
    while frontier.size:
        done += frontier.size
        lo = ptr[frontier]
        cnt = ptr[frontier + 1] - lo
        total = int(cnt.sum())
        if total == 0:
            break
        offs = np.repeat(lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(total)
        targets = s_dst[offs]
        cand = np.repeat(start[frontier] + dur[frontier], cnt) + s_w[offs]
        np.maximum.at(start, targets, cand)
        np.subtract.at(indeg, targets, 1)
        ready = targets[indeg[targets] == 0]
        frontier = np.unique(ready)
    if done != n:
        raise CycleError(f"scheduled graph has a cycle ({n - done} tasks never became ready)")
    return start


def heap_longest_path(
    n: int, dur: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray
) -> np.ndarray:
    """The same answer as `longest_path` from a plain heapq event loop (one task at a time)."""
    succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, c in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        succ[a].append((b, c))
    indeg = np.bincount(dst, minlength=n).tolist()
    ready = [0] * n
    durs = dur.tolist()
    start = [0] * n
    events = [(0 + durs[i], i) for i in range(n) if indeg[i] == 0]
    heapq.heapify(events)
    while events:
        end, i = heapq.heappop(events)
        for j, delay in succ[i]:
            t = end + delay
            if t > ready[j]:
                ready[j] = t
            indeg[j] -= 1
            if indeg[j] == 0:
                start[j] = ready[j]
                heapq.heappush(events, (ready[j] + durs[j], j))
    return np.array(start, dtype=np.int64)


def lane_chain(lane: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges task -> next task on the same lane, ordered by (key, id); lane < 0 means no lane."""
    ids = np.flatnonzero(lane >= 0)
    order = ids[np.lexsort((ids, key[ids], lane[ids]))]
    same = lane[order[1:]] == lane[order[:-1]]
    return order[:-1][same], order[1:][same]


def assign_lanes(t: Timed, layout: dict[int, tuple[int, int]], plan: np.ndarray) -> np.ndarray:
    """Global lane of every task: pools dealt round-robin in planned-start order, per rank."""
    base = np.zeros(8, dtype=np.int64)
    size = np.ones(8, dtype=np.int64)
    for pool, (b, s) in layout.items():
        base[pool], size[pool] = b, s
    ids = np.arange(t.n)
    group = t.rank * 8 + t.pool
    order = np.lexsort((ids, plan, group))
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]]
    pos = np.arange(t.n) - np.maximum.accumulate(np.where(first, np.arange(t.n), 0))
    lane = np.empty(t.n, dtype=np.int64)
    lane[order] = pos % size[t.pool[order]] + base[t.pool[order]]
    return t.rank * t.lanes_per_rank + lane


def plan_starts(t: Timed) -> np.ndarray:
    """Planned starts: data edges + FIFO link/stream lanes (ordered by seq); cores unlimited."""
    fifo = ~np.isin(t.pool, [POOL_AIC, POOL_AIV, POOL_AIVC])
    lane = np.where(fifo, t.rank * 8 + t.pool, -1)
    a, b = lane_chain(lane, t.seq)
    src = np.concatenate([t.src, a])
    dst = np.concatenate([t.dst, b])
    w = np.concatenate([t.w, np.zeros(a.size, dtype=np.int64)])
    return longest_path(t.n, t.dur, src, dst, w)


def static_graph(
    t: Timed, layout: dict[int, tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lane, src, dst, w) of the static schedule: data edges plus lane-order edges."""
    if t.list_scheduled:
        key, lane = list_schedule(t, layout, by_stage=True)
    else:
        key = plan_starts(t)
        lane = assign_lanes(t, layout, key)
    a, b = lane_chain(lane, key)
    src = np.concatenate([t.src, a])
    dst = np.concatenate([t.dst, b])
    w = np.concatenate([t.w, np.zeros(a.size, dtype=np.int64)])
    return lane, src, dst, w


def run_static(t: Timed, layout: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) of every task under the static per-core order."""
    lane, src, dst, w = static_graph(t, layout)
    return longest_path(t.n, t.dur, src, dst, w), lane


def run_dynamic(t: Timed, layout: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) with a run-time FIFO ready queue per pool (--dynamic)."""
    return list_schedule(t, layout, by_stage=False)


def list_schedule(
    t: Timed, layout: dict[int, tuple[int, int]], by_stage: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Event-driven list scheduling: when a core of a pool is free, it takes the best ready task.

    by_stage=True (the tile schedule's offline scheduler): the latest pipeline stage first
    (combine before GEMM2 before GEMM1 ...; the final unpermute, which feeds nothing, yields to
    all), then release time, then the rotation order of
    transfers (seq: sender s sends to s+1, s+2, ... to avoid incast), then id; this drains row tiles
    so intermediates stay in L2 and combine overlaps the GEMMs. by_stage=False (a run-time
    ready queue): FIFO by release time (then seq, id). Link ports, streams and the step lane
    are FIFO servers
    that take a transfer as soon as it is released. Returns (start ns, global lane).
    """
    n = t.n
    lpr = t.lanes_per_rank
    succ: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, c in zip(t.src.tolist(), t.dst.tolist(), t.w.tolist(), strict=True):
        succ[a].append((b, c))
    indeg = np.bincount(t.dst, minlength=n).tolist()
    rank, pool, dur = t.rank.tolist(), t.pool.tolist(), t.dur.tolist()
    prio = np.where(t.type == T["unpermute"], 1, -t.type)  # unpermute feeds nothing: it yields
    stage = (prio if by_stage else np.zeros(n, dtype=np.int64)).tolist()
    seq = t.seq.tolist()
    fifo = [p not in (POOL_AIC, POOL_AIV, POOL_AIVC) for p in range(8)]
    ranks = int(t.rank.max()) + 1 if n else 0
    free: dict[int, list[int]] = {}
    queue: dict[int, list[tuple[int, int, int, int]]] = {}
    lane_free: dict[int, int] = {}
    for r in range(ranks):
        for p, (b0, size) in layout.items():
            g = r * 8 + p
            free[g] = [r * lpr + b0 + i for i in range(size)]
            queue[g] = []
            lane_free[g] = 0
    ready = [0] * n
    start = [0] * n
    lane = [0] * n
    events: list[tuple[int, int, int]] = []  # (time, 0 finish | 1 ready, task)

    def release(j: int, now: int) -> None:
        g = rank[j] * 8 + pool[j]
        if fifo[pool[j]]:
            s = max(ready[j], lane_free[g])
            start[j] = s
            lane[j] = free[g][0]
            lane_free[g] = s + dur[j]
            heapq.heappush(events, (s + dur[j], 0, j))
        elif ready[j] <= now:
            heapq.heappush(queue[g], (stage[j], ready[j], seq[j], j))
            touched.add(g)
        else:
            heapq.heappush(events, (ready[j], 1, j))

    touched: set[int] = set()
    for i in range(n):
        if indeg[i] == 0:
            release(i, 0)
    while events or touched:
        now = events[0][0] if events else 0
        while events and events[0][0] == now:
            _, what, i = heapq.heappop(events)
            if what == 1:
                g = rank[i] * 8 + pool[i]
                heapq.heappush(queue[g], (stage[i], ready[i], seq[i], i))
                touched.add(g)
                continue
            end = start[i] + dur[i]
            if not fifo[pool[i]]:
                g = rank[i] * 8 + pool[i]
                heapq.heappush(free[g], lane[i])
                touched.add(g)
            for j, delay in succ[i]:
                tj = end + delay
                if tj > ready[j]:
                    ready[j] = tj
                indeg[j] -= 1
                if indeg[j] == 0:
                    release(j, now)
        for g in sorted(touched):
            q, f = queue[g], free[g]
            while q and f:
                _, _, _, j = heapq.heappop(q)
                start[j] = now
                lane[j] = heapq.heappop(f)
                heapq.heappush(events, (now + dur[j], 0, j))
        touched.clear()
    if any(indeg):
        raise CycleError("scheduled graph has a cycle")
    return np.array(start, dtype=np.int64), np.array(lane, dtype=np.int64)
