"""How one MoE layer's rows are cut into tiles: token tiles, dispatch tiles, expert row tiles.

Rows are (source rank, token, k-slot) triples. Each source sorts its rows by (destination,
chunk, local expert, token) and cuts each (source, destination, chunk) stream into dispatch
tiles of `tile_rows` rows; each expert sorts what it receives by (chunk, source, token) and
cuts it into GEMM row tiles. Rows are placed by counting, never sorted. This is the data
placement alone; `tiles.build_graph` makes the tasks and dependencies on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moetrace.executor.graph_util import exclusive_cumsum, tiles_of_groups
from moetrace.executor.rowlayout import RowLayout, RowMap
from moetrace.executor.workload import Workload, place, route


@dataclass
class Tiling:
    """The tiles of one layer (arrays over token tiles, dispatch tiles or row tiles).

    Dispatch (comm) tiles `c_*` are numbered stream by stream, streams in (src, dst, chunk)
    order; row tiles `r_*` buffer by buffer, buffers in (expert, chunk) order."""

    assign: np.ndarray  # expert of every (rank, token, slot), shape (ranks, tokens * top_k)
    expert_rank: np.ndarray  # rank holding each expert
    cnt: np.ndarray  # rows per (source, chunk, expert)
    by_dst: np.ndarray  # experts ordered by their rank (a rank's local order)
    layout: RowLayout
    tokens_per_tile: int  # tokens per token tile (about one row tile of rows)
    n_token_tiles: int  # token tiles per rank
    chunks: int
    chunk_of_u: np.ndarray  # chunk of every token tile
    # dispatch tiles
    c_src: np.ndarray
    c_dst: np.ndarray
    c_chunk: np.ndarray
    c_q: np.ndarray  # index of the tile within its stream
    c_rows: np.ndarray
    max_q: int  # 1 + the largest c_q (at least 1)
    # expert row tiles
    r_expert: np.ndarray
    r_chunk: np.ndarray
    r_idx: np.ndarray  # index of the tile within its (expert, chunk) buffer
    r_rows: np.ndarray
    r_rank: np.ndarray
    tiles_per_expert: np.ndarray
    # (dispatch tile, row tile) pairs sharing at least one row, unordered
    shared_ct: np.ndarray
    shared_rt: np.ndarray

    @property
    def n_ct(self) -> int:
        """Dispatch tiles of the layer."""
        return int(self.c_src.size)

    @property
    def n_rt(self) -> int:
        """Expert row tiles of the layer."""
        return int(self.r_expert.size)

    def row_map(self, ranks: int, tokens: int, top_k: int) -> RowMap:
        """Where every row lives (the functional proof's per-row map)."""
        return self.layout.row_map(self.assign.reshape(ranks, tokens, top_k), self.tokens_per_tile)


def tile_layer(wl: Workload, chunks: int, assign: np.ndarray | None = None) -> Tiling:
    """Route `wl` (unless `assign` is given) and cut its rows into tiles, `chunks` token
    chunks per rank (clamped to 1 .. token tiles)."""
    sh = wl.shape
    ep, tok, k = wl.ranks, wl.tokens, sh.top_k
    tr = wl.tile_rows
    tt = max(1, tr // k)
    nu = -(-tok // tt)
    chunks = max(1, min(chunks, nu))
    assign = route(wl) if assign is None else assign
    expert_rank = place(wl, assign)

    # Rows (src, token, slot) are placed by counting, never sorted: chunk grows with token,
    # so the rows of one (src, chunk, expert) cell are contiguous in its dispatch stream and
    # in its expert's receive buffer; tiles are ranges of those counts.
    e_ = sh.experts
    chunk_of_u = np.arange(nu) * chunks // nu
    row_chunk = np.repeat(chunk_of_u[np.arange(tok) // tt], k)  # chunk of each (token, slot)
    # balanced routing: every source routes alike, so one source's counts serve all
    alike = wl.routing == "balanced"
    sources = 1 if alike else ep
    cell_of_row = (
        (np.arange(sources, dtype=np.int64)[:, None] * chunks + row_chunk) * e_
        + assign[:sources].reshape(sources, tok * k)
    ).ravel()
    cnt = np.bincount(cell_of_row, minlength=sources * chunks * e_).reshape(sources, chunks, e_)
    if alike:
        cnt = np.repeat(cnt, ep, axis=0)

    # dispatch streams: (src, dst, chunk) sorted by (local expert, token, slot); a rank's
    # experts in local order are its experts in id order
    by_dst = np.argsort(expert_rank, kind="stable")
    before = exclusive_cumsum(cnt[:, :, by_dst], axis=2)
    first_of_dst = np.searchsorted(expert_rank[by_dst], expert_rank[by_dst])
    stream_base = np.empty_like(cnt)  # first stream position of each cell
    stream_base[:, :, by_dst] = before - before[:, :, first_of_dst]
    onehot = np.zeros((e_, ep), dtype=np.int64)
    onehot[np.arange(e_), expert_rank] = 1
    stream_rows = np.einsum("sce,ed->sdc", cnt, onehot).ravel()  # (src, dst, chunk)
    first_ct, c_g, c_q = tiles_of_groups(stream_rows, tr)
    max_q = max(1, int(c_q.max()) + 1) if c_g.size else 1

    # expert receive buffers: (expert, chunk) sorted by (source, token, slot)
    buffer_base = exclusive_cumsum(cnt, axis=0)  # first buffer position of each cell
    buffer_rows = cnt.sum(axis=0).T.ravel()  # (expert, chunk)
    first_rt, r_g, r_idx = tiles_of_groups(buffer_rows, tr)
    r_expert = r_g // chunks
    layout = RowLayout(
        cnt, stream_base, buffer_base, first_ct, first_rt, expert_rank, ep, chunks, tr
    )
    shared_ct, shared_rt = layout.tile_pairs()
    return Tiling(
        assign=assign,
        expert_rank=expert_rank,
        cnt=cnt,
        by_dst=by_dst,
        layout=layout,
        tokens_per_tile=tt,
        n_token_tiles=nu,
        chunks=chunks,
        chunk_of_u=chunk_of_u,
        c_src=c_g // (ep * chunks),
        c_dst=(c_g // chunks) % ep,
        c_chunk=c_g % chunks,
        c_q=c_q,
        c_rows=np.minimum(tr, stream_rows[c_g] - c_q * tr),
        max_q=max_q,
        r_expert=r_expert,
        r_chunk=r_g % chunks,
        r_idx=r_idx,
        r_rows=np.minimum(tr, buffer_rows[r_g] - r_idx * tr),
        r_rank=expert_rank[r_expert].astype(np.int64),
        tiles_per_expert=np.bincount(r_expert, minlength=e_),
        shared_ct=shared_ct,
        shared_rt=shared_rt,
    )


def local_expert_of_tiles(t: Tiling, ep: int) -> np.ndarray:
    """Local expert index (on its destination) of the first row of every dispatch tile.

    Streams list a destination's experts in `by_dst` order, so a tile's first row falls in
    the cell found by one searchsorted per tile over the cumulative counts of its (source,
    chunk) row, offset to its destination's first expert."""
    cnt, by_dst, src, dst, chunk = t.cnt, t.by_dst, t.c_src, t.c_dst, t.c_chunk
    first_row = t.c_q * t.layout.tile_rows
    ranks, chunks, experts = cnt.shape
    incl = np.cumsum(cnt[:, :, by_dst], axis=2)  # (src, chunk, experts in by_dst order)
    before = incl - cnt[:, :, by_dst]
    per_rank = max(1, experts // ep)
    dst_first = np.arange(ranks) * per_rank  # by_dst lists each rank's experts contiguously
    row = src * chunks + chunk
    big = int(incl[..., -1].max(initial=0)) + 1
    flat = incl.reshape(ranks * chunks, experts) + (np.arange(ranks * chunks) * big)[:, None]
    pos = before.reshape(ranks * chunks, experts)[row, dst_first[dst]] + first_row
    k = np.searchsorted(flat.ravel(), pos + row * big, side="right") - row * experts
    return np.asarray(np.clip(k - dst_first[dst], 0, per_rank - 1))
