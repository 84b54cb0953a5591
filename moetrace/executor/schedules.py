"""Schedules: turn the task graph into timed work on lanes (durations, edge delays, launches).

- `sequential`: one kernel per operator on one stream; each kernel waits for the previous one
  on its rank (device barrier) and pays a launch; the all-to-all is an HCCL collective (no AIV),
  so GEMMs start only after every tile has arrived; intermediates go through HBM.
- `chunked`: the same kernels per micro-batch on a compute and a comm stream: chunk c's
  dispatch overlaps chunk c-1's GEMMs (coarse overlap, MindSpeed/DualPipe style).
- `tile` (HyperParallel-MoE): one kernel; static per-core task order; AIV-issued one-sided
  writes release dependents on arrival; intermediates in L2 when they fit; per-task sync.
  Ablations: one_sided=False (two-sided: a rendezvous before each transfer and no per-tile
  arrival signal, so GEMMs wait until all of a rank's dispatch has arrived), l2=False
  (intermediates via
  HBM), dynamic=True (runtime ready queue: pays a dequeue per task; order decided at run time).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from moetrace.executor.contention import lex_order
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.hardware import Hardware
from moetrace.executor.taskgraph import AIC_TYPES, TYPES, T, TaskGraph
from moetrace.executor.workload import Workload

SCHEDULES = ("sequential", "chunked", "tile")
POOL_AIC, POOL_AIV, POOL_AIVC, POOL_TX, POOL_RX, POOL_STEP, POOL_STREAM = range(7)
A_INTERMEDIATE = {T["swiglu"], T["gemm2"], T["shared_act"], T["shared_down"]}
OUT_INTERMEDIATE = {T["gemm1"], T["swiglu"], T["shared_up"], T["shared_act"]}
_COMPUTE_OPS = ("gate", "topk", "layout", "permute", "shared_up", "shared_act", "shared_down")
_EXPERT_OPS = ("gemm1", "swiglu", "gemm2")


@dataclass(frozen=True)
class ScheduleOptions:
    """Which schedule and which HyperParallel mechanisms are on."""

    schedule: str = "tile"
    chunks: int = 4
    one_sided: bool = True
    l2: bool = True
    dynamic: bool = False
    order: str = "arrival"  # tile: "arrival" (transfers in rotation order) or "expert"-major
    aic_hbm_bias: float = 1.0  # tile: weight of the AIC pool's bytes when HBM is split (plan)

    def check(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ExecutorInputError(
                f"unknown schedule {self.schedule!r} (known: {', '.join(SCHEDULES)})"
            )
        if self.order not in ("auto", "arrival", "expert"):
            raise ExecutorInputError(f"unknown order {self.order!r} (known: auto, arrival, expert)")
        if self.chunks < 1:
            raise ExecutorInputError(f"chunks must be >= 1 (got {self.chunks})")
        if self.schedule != "tile" and (not self.one_sided or not self.l2 or self.dynamic):
            raise ExecutorInputError(
                "--no-one-sided, --no-l2 and --dynamic apply to the tile schedule only"
            )


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
    n_vec = hw.n_aiv - hw.comm_aiv if opts.schedule == "tile" else hw.n_aiv
    b_aic = np.bincount(rank[is_aic], weights=hbm[is_aic], minlength=ep)
    b_vec = np.bincount(rank[is_vec], weights=hbm[is_vec], minlength=ep)
    b_port = np.bincount(rank, weights=port_bytes, minlength=ep)
    want_aic, want_vec, want_port = hw.n_aic * core, n_vec * core, 2 * fastest
    # the ports' part is set aside first, in proportion to bytes and never above their use;
    # it is not lent back to compute, so a faster link never takes bandwidth from the cores
    if opts.schedule == "sequential":
        port_part = np.zeros(ep)  # collectives run alone: they get all of it while they run
        share_port = np.full(ep, min(cap, want_port))
    else:
        shared = b_port / np.maximum(b_port + b_aic + b_vec, 1.0)
        share_port = np.minimum(want_port, cap * shared)
        port_part = cap * shared
    budget = cap - port_part
    if opts.schedule == "tile":
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
    if opts.schedule == "tile" and not opts.l2:
        meta = {"model": "no L2: every row tile reads its weights from HBM", "l2_hit": 0.0}
        return np.where(is_gemm, 1.0, c["w_hbm"]), meta
    one_expert = 2.0 * sh.hidden * sh.intermediate * 2  # W1 (gate|up), the larger matrix
    # expert-major tile order: the expert being computed and the next one starting
    live_experts = (
        1
        if opts.schedule != "tile"
        else min(2 if opts.order == "expert" else wl.experts_per_rank, wl.experts_per_rank)
    )
    room = hw.l2_bytes
    if opts.schedule == "tile" and opts.l2:
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
    """Pool -> (first lane index within the rank, number of lanes)."""
    tile = opts.schedule == "tile"
    vec = hw.n_aiv - hw.comm_aiv if tile else hw.n_aiv
    link = hw.n_aic + hw.n_aiv
    out = {
        POOL_AIC: (0, hw.n_aic),
        POOL_AIV: (hw.n_aic, vec),
        POOL_TX: (link, 1),
        POOL_RX: (link + 1, 1),
        POOL_STEP: (link + 2, 1),
    }
    if tile:
        out[POOL_AIVC] = (hw.n_aic + vec, hw.comm_aiv)
    if opts.schedule == "chunked":
        out[POOL_STREAM] = (link + 3, 1)
    return out


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
    tile = opts.schedule == "tile"
    n = graph.n
    is_aic = _member(typ, [T[x] for x in AIC_TYPES])
    is_tx = _member(typ, [T["dispatch_tx"], T["combine_tx"]])
    is_rx = _member(typ, [T["dispatch_rx"], T["combine_rx"]])
    is_issue = _member(typ, [T["dispatch_issue"], T["combine_issue"]])
    is_done = _member(typ, [T["dispatch_done"], T["combine_done"]])
    is_vec = ~(is_aic | is_tx | is_rx | is_issue | is_done)

    live = hw.n_aic * wl.tile_rows * 3 * wl.shape.intermediate * 2.0
    l2_inter = tile and opts.l2 and live <= hw.l2_bytes / 2
    inter_a = _member(typ, list(A_INTERMEDIATE))
    inter_o = _member(typ, list(OUT_INTERMEDIATE))
    a_hbm = np.where(inter_a, 0.0 if l2_inter else 1.0, c["a_hbm"])
    o_hbm = np.where(inter_o, 0.0 if l2_inter else 1.0, 1.0)
    is_expert_gemm = _member(typ, [T["gemm1"], T["gemm2"]])
    w_hbm, weight_reads = weight_hbm_fraction(wl, hw, opts, c, is_expert_gemm)
    if tile and not opts.l2:  # --no-l2: no operand is served from L2, every read goes to HBM
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
    eff = hw.tile_gemm_eff if tile else hw.gemm_eff
    flop_rate = np.where(is_aic, hw.core_peak_flops * eff, hw.vector_core_flops)
    flop_ns = c["flops"] / flop_rate * 1e9
    work_ns = np.maximum(flop_ns, hbm_ns + l2_ns)
    sync = hw.tile_sync_ns if tile else 0.0
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
    seq = (graph.seq_expert if tile and opts.order == "expert" else graph.seq).copy()

    launch = _launches(graph, wl, hw, opts, n)
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
        list_scheduled=tile,
        traffic_bytes=np.concatenate([traffic, zeros]),
        hbm_bw=hw.hbm_bw,
        flops=np.concatenate([c["flops"], zeros]),
        is_aic=np.concatenate([is_aic, np.zeros(l_rank.size, dtype=bool)]),
        port_rate_bytes=np.concatenate([np.where(is_tx | is_rx, link_rate, 0.0), zeros]),
        remote=np.concatenate([(is_tx | is_rx) & ~local, np.zeros(l_rank.size, dtype=bool)]),
        recv_buffer_bytes=hw.recv_buffer_bytes if tile and opts.one_sided else float("inf"),
        credit_ns=round(hw.link_latency_ns),
        weight_reads=weight_reads,
    )


def _kernels(
    graph: TaskGraph, opts: ScheduleOptions
) -> list[tuple[str, int, int, list[tuple[str, int]]]]:
    """Kernels in launch order: (op, chunk, stream, producer kernels on another stream)."""
    shared = "shared_up" in graph.ids
    pre = [op for op in _COMPUTE_OPS if shared or not op.startswith("shared")]
    out: list[tuple[str, int, int, list[tuple[str, int]]]] = []
    if opts.schedule == "sequential":
        for op in (*pre, "dispatch", *_EXPERT_OPS, "combine", "unpermute"):
            out.append((op, 0, 0, []))
        return out
    k = graph.chunks
    for ch in range(k):
        out += [(op, ch, 0, []) for op in pre]
    for ch in range(k):
        out.append(("dispatch", ch, 1, [("permute", ch)]))
    for ch in range(k):
        out.append(("gemm1", ch, 0, [("dispatch", ch)]))
        out += [(op, ch, 0, []) for op in _EXPERT_OPS[1:]]
    for ch in range(k):
        out.append(("combine", ch, 1, [("gemm2", ch)]))
    for ch in range(k):
        out.append(("unpermute", ch, 0, [("combine", ch)]))
    return out


def _launches(
    graph: TaskGraph, wl: Workload, hw: Hardware, opts: ScheduleOptions, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Launch nodes (one per kernel per rank) and their edges."""
    ep = wl.ranks
    typ, rank, chunk = graph.cols["type"], graph.cols["rank"], graph.cols["chunk"]
    indeg = np.bincount(graph.edge_dst, minlength=n)
    if opts.schedule == "tile":
        l_ids = n + np.arange(ep)
        roots = np.flatnonzero(indeg == 0)
        return (
            np.arange(ep),
            np.full(ep, int(hw.launch_ns) or 1, dtype=np.int64),
            np.full(ep, POOL_STEP),
            np.zeros(ep, dtype=np.int64),
            ["kernel"],
            l_ids[rank[roots]],
            roots,
        )
    kernels = _kernels(graph, opts)
    op_types = {op: [T[op]] for op in TYPES}
    op_types["dispatch"] = [T["dispatch_tx"], T["dispatch_rx"]]
    op_types["combine"] = [T["combine_tx"], T["combine_rx"]]
    nk = len(kernels)
    kernel_of = np.full(n, -1, dtype=np.int64)
    index = {(op, ch): i for i, (op, ch, _, _) in enumerate(kernels)}
    for i, (op, ch, _, _) in enumerate(kernels):
        kernel_of[np.isin(typ, op_types[op]) & (chunk == ch)] = i
    # launch node id of (rank r, kernel i) = n + r * nk + i
    l_rank = np.repeat(np.arange(ep), nk)
    l_kernel = np.tile(np.arange(nk), ep)
    comm = np.array([op in ("dispatch", "combine") for op, _, _, _ in kernels])
    l_dur = np.where(comm[l_kernel], int(hw.collective_ns) or 1, int(hw.launch_ns) or 1).astype(
        np.int64
    )
    streams = np.array([s for _, _, s, _ in kernels])
    l_pool = np.where(streams[l_kernel] == 1, POOL_STREAM, POOL_STEP)
    tasks = np.flatnonzero(kernel_of >= 0)
    e_src = [n + rank[tasks] * nk + kernel_of[tasks]]
    e_dst = [tasks]
    # task of kernel i -> launch of the next kernel on its stream and of cross-stream consumers
    nxt = np.full(nk, -1)
    for s in (0, 1):
        idx = [i for i in range(nk) if streams[i] == s]
        for a, b in itertools.pairwise(idx):
            nxt[a] = b
    consumers: list[list[int]] = [[] for _ in range(nk)]
    for i, (_, _, _, producers) in enumerate(kernels):
        for prod in producers:
            consumers[index[prod]].append(i)
        if nxt[i] >= 0:
            consumers[i].append(int(nxt[i]))
    kt = kernel_of[tasks]
    for i in range(nk):
        mine = tasks[kt == i]
        for j in consumers[i]:
            e_src.append(mine)
            e_dst.append(n + rank[mine] * nk + j)
        if not mine.size and nxt[i] >= 0:  # empty kernel: chain its launch to the next one
            e_src.append(n + np.arange(ep) * nk + i)
            e_dst.append(n + np.arange(ep) * nk + nxt[i])
    # launch i -> next launch on the same stream (keeps the stream lane well ordered)
    for i in range(nk):
        if nxt[i] >= 0:
            e_src.append(n + np.arange(ep) * nk + i)
            e_dst.append(n + np.arange(ep) * nk + nxt[i])
    ops = [f"{op}" + (f" c{ch}" if opts.schedule == "chunked" else "") for op, ch, _, _ in kernels]
    return (
        l_rank,
        l_dur,
        l_pool,
        l_kernel.astype(np.int64),
        ops,
        np.concatenate(e_src).astype(np.int64),
        np.concatenate(e_dst).astype(np.int64),
    )
