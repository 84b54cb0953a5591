"""Rotation symmetry of a tile-schedule run: the smallest rotation of the ranks (the period)
that maps the task graph onto itself, and where a rotated tile lands among the tasks of ranks
0 .. period-1 (what `tiles.build_graph(fold=True)` builds and `fold` expands)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from moetrace.executor.graph_util import exclusive_cumsum
from moetrace.executor.workload import Workload


@dataclass(frozen=True)
class Symmetry:
    """A run that rotating every rank by `period` ranks (rank a -> a + period, expert l*EP + a
    -> l*EP + a + period) maps onto itself: balanced routing, round-robin placement, one chunk,
    and every expert's receive buffer cut into row tiles that the rotation maps onto row tiles.
    `period` is the smallest such rotation (1 when every source's rows fill whole row tiles; 2
    when a row tile holds two sources' rows, ...); it divides `ranks`.

    per_stream: dispatch tiles per (source, destination) stream (the same for all);
    shift[l], tiles[l]: row tiles per rotation by `period` and per expert, for local expert l
    (shift 0 when one row tile holds every source's rows)."""

    ranks: int
    per_stream: int
    shift: np.ndarray
    tiles: np.ndarray
    period: int = 1

    @property
    def copies(self) -> int:
        """Rotations by multiples of `period` (each rank's copies on the other ranks, itself
        included): the folded graph (ranks 0 .. period-1) stands for this many blocks."""
        return self.ranks // self.period

    def send_rep(self, src: np.ndarray, dst: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Index of the dispatch tile (src -> dst, q) rotated onto a source below `period`
        among those sources' tiles (ordered by source, destination, tile)."""
        p, m, ep = self.period, src // self.period, self.ranks
        return np.asarray(((src % p) * ep + (dst - m * p) % ep) * self.per_stream + q)

    def recv_rep(self, src: np.ndarray, dst: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Position of the tile (src -> dst, q) rotated onto a destination below `period` among
        the tiles those destinations receive (ordered by source, destination, tile)."""
        p, m = self.period, dst // self.period
        return np.asarray((((src - m * p) % self.ranks) * p + dst % p) * self.per_stream + q)

    def row_tile_rep(self, expert: np.ndarray, index: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Position of the row tile (expert, index within it) rotated onto a rank below
        `period` among those ranks' row tiles (ordered by expert, then index)."""
        p = self.period
        local = expert // self.ranks
        first = exclusive_cumsum(np.repeat(self.tiles, p))  # experts l*EP + a, a < p: (l, a)
        moved = (index - (rank // p) * self.shift[local]) % np.maximum(self.tiles[local], 1)
        return np.asarray(first[local * p + rank % p] + moved)


def symmetry(
    wl: Workload, cnt: np.ndarray, expert_rank: np.ndarray, aiv_comm: bool
) -> Symmetry | None:
    """The rotation symmetry of a tile-schedule run (see `Symmetry`), or None.

    cnt: rows per (source, chunk, expert). Needed: one chunk, round-robin placement, the same
    counts from every source, the same count c for the experts of one local index on every
    rank, and row tiles that some rotation maps onto row tiles: EP x c a multiple of tile_rows
    (the buffer splits into whole tiles), or one row tile holding every source's rows. The
    period is then the least p with p x c a multiple of tile_rows for every local expert."""
    ep, tr = wl.ranks, wl.tile_rows
    experts = cnt.shape[2]
    if (
        not aiv_comm
        or wl.routing != "balanced"
        or cnt.shape[1] != 1
        or experts % ep
        or not np.array_equal(expert_rank, np.arange(experts) % ep)
        or not (cnt == cnt[:1]).all()
    ):
        return None
    per_local = cnt[0, 0].reshape(experts // ep, ep)  # (local expert, rank)
    if not (per_local == per_local[:, :1]).all():
        return None
    c = per_local[:, 0].astype(np.int64)
    one_tile = c * ep <= tr
    if not ((c * ep % tr == 0) | one_tile).all():
        return None
    # rotating by p ranks moves an expert's buffer by p x c rows: whole tiles when tile_rows
    # divides p x c, i.e. p a multiple of tile_rows / gcd(c, tile_rows) (which divides EP)
    period = 1
    for rows in c[~one_tile].tolist():
        period = math.lcm(period, tr // math.gcd(rows, tr))
    stream = int(c.sum())
    per_stream = -(-stream // tr)
    shift = np.where(one_tile, 0, period * c // tr)
    tiles = np.where(one_tile, (c > 0).astype(np.int64), c * ep // tr)
    return Symmetry(ep, per_stream, shift, tiles, period)
