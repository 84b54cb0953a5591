"""Where the routed rows of a layer go, by counting: tile pairs per cell, rows on demand.

A cell is (source rank, chunk, expert). Its rows are contiguous in the (src, dst, chunk)
dispatch stream (streams are ordered by local expert, then token) and in the (expert, chunk)
receive buffer (ordered by source, then token), so tiles of `tile_rows` consecutive positions
meet a cell in ranges: the tile pairs of the graph come from per-cell arithmetic, and the
per-row map (only the functional proof needs it) is computed when asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moetrace.executor.graph_util import cumcount_rows, exclusive_cumsum


@dataclass
class RowMap:
    """Where every row lives: its tiles on the way out and back (arrays over rows)."""

    src: np.ndarray
    token: np.ndarray
    slot: np.ndarray
    expert: np.ndarray
    dst: np.ndarray
    token_tile: np.ndarray  # global token-tile index (src * tiles_per_rank + u)
    comm_tile: np.ndarray  # dispatch/combine tile index
    row_tile: np.ndarray  # expert row-tile index


def _ranges(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for every count c, concatenated."""
    out: np.ndarray = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(
        exclusive_cumsum(counts), counts
    )
    return out


@dataclass
class RowLayout:
    """Per-cell counts and first positions (arrays shaped (ranks, chunks, experts)) plus the
    first tile index of every dispatch stream (src, dst, chunk) and receive buffer (expert,
    chunk)."""

    cnt: np.ndarray
    stream_base: np.ndarray
    buffer_base: np.ndarray
    first_ct: np.ndarray
    first_rt: np.ndarray
    expert_rank: np.ndarray
    ranks: int
    chunks: int
    tile_rows: int

    def tile_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (dispatch tile, row tile) pair sharing at least one row, unordered.

        Within a cell both tile indices grow with the row's offset x, so the cell splits into
        pieces at x = 0 and at every x where either position crosses a tile boundary; each
        piece is one pair, and two cells never share a row tile (different expert or chunk).
        """
        tr, chunks = self.tile_rows, self.chunks
        experts = self.cnt.shape[2]
        cell = np.flatnonzero(self.cnt.ravel())
        length = self.cnt.ravel()[cell]
        s_src, s_exp = cell // (chunks * experts), cell % experts
        s_chunk = (cell // experts) % chunks
        b = self.stream_base.ravel()[cell]
        b2 = self.buffer_base.ravel()[cell]
        n_q = (b + length - 1) // tr - b // tr  # dispatch-tile boundaries inside the cell
        n_r = (b2 + length - 1) // tr - b2 // tr  # row-tile boundaries inside the cell
        idx = np.arange(cell.size, dtype=np.int64)
        which = np.concatenate([idx, np.repeat(idx, n_q), np.repeat(idx, n_r)])
        offset = np.concatenate(
            [
                np.zeros(cell.size, dtype=np.int64),
                (np.repeat(b // tr + 1, n_q) + _ranges(n_q)) * tr - np.repeat(b, n_q),
                (np.repeat(b2 // tr + 1, n_r) + _ranges(n_r)) * tr - np.repeat(b2, n_r),
            ]
        )
        width = int(length.max()) + 1 if cell.size else 1
        key = np.unique(which * width + offset)  # a boundary of both tilings counts once
        which, offset = key // width, key % width
        group = (s_src * self.ranks + self.expert_rank[s_exp]) * chunks + s_chunk
        ct = self.first_ct[group[which]] + (b[which] + offset) // tr
        rt = self.first_rt[(s_exp * chunks + s_chunk)[which]] + (b2[which] + offset) // tr
        return ct, rt

    def row_map(self, assign: np.ndarray, tokens_per_tile: int) -> RowMap:
        """The per-row map (millions of rows at full scale: for the functional proof)."""
        ep, tok, k = assign.shape
        chunks, experts, tr = self.chunks, self.cnt.shape[2], self.tile_rows
        nu = -(-tok // tokens_per_tile)
        src = np.repeat(np.arange(ep, dtype=np.int64), tok * k)
        token = np.tile(np.repeat(np.arange(tok, dtype=np.int64), k), ep)
        slot = np.tile(np.arange(k, dtype=np.int64), ep * tok)
        expert = assign.ravel().astype(np.int64)
        dst = self.expert_rank[expert].astype(np.int64)
        u = token // tokens_per_tile
        chunk = (np.arange(nu) * chunks // nu)[u]
        cell = (src * chunks + chunk) * experts + expert
        in_src = cumcount_rows(expert.reshape(ep, tok * k), experts).ravel()
        in_cell = in_src - exclusive_cumsum(self.cnt, axis=1).ravel()[cell]
        pos = in_cell + self.stream_base.ravel()[cell]
        comm_tile = self.first_ct[(src * ep + dst) * chunks + chunk] + pos // tr
        epos = in_cell + self.buffer_base.ravel()[cell]
        row_tile = self.first_rt[expert * chunks + chunk] + epos // tr
        return RowMap(src, token, slot, expert, dst, src * nu + u, comm_tile, row_tile)
