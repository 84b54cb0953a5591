"""The tile-level task graph of one MoE layer across all EP ranks (schedule independent).

The tiles come from `tiling` (token tiles, dispatch tiles per (source, destination, chunk)
stream, expert row tiles); here they become tasks, kind by kind in dependency order. A
dependency joins two tiles when they share at least one row, so skewed routing gives
many-to-many edges. Combine tiles carry the same rows back as their dispatch tile.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from moetrace.executor.graph_util import Builder
from moetrace.executor.rowlayout import RowMap
from moetrace.executor.symmetry import symmetry
from moetrace.executor.taskgraph import COLS, FCOLS, T, TaskGraph
from moetrace.executor.tiling import Tiling, local_expert_of_tiles, tile_layer
from moetrace.executor.workload import Workload


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
    tasks = _Tasks(wl, tile_layer(wl, chunks, assign), aiv_comm, two_sided, fold)
    tasks.token_tiles()
    tasks.permute()
    if wl.shared_expert and wl.shape.shared_experts:
        tasks.shared_expert()
    tasks.experts(dispatch_rx=tasks.dispatch())
    tasks.combine()
    return tasks.graph()


class _Tasks:
    """The tasks and data edges of one layer, added kind by kind in dependency order (ids
    grow along every edge), with each task's tie position for `seq` (see `build_graph`)."""

    def __init__(
        self, wl: Workload, t: Tiling, aiv_comm: bool, two_sided: bool, fold: bool
    ) -> None:
        self.wl, self.t = wl, t
        self.aiv_comm, self.two_sided = aiv_comm, two_sided
        ep = wl.ranks
        sym = self.sym = symmetry(wl, t.cnt, t.expert_rank, aiv_comm)
        self.period = period = sym.period if sym is not None else ep
        self.copies = copies = ep // period  # blocks of `period` ranks a rotation maps alike
        self.fold = fold = fold and copies > 1  # else the whole graph
        # the objects whose tasks are built: all, or (folded) those of ranks below the period:
        # their token tiles, the dispatch tiles they send (the first period x EP x per-stream
        # tiles) and receive, their row tiles
        self.ept = period if fold else ep  # ranks whose token tiles are built
        every_ct = np.arange(t.n_ct)
        self.sent = np.arange(period * ep * sym.per_stream) if fold and sym else every_ct
        self.received = np.flatnonzero(t.c_dst < period) if fold else every_ct
        self.kept_rt = np.flatnonzero(t.r_rank < period) if fold else np.arange(t.n_rt)
        # position of a tile's copy in the block among the block's tiles (ties; folded: edge
        # sources)
        self.src_side = sym.send_rep(t.c_src, t.c_dst, t.c_q) if sym else every_ct
        self.dst_side = sym.recv_rep(t.c_src, t.c_dst, t.c_q) if sym else every_ct
        self.rt_rep = sym.row_tile_rep(t.r_expert, t.r_idx, t.r_rank) if sym else np.arange(t.n_rt)
        self.b = Builder(T, COLS, FCOLS)
        self.ids: dict[str, np.ndarray] = {}
        self.objects: dict[str, np.ndarray] = {}  # comm-tile type -> the tiles its tasks are
        self._canon: list[np.ndarray] = []
        self._q_base = 0
        # bytes per dispatched value relative to bf16 input (fp8/int8 dispatch: 1)
        self.bd = 2.0 if wl.dispatch_dtype in ("bf16", "fp16") else 1.0
        # token tiles of the built ranks
        nu, tt = t.n_token_tiles, t.tokens_per_tile
        self.tt_rank = np.repeat(np.arange(self.ept), nu)
        self.tt_u = np.tile(np.arange(nu), self.ept)
        self.tt_rows = np.minimum(tt, wl.tokens - self.tt_u * tt)
        self.tt_chunk = t.chunk_of_u[self.tt_u]
        # transfers go round-robin over destinations (sender s: s+1, s+2, ...) so that no
        # receiver is hit by every sender at once; seq carries that order to the schedulers
        chunks, maxq = t.chunks, t.max_q
        rnd = (t.c_dst - t.c_src) % ep
        self.dispatch_seq = ((0 * chunks + t.c_chunk) * ep + rnd) * maxq + t.c_q
        self.combine_seq = ((1 * chunks + t.c_chunk) * ep + rnd) * maxq + t.c_q
        # expert-major alternative: every sender sends its rows of each destination's first
        # local expert before any of its second, so experts complete one after another on
        # the receiver
        c_local = local_expert_of_tiles(t, ep)
        n_local = max(1, wl.shape.experts // ep)
        self.expert_key = ((t.c_chunk * n_local + c_local) * ep + rnd) * maxq + t.c_q
        self.phase_span = chunks * n_local * ep * maxq

    def add(self, kind: str, size: int, rep: np.ndarray, **cols: Any) -> np.ndarray:
        """`Builder.add`, plus each task's tie position: its id, or in a symmetric run the id
        its copy in the block (ranks below the period) has in the folded graph (`rep`:
        position among the block's tasks of this kind)."""
        block = self.b.add(kind, size, **cols)
        if self.sym is None:
            self._canon.append(block)
        else:
            self._canon.append(self._q_base + np.broadcast_to(rep, (size,)))
            self._q_base += size if self.fold else size // self.copies
        return block

    def rank_major(self, size: int) -> np.ndarray:
        """Position of each task of a kind ordered by rank among the tasks of its copy's rank
        in the block (rank mod period) and the block's lower ranks."""
        return np.arange(size) % (size // self.ept * self.period)

    def _per_token_tile(self) -> dict[str, Any]:
        return dict(rank=self.tt_rank, token_tile=self.tt_u, chunk=self.tt_chunk, rows=self.tt_rows)

    def _comm_tile(self) -> dict[str, Any]:
        """Columns of a per-dispatch-tile task on the sender: receiver, tile, chunk, rows."""
        t, sent = self.t, self.sent
        return dict(
            rank=t.c_src[sent],
            peer=t.c_dst[sent],
            tile=t.c_q[sent],
            chunk=t.c_chunk[sent],
            rows=t.c_rows[sent],
        )

    def token_tiles(self) -> None:
        """Gate, top-k (which also zeroes its tokens' output rows, the accumulator unpermute
        adds into) and the per-(rank, chunk) dispatch layout."""
        wl, t, ids, b = self.wl, self.t, self.ids, self.b
        h, e_, k = wl.shape.hidden, wl.shape.experts, wl.shape.top_k
        nu, chunks, ept = t.n_token_tiles, t.chunks, self.ept
        tt_rows = self.tt_rows
        ids["gate"] = self.add(
            "gate",
            ept * nu,
            self.rank_major(ept * nu),
            **self._per_token_tile(),
            flops=2.0 * tt_rows * h * e_,
            a_bytes=tt_rows * h * 2.0,
            a_hbm=1.0,
            w_bytes=h * e_ * 2.0,
            w_hbm=1.0 / nu,
            out_bytes=tt_rows * e_ * 4.0,
        )
        ids["topk"] = self.add(
            "topk",
            ept * nu,
            self.rank_major(ept * nu),
            **self._per_token_tile(),
            flops=tt_rows * e_ * 4.0,
            a_bytes=tt_rows * e_ * 4.0,
            a_hbm=1.0,
            out_bytes=tt_rows * (k * 8.0 + h * 2.0),
        )
        b.edge(ids["gate"], ids["topk"])
        # layout: per (rank, chunk), counts rows per destination/expert from every token's
        # top-k (DeepEP's get_dispatch_layout); it fixes where each row goes in the send
        # buffers
        cell = self.tt_rank * chunks + self.tt_chunk
        lay_tokens = np.bincount(cell, weights=tt_rows, minlength=ept * chunks)
        ids["layout"] = self.add(
            "layout",
            ept * chunks,
            self.rank_major(ept * chunks),
            rank=np.repeat(np.arange(ept), chunks),
            chunk=np.tile(np.arange(chunks), ept),
            rows=lay_tokens.astype(np.int64),
            flops=lay_tokens * k * 2.0,
            a_bytes=lay_tokens * k * 4.0,
            a_hbm=1.0,
            out_bytes=float(e_ * 8),
        )
        b.edge(ids["topk"], ids["layout"][cell])

    def permute(self) -> None:
        """One task per dispatch tile, gathering its rows of x into the send buffer."""
        t, sent, h = self.t, self.sent, self.wl.shape.hidden
        s_rows = t.c_rows[sent]
        self.ids["permute"] = self.add(
            "permute",
            sent.size,
            self.src_side[sent],
            **self._comm_tile(),
            seq=self.dispatch_seq[sent],
            flops=s_rows * h * (2.0 if self.bd == 1 else 0.0),
            a_bytes=s_rows * h * 2.0,
            a_hbm=1.0,
            out_bytes=s_rows * self.wl.dispatch_row_bytes,
        )
        self.objects["permute"] = sent
        self.b.edge(
            self.ids["layout"][t.c_src[sent] * t.chunks + t.c_chunk[sent]], self.ids["permute"]
        )

    def shared_expert(self) -> None:
        """The shared expert's up GEMM, activation and down GEMM per token tile (N-tiled)."""
        wl, ids, b = self.wl, self.ids, self.b
        sh, h, n_tile = wl.shape, wl.shape.hidden, wl.n_tile
        nu, ept = self.t.n_token_tiles, self.ept
        tt_rows = self.tt_rows
        si = sh.intermediate * sh.shared_experts
        s1 = -(-2 * si // n_tile)
        s2 = -(-h // n_tile)
        sw1 = np.minimum(n_tile, 2 * si - np.arange(s1) * n_tile)
        sw2 = np.minimum(n_tile, h - np.arange(s2) * n_tile)

        def per_tt(m: int) -> dict[str, Any]:
            return dict(
                rank=np.repeat(self.tt_rank, m),
                token_tile=np.repeat(self.tt_u, m),
                chunk=np.repeat(self.tt_chunk, m),
                rows=np.repeat(tt_rows, m),
                n_tile=np.tile(np.arange(m), ept * nu),
            )

        up = per_tt(s1)
        wid1 = np.tile(sw1, ept * nu)
        ids["shared_up"] = self.add(
            "shared_up",
            ept * nu * s1,
            self.rank_major(ept * nu * s1),
            **{**up, "w_bytes": wid1 * h * 2.0},
            flops=2.0 * up["rows"] * wid1 * h,
            a_bytes=up["rows"] * h * 2.0,
            a_hbm=1.0 / s1,
            w_hbm=1.0 / nu,
            out_bytes=up["rows"] * wid1 * 2.0,
        )
        ids["shared_act"] = self.add(
            "shared_act",
            ept * nu,
            self.rank_major(ept * nu),
            **self._per_token_tile(),
            flops=tt_rows * si * 5.0,
            a_bytes=tt_rows * 2 * si * 2.0,
            out_bytes=tt_rows * si * 2.0,
        )
        down = per_tt(s2)
        wid2 = np.tile(sw2, ept * nu)
        ids["shared_down"] = self.add(
            "shared_down",
            ept * nu * s2,
            self.rank_major(ept * nu * s2),
            **{**down, "w_bytes": wid2 * si * 2.0},
            flops=2.0 * down["rows"] * wid2 * si,
            a_bytes=down["rows"] * si * 2.0,
            w_hbm=1.0 / nu,
            out_bytes=down["rows"] * wid2 * 4.0,
        )
        b.edge(ids["shared_up"], np.repeat(ids["shared_act"], s1))
        b.edge(np.repeat(ids["shared_act"], s2), ids["shared_down"])
        b.edge(np.repeat(ids["topk"], s2), ids["shared_down"])  # adds into the zeroed output

    def _by_tile(self, block: np.ndarray, tiles: np.ndarray) -> np.ndarray:
        """Task id of each dispatch tile's task in `block` (built for `tiles`; -1 elsewhere)."""
        out = np.full(self.t.n_ct, -1, dtype=np.int64)
        out[tiles] = block
        return out

    def comm_block(self, prefix: str) -> tuple[np.ndarray, np.ndarray]:
        """Issue, TX, RX (and done) tasks of one all-to-all, "dispatch" (each tile from its
        source to its destination) or "combine" (back); (first, RX) task ids by dispatch
        tile."""
        t, ids, b, wl = self.t, self.ids, self.b, self.wl
        from_src = prefix == "dispatch"
        if from_src:
            sender, receiver, seq = t.c_src, t.c_dst, self.dispatch_seq
            nbytes = t.c_rows * wl.dispatch_row_bytes
        else:
            sender, receiver, seq = t.c_dst, t.c_src, self.combine_seq
            nbytes = t.c_rows * wl.combine_row_bytes
        sent, received = self.sent, self.received
        out_tiles, in_tiles = (sent, received) if from_src else (received, sent)
        out_rep, in_rep = (
            (self.src_side, self.dst_side) if from_src else (self.dst_side, self.src_side)
        )

        def base(tiles: np.ndarray, peer: np.ndarray) -> dict[str, Any]:
            return dict(
                expert=-1,
                peer=peer[tiles],
                tile=t.c_q[tiles],
                chunk=t.c_chunk[tiles],
                rows=t.c_rows[tiles],
                comm_bytes=nbytes[tiles],
                seq=seq[tiles],
            )

        first = None
        if self.aiv_comm:
            ids[f"{prefix}_issue"] = first = self.add(
                f"{prefix}_issue",
                out_tiles.size,
                out_rep[out_tiles],
                rank=sender[out_tiles],
                **base(out_tiles, receiver),
            )
            self.objects[f"{prefix}_issue"] = out_tiles
        ids[f"{prefix}_tx"] = tx = self.add(
            f"{prefix}_tx",
            out_tiles.size,
            out_rep[out_tiles],
            rank=sender[out_tiles],
            **base(out_tiles, receiver),
        )
        ids[f"{prefix}_rx"] = rx = self.add(
            f"{prefix}_rx",
            in_tiles.size,
            in_rep[in_tiles],
            rank=receiver[in_tiles],
            **base(in_tiles, sender),
        )
        self.objects[f"{prefix}_tx"], self.objects[f"{prefix}_rx"] = out_tiles, in_tiles
        if first is not None:
            b.edge(first, tx)
        # folded: a tile's TX on a rank outside the block is its copy's in the block
        b.edge(tx[0] + (out_rep[in_tiles] if self.fold else in_tiles), rx)
        if self.two_sided:  # completion known per rank only once every tile has arrived
            ids[f"{prefix}_done"] = done = self.add(
                f"{prefix}_done", self.ept, self.rank_major(self.ept), rank=np.arange(self.ept)
            )
            b.edge(rx, done[receiver[in_tiles]])
        return (
            self._by_tile(first if first is not None else tx, out_tiles),
            self._by_tile(rx, in_tiles),
        )

    def dispatch(self) -> np.ndarray:
        """The dispatch all-to-all (after each tile's permute); the RX task id of every
        dispatch tile (-1 for tiles not built)."""
        first, rx = self.comm_block("dispatch")
        self.b.edge(self.ids["permute"], first[self.sent])
        return rx

    def experts(self, dispatch_rx: np.ndarray) -> None:
        """GEMM1 (N-tiled), SwiGLU and GEMM2 per expert row tile; GEMM1 tiles wait for every
        dispatch tile (`dispatch_rx`: its RX task) that shares a row with their row tile."""
        wl, t, ids, b = self.wl, self.t, self.ids, self.b
        h, inter, n_tile = wl.shape.hidden, wl.shape.intermediate, wl.n_tile
        n1 = self.n1 = -(-2 * inter // n_tile)
        n2 = self.n2 = -(-h // n_tile)
        w1 = np.minimum(n_tile, 2 * inter - np.arange(n1) * n_tile)
        w2 = np.minimum(n_tile, h - np.arange(n2) * n_tile)
        kept_rt = self.kept_rt
        n_kept = kept_rt.size
        kr_rows, kr_rank, kr_expert = t.r_rows[kept_rt], t.r_rank[kept_rt], t.r_expert[kept_rt]
        kr_idx, kr_chunk = t.r_idx[kept_rt], t.r_chunk[kept_rt]
        reuse = t.tiles_per_expert[kr_expert].astype(np.float64)
        rt_pos = self.rt_pos = np.full(t.n_rt, -1, dtype=np.int64)  # position among those built
        rt_pos[kept_rt] = np.arange(n_kept)
        bd = self.bd

        def gemm(kind: str, nt: int, widths: np.ndarray, kdim: int, a_hbm: float) -> np.ndarray:
            rows = np.repeat(kr_rows, nt)
            wid = np.tile(widths, n_kept)
            return self.add(
                kind,
                n_kept * nt,
                (self.rt_rep[kept_rt][:, None] * nt + np.arange(nt)).ravel(),
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
        # (dispatch tile, row tile) pairs sharing a row, sorted by dispatch tile (combine
        # side: the same pairs sorted by row tile); folded: the pairs of the block's row tiles
        pair_kept = rt_pos[t.shared_rt] >= 0
        self.pair_ct, self.pair_rt = t.shared_ct[pair_kept], t.shared_rt[pair_kept]
        order = np.lexsort((self.pair_rt, self.pair_ct))
        a, c = self.pair_ct[order], rt_pos[self.pair_rt[order]]
        b.edge(
            np.repeat(dispatch_rx[a], n1),
            (c[:, None] * n1 + np.arange(n1)).ravel() + ids["gemm1"][0],
        )
        if self.two_sided:
            b.edge(ids["dispatch_done"][np.repeat(kr_rank, n1)], ids["gemm1"])
        ids["swiglu"] = self.add(
            "swiglu",
            n_kept,
            self.rt_rep[kept_rt],
            rank=kr_rank,
            expert=kr_expert,
            row_tile=kr_idx,
            chunk=kr_chunk,
            rows=kr_rows,
            flops=kr_rows * inter * 5.0,
            a_bytes=kr_rows * 2 * inter * 2.0,
            out_bytes=kr_rows * inter * 2.0,
        )
        b.edge(ids["gemm1"], np.repeat(ids["swiglu"], n1))
        ids["gemm2"] = gemm("gemm2", n2, w2, inter, 1.0 / n2)
        b.edge(np.repeat(ids["swiglu"], n2), ids["gemm2"])

    def combine(self) -> None:
        """The combine all-to-all (each tile after every GEMM2 tile sharing a row with it),
        then one unpermute task per combine tile on the source rank (weighted atomic add into
        the output)."""
        t, ids, b, sent = self.t, self.ids, self.b, self.sent
        c_first, c_last = self.comm_block("combine")
        h, n2 = self.wl.shape.hidden, self.n2
        order = np.lexsort((self.pair_ct, self.pair_rt))
        a, c = self.rt_pos[self.pair_rt[order]], self.pair_ct[order]
        b.edge(
            (a[:, None] * n2 + np.arange(n2)).ravel() + ids["gemm2"][0], np.repeat(c_first[c], n2)
        )
        s_rows = t.c_rows[sent]
        ids["unpermute"] = self.add(
            "unpermute",
            sent.size,
            self.src_side[sent],
            **self._comm_tile(),
            seq=self.combine_seq[sent],
            flops=s_rows * h * 2.0,
            a_bytes=s_rows * h * 2.0,
            a_hbm=1.0,
            out_bytes=s_rows * h * 4.0,
        )
        self.objects["unpermute"] = sent
        b.edge(c_last[sent], ids["unpermute"])
        if self.two_sided:
            b.edge(ids["combine_done"][t.c_src[sent]], ids["unpermute"])

    def graph(self) -> TaskGraph:
        """The task graph of everything added (columns, edges, seq with its ties)."""
        b, ids, objects, t, wl = self.b, self.ids, self.objects, self.t, self.wl
        cols = {name: np.concatenate(b.parts[name]) for name in COLS + FCOLS}
        seq = np.concatenate(b.parts["seq"])
        seq_expert = seq.copy()
        for name in ("permute", "dispatch_issue", "dispatch_tx", "dispatch_rx"):
            if name in ids:
                seq_expert[ids[name]] = self.expert_key[objects[name]]
        for name in ("combine_issue", "combine_tx", "combine_rx", "unpermute"):
            if name in ids:
                seq_expert[ids[name]] = self.phase_span + self.expert_key[objects[name]]
        # ties after seq: by id, or in a symmetric run by the id of the task's copy on rank 0,
        # so that every rank breaks its ties as rank 0 does (the schedules order by seq alone)
        canon = np.concatenate(self._canon)
        span = int(canon.max(initial=0)) + 1
        seq = seq * span + canon
        seq_expert = seq_expert * span + canon
        es = np.concatenate([e[0] for e in b.edges])
        ed = np.concatenate([e[1] for e in b.edges])

        def make_rows() -> RowMap:
            return t.row_map(wl.ranks, wl.tokens, wl.shape.top_k)

        return TaskGraph(
            cols,
            es,
            ed,
            seq,
            seq_expert,
            make_rows,
            t.assign,
            t.expert_rank,
            t.n_token_tiles,
            t.chunks,
            self.aiv_comm,
            self.two_sided,
            ids,
            self.copies if self.fold else 1,
            self.sym,
        )
