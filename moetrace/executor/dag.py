"""Longest paths on the executor's task DAGs (the timing core every scheduler shares).

A schedule with fixed per-lane orders is a longest-path problem on a DAG whose edges are the
data dependencies (with a delay each) plus "next task on the same lane". `chain_longest_path`
(the one implementation in production) solves it with numpy across all ranks and tiles at once,
a whole run of a lane's backlogged tasks per step; its references (Kahn's sweep over the same
edges as one graph, a plain heapq event loop) are in `moetrace.testing.longest_path`, for the
tests and the benchmark. Kept in its own module
below the engine and both schedulers (engine, listsched, staticsched all import it), so that
none of them imports another to reach it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from moetrace.executor.contention import lex_order


class CycleError(RuntimeError):
    """The scheduled graph has a cycle (a bug in a schedule, never bad user input)."""


@dataclass(frozen=True)
class DataEdges:
    """A graph's data edges indexed by source (CSR), built once and shared by every
    `chain_longest_path` over the same edges (a plan is timed several times per candidate)."""

    n: int
    order: np.ndarray  # edge ids sorted by source (stable)
    s_dst: np.ndarray  # target of each edge in that order
    s_w: np.ndarray  # delay (ns) of each edge in that order
    ptr: np.ndarray  # edges of task i: positions ptr[i]:ptr[i + 1]
    indeg: np.ndarray  # data inputs of each task

    @classmethod
    def build(cls, n: int, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> DataEdges:
        order = np.argsort(src, kind="stable")
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
        indeg = np.bincount(dst, minlength=n).astype(np.int64)
        return cls(n, order, dst[order], w[order], ptr, indeg)

    def with_delays(self, w: np.ndarray) -> DataEdges:
        """The same edges with other delays (`w` by edge id)."""
        return dataclasses.replace(self, s_w=w[self.order])


def _steps(size: int) -> np.ndarray:
    """0, 1, ..., size - 1 (a view of a cached arange: the sweeps slice it every step)."""
    global _STEPS
    if _STEPS.size < size:
        _STEPS = np.arange(max(size, 2 * _STEPS.size), dtype=np.int64)
    return _STEPS[:size]


_STEPS = np.arange(1 << 16, dtype=np.int64)
# runs per step from which the one-task runs skip the running maximum (below, the extra numpy
# calls cost more than the element work they save)
_SPLIT_RUNS = 2048


def chain_longest_path(
    dur: np.ndarray,
    edges: DataEdges,
    chains: np.ndarray,
    first: np.ndarray,
    floor: np.ndarray | None = None,
) -> np.ndarray:
    """The longest path of the data `edges` plus the lane-order edges of `chains` (task ids, each
    lane's tasks in order, one lane after another; `first` marks where a lane begins; a task is
    on at most one lane), which have no delay: a lane runs its tasks back to back. The same
    starts (int64 ns), in far fewer numpy steps where lanes are long.

    Each step takes, on every lane whose next task just became ready, the whole run of that
    lane's following tasks whose data inputs are all done already (a lane backlogged behind its
    own tasks), and times it with one running maximum: along the run, start = max(inputs
    ready, previous end) is start[i] = C[i] + max over j <= i of (ready[j] - C[j]), C the
    lane's durations summed before i. The steps are then the data edges on the longest path
    counted in data edges (15 when only the link ports are lanes, a few hundred on a skewed
    64-rank tile run), not the tasks on the longest lane (thousands): Kahn's sweep over a graph
    whose lanes are condensed into runs.
    """
    n = edges.n
    start = np.zeros(n + 1, dtype=np.int64)  # + a scratch entry for the lanes' ends
    if floor is not None:
        start[:n] = floor
    if n == 0:
        return start[:n]
    # every task on a lane (the others alone on one), each lane followed by an end marker:
    # `slots` holds task ids and n for the markers
    alone = np.ones(n, dtype=bool)
    alone[chains] = False
    singles = np.flatnonzero(alone)
    tasks = np.concatenate([chains, singles])
    chain_lanes = int(np.count_nonzero(first))
    lane_id = np.empty(n, dtype=np.int64)
    np.cumsum(first, out=lane_id[: chains.size])
    lane_id[: chains.size] -= 1
    lane_id[chains.size :] = _steps(singles.size) + chain_lanes
    at = _steps(n) + lane_id  # slot of each of `tasks`
    slots = np.full(n + int(lane_id[-1]) + 1, n, dtype=np.int64)
    slots[at] = tasks
    pos = np.empty(n, dtype=np.int64)
    pos[tasks] = at
    # C: a lane's durations summed before each of its tasks' slots (runs hold no marker)
    task_dur = dur[tasks]
    summed = np.cumsum(task_dur)
    summed -= task_dur
    lane_first = np.concatenate([np.flatnonzero(first), _steps(singles.size) + chains.size])
    summed -= summed[lane_first][lane_id]
    before = np.zeros(slots.size, dtype=np.int64)
    before[at] = summed
    # inputs not yet done: data inputs + the lane predecessor; a marker never gets ready
    remaining = np.zeros(n + 1, dtype=np.int64)
    remaining[chains] = ~first
    remaining[:n] += edges.indeg
    remaining[n] = 1 << 40
    ptr, s_dst, s_w = edges.ptr, edges.s_dst, edges.s_w
    deg = ptr[1:] - ptr[:-1]
    last_slot = slots.size - 1
    slot = np.zeros(n + 1, dtype=np.int64)
    repeat, max_at, sub_at, concat = np.repeat, np.maximum.at, np.subtract.at, np.concatenate
    frontier = np.flatnonzero(remaining[:n] == 0)
    done = 0
    while frontier.size:
        # starts of the frontier are final; each heads a run (see the docstring) that ends
        # before the first later slot of its lane whose task still waits for data, or its end
        heads = pos[frontier]
        stop = _run_stops(heads, remaining, slots, last_slot)
        length = stop - heads
        n_alone = 0  # runs of one task (their head's start is final): first, not scanned
        if heads.size >= _SPLIT_RUNS:
            single = length == 1
            n_alone = int(np.count_nonzero(single))
            if n_alone < heads.size // 2:
                n_alone = 0
            elif n_alone < heads.size:
                by_kind = np.concatenate([np.flatnonzero(single), np.flatnonzero(~single)])
                frontier, heads, stop, length = (
                    frontier[by_kind],
                    heads[by_kind],
                    stop[by_kind],
                    length[by_kind],
                )
        ends = np.cumsum(length)
        if int(ends[-1]) == heads.size:  # every run is its head alone
            run = frontier
            value = start[run]
        else:
            run, value = _time_runs(heads[n_alone:], length[n_alone:], start, before, slots)
            if n_alone:
                run = concat([frontier[:n_alone], run])
                value = concat([start[frontier[:n_alone]], value])
        done += run.size
        # out-edges: the data edges of the run's tasks, and each run's last task -> the task
        # that stopped it (a marker: the scratch entry)
        value += dur[run]  # ends
        cnt = deg[run]
        csum = cnt.cumsum()
        offs = repeat(ptr[run] - csum + cnt, cnt)
        offs += _steps(int(csum[-1]))
        targets = concat([s_dst[offs], slots[stop]])
        cand = repeat(value, cnt)
        cand += s_w[offs]
        cand = concat([cand, value[ends - 1]])
        max_at(start, targets, cand)
        sub_at(remaining, targets, 1)
        ready = targets[remaining[targets] == 0]
        # distinct without sorting or hashing: keep the position that wrote last
        slot[ready] = _steps(ready.size)
        frontier = ready[slot[ready] == _steps(ready.size)]
    if done != n:
        raise CycleError(f"scheduled graph has a cycle ({n - done} tasks never became ready)")
    return start[:n]


def _time_runs(
    heads: np.ndarray,
    length: np.ndarray,
    start: np.ndarray,
    before: np.ndarray,
    slots: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(tasks, their starts) of the runs of `length` slots from `heads`, run after run, with
    `start` updated: one running maximum over all of them (see `chain_longest_path`), each
    run offset above the ones before so that the maximum restarts at its head."""
    ends = np.cumsum(length)
    run_pos = np.repeat(heads - ends + length, length)
    run_pos += _steps(int(ends[-1]))
    run = slots[run_pos]
    lane_before = before[run_pos]
    value = start[run] - lane_before
    low = int(value.min())
    span = int(value.max()) - low + 1
    if span * heads.size >= 1 << 62:  # never at ns scale: the offsets would overflow
        raise OverflowError("start times too large for one running maximum")
    shift = np.repeat(_steps(heads.size) * span - low, length)
    value += shift
    np.maximum.accumulate(value, out=value)
    value -= shift
    value += lane_before
    start[run] = value
    return run, value


def _run_stops(
    heads: np.ndarray, remaining: np.ndarray, slots: np.ndarray, last_slot: int
) -> np.ndarray:
    """For each run head (slot), the first later slot of its lane that stops its run: its
    lane's end marker, or a task still waiting for a data input (`remaining` > 1: its lane
    predecessor counts one). The next slot first (most runs are one task long), then the
    longer runs in windows that double (a long run costs a few steps, not one per task)."""
    stop = heads + 1
    longer = np.flatnonzero(remaining[slots[stop]] == 1)
    base = stop[longer]
    width = 8
    while longer.size:
        cand = base[:, None] + _steps(width + 1)[1:]
        np.minimum(cand, last_slot, out=cand)
        blocked = remaining[slots[cand]] > 1
        at = blocked.argmax(axis=1)
        stop[longer] = base + 1 + at
        hit = blocked[_steps(at.size), at]
        longer, base = longer[~hit], base[~hit] + width
        width *= 2
    return stop


def lane_order(lane: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Ids of the tasks on a lane (lane >= 0) sorted by (lane, key, id): each lane's tasks in
    their order, one lane after another (the `chains` of `chain_longest_path`)."""
    ids = np.flatnonzero(lane >= 0)
    return np.asarray(ids[lex_order(key[ids], lane[ids])])


def chain_starts(lane: np.ndarray, chains: np.ndarray) -> np.ndarray:
    """True where `chains` (task ids, lanes one after another) begins a lane."""
    first = np.ones(chains.size, dtype=bool)
    np.not_equal(lane[chains[1:]], lane[chains[:-1]], out=first[1:])
    return first
