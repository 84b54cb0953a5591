"""One rank simulated for a rotation-symmetric run, the result expanded to every rank.

In a symmetric tile run (`tiles.symmetry`: balanced routing, round-robin placement, row tiles
that a rotation maps onto row tiles) rotating every rank by r maps the task graph, its
durations and its tie-breaking onto themselves, so the schedule of rank a + r is rank a's
rotated. The folded graph (`build_graph(fold=True)`) holds rank 0's tasks, a transfer into rank
0 coming from its copy on rank 0; the planner times it (EP times fewer tasks) and `expand`
maps every task of the whole run to its copy on rank 0 (`Expansion`), from which the trace
of all ranks is gathered. tests/executor/test_fold.py proves the expanded run equal to the
full simulation, start and end of every task on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moetrace.executor.graph_util import exclusive_cumsum
from moetrace.executor.schedules import Timed
from moetrace.executor.tiles import TYPES, T, TaskGraph

# how a task type's tasks are ordered in the whole graph (see tiles.build_graph)
_RANK_MAJOR: tuple[str, ...] = ("gate", "topk", "layout", "shared_up", "shared_act")
_RANK_MAJOR += ("shared_down", "dispatch_done", "combine_done")
_FROM_SOURCE = ("permute", "dispatch_issue", "dispatch_tx", "combine_rx", "unpermute")
_FROM_DEST = ("dispatch_rx", "combine_issue", "combine_tx")
_ROW_TILE = ("gemm1", "swiglu", "gemm2")
_ARRIVALS = (T["dispatch_rx"], T["combine_rx"])


@dataclass
class Expansion:
    """Every task of the whole run (graph tasks in the full graph's id order, then one launch
    per rank) as (rank, index of its copy in the folded timed graph); `full_id[r, j]` is the
    whole run's id of folded task j's copy on rank r (launches: n_graph + r)."""

    rank: np.ndarray
    rep: np.ndarray
    full_id: np.ndarray
    n_graph: int
    ranks: int

    @property
    def n(self) -> int:
        return int(self.rep.size)


def expand(graph: TaskGraph, timed: Timed) -> Expansion:
    """The whole run's tasks as copies of the folded graph's (see `Expansion`)."""
    sym = graph.symmetric
    assert sym is not None and graph.folded_ranks > 1, "expand needs a folded graph"
    ep, per_stream = sym.ranks, sym.per_stream
    c = graph.cols
    typ, peer, tile = c["type"], c["peer"], c["tile"]
    nq = graph.n
    counts = np.bincount(typ, minlength=len(TYPES))
    base_folded = exclusive_cumsum(counts)
    r = np.arange(ep, dtype=np.int64)[:, None]
    local = np.full((ep, nq), -1, dtype=np.int64)

    def of(names: tuple[str, ...]) -> np.ndarray:
        return np.flatnonzero(np.isin(typ, [T[x] for x in names]))

    j = of(_RANK_MAJOR)  # blocks ordered by rank: rank r's copy is r blocks further
    local[:, j] = r * counts[typ[j]] + (j - base_folded[typ[j]])
    j = of(_FROM_SOURCE)  # tiles (src, dst, q) in (src, dst, q) order; on rank 0: src 0
    local[:, j] = (r * ep + (peer[j] + r) % ep) * per_stream + tile[j]
    j = of(_FROM_DEST)  # on rank 0: dst 0, peer = src
    local[:, j] = (((peer[j] + r) % ep) * ep + r) * per_stream + tile[j]
    j = of(_ROW_TILE)  # row tiles by (expert, index), times the block's column tiles
    if j.size:
        expert, index = c["expert"][j], c["row_tile"][j]
        col = np.maximum(c["n_tile"][j], 0)
        per_tile = np.zeros(len(TYPES), dtype=np.int64)
        np.maximum.at(per_tile, typ[j], col + 1)
        first = exclusive_cumsum(np.repeat(sym.tiles, ep))  # first row tile of each expert
        lo = expert // ep
        moved = (index + r * sym.shift[lo]) % np.maximum(sym.tiles[lo], 1)
        local[:, j] = (first[expert + r] + moved) * per_tile[typ[j]] + col
    full_id = (base_folded[typ] * ep + local).astype(np.int32)  # < MAX_TASKS
    del local
    n_graph = nq * ep
    # launches: the folded timed graph has one per rank (ranks > 0 idle); all copy rank 0's
    launch = np.arange(ep, dtype=np.int64)
    rep = np.empty(n_graph + ep, dtype=np.int32)
    rank = np.empty(n_graph + ep, dtype=np.int32)
    flat = full_id.ravel()
    rep[flat] = np.tile(np.arange(nq, dtype=np.int32), ep)
    rank[flat] = np.repeat(launch.astype(np.int32), nq)
    rep[n_graph:] = timed.n_graph  # rank 0's launch
    rank[n_graph:] = launch
    table = np.concatenate([full_id, (n_graph + launch[:, None]).astype(np.int32)], axis=1)
    return Expansion(rank, rep, table, n_graph, ep)


def expand_edges(
    exp: Expansion, graph: TaskGraph, timed: Timed
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, folded edge index) of every edge of the whole run, rank by rank: each folded
    edge once per rank of its destination. An edge into an arrival (RX) comes from the
    sender's rank (the RX's peer), so its source is the copy on that rank."""
    ep, nq = exp.ranks, graph.n
    src, dst = timed.src, timed.dst  # every folded edge ends on a task of rank 0
    src_col = np.where(src < nq, src, nq)  # rank 0's launch: the launch column
    peer = graph.cols["peer"][np.minimum(dst, nq - 1)]
    shift = np.where(np.isin(timed.type[dst], _ARRIVALS), peer, 0).astype(np.int32)
    r = np.arange(ep, dtype=np.int32)[:, None]
    full_src = exp.full_id[(r + shift) % ep, src_col].ravel()
    full_dst = exp.full_id[r, dst].ravel()
    index = np.tile(np.arange(src.size, dtype=np.int32), ep)
    return full_src, full_dst, index
