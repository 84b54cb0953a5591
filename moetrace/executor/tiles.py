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
) -> TaskGraph:
    """All tasks of all ranks. `aiv_comm`: transfers issued by AIV tasks; `two_sided`: no
    per-tile arrival signal, so consumers wait for a per-rank "all arrived" node. `assign`:
    `route(wl)` when the caller already has it (routing is deterministic)."""
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
    cell_of_row = (
        (np.arange(ep, dtype=np.int64)[:, None] * chunks + row_chunk) * e_
        + assign.reshape(ep, tok * k)
    ).ravel()
    cnt = np.bincount(cell_of_row, minlength=ep * chunks * e_).reshape(ep, chunks, e_)

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

    b = Builder(T, _COLS, _FCOLS)
    ids: dict[str, np.ndarray] = {}
    tt_rank = np.repeat(np.arange(ep), nu)
    tt_u = np.tile(np.arange(nu), ep)
    tt_rows = np.minimum(tt, tok - tt_u * tt)
    tt_chunk = chunk_of_u[tt_u]
    common_tt: dict[str, Any] = dict(rank=tt_rank, token_tile=tt_u, chunk=tt_chunk, rows=tt_rows)
    bd = 2.0 if wl.dispatch_dtype in ("bf16", "fp16") else 1.0
    gate_io: dict[str, Any] = dict(
        a_bytes=tt_rows * h * 2.0, a_hbm=1.0, w_bytes=h * e_ * 2.0, w_hbm=1.0 / nu
    )
    ids["gate"] = b.add(
        "gate",
        ep * nu,
        **common_tt,
        flops=2.0 * tt_rows * h * e_,
        **gate_io,
        out_bytes=tt_rows * e_ * 4.0,
    )
    # top-k also zeroes its tokens' output rows (the accumulator unpermute adds into)
    ids["topk"] = b.add(
        "topk",
        ep * nu,
        **common_tt,
        flops=tt_rows * e_ * 4.0,
        a_bytes=tt_rows * e_ * 4.0,
        a_hbm=1.0,
        out_bytes=tt_rows * (k * 8.0 + h * 2.0),
    )
    b.edge(ids["gate"], ids["topk"])
    # layout: per (rank, chunk), counts rows per destination/expert from every token's top-k
    # (DeepEP's get_dispatch_layout); it fixes where each row goes in the send buffers
    lay_rank = np.repeat(np.arange(ep), chunks)
    lay_chunk = np.tile(np.arange(chunks), ep)
    lay_tokens = np.bincount(tt_rank * chunks + tt_chunk, weights=tt_rows, minlength=ep * chunks)
    ids["layout"] = b.add(
        "layout",
        ep * chunks,
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
    comm_tile: dict[str, Any] = dict(rank=c_src, peer=c_dst, tile=c_q, chunk=c_chunk, rows=c_rows)
    # permute: one task per dispatch tile, gathering its rows of x into the send buffer
    ids["permute"] = b.add(
        "permute",
        n_ct,
        **comm_tile,
        seq=dispatch_seq,
        flops=c_rows * h * (2.0 if bd == 1 else 0.0),
        a_bytes=c_rows * h * 2.0,
        a_hbm=1.0,
        out_bytes=c_rows * wl.dispatch_row_bytes,
    )
    b.edge(ids["layout"][c_src * chunks + c_chunk], ids["permute"])
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
                n_tile=np.tile(np.arange(m), ep * nu),
            )

        up = per_tt(s1)
        wid1 = np.tile(sw1, ep * nu)
        ids["shared_up"] = b.add(
            "shared_up",
            ep * nu * s1,
            **{**up, "w_bytes": wid1 * h * 2.0},
            flops=2.0 * up["rows"] * wid1 * h,
            a_bytes=up["rows"] * h * 2.0,
            a_hbm=1.0 / s1,
            w_hbm=1.0 / nu,
            out_bytes=up["rows"] * wid1 * 2.0,
        )
        ids["shared_act"] = b.add(
            "shared_act",
            ep * nu,
            **common_tt,
            flops=tt_rows * si * 5.0,
            a_bytes=tt_rows * 2 * si * 2.0,
            out_bytes=tt_rows * si * 2.0,
        )
        down = per_tt(s2)
        wid2 = np.tile(sw2, ep * nu)
        ids["shared_down"] = b.add(
            "shared_down",
            ep * nu * s2,
            **{**down, "w_bytes": wid2 * si * 2.0},
            flops=2.0 * down["rows"] * wid2 * si,
            a_bytes=down["rows"] * si * 2.0,
            w_hbm=1.0 / nu,
            out_bytes=down["rows"] * wid2 * 4.0,
        )
        b.edge(ids["shared_up"], np.repeat(ids["shared_act"], s1))
        b.edge(np.repeat(ids["shared_act"], s2), ids["shared_down"])
        b.edge(np.repeat(ids["topk"], s2), ids["shared_down"])  # adds into the zeroed output

    def comm_block(
        prefix: str, sender: np.ndarray, receiver: np.ndarray, nbytes: np.ndarray, seq: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        base: dict[str, Any] = dict(
            expert=-1,
            peer=receiver,
            tile=c_q,
            chunk=c_chunk,
            rows=c_rows,
            comm_bytes=nbytes,
            seq=seq,
        )
        first = None
        if aiv_comm:
            ids[f"{prefix}_issue"] = first = b.add(f"{prefix}_issue", n_ct, rank=sender, **base)
        ids[f"{prefix}_tx"] = tx = b.add(f"{prefix}_tx", n_ct, rank=sender, **base)
        ids[f"{prefix}_rx"] = rx = b.add(
            f"{prefix}_rx", n_ct, rank=receiver, **{**base, "peer": sender}
        )
        if first is not None:
            b.edge(first, tx)
        b.edge(tx, rx)
        if two_sided:  # completion known per rank only once every tile has arrived
            ids[f"{prefix}_done"] = done = b.add(f"{prefix}_done", ep, rank=np.arange(ep))
            b.edge(rx, done[receiver])
        return (first if first is not None else tx), rx

    d_first, d_last = comm_block(
        "dispatch", c_src, c_dst, c_rows * wl.dispatch_row_bytes, dispatch_seq
    )
    b.edge(ids["permute"], d_first)

    n1 = -(-2 * inter // wl.n_tile)
    n2 = -(-h // wl.n_tile)
    w1 = np.minimum(wl.n_tile, 2 * inter - np.arange(n1) * wl.n_tile)
    w2 = np.minimum(wl.n_tile, h - np.arange(n2) * wl.n_tile)
    reuse = tiles_per_expert[r_expert].astype(np.float64)

    def gemm(kind: str, nt: int, widths: np.ndarray, kdim: int, a_hbm: float) -> np.ndarray:
        rows = np.repeat(r_rows, nt)
        wid = np.tile(widths, n_rt)
        return b.add(
            kind,
            n_rt * nt,
            rank=np.repeat(r_rank, nt),
            expert=np.repeat(r_expert, nt),
            row_tile=np.repeat(r_idx, nt),
            n_tile=np.tile(np.arange(nt), n_rt),
            chunk=np.repeat(r_chunk, nt),
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
    # the same pairs sorted by row tile)
    order = np.lexsort((shared_rt, shared_ct))
    a, c = shared_ct[order], shared_rt[order]
    b.edge(np.repeat(d_last[a], n1), (c[:, None] * n1 + np.arange(n1)).ravel() + ids["gemm1"][0])
    if two_sided:
        b.edge(ids["dispatch_done"][np.repeat(r_rank, n1)], ids["gemm1"])
    rt_common = dict(rank=r_rank, expert=r_expert, row_tile=r_idx, chunk=r_chunk, rows=r_rows)
    ids["swiglu"] = b.add(
        "swiglu",
        n_rt,
        **rt_common,
        flops=r_rows * inter * 5.0,
        a_bytes=r_rows * 2 * inter * 2.0,
        out_bytes=r_rows * inter * 2.0,
    )
    b.edge(ids["gemm1"], np.repeat(ids["swiglu"], n1))
    ids["gemm2"] = gemm("gemm2", n2, w2, inter, 1.0 / n2)
    b.edge(np.repeat(ids["swiglu"], n2), ids["gemm2"])

    c_first, c_last = comm_block(
        "combine", c_dst, c_src, c_rows * wl.combine_row_bytes, combine_seq
    )
    order = np.lexsort((shared_ct, shared_rt))
    a, c = shared_rt[order], shared_ct[order]
    b.edge((a[:, None] * n2 + np.arange(n2)).ravel() + ids["gemm2"][0], np.repeat(c_first[c], n2))
    # unpermute: one task per combine tile on the source rank, weighted atomic add into the output
    ids["unpermute"] = b.add(
        "unpermute",
        n_ct,
        **comm_tile,
        seq=combine_seq,
        flops=c_rows * h * 2.0,
        a_bytes=c_rows * h * 2.0,
        a_hbm=1.0,
        out_bytes=c_rows * h * 4.0,
    )
    b.edge(c_last, ids["unpermute"])
    if two_sided:
        b.edge(ids["combine_done"][c_src], ids["unpermute"])

    cols = {name: np.concatenate(b.parts[name]) for name in _COLS + _FCOLS}
    seq = np.concatenate(b.parts["seq"])
    seq_expert = seq.copy()
    for name in ("permute", "dispatch_issue", "dispatch_tx", "dispatch_rx"):
        if name in ids:
            seq_expert[ids[name]] = expert_key
    for name in ("combine_issue", "combine_tx", "combine_rx", "unpermute"):
        if name in ids:
            seq_expert[ids[name]] = phase_span + expert_key
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
    return np.clip(k - dst_first[dst], 0, per_rank - 1)
