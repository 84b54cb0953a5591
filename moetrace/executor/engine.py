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

from moetrace.executor.contention import lex_order
from moetrace.executor.listsched import list_schedule
from moetrace.executor.schedules import POOL_AIC, POOL_AIV, POOL_AIVC, POOL_RX, POOL_TX, Timed
from moetrace.executor.staticsched import static_schedule

Level = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class CycleError(RuntimeError):
    """The scheduled graph has a cycle (a bug in a schedule, never bad user input)."""


def longest_path(
    n: int,
    dur: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    w: np.ndarray,
    floor: np.ndarray | None = None,
    levels: list[Level] | None = None,
) -> np.ndarray:
    """Earliest start (int64 ns) of every node, with start[d] >= start[s] + dur[s] + w per edge
    (and start >= floor when given).

    A vectorised Kahn sweep: each iteration takes every node whose predecessors are all done
    (one topological level, across all ranks and tiles), relaxes all their out-edges with
    `np.maximum.at` and finds the next level. The cost is a few numpy calls per level.
    levels: when a list is given, each level's (nodes, out-degrees, targets, edge ids) is
    appended to it, so `replay_levels` can re-time the same graph (or a subgraph: edges of
    delay -inf) with other durations, delays and floors.
    """
    order = np.argsort(src, kind="stable")
    s_dst, s_w = dst[order], w[order]
    deg = np.bincount(src, minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=ptr[1:])
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    start = np.zeros(n, dtype=np.int64) if floor is None else floor.astype(np.int64)
    steps = np.arange(src.size + 1)
    frontier = np.flatnonzero(indeg == 0)
    done = 0
    max_at, sub_at, repeat = np.maximum.at, np.subtract.at, np.repeat
    slot = np.zeros(n, dtype=np.int64)
    while frontier.size:
        done += frontier.size
        cnt = deg[frontier]
        csum = cnt.cumsum()
        total = int(csum[-1])
        if total == 0:
            break
        offs = repeat(ptr[frontier] - csum + cnt, cnt)
        offs += steps[:total]
        targets = s_dst[offs]
        cand = repeat(start[frontier] + dur[frontier], cnt)
        cand += s_w[offs]
        max_at(start, targets, cand)
        if levels is not None:
            levels.append((frontier, cnt, targets, order[offs]))
        sub_at(indeg, targets, 1)
        ready = targets[indeg[targets] == 0]
        # distinct without sorting or hashing: keep the position that wrote last
        slot[ready] = steps[: ready.size]
        frontier = ready[slot[ready] == steps[: ready.size]]
    if done != n:
        raise CycleError(f"scheduled graph has a cycle ({n - done} tasks never became ready)")
    return start


def replay_levels(
    n: int, dur: np.ndarray, w: np.ndarray, levels: list[Level], floor: np.ndarray | None = None
) -> np.ndarray:
    """`longest_path` of a graph already swept once (its recorded `levels`) with new durations,
    edge delays `w` (by edge id) and floor: the levels do not depend on them, so only the
    relaxations are redone (no sort, no in-degree count, no ready detection). An edge whose
    delay is hugely negative never binds: the same levels then serve any subgraph."""
    start = np.zeros(n, dtype=np.int64) if floor is None else floor.astype(np.int64)
    max_at, repeat = np.maximum.at, np.repeat
    for frontier, cnt, targets, edge in levels:
        cand = repeat(start[frontier] + dur[frontier], cnt)
        cand += w[edge]
        max_at(start, targets, cand)
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
    """Edges task -> next task on the same lane, ordered by (key, id); lane < 0 means no lane.

    Returned sorted by source (each task has at most one successor, so a scatter sorts them):
    appended to the data edges, which come nearly sorted, `longest_path`'s stable sort by
    source then merges two sorted runs instead of sorting a shuffled third of the edges."""
    ids = np.flatnonzero(lane >= 0)
    order = ids[lex_order(key[ids], lane[ids])]
    same = lane[order[1:]] == lane[order[:-1]]
    successor = np.full(lane.size, -1, dtype=np.int64)
    successor[order[:-1][same]] = order[1:][same]
    first = np.flatnonzero(successor >= 0)
    return first, successor[first]


def assign_lanes(t: Timed, layout: dict[int, tuple[int, int]], plan: np.ndarray) -> np.ndarray:
    """Global lane of every task: pools dealt round-robin in planned-start order, per rank."""
    base = np.zeros(8, dtype=np.int64)
    size = np.ones(8, dtype=np.int64)
    for pool, (b, s) in layout.items():
        base[pool], size[pool] = b, s
    group = t.rank * 8 + t.pool
    order = lex_order(plan, group)
    g = group[order]
    first = np.r_[True, g[1:] != g[:-1]]
    pos = np.arange(t.n) - np.maximum.accumulate(np.where(first, np.arange(t.n), 0))
    lane = np.empty(t.n, dtype=np.int64)
    lane[order] = pos % size[t.pool[order]] + base[t.pool[order]]
    return t.rank * t.lanes_per_rank + lane


def plan_starts(t: Timed, links_only: bool = False) -> np.ndarray:
    """Planned starts: data edges + FIFO link/stream lanes (ordered by seq); cores unlimited.
    links_only: only the TX/RX ports are FIFO (the step lane's completion nodes carry no seq)."""
    fifo = ~np.isin(t.pool, [POOL_AIC, POOL_AIV, POOL_AIVC])
    if links_only:
        fifo = np.isin(t.pool, [POOL_TX, POOL_RX])
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
        key, lane = static_schedule(t, layout)
    else:
        key = plan_starts(t)
        lane = assign_lanes(t, layout, key)
    a, b = lane_chain(lane, key)
    src = np.concatenate([t.src, a])
    dst = np.concatenate([t.dst, b])
    w = np.concatenate([t.w, np.zeros(a.size, dtype=np.int64)])
    return lane, src, dst, w


def run_static(t: Timed, layout: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) of every task under the static per-core order (durations t.dur)."""
    lane, src, dst, w = static_graph(t, layout)
    return longest_path(t.n, t.dur, src, dst, w), lane


def run_dynamic(t: Timed, layout: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) with a run-time FIFO ready queue per pool (--dynamic)."""
    return list_schedule(t, layout, by_stage=False)


def arrival_order_ports(
    t: Timed, lane: np.ndarray, start: np.ndarray, rounds: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """(start, lane) after letting every link port take its transfers in the order their data
    became ready in the previous timing (a receiver takes what arrives first), cores keeping
    their order; repeated `rounds` times, the best makespan kept.

    Cannot deadlock: with potential (ready time for port tasks, start for the others; ties by
    id, which grows along every data edge) every data edge and every lane edge goes up."""
    port = np.isin(t.pool, [POOL_TX, POOL_RX])
    best_start, best_span = start, int((start + t.dur).max())
    for _ in range(rounds):
        ready = np.zeros(t.n, dtype=np.int64)
        np.maximum.at(ready, t.dst, start[t.src] + t.dur[t.src] + t.w)
        key = np.where(port, ready, start)
        a, b = lane_chain(lane, key)
        w = np.concatenate([t.w, np.zeros(a.size, dtype=np.int64)])
        start = longest_path(t.n, t.dur, np.r_[t.src, a], np.r_[t.dst, b], w)
        span = int((start + t.dur).max())
        if span < best_span:
            best_start, best_span = start, span
    return best_start, lane


def run_schedule(
    t: Timed, layout: dict[int, tuple[int, int]], dynamic: bool = False
) -> tuple[np.ndarray, np.ndarray, Timed]:
    """(start ns, lane, timed) of the schedule's per-core orders. The durations already hold
    every shared resource's share (HBM: `schedules.hbm_rates`), so one timing is the run."""
    if dynamic:
        start, lane = run_dynamic(t, layout)
        return start, lane, t
    lane, src, dst, w = static_graph(t, layout)
    start = longest_path(t.n, t.dur, src, dst, w)
    if t.list_scheduled:  # tile: the ports serve transfers in arrival order
        start, lane = arrival_order_ports(t, lane, start)
    return start, lane, t
