"""The tile-level task graph of one MoE layer across all EP ranks (schedule independent).

Rows are (source rank, token, k-slot) triples. Each source sorts its rows by (destination, chunk,
local expert, token) and cuts each (source, destination, chunk) stream into dispatch tiles of
`tile_rows` rows; each expert sorts what it receives by (chunk, source, token) and cuts it into
GEMM row tiles. A dependency joins two tiles when they share at least one row, so skewed
routing gives many-to-many edges. Combine tiles carry the same rows back as their dispatch tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from moetrace.executor.graph_util import (
    Builder,
    exclusive_cumsum,
    tiles_of_groups,
)
from moetrace.executor.rowlayout import RowLayout, RowMap
from moetrace.executor.symmetry import Symmetry, symmetry
from moetrace.executor.workload import Workload, place, route

# Task types in generation (= dependency) order; ids grow along every edge.
TYPES = (
    "gate",
    "topk",
    "layout",
    "permute",
    "shared_up",
    "shared_act",
    "shared_down",
    "dispatch_issue",
    "dispatch_tx",
    "dispatch_rx",
    "dispatch_done",
    "gemm1",
    "swiglu",
    "gemm2",
    "combine_issue",
    "combine_tx",
    "combine_rx",
    "combine_done",
    "unpermute",
    "launch",
)
T = {name: i for i, name in enumerate(TYPES)}
AIC_TYPES = ("gate", "shared_up", "shared_down", "gemm1", "gemm2")
COMM_TX = ("dispatch_tx", "combine_tx")
COMM_RX = ("dispatch_rx", "combine_rx")
ISSUE = ("dispatch_issue", "combine_issue")
DONE = ("dispatch_done", "combine_done")

_COLS = (
    "type",
    "rank",
    "expert",
    "row_tile",
    "n_tile",
    "peer",
    "tile",
    "token_tile",
    "chunk",
    "rows",
)
_FCOLS = ("flops", "a_bytes", "a_hbm", "w_bytes", "w_hbm", "out_bytes", "comm_bytes")


@dataclass
class TaskGraph:
    """Struct of arrays, one entry per task, plus data edges (src -> dst task ids)."""

    cols: dict[str, np.ndarray]
    edge_src: np.ndarray
    edge_dst: np.ndarray
    seq: np.ndarray  # ordering hint for link lanes: (phase, chunk, round, tile)
    seq_expert: np.ndarray  # the same, expert-major: (phase, chunk, local expert, round, tile)
    make_rows: Callable[[], RowMap]  # the per-row map, computed on demand
    assign: np.ndarray
    expert_rank: np.ndarray
    n_token_tiles: int
    chunks: int
    aiv_comm: bool
    two_sided: bool
    ids: dict[str, np.ndarray] = field(default_factory=dict)  # type -> task ids in object order
    # folded: the graph holds the tasks of ranks 0 .. period-1 of a rotation-symmetric run
    # (`symmetry`), each standing for its copies rotated by every multiple of the period; an
    # edge from a task of another rank (a transfer into the block) comes from its copy in the
    # block. `folded_ranks` is the number of copies (EP / period; 1: not folded).
    folded_ranks: int = 1
    symmetric: Symmetry | None = None

    @property
    def full_tasks(self) -> int:
        """Tasks of the whole run (all ranks), also when the graph is folded."""
        return self.n * self.folded_ranks

    @cached_property
    def rows(self) -> RowMap:
        """Where every row lives (computed on first use: only the functional proof needs it)."""
        return self.make_rows()

    @property
    def n(self) -> int:
        return int(self.cols["type"].size)


def build_graph(
    wl: Workload,
    chunks: int = 1,
    aiv_comm: bool = True,
    two_sided: bool = False,
    assign: np.ndarray | None = None,
    fold: bool = False,
) -> TaskGraph:
    """All tasks of all ranks. `aiv_comm`: transfers issued by AIV tasks; `two_sided`: no
    per-tile arrival signal, so consumers wait for a per-rank "all arrived" node. `assign`:
    `route(wl)` when the caller already has it (routing is deterministic).

    Rotation-symmetric tile runs (`symmetry`) break ties by each task's copy on the ranks
    below the period (its `seq` is (transfer order, position of that copy)), so rank a +
    period's schedule is the rotation of rank a's; `fold` then builds the tasks of ranks 0 ..
    period-1 alone (see `TaskGraph`), which `executor.fold` times and expands to every rank
    (other runs, or a period of EP: the whole graph; `folded_ranks` says which)."""
    sh = wl.shape
    ep, tok, k, h, inter = wl.ranks, wl.tokens, sh.top_k, sh.hidden, sh.intermediate
    tr = wl.tile_rows
    tt = max(1, tr // k)  # tokens per token tile: a token tile makes about one row tile of rows
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
    n_ct = c_g.size
    maxq = max(1, int(c_q.max()) + 1) if n_ct else 1
    c_src, c_dst, c_chunk = c_g // (ep * chunks), (c_g // chunks) % ep, c_g % chunks
    c_rows = np.minimum(tr, stream_rows[c_g] - c_q * tr)

    # expert receive buffers: (expert, chunk) sorted by (source, token, slot)
    buffer_base = exclusive_cumsum(cnt, axis=0)  # first buffer position of each cell
    buffer_rows = cnt.sum(axis=0).T.ravel()  # (expert, chunk)
    first_rt, r_g, r_idx = tiles_of_groups(buffer_rows, tr)
    n_rt = r_g.size
    r_expert, r_chunk = r_g // chunks, r_g % chunks
    r_rows = np.minimum(tr, buffer_rows[r_g] - r_idx * tr)
    layout = RowLayout(
        cnt, stream_base, buffer_base, first_ct, first_rt, expert_rank, ep, chunks, tr
    )
    shared_ct, shared_rt = layout.tile_pairs()

    def make_rows() -> RowMap:
        return layout.row_map(assign.reshape(ep, tok, k), tt)

    r_rank = expert_rank[r_expert].astype(np.int64)
    tiles_per_expert = np.bincount(r_expert, minlength=sh.experts)
    sym = symmetry(wl, cnt, expert_rank, aiv_comm)
    period = sym.period if sym is not None else ep
    copies = ep // period  # blocks of `period` ranks that a rotation maps onto each other
    fold = fold and copies > 1  # else the whole graph
    # the objects whose tasks are built: all, or (folded) those of ranks below the period:
    # their token tiles, the dispatch tiles they send (the first period x EP x per-stream
    # tiles) and receive, their row tiles
    ept = period if fold else ep  # ranks whose token tiles are built
    every_ct = np.arange(n_ct)
    sent = np.arange(period * ep * sym.per_stream) if fold and sym else every_ct
    received = np.flatnonzero(c_dst < period) if fold else every_ct
    kept_rt = np.flatnonzero(r_rank < period) if fold else np.arange(n_rt)
    # position of a tile's copy in the block among the block's tiles (ties; folded: edge
    # sources)
    src_side = sym.send_rep(c_src, c_dst, c_q) if sym else every_ct
    dst_side = sym.recv_rep(c_src, c_dst, c_q) if sym else every_ct
    rt_rep = sym.row_tile_rep(r_expert, r_idx, r_rank) if sym else np.arange(n_rt)

    b = Builder(T, _COLS, _FCOLS)
    ids: dict[str, np.ndarray] = {}
    objects: dict[str, np.ndarray] = {}  # comm-tile type -> the tiles its tasks stand for
    canon_parts: list[np.ndarray] = []
    q_base = [0]

    def add(kind: str, size: int, rep: np.ndarray, **cols: Any) -> np.ndarray:
        """`b.add`, plus each task's tie position: its id, or in a symmetric run the id its
        copy in the block (ranks below the period) has in the folded graph (`rep`: position
        among the block's tasks of this kind)."""
        block = b.add(kind, size, **cols)
        if sym is None:
            canon_parts.append(block)
        else:
            canon_parts.append(q_base[0] + np.broadcast_to(rep, (size,)))
            q_base[0] += size if fold else size // copies
        return block

    def rank_major(size: int) -> np.ndarray:
        """Position of each task of a kind ordered by rank among the tasks of its copy's rank
        in the block (rank mod period) and the block's lower ranks."""
        return np.arange(size) % (size // ept * period)

    tt_rank = np.repeat(np.arange(ept), nu)
    tt_u = np.tile(np.arange(nu), ept)
    tt_rows = np.minimum(tt, tok - tt_u * tt)
    tt_chunk = chunk_of_u[tt_u]
    common_tt: dict[str, Any] = dict(rank=tt_rank, token_tile=tt_u, chunk=tt_chunk, rows=tt_rows)
    bd = 2.0 if wl.dispatch_dtype in ("bf16", "fp16") else 1.0
    gate_io: dict[str, Any] = dict(
        a_bytes=tt_rows * h * 2.0, a_hbm=1.0, w_bytes=h * e_ * 2.0, w_hbm=1.0 / nu
    )
    ids["gate"] = add(
        "gate",
        ept * nu,
        rank_major(ept * nu),
        **common_tt,
        flops=2.0 * tt_rows * h * e_,
        **gate_io,
        out_bytes=tt_rows * e_ * 4.0,
    )
    # top-k also zeroes its tokens' output rows (the accumulator unpermute adds into)
    ids["topk"] = add(
        "topk",
        ept * nu,
        rank_major(ept * nu),
        **common_tt,
        flops=tt_rows * e_ * 4.0,
        a_bytes=tt_rows * e_ * 4.0,
        a_hbm=1.0,
        out_bytes=tt_rows * (k * 8.0 + h * 2.0),
    )
    b.edge(ids["gate"], ids["topk"])
    # layout: per (rank, chunk), counts rows per destination/expert from every token's top-k
    # (DeepEP's get_dispatch_layout); it fixes where each row goes in the send buffers
    lay_rank = np.repeat(np.arange(ept), chunks)
    lay_chunk = np.tile(np.arange(chunks), ept)
    lay_tokens = np.bincount(tt_rank * chunks + tt_chunk, weights=tt_rows, minlength=ept * chunks)
    ids["layout"] = add(
        "layout",
        ept * chunks,
        rank_major(ept * chunks),
        rank=lay_rank,
        chunk=lay_chunk,
        rows=lay_tokens.astype(np.int64),
        flops=lay_tokens * k * 2.0,
        a_bytes=lay_tokens * k * 4.0,
        a_hbm=1.0,
        out_bytes=float(e_ * 8),
    )
    b.edge(ids["topk"], ids["layout"][tt_rank * chunks + tt_chunk])
    # transfers go round-robin over destinations (sender s: s+1, s+2, ...) so that no receiver
    # is hit by every sender at once; seq carries that order to the schedulers
    rnd = (c_dst - c_src) % ep
    dispatch_seq = ((0 * chunks + c_chunk) * ep + rnd) * maxq + c_q
    combine_seq = ((1 * chunks + c_chunk) * ep + rnd) * maxq + c_q
    # expert-major alternative: every sender sends its rows of each destination's first local
    # expert before any of its second, so experts complete one after another on the receiver
    c_local = _local_expert_of_tiles(cnt, by_dst, c_src, c_dst, c_chunk, c_q * tr, ep)
    n_local = max(1, e_ // ep)
    expert_key = ((c_chunk * n_local + c_local) * ep + rnd) * maxq + c_q
    phase_span = chunks * n_local * ep * maxq
    # columns shared by every per-comm-tile task (permute, unpermute): sender, receiver, tile
    comm_tile: dict[str, Any] = dict(
        rank=c_src[sent], peer=c_dst[sent], tile=c_q[sent], chunk=c_chunk[sent], rows=c_rows[sent]
    )
    s_rows = c_rows[sent]
    # permute: one task per dispatch tile, gathering its rows of x into the send buffer
    ids["permute"] = add(
        "permute",
        sent.size,
        src_side[sent],
        **comm_tile,
        seq=dispatch_seq[sent],
        flops=s_rows * h * (2.0 if bd == 1 else 0.0),
        a_bytes=s_rows * h * 2.0,
        a_hbm=1.0,
        out_bytes=s_rows * wl.dispatch_row_bytes,
    )
    objects["permute"] = sent
    b.edge(ids["layout"][c_src[sent] * chunks + c_chunk[sent]], ids["permute"])
    shared = bool(wl.shared_expert and sh.shared_experts)
    if shared:
        si = sh.intermediate * sh.shared_experts
        s1 = -(-2 * si // wl.n_tile)
        s2 = -(-h // wl.n_tile)
        sw1 = np.minimum(wl.n_tile, 2 * si - np.arange(s1) * wl.n_tile)
        sw2 = np.minimum(wl.n_tile, h - np.arange(s2) * wl.n_tile)

        def per_tt(m: int) -> dict[str, Any]:
            return dict(
                rank=np.repeat(tt_rank, m),
                token_tile=np.repeat(tt_u, m),
                chunk=np.repeat(tt_chunk, m),
                rows=np.repeat(tt_rows, m),
                n_tile=np.tile(np.arange(m), ept * nu),
            )

        up = per_tt(s1)
        wid1 = np.tile(sw1, ept * nu)
        ids["shared_up"] = add(
            "shared_up",
            ept * nu * s1,
            rank_major(ept * nu * s1),
            **{**up, "w_bytes": wid1 * h * 2.0},
            flops=2.0 * up["rows"] * wid1 * h,
            a_bytes=up["rows"] * h * 2.0,
            a_hbm=1.0 / s1,
            w_hbm=1.0 / nu,
            out_bytes=up["rows"] * wid1 * 2.0,
        )
        ids["shared_act"] = add(
            "shared_act",
            ept * nu,
            rank_major(ept * nu),
            **common_tt,
            flops=tt_rows * si * 5.0,
            a_bytes=tt_rows * 2 * si * 2.0,
            out_bytes=tt_rows * si * 2.0,
        )
        down = per_tt(s2)
        wid2 = np.tile(sw2, ept * nu)
        ids["shared_down"] = add(
            "shared_down",
            ept * nu * s2,
            rank_major(ept * nu * s2),
            **{**down, "w_bytes": wid2 * si * 2.0},
            flops=2.0 * down["rows"] * wid2 * si,
            a_bytes=down["rows"] * si * 2.0,
            w_hbm=1.0 / nu,
            out_bytes=down["rows"] * wid2 * 4.0,
        )
        b.edge(ids["shared_up"], np.repeat(ids["shared_act"], s1))
        b.edge(np.repeat(ids["shared_act"], s2), ids["shared_down"])
        b.edge(np.repeat(ids["topk"], s2), ids["shared_down"])  # adds into the zeroed output

    def by_tile(block: np.ndarray, tiles: np.ndarray) -> np.ndarray:
        """Task id of each dispatch tile's task in `block` (built for `tiles`; -1 elsewhere)."""
        out = np.full(n_ct, -1, dtype=np.int64)
        out[tiles] = block
        return out

    def comm_block(
        prefix: str,
        sender: np.ndarray,
        receiver: np.ndarray,
        nbytes: np.ndarray,
        seq: np.ndarray,
        from_src: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Issue, TX, RX (and done) tasks of one all-to-all; (first, RX) ids by dispatch tile.
        from_src: the senders are the tiles' sources (dispatch), else their destinations."""
        out_tiles, in_tiles = (sent, received) if from_src else (received, sent)
        out_rep, in_rep = (src_side, dst_side) if from_src else (dst_side, src_side)

        def base(tiles: np.ndarray, peer: np.ndarray) -> dict[str, Any]:
            return dict(
                expert=-1,
                peer=peer[tiles],
                tile=c_q[tiles],
                chunk=c_chunk[tiles],
                rows=c_rows[tiles],
                comm_bytes=nbytes[tiles],
                seq=seq[tiles],
            )

        first = None
        if aiv_comm:
            ids[f"{prefix}_issue"] = first = add(
                f"{prefix}_issue",
                out_tiles.size,
                out_rep[out_tiles],
                rank=sender[out_tiles],
                **base(out_tiles, receiver),
            )
            objects[f"{prefix}_issue"] = out_tiles
        ids[f"{prefix}_tx"] = tx = add(
            f"{prefix}_tx",
            out_tiles.size,
            out_rep[out_tiles],
            rank=sender[out_tiles],
            **base(out_tiles, receiver),
        )
        ids[f"{prefix}_rx"] = rx = add(
            f"{prefix}_rx",
            in_tiles.size,
            in_rep[in_tiles],
            rank=receiver[in_tiles],
            **base(in_tiles, sender),
        )
        objects[f"{prefix}_tx"], objects[f"{prefix}_rx"] = out_tiles, in_tiles
        if first is not None:
            b.edge(first, tx)
        # folded: a tile's TX on a rank outside the block is its copy's in the block
        b.edge(tx[0] + (out_rep[in_tiles] if fold else in_tiles), rx)
        if two_sided:  # completion known per rank only once every tile has arrived
            ids[f"{prefix}_done"] = done = add(
                f"{prefix}_done", ept, rank_major(ept), rank=np.arange(ept)
            )
            b.edge(rx, done[receiver[in_tiles]])
        return by_tile(first if first is not None else tx, out_tiles), by_tile(rx, in_tiles)

    d_first, d_last = comm_block(
        "dispatch", c_src, c_dst, c_rows * wl.dispatch_row_bytes, dispatch_seq, True
    )
    b.edge(ids["permute"], d_first[sent])

    n1 = -(-2 * inter // wl.n_tile)
    n2 = -(-h // wl.n_tile)
    w1 = np.minimum(wl.n_tile, 2 * inter - np.arange(n1) * wl.n_tile)
    w2 = np.minimum(wl.n_tile, h - np.arange(n2) * wl.n_tile)
    n_kept = kept_rt.size
    kr_rows, kr_rank, kr_expert = r_rows[kept_rt], r_rank[kept_rt], r_expert[kept_rt]
    kr_idx, kr_chunk = r_idx[kept_rt], r_chunk[kept_rt]
    reuse = tiles_per_expert[kr_expert].astype(np.float64)
    rt_pos = np.full(n_rt, -1, dtype=np.int64)  # position of a row tile among those built
    rt_pos[kept_rt] = np.arange(n_kept)

    def gemm(kind: str, nt: int, widths: np.ndarray, kdim: int, a_hbm: float) -> np.ndarray:
        rows = np.repeat(kr_rows, nt)
        wid = np.tile(widths, n_kept)
        return add(
            kind,
            n_kept * nt,
            (rt_rep[kept_rt][:, None] * nt + np.arange(nt)).ravel(),
            rank=np.repeat(kr_rank, nt),
            expert=np.repeat(kr_expert, nt),
            row_tile=np.repeat(kr_idx, nt),
            n_tile=np.tile(np.arange(nt), n_kept),
            chunk=np.repeat(kr_chunk, nt),
            rows=rows,
            flops=2.0 * rows * wid * kdim,
            a_bytes=rows * kdim * (bd if kind == "gemm1" else 2.0),
            a_hbm=a_hbm,
            w_bytes=wid * kdim * 2.0,
            w_hbm=1.0 / np.repeat(reuse, nt),
            out_bytes=rows * wid * 2.0,
        )

    ids["gemm1"] = gemm("gemm1", n1, w1, h, 1.0 / n1)
    # (dispatch tile, row tile) pairs sharing a row, sorted by dispatch tile (combine side:
    # the same pairs sorted by row tile); folded: the pairs of the block's row tiles
    pair_kept = rt_pos[shared_rt] >= 0
    pair_ct, pair_rt = shared_ct[pair_kept], shared_rt[pair_kept]
    order = np.lexsort((pair_rt, pair_ct))
    a, c = pair_ct[order], rt_pos[pair_rt[order]]
    b.edge(np.repeat(d_last[a], n1), (c[:, None] * n1 + np.arange(n1)).ravel() + ids["gemm1"][0])
    if two_sided:
        b.edge(ids["dispatch_done"][np.repeat(kr_rank, n1)], ids["gemm1"])
    rt_common = dict(rank=kr_rank, expert=kr_expert, row_tile=kr_idx, chunk=kr_chunk, rows=kr_rows)
    ids["swiglu"] = add(
        "swiglu",
        n_kept,
        rt_rep[kept_rt],
        **rt_common,
        flops=kr_rows * inter * 5.0,
        a_bytes=kr_rows * 2 * inter * 2.0,
        out_bytes=kr_rows * inter * 2.0,
    )
    b.edge(ids["gemm1"], np.repeat(ids["swiglu"], n1))
    ids["gemm2"] = gemm("gemm2", n2, w2, inter, 1.0 / n2)
    b.edge(np.repeat(ids["swiglu"], n2), ids["gemm2"])

    c_first, c_last = comm_block(
        "combine", c_dst, c_src, c_rows * wl.combine_row_bytes, combine_seq, False
    )
    order = np.lexsort((pair_ct, pair_rt))
    a, c = rt_pos[pair_rt[order]], pair_ct[order]
    b.edge((a[:, None] * n2 + np.arange(n2)).ravel() + ids["gemm2"][0], np.repeat(c_first[c], n2))
    # unpermute: one task per combine tile on the source rank, weighted atomic add into the output
    ids["unpermute"] = add(
        "unpermute",
        sent.size,
        src_side[sent],
        **comm_tile,
        seq=combine_seq[sent],
        flops=s_rows * h * 2.0,
        a_bytes=s_rows * h * 2.0,
        a_hbm=1.0,
        out_bytes=s_rows * h * 4.0,
    )
    objects["unpermute"] = sent
    b.edge(c_last[sent], ids["unpermute"])
    if two_sided:
        b.edge(ids["combine_done"][c_src[sent]], ids["unpermute"])

    cols = {name: np.concatenate(b.parts[name]) for name in _COLS + _FCOLS}
    seq = np.concatenate(b.parts["seq"])
    seq_expert = seq.copy()
    for name in ("permute", "dispatch_issue", "dispatch_tx", "dispatch_rx"):
        if name in ids:
            seq_expert[ids[name]] = expert_key[objects[name]]
    for name in ("combine_issue", "combine_tx", "combine_rx", "unpermute"):
        if name in ids:
            seq_expert[ids[name]] = phase_span + expert_key[objects[name]]
    # ties after seq: by id, or in a symmetric run by the id of the task's copy on rank 0, so
    # that every rank breaks its ties as rank 0 does (the schedules order by seq alone)
    canon = np.concatenate(canon_parts)
    span = int(canon.max(initial=0)) + 1
    seq = seq * span + canon
    seq_expert = seq_expert * span + canon
    es = np.concatenate([e[0] for e in b.edges])
    ed = np.concatenate([e[1] for e in b.edges])
    return TaskGraph(
        cols,
        es,
        ed,
        seq,
        seq_expert,
        make_rows,
        assign,
        expert_rank,
        nu,
        chunks,
        aiv_comm,
        two_sided,
        ids,
        copies if fold else 1,
        sym,
    )


def _local_expert_of_tiles(
    cnt: np.ndarray,
    by_dst: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    chunk: np.ndarray,
    first_row: np.ndarray,
    ep: int,
) -> np.ndarray:
    """Local expert index (on its destination) of the first row of every dispatch tile.

    cnt: rows per (source, chunk, expert); streams list a destination's experts in `by_dst`
    order, so a tile's first row falls in the cell found by one searchsorted per tile over the
    cumulative counts of its (source, chunk) row, offset to its destination's first expert."""
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
