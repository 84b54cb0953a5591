"""The lower bound `moetrace search` prunes with: a candidate's constraints (HBM per rank,
link rate) and a makespan it cannot beat, from its routing alone (no task graph, no run).

Every simulation must take at least `estimate(cfg).lower_bound_ns`
(`test_the_lower_bound_never_beats_the_simulation`), or the search would drop a winner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.schedules import get_schedule

Config = dict[str, Any]
"""One candidate: `SimulationConfig`'s fields by name (search.Config)."""


@dataclass(frozen=True)
class Estimate:
    """What a candidate costs before any simulation: constraints and a makespan lower bound."""

    feasible: bool
    reason: str  # why not feasible ("" when feasible)
    lower_bound_ns: float
    hbm_need_bytes: float
    link_bw: float  # the slower of the dispatch and combine per-rank rates (bytes/s)
    flops: float  # the layer's cube FLOPs on all ranks
    peak_flops: float = math.nan  # all ranks' peak cube FLOP/s


def estimate(
    cfg: Config, max_hbm_per_rank: float | None = None, max_link_bw: float | None = None
) -> Estimate:
    """Validate `cfg`, check the constraints and bound its makespan (routing only, no graph).

    Constraints: the busiest rank's HBM need (weights and buffers, as `run.check_memory`
    counts it) at most `max_hbm_per_rank` and the device's HBM; the per-rank link rate the
    configuration assumes (dispatch and combine at its EP) at most `max_link_bw`."""
    from moetrace.executor.config import SimulationConfig
    from moetrace.executor.run import hbm_need, prepare
    from moetrace.executor.workload import rows_per_source_expert

    p = dict(cfg)
    try:
        wl, hw, opts, _ = prepare(SimulationConfig.build(**p))
    except ExecutorInputError as exc:
        return Estimate(False, str(exc), math.inf, math.nan, math.nan, math.nan)
    assign, expert_rank = _routed(wl)
    need = hbm_need(wl, assign, expert_rank)
    rate_d, rate_c = hw.link_rate("dispatch", wl.ranks), hw.link_rate("combine", wl.ranks)
    sh = wl.shape
    cnt = rows_per_source_expert(wl, assign).astype(np.float64)  # [source, expert]
    onehot = np.zeros((sh.experts, wl.ranks))
    onehot[np.arange(sh.experts), expert_rank] = 1.0
    rows = cnt @ onehot  # [source, destination]
    np.fill_diagonal(rows, 0.0)  # rank-local rows never cross a link
    sent, received = rows.sum(axis=1), rows.sum(axis=0)
    d_tx, d_rx = sent * wl.dispatch_row_bytes / rate_d, received * wl.dispatch_row_bytes / rate_d
    c_tx, c_rx = received * wl.combine_row_bytes / rate_c, sent * wl.combine_row_bytes / rate_c
    link_s = np.maximum(d_tx + c_tx, d_rx + c_rx)
    per_expert = cnt.sum(axis=0)
    rank_rows = np.bincount(expert_rank, weights=per_expert, minlength=wl.ranks)
    h, inter = float(sh.hidden), float(sh.intermediate)
    expert_flops = rank_rows * 6.0 * h * inter  # GEMM1 (2 x H x 2I) + GEMM2 (2 x I x H) per row
    other_flops = 2.0 * wl.tokens * h * sh.experts  # the gate GEMM of every token
    if wl.shared_expert and sh.shared_experts:
        other_flops += 6.0 * wl.tokens * h * inter * sh.shared_experts
    sched = get_schedule(opts.schedule)
    # per-core task orders (the tile schedule): per-task sync, and the planner may keep an
    # operator-level plan; otherwise operator kernels in stream order
    tile = sched.static_orders
    eff = sched.gemm_eff(hw)
    aic_rate = hw.peak_flops * eff
    # a cube task lasts at least max(FLOPs at peak x eff, its HBM bytes at one core's HBM rate)
    # plus the tile schedule's per-task sync: a rank's cube time over its cores bounds it
    used = np.bincount(expert_rank, weights=per_expert > 0, minlength=wl.ranks)
    weights = used * 3.0 * h * inter * 2  # each used expert's weights, read at least once
    aic_hbm = min(hw.hbm_bw, hw.n_aic * hw.hbm_core_rate)
    expert_s = np.maximum(expert_flops / aic_rate, weights / aic_hbm)
    aic_s = np.maximum((expert_flops + other_flops) / aic_rate, weights / aic_hbm)
    if tile:
        n1, n2 = -(-2 * sh.intermediate // wl.n_tile), -(-sh.hidden // wl.n_tile)
        row_tiles = np.bincount(
            expert_rank, weights=np.ceil(per_expert / wl.tile_rows), minlength=wl.ranks
        )
        token_tiles = -(-wl.tokens // max(1, wl.tile_rows // sh.top_k))
        per_task = sched.sync_ns(hw) + (hw.dequeue_ns if opts.dynamic else 0.0)
        aic_s = aic_s + (row_tiles * (n1 + n2) + token_tiles) * per_task * 1e-9 / hw.n_aic
    rest_s = max(float(link_s.max()), float((weights / hw.hbm_bw).max()))
    bound_s = max(float(aic_s.max()), rest_s)
    if tile:
        # the tile planner may keep an operator-level plan (chunked kernels at gemm_eff, no
        # per-task sync): the bound is the smaller of the two
        op_rate = hw.peak_flops * hw.gemm_eff
        op_s = np.maximum((expert_flops + other_flops) / op_rate, weights / aic_hbm)
        bound_s = min(bound_s, max(float(op_s.max()), rest_s))
    if not tile:
        # operator kernels in stream order: every expert GEMM of a rank starts after its first
        # micro-batch's dispatch has arrived and ends before its last one's combine is sent
        first, last = _edge_chunk_rows(wl, assign, expert_rank, opts.chunks)
        chain = (
            first.sum(axis=0) * wl.dispatch_row_bytes / rate_d
            + expert_s
            + last.sum(axis=0) * wl.combine_row_bytes / rate_c
        )
        bound_s = max(bound_s, float(chain.max()))
    reason = ""
    if max_hbm_per_rank is not None and need > max_hbm_per_rank:
        reason = f"needs {need / 1e9:.1f} GB of HBM per rank (limit {max_hbm_per_rank / 1e9:g})"
    elif need > hw.hbm_bytes:
        reason = f"needs {need / 1e9:.1f} GB of HBM per rank ({hw.name}: {hw.hbm_bytes / 1e9:g})"
    elif max_link_bw is not None and max(rate_d, rate_c) > max_link_bw:
        reason = (
            f"assumes {max(rate_d, rate_c) / 1e9:.0f} GB/s per rank "
            f"(link budget {max_link_bw / 1e9:g})"
        )
    flops = float(expert_flops.sum() + other_flops * wl.ranks)
    return Estimate(
        not reason,
        reason,
        bound_s * 1e9,
        need,
        min(rate_d, rate_c),
        flops,
        hw.peak_flops * wl.ranks,
    )


_ROUTED: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}


def _routed(wl: Any) -> tuple[np.ndarray, np.ndarray]:
    """`route(wl)` and `place(wl, ...)`, memoised over the candidates that share a routing
    (schedules, micro-batches and tiles do not change it; a skewed EP256 route takes seconds)."""
    from moetrace.executor.workload import place, route

    key = (repr(wl.shape), wl.ranks, wl.tokens, wl.routing, wl.placement, wl.seed)
    if key not in _ROUTED:
        if len(_ROUTED) >= 4:
            _ROUTED.pop(next(iter(_ROUTED)))
        assign = route(wl)
        _ROUTED[key] = (assign, place(wl, assign))
    return _ROUTED[key]


def _edge_chunk_rows(
    wl: Any, assign: np.ndarray, expert_rank: np.ndarray, chunks: int
) -> tuple[np.ndarray, np.ndarray]:
    """Remote rows [source, destination] of the first and the last micro-batch (token chunks
    as `tiling.tile_layer` cuts them: whole token tiles, `chunks` clamped to 1..token tiles)."""
    k = wl.shape.top_k
    tt = max(1, wl.tile_rows // k)
    nu = -(-wl.tokens // tt)
    chunks = max(1, min(chunks, nu))
    chunk_of_token = (np.arange(wl.tokens) // tt) * chunks // nu
    out = []
    for c in (0, chunks - 1):
        sel = assign[:, chunk_of_token == c, :].reshape(wl.ranks, -1)
        dst = expert_rank[sel].astype(np.int64) + wl.ranks * np.arange(wl.ranks)[:, None]
        rows = np.bincount(dst.ravel(), minlength=wl.ranks * wl.ranks).reshape(wl.ranks, -1)
        np.fill_diagonal(rows, 0)
        out.append(rows.astype(np.float64))
    return out[0], out[1]
