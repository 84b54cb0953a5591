"""A block of ranks simulated for a rotation-symmetric run, the result expanded to every rank.

In a symmetric tile run (`symmetry.symmetry`: balanced routing, round-robin placement, row tiles
that a rotation by `period` ranks maps onto row tiles) rotating every rank by a multiple of the
period maps the task graph, its durations and its tie-breaking onto themselves, so the schedule
of rank a + period is rank a's rotated. The folded graph (`build_graph(fold=True)`) holds the
tasks of ranks 0 .. period-1 (the block), a transfer into the block from a rank outside it
coming from its copy in the block; the planner times it (EP / period times fewer tasks) and
`expand` maps every task of the whole run to its copy in the block (`Expansion`), from which
the trace of all ranks is gathered. The period is 1 when every source's rows fill whole row
tiles, 2 when a 128-row tile holds two sources' 64 rows, and so on.
tests/executor/test_fold.py proves the expanded run equal to the full simulation, start and
end of every task on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moetrace.executor.graph_util import exclusive_cumsum
from moetrace.executor.schedules import Timed
from moetrace.executor.taskgraph import TYPES, T, TaskGraph

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
    per rank) as (rank, index of its copy in the folded timed graph); `full_id[m, j]` is the
    whole run's id of folded task j's copy rotated by m periods; its columns past the folded
    graph's tasks are the launches of the block's ranks a (copy m: launch n_graph + a + m x
    period)."""

    rank: np.ndarray
    rep: np.ndarray
    full_id: np.ndarray
    n_graph: int
    ranks: int
    period: int = 1

    @property
    def n(self) -> int:
        return int(self.rep.size)

    @property
    def copies(self) -> int:
        """How many copies (rotations by a multiple of the period) every folded task has."""
        return self.ranks // self.period


def expand(graph: TaskGraph, timed: Timed) -> Expansion:
    """The whole run's tasks as copies of the folded graph's (see `Expansion`)."""
    sym = graph.symmetric
    assert sym is not None and graph.folded_ranks > 1, "expand needs a folded graph"
    ep, per_stream, period = sym.ranks, sym.per_stream, sym.period
    copies = ep // period
    c = graph.cols
    typ, peer, tile = c["type"], c["peer"], c["tile"]
    nq = graph.n
    counts = np.bincount(typ, minlength=len(TYPES))
    base_folded = exclusive_cumsum(counts)
    m = np.arange(copies, dtype=np.int64)[:, None]  # copy index: rotation by m periods
    turn = m * period  # ranks each copy is rotated by
    local = np.full((copies, nq), -1, dtype=np.int64)

    def of(names: tuple[str, ...]) -> np.ndarray:
        return np.flatnonzero(np.isin(typ, [T[x] for x in names]))

    j = of(_RANK_MAJOR)  # blocks ordered by rank: copy m is m x (the block's tasks) further
    local[:, j] = m * counts[typ[j]] + (j - base_folded[typ[j]])
    # tiles (src, dst, q) in (src, dst, q) order
    j = of(_FROM_SOURCE)  # rank = src, peer = dst
    local[:, j] = ((c["rank"][j] + turn) * ep + (peer[j] + turn) % ep) * per_stream + tile[j]
    j = of(_FROM_DEST)  # rank = dst, peer = src
    local[:, j] = (((peer[j] + turn) % ep) * ep + c["rank"][j] + turn) * per_stream + tile[j]
    j = of(_ROW_TILE)  # row tiles by (expert, index), times the block's column tiles
    if j.size:
        expert, index = c["expert"][j], c["row_tile"][j]
        col = np.maximum(c["n_tile"][j], 0)
        per_tile = np.zeros(len(TYPES), dtype=np.int64)
        np.maximum.at(per_tile, typ[j], col + 1)
        first = exclusive_cumsum(np.repeat(sym.tiles, ep))  # first row tile of each expert
        lo = expert // ep
        moved = (index + m * sym.shift[lo]) % np.maximum(sym.tiles[lo], 1)
        local[:, j] = (first[expert + turn] + moved) * per_tile[typ[j]] + col
    full_id = (base_folded[typ] * copies + local).astype(np.int32)  # < MAX_TASKS
    del local
    n_graph = nq * copies
    # launches: the folded timed graph has one per rank (ranks outside the block idle); the
    # launch of rank r copies that of block rank r mod period
    launch = np.arange(ep, dtype=np.int64)
    rep = np.empty(n_graph + ep, dtype=np.int32)
    rank = np.empty(n_graph + ep, dtype=np.int32)
    flat = full_id.ravel()
    rep[flat] = np.tile(np.arange(nq, dtype=np.int32), copies)
    rank[flat] = (c["rank"][None, :] + turn).astype(np.int32).ravel()
    rep[n_graph:] = timed.n_graph + launch % period
    rank[n_graph:] = launch
    block_launch = n_graph + np.arange(period)[None, :] + turn
    table = np.concatenate([full_id, block_launch.astype(np.int32)], axis=1)
    return Expansion(rank, rep, table, n_graph, ep, period)


def expand_edges(
    exp: Expansion, graph: TaskGraph, timed: Timed
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, folded edge index) of every edge of the whole run, copy by copy: each folded
    edge once per copy of its destination. An edge into an arrival (RX) comes from the
    sender's rank (the RX's peer), so its source is the copy rotated by the sender's block
    (peer // period) further."""
    copies, nq = exp.copies, graph.n
    src, dst = timed.src, timed.dst  # every folded edge ends on a task of the block
    peer = graph.cols["peer"][np.minimum(dst, nq - 1)]
    arrival = np.isin(timed.type[dst], _ARRIVALS)
    shift = np.where(arrival, peer // exp.period, 0).astype(np.int32)
    m = np.arange(copies, dtype=np.int32)[:, None]
    full_src = exp.full_id[(m + shift) % copies, src].ravel()
    full_dst = exp.full_id[m, dst].ravel()
    index = np.tile(np.arange(src.size, dtype=np.int32), copies)
    return full_src, full_dst, index
