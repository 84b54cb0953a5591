"""Timing a task graph under a schedule: durations, edge delays, HBM shares and launches.

What differs between schedules (lanes, pools, HBM split, launches, per-task costs) is asked of
the `Schedule` the options name (`registry.get_schedule`); the schedules themselves live in
`sequential.py`, `chunked.py` and `tile.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from moetrace.executor.contention import lex_order
from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules.base import (
    POOL_AIC,
    POOL_AIV,
    POOL_AIVC,
    POOL_RX,
    POOL_STEP,
    POOL_TX,
    ScheduleOptions,
)
from moetrace.executor.schedules.registry import get_schedule
from moetrace.executor.taskgraph import AIC_TYPES, T, TaskGraph
from moetrace.executor.workload import Workload

A_INTERMEDIATE = {T["swiglu"], T["gemm2"], T["shared_act"], T["shared_down"]}
OUT_INTERMEDIATE = {T["gemm1"], T["swiglu"], T["shared_up"], T["shared_act"]}


@dataclass
class Timed:
    """A scheduled graph: tasks (graph tasks then launch nodes), durations (ns) and edges."""

    n: int
    rank: np.ndarray
    type: np.ndarray
    dur: np.ndarray  # int64 ns, >= 1
    src: np.ndarray
    dst: np.ndarray
    w: np.ndarray  # int64 ns: start[dst] >= end[src] + w
    pool: np.ndarray  # POOL_* code
    seq: np.ndarray  # order hint for FIFO lanes (links, streams)
    launch_op: list[str]  # op name of every launch node (ids n_graph, n_graph+1, ...)
    n_graph: int
    lanes_per_rank: int
    l2_intermediates: bool
    hbm_bytes: np.ndarray
    l2_bytes: np.ndarray
    list_scheduled: bool  # tile: per-core orders from the offline scheduler (staticsched.py)
    traffic_bytes: np.ndarray  # bytes each task moves through its rank's HBM (demand)
    hbm_bw: float  # device HBM bandwidth (bytes/s) shared by everything running
    flops: np.ndarray  # FLOPs of every task (0 for transfers and launches)
    is_aic: np.ndarray  # task runs on a cube core (its FLOPs count towards MFU)
    port_rate_bytes: np.ndarray  # bytes/s of transfers on their port (0 elsewhere)
    remote: np.ndarray  # transfer between two ranks (not a rank-local copy)
    # receive buffer per rank (bytes) the one-sided tile writes land in (inf: no limit) and
    # the delay (ns) of a returned credit reaching its sender (credits.py)
    recv_buffer_bytes: float = float("inf")
    credit_ns: int = 0
    # how expert weights are charged to HBM (`weight_hbm_fraction`): the trace meta says which
    weight_reads: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HbmShares:
    """Per-rank HBM rates (bytes/s): one AIC's, one vector AIV's, one link port's DMA."""

    aic: np.ndarray
    vec: np.ndarray
    port: float


def water_fill(
    cap: float, want: np.ndarray, weight: np.ndarray, cap_per_row: np.ndarray | None = None
) -> np.ndarray:
    """Split `cap` over columns (per row) in proportion to `weight`, never above `want`; what a
    capped column leaves goes to the others in the same proportion (water filling)."""
    share = np.zeros_like(want)
    free = np.ones(want.shape, dtype=bool)
    left = np.full(want.shape[0], cap) if cap_per_row is None else cap_per_row.astype(float)
    for _ in range(want.shape[1]):
        w = np.where(free, weight, 0.0)
        total = w.sum(axis=1, keepdims=True)
        offer = np.divide(w * left[:, None], total, out=np.zeros_like(w), where=total > 0)
        capped = free & (offer >= want - share)
        if not capped.any():
            share += offer
            break
        grant = np.where(capped, want - share, 0.0)
        share += grant
        left -= grant.sum(axis=1)
        free &= ~capped
    return share


def hbm_rates(
    wl: Workload,
    hw: Hardware,
    opts: ScheduleOptions,
    rank: np.ndarray,
    hbm: np.ndarray,
    is_aic: np.ndarray,
    is_vec: np.ndarray,
    port_bytes: np.ndarray,
) -> HbmShares:
    """How `hbm_bw` is shared, decided before scheduling so that no instant can exceed it.

    Where transfers overlap compute (chunked, tile) the link ports get a part in proportion to
    their share of the rank's HBM bytes (their DMA reads and writes), used up to the two ports'
    rate and never lent back. The rest is the compute budget: operator kernels run one at a
    time on the compute stream, so the running pool may use all of it (sequential: all of
    `hbm_bw`, its collectives run alone); in the tile kernel the AIC and the vector AIV pools
    split it in proportion to their HBM bytes, each capped at what its cores can stream, the
    rest going to the other (`water_fill`). Each core then streams at its pool's
    share over its cores. The shares of parties that can run together sum to at most
    `hbm_bw`, so the HBM floor holds by construction; the price is that bandwidth one party
    leaves idle is not lent to another (conservative when their phases do not overlap).
    """
    ep = wl.ranks
    cap = hw.hbm_bw
    core = hw.hbm_core_rate
    fastest = max(hw.link_rate("dispatch", ep), hw.link_rate("combine", ep))
    sched = get_schedule(opts.schedule)
    n_vec = sched.lane_layout(hw)[POOL_AIV][1]
    b_aic = np.bincount(rank[is_aic], weights=hbm[is_aic], minlength=ep)
    b_vec = np.bincount(rank[is_vec], weights=hbm[is_vec], minlength=ep)
    b_port = np.bincount(rank, weights=port_bytes, minlength=ep)
    want_aic, want_vec, want_port = hw.n_aic * core, n_vec * core, 2 * fastest
    # the ports' part is set aside first, in proportion to bytes and never above their use;
    # it is not lent back to compute, so a faster link never takes bandwidth from the cores
    if sched.collectives_alone:
        port_part = np.zeros(ep)  # collectives run alone: they get all of it while they run
        share_port = np.full(ep, min(cap, want_port))
    else:
        shared = b_port / np.maximum(b_port + b_aic + b_vec, 1.0)
        share_port = np.minimum(want_port, cap * shared)
        port_part = cap * shared
    budget = cap - port_part
    if sched.pools_together:
        wants = np.column_stack([np.full(ep, want_aic), np.full(ep, want_vec)])
        weight = np.column_stack([opts.aic_hbm_bias * b_aic + 1.0, b_vec + 1.0])
        split = water_fill(0.0, wants, weight, budget)
        share_aic, share_vec = split[:, 0], split[:, 1]
    else:  # one pool at a time on the compute stream
        share_aic, share_vec = np.minimum(budget, want_aic), np.minimum(budget, want_vec)
    # one rate for every port (TX and RX alike): the least of the ranks in the graph (a folded
    # graph holds rank 0's tasks alone, standing for every rank's)
    port = float(share_port[np.bincount(rank, minlength=ep) > 0].min()) / 2
    return HbmShares(
        np.minimum(core, share_aic / hw.n_aic), np.minimum(core, share_vec / n_vec), port
    )


def weight_hbm_fraction(
    wl: Workload,
    hw: Hardware,
    opts: ScheduleOptions,
    c: dict[str, np.ndarray],
    is_gemm: np.ndarray,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Share of each task's weight bytes read from HBM (the rest hit L2), and what the trace
    meta says about it (`weight_reads`).

    The graph's `w_hbm` (1 / an expert's row tiles) reads an expert's weights from HBM once and
    keeps them in L2 for its other row tiles. That holds only while the weights the schedule
    keeps live fit: operator kernels (grouped GEMMs) walk the experts one after another, so one
    expert's matrix is live; the tile schedule interleaves the row tiles of all local experts as
    their rows arrive, so all of them are. With a live set S and an L2 of `l2_bytes` (minus the
    intermediates it holds), a fraction f = min(1, L2 / S) of the weight reads can hit (LRU over
    a cyclic walk keeps about that share resident). An expert whose weights fit alone
    (f_alone = min(1, L2 / one expert's)) is only evicted by another expert's tiles between two
    of its own, so of its T row tiles at most min(T - 1, the other local experts' row tiles)
    re-read it: re-reads = (1 - f_alone)(T - 1) + (f_alone - f) min(T - 1, others). Balanced
    routing gives (1 - f)(T - 1), as before; a hot expert under skew is read about once, not
    once per row tile. `--no-l2`: every read goes to HBM."""
    sh = wl.shape
    sched = get_schedule(opts.schedule)
    if sched.bypass_l2(opts):
        meta = {"model": "no L2: every row tile reads its weights from HBM", "l2_hit": 0.0}
        return np.where(is_gemm, 1.0, c["w_hbm"]), meta
    one_expert = 2.0 * sh.hidden * sh.intermediate * 2  # W1 (gate|up), the larger matrix
    live_experts = sched.live_experts(wl, opts)
    room = hw.l2_bytes
    if sched.l2_intermediates(opts):
        room -= min(room / 2, hw.n_aic * wl.tile_rows * 3 * sh.intermediate * 2.0)
    room = max(room, 0.0)
    hit = min(1.0, room / (1.5 * one_expert * live_experts))
    hit_alone = min(1.0, room / (1.5 * one_expert))
    expert = c["expert"]
    row_tiles = is_gemm & (c["type"] == T["gemm1"]) & (c["n_tile"] == 0)
    tiles = np.bincount(expert[row_tiles], minlength=sh.experts).astype(np.float64)
    rank_of = np.zeros(sh.experts, dtype=np.int64)
    rank_of[expert[row_tiles]] = c["rank"][row_tiles]
    others = np.bincount(rank_of, weights=tiles, minlength=int(rank_of.max()) + 1)[rank_of] - tiles
    again = np.maximum(tiles - 1, 0.0)
    rereads = (1 - hit_alone) * again + (hit_alone - hit) * np.minimum(again, others)
    reads = 1.0 + rereads  # HBM reads of each expert's weights (per expert with row tiles)
    e = np.where(is_gemm, expert, 0)
    frac = np.where(is_gemm, c["w_hbm"] * reads[e], c["w_hbm"])
    used = tiles > 0
    meta = {
        "model": (
            "read once per expert (and micro-batch kernel), then from L2"
            if hit >= 1
            else "L2 eviction: re-reads bounded by the other experts' row tiles in between"
        ),
        "l2_hit": hit,
        "l2_hit_alone": hit_alone,
        "max_reads_per_expert": float(reads[used].max()) if used.any() else 0.0,
        "mean_reads_per_expert": float(reads[used].mean()) if used.any() else 0.0,
    }
    return frac, meta


def lane_layout(hw: Hardware, opts: ScheduleOptions) -> dict[int, tuple[int, int]]:
    """Pool -> (first lane index within the rank, number of lanes) of the options' schedule."""
    return get_schedule(opts.schedule).lane_layout(hw)


def _member(typ: np.ndarray, codes: list[int]) -> np.ndarray:
    """`np.isin(typ, codes)` for small non-negative type codes, via a lookup table (one gather)."""
    table = np.zeros(max(int(typ.max(initial=0)), *codes) + 1, dtype=bool)
    table[codes] = True
    return np.asarray(table[typ])


def _setup_ns(
    is_tx: np.ndarray,
    is_dispatch: np.ndarray,
    rank: np.ndarray,
    chunk: np.ndarray,
    seq: np.ndarray,
    setup_ns: float,
) -> np.ndarray:
    """Per all-to-all call (rank, dispatch or combine, chunk): `setup_ns` on its first transfer's
    TX (the count/notify exchange before any data moves; small messages are dominated by it)."""
    out = np.zeros(rank.size)
    if setup_ns <= 0 or not is_tx.any():
        return out
    ids = np.flatnonzero(is_tx)
    call = (rank[ids] * 2 + is_dispatch[ids]) * (int(chunk.max()) + 1) + chunk[ids]
    order = lex_order(seq[ids], call)
    first = order[np.r_[True, call[order][1:] != call[order][:-1]]]
    out[ids[first]] = setup_ns
    return out


def _ns(x: np.ndarray) -> np.ndarray:
    """Whole ns, rounded up: a task never moves its bytes faster than its rate allows."""
    return np.maximum(1, np.ceil(x - 1e-6)).astype(np.int64)


def schedule(graph: TaskGraph, wl: Workload, hw: Hardware, opts: ScheduleOptions) -> Timed:
    """Durations, edge delays and kernel launches of `graph` under `opts` on `hw`."""
    c = graph.cols
    typ, rank = c["type"], c["rank"]
    sched = get_schedule(opts.schedule)
    n = graph.n
    is_aic = _member(typ, [T[x] for x in AIC_TYPES])
    is_tx = _member(typ, [T["dispatch_tx"], T["combine_tx"]])
    is_rx = _member(typ, [T["dispatch_rx"], T["combine_rx"]])
    is_issue = _member(typ, [T["dispatch_issue"], T["combine_issue"]])
    is_done = _member(typ, [T["dispatch_done"], T["combine_done"]])
    is_vec = ~(is_aic | is_tx | is_rx | is_issue | is_done)

    live = hw.n_aic * wl.tile_rows * 3 * wl.shape.intermediate * 2.0
    l2_inter = sched.l2_intermediates(opts) and live <= hw.l2_bytes / 2
    inter_a = _member(typ, list(A_INTERMEDIATE))
    inter_o = _member(typ, list(OUT_INTERMEDIATE))
    a_hbm = np.where(inter_a, 0.0 if l2_inter else 1.0, c["a_hbm"])
    o_hbm = np.where(inter_o, 0.0 if l2_inter else 1.0, 1.0)
    is_expert_gemm = _member(typ, [T["gemm1"], T["gemm2"]])
    w_hbm, weight_reads = weight_hbm_fraction(wl, hw, opts, c, is_expert_gemm)
    if sched.bypass_l2(opts):  # --no-l2: no operand is served from L2, every read goes to HBM
        a_hbm = np.ones_like(a_hbm)
    hbm = c["a_bytes"] * a_hbm + c["w_bytes"] * w_hbm + c["out_bytes"] * o_hbm
    l2 = c["a_bytes"] + c["w_bytes"] + c["out_bytes"] - hbm
    # HBM bandwidth is shared inside the schedule: every core streams at most at the rate its
    # pool's share of `hbm_bw` allows (see `hbm_rates`), so no instant can exceed `hbm_bw`
    is_port = _member(typ, [T["dispatch_tx"], T["dispatch_rx"], T["combine_tx"], T["combine_rx"]])
    shares = hbm_rates(
        wl, hw, opts, rank, hbm, is_aic, is_vec, np.where(is_port, c["comm_bytes"], 0.0)
    )
    core_rate = np.where(is_aic, shares.aic[rank], shares.vec[rank])
    hbm_ns = np.where(is_aic | is_vec, hbm / core_rate * 1e9, 0.0)
    l2_ns = l2 / hw.l2_core_rate * 1e9
    eff = sched.gemm_eff(hw)
    flop_rate = np.where(is_aic, hw.core_peak_flops * eff, hw.vector_core_flops)
    flop_ns = c["flops"] / flop_rate * 1e9
    work_ns = np.maximum(flop_ns, hbm_ns + l2_ns)
    sync = sched.sync_ns(hw)
    extra = sync + (hw.dequeue_ns if opts.dynamic else 0.0)

    peer = c["peer"]
    local = peer == rank
    is_dispatch = _member(typ, [T["dispatch_tx"], T["dispatch_rx"]])
    ep = wl.ranks
    link_rate = np.where(is_dispatch, hw.link_rate("dispatch", ep), hw.link_rate("combine", ep))
    # a port's DMA reads (TX) or writes (RX) HBM at its rate: capped by the transfers' HBM share
    link_rate = np.where(local, shares.port, np.minimum(link_rate, shares.port))
    dur_f = np.where(is_tx | is_rx, c["comm_bytes"] / link_rate * 1e9, work_ns + extra)
    copy_ns = c["comm_bytes"] / hw.aiv_copy_bw * 1e9
    dur_f = np.where(is_issue, copy_ns + extra, dur_f)
    dur_f = np.where(is_done, hw.tile_sync_ns, dur_f)
    dur_f += _setup_ns(is_tx, is_dispatch, rank, c["chunk"], graph.seq, hw.a2a_setup_ns)
    dur = _ns(dur_f)

    src, dst = graph.edge_src, graph.edge_dst
    w = np.zeros(src.size, dtype=np.int64)
    lat = np.where(local, 0, round(hw.link_latency_ns))
    # only the few edges into transfers carry a delay: compute it on those alone
    tx_after_issue = np.flatnonzero(is_tx[dst] & is_issue[src])
    e_s, e_d = src[tx_after_issue], dst[tx_after_issue]
    rendezvous = 0 if opts.one_sided else 2 * lat[e_d]
    w[tx_after_issue] = np.maximum(round(sync) - dur[e_s], -dur[e_d]) + rendezvous
    rx_after_tx = np.flatnonzero(is_rx[dst])
    e_s, e_d = src[rx_after_tx], dst[rx_after_tx]
    w[rx_after_tx] = lat[e_d] - np.minimum(dur[e_s], dur[e_d])

    pool = np.where(is_aic, POOL_AIC, np.where(is_vec, POOL_AIV, POOL_AIVC))
    pool = np.where(is_tx, POOL_TX, np.where(is_rx, POOL_RX, np.where(is_done, POOL_STEP, pool)))
    seq = sched.transfer_seq(graph, opts)

    launch = sched.launches(graph, wl, hw, opts, n)
    l_rank, l_dur, l_pool, l_seq, l_op, e_src, e_dst = launch
    zeros = np.zeros(l_rank.size)
    # HBM traffic of every task: compute tiles their HBM bytes, transfers their DMA read (TX,
    # sender) or write (RX, receiver); the issuing AIV's copy is the TX's traffic, not counted twice
    traffic = np.where(is_tx | is_rx, c["comm_bytes"], hbm)
    return Timed(
        n=n + l_rank.size,
        rank=np.concatenate([rank, l_rank]),
        type=np.concatenate([typ, np.full(l_rank.size, T["launch"], dtype=np.int64)]),
        dur=np.concatenate([dur, l_dur]),
        src=np.concatenate([src, e_src]),
        dst=np.concatenate([dst, e_dst]),
        w=np.concatenate([w, np.zeros(e_src.size, dtype=np.int64)]),
        pool=np.concatenate([pool, l_pool]),
        seq=np.concatenate([seq, l_seq]),
        launch_op=l_op,
        n_graph=n,
        lanes_per_rank=max(b + s for b, s in lane_layout(hw, opts).values()),
        l2_intermediates=l2_inter,
        hbm_bytes=np.concatenate([hbm, np.zeros(l_rank.size)]),
        l2_bytes=np.concatenate([l2, np.zeros(l_rank.size)]),
        list_scheduled=sched.static_orders,
        traffic_bytes=np.concatenate([traffic, zeros]),
        hbm_bw=hw.hbm_bw,
        flops=np.concatenate([c["flops"], zeros]),
        is_aic=np.concatenate([is_aic, np.zeros(l_rank.size, dtype=bool)]),
        port_rate_bytes=np.concatenate([np.where(is_tx | is_rx, link_rate, 0.0), zeros]),
        remote=np.concatenate([(is_tx | is_rx) & ~local, np.zeros(l_rank.size, dtype=bool)]),
        recv_buffer_bytes=sched.recv_window(hw, opts),
        credit_ns=round(hw.link_latency_ns),
        weight_reads=weight_reads,
    )
