"""The counting row layout (rowlayout.py) against a sort-based reference built row by row."""

from __future__ import annotations

import numpy as np
import pytest

from moetrace.executor.taskgraph import TaskGraph
from moetrace.executor.tiles import build_graph
from moetrace.executor.workload import Workload, make_workload

Keys = tuple[np.ndarray, ...]


def sorted_reference(wl: Workload, graph: TaskGraph) -> tuple[np.ndarray, np.ndarray]:
    """Per-row tiles by the definitions: lexsort the rows, cut runs into tiles of tile_rows."""
    assign, expert_rank, tr = graph.assign, graph.expert_rank, wl.tile_rows
    ep, tok, k = assign.shape
    src, token, slot = (a.ravel() for a in np.indices((ep, tok, k)))
    expert = assign.ravel().astype(np.int64)
    dst = expert_rank[expert]
    tt = max(1, tr // k)
    nu = -(-tok // tt)
    chunk = (np.arange(nu) * graph.chunks // nu)[token // tt]
    local = np.array([np.sum(expert_rank[:e] == expert_rank[e]) for e in range(expert_rank.size)])

    def tiles(group_keys: Keys, order_keys: Keys) -> np.ndarray:
        order = np.lexsort(tuple(reversed(group_keys + order_keys)))
        out = np.empty(src.size, dtype=np.int64)
        seen: dict[tuple[int, ...], int] = {}
        pos_in_group: dict[tuple[int, ...], int] = {}
        for row in order.tolist():
            g = tuple(int(x[row]) for x in group_keys)
            p = pos_in_group.get(g, 0)
            pos_in_group[g] = p + 1
            key = (*g, p // tr)
            if key not in seen:
                seen[key] = len(seen)
            out[row] = seen[key]
        return out

    comm = tiles((src, dst, chunk), (local[expert], token, slot))
    rows = tiles((expert, chunk), (src, token, slot))
    return comm, rows


@pytest.mark.parametrize(
    ("ranks", "tokens", "routing", "placement", "chunks"),
    [(4, 96, "zipf:1.5", "balanced", 3), (8, 64, "balanced", "round-robin", 1)],
)
def test_counting_layout_matches_sorting(ranks, tokens, routing, placement, chunks):  # type: ignore[no-untyped-def]
    wl = make_workload("mixtral-8x7b", ranks, tokens, routing, placement, 3, None, False, 32, 512)
    graph = build_graph(wl, chunks=chunks)
    comm, rows = sorted_reference(wl, graph)
    assert np.array_equal(graph.rows.comm_tile, comm)
    assert np.array_equal(graph.rows.row_tile, rows)
    # the dispatch -> GEMM1 edges join exactly the tile pairs that share a row
    n1 = -(-2 * wl.shape.intermediate // wl.n_tile)
    rx = graph.ids["dispatch_rx"]
    g1 = graph.ids["gemm1"]
    edges = {
        (int(np.searchsorted(rx, s)), (int(d) - int(g1[0])) // n1)
        for s, d in zip(graph.edge_src, graph.edge_dst, strict=True)
        if rx[0] <= s <= rx[-1] and g1[0] <= d <= g1[-1]
    }
    assert edges == set(zip(comm.tolist(), rows.tolist(), strict=True))
