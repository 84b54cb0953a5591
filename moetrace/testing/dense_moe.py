"""Functional proof: run the simulated task graph on real numpy buffers, in simulated time order.

Every intermediate buffer starts as NaN. Each task reads its inputs at its simulated start and
writes its outputs at its simulated end (events sorted by time, ends before starts at equal
times), so a task scheduled before its producer finished reads NaN or a stale value. The layer
output must then equal a dense reference MoE layer (gate -> top-k -> SwiGLU experts -> weighted
sum, plus the shared expert): a missing dependency shows up as NaN or a wrong number.
The routing (which experts) is the workload's input, as in the timing model; the gate still
computes the logits that weight each expert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from moetrace.executor.taskgraph import T

if TYPE_CHECKING:
    from moetrace.executor.run import Run


@dataclass
class Weights:
    """Random layer parameters (float64) for a small shape."""

    gate: np.ndarray  # [H, E]
    w1: np.ndarray  # [E, H, 2I] (gate | up)
    w2: np.ndarray  # [E, I, H]
    s1: np.ndarray  # [H, 2Is]
    s2: np.ndarray  # [Is, H]
    x: np.ndarray  # [ranks, T, H]


def make_weights(run: Run, seed: int = 0) -> Weights:
    sh, wl = run.workload.shape, run.workload
    rng = np.random.default_rng(seed)
    h, i, e = sh.hidden, sh.intermediate, sh.experts
    si = max(1, sh.shared_experts) * i
    return Weights(
        gate=rng.normal(0, 1 / np.sqrt(h), (h, e)),
        w1=rng.normal(0, 1 / np.sqrt(h), (e, h, 2 * i)),
        w2=rng.normal(0, 1 / np.sqrt(i), (e, i, h)),
        s1=rng.normal(0, 1 / np.sqrt(h), (h, 2 * si)),
        s2=rng.normal(0, 1 / np.sqrt(si), (si, h)),
        x=rng.normal(0, 1, (wl.ranks, wl.tokens, h)),
    )


def _silu_mul(h: np.ndarray) -> np.ndarray:
    half = h.shape[1] // 2
    g = h[:, :half]
    return np.asarray(g / (1 + np.exp(-g)) * h[:, half:])


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    ez = np.exp(z)
    return np.asarray(ez / ez.sum(axis=-1, keepdims=True))


def reference(run: Run, w: Weights) -> np.ndarray:
    """Dense MoE layer: y[r, t] = Σ_j softmax(chosen logits)_j · FFN_e_j(x) (+ shared FFN)."""
    assign = run.graph.assign
    y = np.zeros_like(w.x)
    for r in range(w.x.shape[0]):
        x = w.x[r]
        logits = x @ w.gate
        chosen = np.take_along_axis(logits, assign[r].astype(np.int64), axis=1)
        weight = _softmax(chosen)
        for j in range(assign.shape[2]):
            for e in np.unique(assign[r, :, j]):
                sel = assign[r, :, j] == e
                y[r, sel] += weight[sel, j : j + 1] * (_silu_mul(x[sel] @ w.w1[e]) @ w.w2[e])
        if run.workload.shared_expert and run.workload.shape.shared_experts:
            y[r] += _silu_mul(x @ w.s1) @ w.s2
    return y


def _csr(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return order, ptr


class PlacementError(AssertionError):
    """A task ran where its data or its expert is not: the run is not a valid EP execution."""


def placement_errors(run: Run) -> list[str]:
    """What breaks placement (empty when sound), checked on the scheduled run itself:
    - every data edge joins two tasks of one rank, except a transfer's TX -> RX;
    - every expert task (GEMM1, SwiGLU, GEMM2) is on the rank that holds its expert;
    - every task runs on a lane (core or port) of its own rank."""
    cols, t = run.graph.cols, run.timed
    rank, typ = cols["rank"], cols["type"]
    src, dst = run.graph.edge_src, run.graph.edge_dst
    hop = ((typ[src] == T["dispatch_tx"]) & (typ[dst] == T["dispatch_rx"])) | (
        (typ[src] == T["combine_tx"]) & (typ[dst] == T["combine_rx"])
    )
    out = []
    cross = (rank[src] != rank[dst]) & ~hop
    if cross.any():
        e = int(np.flatnonzero(cross)[0])
        out.append(
            f"{int(cross.sum())} data edge(s) cross ranks outside a transfer, e.g. "
            f"task {int(src[e])} (rank {int(rank[src[e]])}) -> task {int(dst[e])} "
            f"(rank {int(rank[dst[e]])})"
        )
    expert_task = np.isin(typ, [T["gemm1"], T["swiglu"], T["gemm2"]])
    holder = run.graph.expert_rank[np.where(expert_task, cols["expert"], 0)]
    wrong = expert_task & (rank != holder)
    if wrong.any():
        i = int(np.flatnonzero(wrong)[0])
        out.append(
            f"{int(wrong.sum())} expert task(s) off their expert's rank, e.g. task {i} of "
            f"expert {int(cols['expert'][i])} on rank {int(rank[i])}, held by {int(holder[i])}"
        )
    n = run.graph.n
    lane_rank = run.lane[:n] // t.lanes_per_rank
    off = lane_rank != rank
    if off.any():
        i = int(np.flatnonzero(off)[0])
        out.append(
            f"{int(off.sum())} task(s) on another rank's lane, e.g. task {i} of rank "
            f"{int(rank[i])} on a lane of rank {int(lane_rank[i])}"
        )
    return out


def execute(run: Run, w: Weights, start: np.ndarray | None = None) -> np.ndarray:
    """The layer output computed by the task graph in simulated order (NaN-initialised), after
    checking that every task ran where its data and its expert are (`placement_errors`)."""
    errors = placement_errors(run)
    if errors:
        raise PlacementError("; ".join(errors))
    g, t, wl = run.graph, run.timed, run.workload
    start = run.start if start is None else start
    rows = g.rows
    sh = wl.shape
    ep, tok, k, h, inter = wl.ranks, wl.tokens, sh.top_k, sh.hidden, sh.intermediate
    tt = max(1, wl.tile_rows // k)
    n_rows = rows.src.size
    nan = np.nan
    logits = np.full((ep, tok, sh.experts), nan)
    weight = np.full((ep, tok, k), nan)
    flag = np.full((ep, tok, k), nan)
    layout = np.full((ep, g.chunks), nan)
    y = np.full((ep, tok, h), nan)
    send, recv, ret, out = (np.full((n_rows, h), nan) for _ in range(4))
    h1 = np.full((n_rows, 2 * inter), nan)
    act = np.full((n_rows, inter), nan)
    si = max(1, sh.shared_experts) * inter
    sh1 = np.full((ep, tok, 2 * si), nan)
    sact = np.full((ep, tok, si), nan)
    comm_order, comm_ptr = _csr(rows.comm_tile, int(rows.comm_tile.max()) + 1)
    rt_order, rt_ptr = _csr(rows.row_tile, int(rows.row_tile.max()) + 1)
    cols, typ = g.cols, t.type
    first = {name: int(ids[0]) for name, ids in g.ids.items() if ids.size}
    nt = wl.n_tile

    def comm_rows(obj: int) -> np.ndarray:
        return comm_order[comm_ptr[obj] : comm_ptr[obj + 1]]

    def tile_rows(obj: int) -> np.ndarray:
        return rt_order[rt_ptr[obj] : rt_ptr[obj + 1]]

    def tokens(i: int) -> tuple[int, slice]:
        u = int(cols["token_tile"][i])
        return int(cols["rank"][i]), slice(u * tt, min(tok, (u + 1) * tt))

    def read(i: int) -> Any:
        kind = int(typ[i])
        if kind == T["gate"]:
            r, s = tokens(i)
            return lambda: logits.__setitem__((r, s), w.x[r, s] @ w.gate)
        if kind == T["topk"]:
            r, s = tokens(i)
            chosen = np.take_along_axis(logits[r, s], g.assign[r, s].astype(np.int64), axis=1)
            wt = _softmax(chosen)

            def write() -> None:
                weight[r, s], flag[r, s], y[r, s] = wt, 1.0, 0.0

            return write
        if kind == T["layout"]:
            r, c = int(cols["rank"][i]), int(cols["chunk"][i])
            toks = [u for u in range(-(-tok // tt)) if u * g.chunks // (-(-tok // tt)) == c]
            ok = (
                np.isfinite(flag[r, toks[0] * tt : min(tok, (toks[-1] + 1) * tt)]).all()
                if toks
                else True
            )
            return lambda: layout.__setitem__((r, c), 1.0 if ok else nan)
        if kind == T["permute"]:
            rr = comm_rows(i - first["permute"])
            data = (
                w.x[rows.src[rr], rows.token[rr]]
                * flag[rows.src[rr], rows.token[rr], rows.slot[rr]][:, None]
            )
            data = data * layout[int(cols["rank"][i]), int(cols["chunk"][i])]
            return lambda: send.__setitem__(rr, data)
        if kind in (T["dispatch_rx"], T["combine_rx"]):
            base = first["dispatch_rx"] if kind == T["dispatch_rx"] else first["combine_rx"]
            rr = comm_rows(i - base)
            src, dst = (send, recv) if kind == T["dispatch_rx"] else (out, ret)
            data = src[rr].copy()
            return lambda: dst.__setitem__(rr, data)
        if kind in (T["gemm1"], T["gemm2"]):
            n1 = -(-(2 * inter if kind == T["gemm1"] else h) // nt)
            obj, n = divmod(i - first["gemm1" if kind == T["gemm1"] else "gemm2"], n1)
            rr = tile_rows(obj)
            e = int(cols["expert"][i])
            cs = slice(n * nt, (n + 1) * nt)
            if kind == T["gemm1"]:
                val = recv[rr] @ w.w1[e][:, cs]
                return lambda: h1.__setitem__((rr, cs), val)
            val = act[rr] @ w.w2[e][:, cs]
            return lambda: out.__setitem__((rr, cs), val)
        if kind == T["swiglu"]:
            rr = tile_rows(i - first["swiglu"])
            val = _silu_mul(h1[rr])
            return lambda: act.__setitem__(rr, val)
        if kind == T["unpermute"]:
            rr = comm_rows(i - first["unpermute"])
            contrib = weight[rows.src[rr], rows.token[rr], rows.slot[rr]][:, None] * ret[rr]
            return lambda: np.add.at(y, (rows.src[rr], rows.token[rr]), contrib)
        if kind == T["shared_up"]:
            r, s = tokens(i)
            cs = slice(int(cols["n_tile"][i]) * nt, (int(cols["n_tile"][i]) + 1) * nt)
            val = w.x[r, s] @ w.s1[:, cs]
            return lambda: sh1.__setitem__((r, s, cs), val)
        if kind == T["shared_act"]:
            r, s = tokens(i)
            val = _silu_mul(sh1[r, s])
            return lambda: sact.__setitem__((r, s), val)
        if kind == T["shared_down"]:
            r, s = tokens(i)
            cs = slice(int(cols["n_tile"][i]) * nt, (int(cols["n_tile"][i]) + 1) * nt)
            val = sact[r, s] @ w.s2[:, cs]

            def add() -> None:
                y[r, s, cs] += val

            return add
        return None  # launches, issue/tx (the data moves on rx), completion nodes

    end = start + t.dur
    n = t.n
    times = np.concatenate([end, start])
    phase = np.concatenate([np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)])
    ids = np.concatenate([np.arange(n), np.arange(n)])
    pending: dict[int, Any] = {}
    for idx in np.lexsort((ids, phase, times)).tolist():
        i = int(ids[idx])
        if phase[idx] == 1:
            pending[i] = read(i)
        else:
            action = pending.pop(i, None)
            if action is not None:
                action()
    return y
