"""The longest-path references `dag.chain_longest_path` must reproduce exactly (the tests in
tests/executor/test_engine.py and benchmarks/bench_simulate.py): Kahn's sweep over the data
and lane-order edges as one graph (`longest_path`, one task per lane and step, vectorised),
a plain heapq event loop (`heap_longest_path`, one task at a time) and the lane-order edges
as explicit (src, dst) pairs (`lane_chain`). Not used by the executor itself.
"""

from __future__ import annotations

import heapq

import numpy as np

from moetrace.executor.dag import CycleError, lane_order


def longest_path(
    n: int,
    dur: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    w: np.ndarray,
    floor: np.ndarray | None = None,
) -> np.ndarray:
    """Earliest start (int64 ns) of every node, with start[d] >= start[s] + dur[s] + w per edge
    (and start >= floor when given).

    A vectorised Kahn sweep: each iteration takes every node whose predecessors are all done
    (one topological level, across all ranks and tiles), relaxes all their out-edges with
    `np.maximum.at` and finds the next level. The cost is a few numpy calls per level, and
    a lane of k tasks makes at least k levels (`chain_longest_path` condenses them).
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
        sub_at(indeg, targets, 1)
        ready = targets[indeg[targets] == 0]
        # distinct without sorting or hashing: keep the position that wrote last
        slot[ready] = steps[: ready.size]
        frontier = ready[slot[ready] == steps[: ready.size]]
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
    """Edges task -> next task on the same lane, ordered by (key, id); lane < 0 means no lane.

    Returned sorted by source (each task has at most one successor, so a scatter sorts them):
    appended to the data edges, which come nearly sorted, `longest_path`'s stable sort by
    source then merges two sorted runs instead of sorting a shuffled third of the edges."""
    order = lane_order(lane, key)
    same = lane[order[1:]] == lane[order[:-1]]
    successor = np.full(lane.size, -1, dtype=np.int64)
    successor[order[:-1][same]] = order[1:][same]
    first = np.flatnonzero(successor >= 0)
    return first, successor[first]
