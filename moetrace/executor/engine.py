"""Timing engine: start times of every task of every rank, simulated together.

Static schedules (what HyperParallel-MoE's scheduler pre-generates) fix each core's task order,
so the run is a longest-path problem on a DAG whose edges are the data dependencies (with a
delay each) plus "next task on the same lane". `dag.chain_longest_path` solves it with numpy
across all ranks and tiles at once. The static order itself comes from a plan: the same graph
with only the link ports and streams as FIFO servers (cores unlimited);
each pool's tasks are then dealt round-robin to its cores in planned-start order.

`dynamic` instead serves a ready queue at run time (earliest-free core, FIFO by release), with a
heap: the ablation of the static order. The longest-path core lives in dag.py.
"""

from __future__ import annotations

import numpy as np

from moetrace.executor.contention import lex_order
from moetrace.executor.credits import retime_with_credits
from moetrace.executor.dag import DataEdges, chain_longest_path, chain_starts, lane_order
from moetrace.executor.listsched import list_schedule
from moetrace.executor.schedules import POOL_AIC, POOL_AIV, POOL_AIVC, POOL_RX, POOL_TX, Timed
from moetrace.executor.staticsched import static_schedule


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
    chains = lane_order(lane, t.seq)
    return chain_longest_path(t.dur, data_edges(t), chains, chain_starts(lane, chains))


def data_edges(t: Timed) -> DataEdges:
    """`t`'s data edges indexed for `dag.chain_longest_path` (build once per timing)."""
    return DataEdges.build(t.n, t.src, t.dst, t.w)


def static_lanes(
    t: Timed, layout: dict[int, tuple[int, int]], edges: DataEdges | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(lane, chains) of the static schedule: every task's global lane, and the tasks of each
    lane in their order, lane after lane (`dag.lane_order`)."""
    if t.list_scheduled:
        key, lane = static_schedule(t, layout, edges)
    else:
        key = plan_starts(t)
        lane = assign_lanes(t, layout, key)
    return lane, lane_order(lane, key)


def static_graph(
    t: Timed, layout: dict[int, tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lane, src, dst, w) of the static schedule: data edges plus lane-order edges."""
    lane, chains = static_lanes(t, layout)
    same = lane[chains[1:]] == lane[chains[:-1]]
    a, b = chains[:-1][same], chains[1:][same]
    by_src = np.argsort(a, kind="stable")
    src = np.concatenate([t.src, a[by_src]])
    dst = np.concatenate([t.dst, b[by_src]])
    w = np.concatenate([t.w, np.zeros(a.size, dtype=np.int64)])
    return lane, src, dst, w


def run_static(t: Timed, layout: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) of every task under the static per-core order (durations t.dur)."""
    lane, chains = static_lanes(t, layout)
    first = chain_starts(lane, chains)
    return chain_longest_path(t.dur, data_edges(t), chains, first), lane


def run_dynamic(t: Timed, layout: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start ns, global lane) with a run-time FIFO ready queue per pool (--dynamic)."""
    return list_schedule(t, layout, by_stage=False)


def arrival_order_ports(
    t: Timed,
    lane: np.ndarray,
    start: np.ndarray,
    rounds: int = 2,
    chains: np.ndarray | None = None,
    edges: DataEdges | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(start, lane) after letting every link port take its transfers in the order their data
    became ready in the previous timing (a receiver takes what arrives first), cores keeping
    their order; repeated `rounds` times, the best makespan kept.

    chains: each lane's tasks in the order `start` was timed with (`dag.lane_order`), and
    edges: `data_edges(t)`, if the caller has them. Only the port lanes are re-ordered: a lane
    whose tasks all last > 0 ns keeps its order in every round (its starts grow strictly along
    it, so ordering it by start changes nothing), so its order is taken from `chains` (or
    ordered once) and each round sorts the port lanes (and any lane with a zero-length task)
    alone, from the ports' own in-edges.

    Equal ready times on a port are taken in seq order (the transfers' rotation order, then
    each task's copy in a rotation-symmetric run: `tiles.build_graph`), so every rank orders
    its ports as its rotated copy does and the folded simulation (`executor.fold`) is exact.

    Cannot deadlock: with potential T (ready time for port tasks, start for the others) no
    edge goes down, and a data edge out of a port task goes strictly up (its duration is >= 1
    ns), so a cycle of equal T could only stay on one port lane, which is a chain; the other
    lanes break ties by id, which grows along every data edge."""
    if edges is None:
        edges = data_edges(t)
    port = np.isin(t.pool, [POOL_TX, POOL_RX])
    best_start, best_span = start, int((start + t.dur).max())
    has_zero = np.zeros(int(lane.max()) + 1, dtype=bool)
    has_zero[lane[(t.dur <= 0) & (lane >= 0)]] = True
    moving = port | has_zero[np.maximum(lane, 0)]
    if chains is None:
        kept = lane_order(np.where(moving, -1, lane), start)
    else:
        kept = chains[~moving[chains]]
    kept_first = chain_starts(lane, kept)
    moving_lane = np.where(moving, lane, -1)
    into_port = np.flatnonzero(port[t.dst])  # only the ports' ready times are used
    p_src, p_dst = t.src[into_port], t.dst[into_port]
    p_delay = t.dur[p_src] + t.w[into_port]
    tie = np.arange(t.n)  # ports (lanes of their own): seq order; other lanes: id
    ports = np.flatnonzero(port)
    tie[ports[lex_order(t.seq[ports])]] = np.arange(ports.size)
    for _ in range(rounds):
        ready = np.zeros(t.n, dtype=np.int64)
        np.maximum.at(ready, p_dst, start[p_src] + p_delay)
        key = np.where(port, ready, start) * (t.n + 1) + tie
        moved = lane_order(moving_lane, key)
        first = np.concatenate([kept_first, chain_starts(lane, moved)])
        start = chain_longest_path(t.dur, edges, np.concatenate([kept, moved]), first)
        span = int((start + t.dur).max())
        if span < best_span:
            best_start, best_span = start, span
    return best_start, lane


def run_schedule(
    t: Timed, layout: dict[int, tuple[int, int]], dynamic: bool = False
) -> tuple[np.ndarray, np.ndarray, Timed]:
    """(start ns, lane, timed) of the schedule's per-core orders. The durations already hold
    every shared resource's share (HBM: `schedules.hbm_rates`); the receive buffers' credits
    are timed with the same orders (`credits.retime_with_credits`)."""
    edges = data_edges(t)
    if dynamic:
        start, lane = run_dynamic(t, layout)
        return retime_with_credits(t, lane, start, edges=edges), lane, t
    lane, chains = static_lanes(t, layout, edges)
    start = chain_longest_path(t.dur, edges, chains, chain_starts(lane, chains))
    if t.list_scheduled:  # tile: the ports serve transfers in arrival order
        start, lane = arrival_order_ports(t, lane, start, chains=chains, edges=edges)
    # a sender waits for room in its receiver's buffer (one-sided tile writes only)
    return retime_with_credits(t, lane, start, edges=edges), lane, t
