"""The vectorised engine against slow obvious references."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from moetrace.executor.engine import (
    CycleError,
    heap_longest_path,
    list_schedule,
    longest_path,
    static_graph,
)
from moetrace.executor.run import simulate_run
from moetrace.executor.schedules import lane_layout


def _random_dag(seed: int, n: int = 400, m: int = 1500) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n, m)
    b = rng.integers(0, n, m)
    keep = a != b
    src, dst = np.minimum(a, b)[keep], np.maximum(a, b)[keep]
    dur = rng.integers(1, 100, n).astype(np.int64)
    w = rng.integers(-5, 50, src.size).astype(np.int64)
    w = np.maximum(w, -dur[src])  # never start before the predecessor starts
    return dur, src.astype(np.int64), dst.astype(np.int64), w


def _slow(n: int, dur: np.ndarray, src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> np.ndarray:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    preds: dict[int, list[tuple[int, int]]] = {i: [] for i in range(n)}
    for s, d, ww in zip(src.tolist(), dst.tolist(), w.tolist(), strict=True):
        g.add_edge(s, d)
        preds[d].append((s, ww))
    start = [0] * n
    for v in nx.topological_sort(g):
        start[v] = max([0] + [start[s] + int(dur[s]) + ww for s, ww in preds[v]])
    return np.array(start)


@pytest.mark.parametrize("seed", range(5))
def test_longest_path_equals_networkx_topological_reference(seed: int) -> None:
    dur, src, dst, w = _random_dag(seed)
    n = dur.size
    expected = _slow(n, dur, src, dst, w)
    assert np.array_equal(longest_path(n, dur, src, dst, w), expected)
    assert np.array_equal(heap_longest_path(n, dur, src, dst, w), expected)


def test_cycle_is_reported() -> None:
    dur = np.ones(3, dtype=np.int64)
    src, dst = np.array([0, 1, 2]), np.array([1, 2, 0])
    with pytest.raises(CycleError):
        longest_path(3, dur, src, dst, np.zeros(3, dtype=np.int64))


@pytest.mark.parametrize("schedule", ["sequential", "chunked", "tile"])
def test_static_replay_matches_heap_loop(schedule: str) -> None:
    """The numpy engine and a plain heapq event loop give the same start of every task."""
    run = simulate_run(ranks=4, tokens=256, schedule=schedule)
    t = run.timed
    lane, src, dst, w = static_graph(t, lane_layout(run.hardware, run.options))
    assert np.array_equal(run.start, heap_longest_path(t.n, t.dur, src, dst, w))
    assert np.array_equal(run.lane, lane)
    # one core runs one task at a time
    order = np.lexsort((run.start, lane))
    same = lane[order][1:] == lane[order][:-1]
    assert np.all(run.start[order][1:][same] >= (run.start + t.dur)[order][:-1][same])


def test_tile_replay_reproduces_the_offline_list_schedule() -> None:
    run = simulate_run(ranks=4, tokens=256, schedule="tile")
    start, lane = list_schedule(run.timed, lane_layout(run.hardware, run.options), by_stage=True)
    assert np.array_equal(run.start, start)
    assert np.array_equal(run.lane, lane)


def test_every_dependency_is_respected() -> None:
    run = simulate_run(ranks=4, tokens=256, schedule="tile", routing="zipf:1.0")
    t = run.timed
    end = run.start + t.dur
    assert np.all(run.start[t.dst] >= end[t.src] + t.w)
