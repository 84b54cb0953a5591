"""Credit-based flow control between senders and receivers (the receive window of each rank).

A one-sided write lands in the receiver's receive buffer (`Hardware.recv_buffer_bytes`, the
HCCL window on Ascend) and stays there until the tasks that read those rows have finished; then
the receiver returns the credit, which reaches the sender one link latency later. A sender
cannot send (so cannot complete) a transfer for which the receiver has no room: with the
receiver's transfers in its port order k = 0, 1, ... (the arrival order the receive port serves)
and C_k the bytes up to and including k, transfer k may start only when every transfer i <= j(k)
has been consumed, j(k) the first with C_j >= C_k - buffer (a ring buffer: space is freed in
order). `retime_with_credits` adds that constraint to a plan's timing with its per-lane orders
kept: the result is the earliest timing of those orders that honours the buffer.

Rank-local copies do not use the window. The operator-level schedules' HCCL collectives and the
two-sided ablation copy out of the window as data arrives (the receive is posted into its
destination), so their credits are returned at the link's own rate and never bind: the limit is
applied to the one-sided tile schedule, where the GEMM reads its rows from the window.
"""

from __future__ import annotations

import math

import numpy as np

from moetrace.executor.contention import lex_order
from moetrace.executor.dag import CycleError, lane_chain, longest_path
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.schedules import POOL_RX, POOL_TX, Timed

_RANK_OFFSET = 1 << 40  # ns: separates ranks in one running maximum (runs are far shorter)
MAX_ROUNDS = 256


class CreditDeadlock(ExecutorInputError):
    """A plan's fixed order needs more receive buffer than the hardware has."""


def _ring(t: Timed, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(remote RX tasks in port order per rank, index j(k) of the transfer that must be consumed
    before each may be sent, or -1; the TX task of each) -- None when no buffer limit applies."""
    buffer = t.recv_buffer_bytes
    if not math.isfinite(buffer):
        return None
    rx = np.flatnonzero((t.pool == POOL_RX) & t.remote)
    if not rx.size:
        return None
    order = rx[lex_order(start[rx], t.rank[rx])]
    nbytes = t.traffic_bytes[order]
    too_big = nbytes > buffer
    if too_big.any():
        raise CreditDeadlock(
            f"a transfer tile of {nbytes[too_big].max() / 2**20:.2f} MiB does not fit the "
            f"{buffer / 2**20:.2f} MiB receive buffer (recv_buffer_bytes); use smaller tiles"
        )
    cum = np.cumsum(nbytes)
    rank = t.rank[order]
    first = np.r_[True, rank[1:] != rank[:-1]]
    base = np.maximum.accumulate(np.where(first, cum - nbytes, 0.0))  # bytes of earlier ranks
    j = np.searchsorted(cum, cum - buffer, side="left")
    j = np.where(cum - base > buffer, j, -1)
    sender = np.zeros(t.n, dtype=np.int64)
    into_rx = (t.pool[t.dst] == POOL_RX) & (t.pool[t.src] == POOL_TX)
    sender[t.dst[into_rx]] = t.src[into_rx]
    return order, j, sender[order]


def credit_floor(t: Timed, start: np.ndarray) -> np.ndarray | None:
    """Earliest start (ns) of every transfer's TX that the receive buffer allows under the
    timing `start` (0 where no limit), or None when no buffer limit applies."""
    ring = _ring(t, start)
    if ring is None:
        return None
    order, j, tx = ring
    end = start + t.dur
    release = np.zeros(t.n, dtype=np.int64)
    release[order] = end[order]
    rx_src = np.zeros(t.n, dtype=bool)
    rx_src[order] = True
    out_of_rx = rx_src[t.src]
    np.maximum.at(release, t.src[out_of_rx], end[t.dst[out_of_rx]])  # its readers finish
    offset = t.rank[order] * _RANK_OFFSET
    freed = np.maximum.accumulate(release[order] + offset) - offset  # in order (ring)
    floor = np.zeros(t.n, dtype=np.int64)
    bound = j >= 0
    floor[tx[bound]] = freed[j[bound]] + t.credit_ns
    return floor


def credit_edges(t: Timed, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, delay) edges reader of transfer i -> TX of the first transfer k with j(k) >= i:
    a subset of the credit constraints whose graph has a cycle exactly when the full set has
    (the receive port's lane order carries a wait on to every later transfer)."""
    empty = np.zeros(0, dtype=np.int64)
    ring = _ring(t, start)
    if ring is None:
        return empty, empty, empty
    order, j, tx = ring
    bound = np.flatnonzero(j >= 0)
    # first k (in port order) with j(k) >= i, for every i of the same rank: j is non-decreasing
    # within a rank and every rank's j lie after the earlier ranks', so one sorted search
    at = np.searchsorted(j[bound], np.arange(order.size), side="left")
    needer = np.full(order.size, -1, dtype=np.int64)
    found = at < bound.size
    needer[found] = bound[at[found]]
    rank = t.rank[order]
    needer[found] = np.where(rank[needer[found]] == rank[found], needer[found], -1)
    pos = np.full(t.n, -1, dtype=np.int64)
    pos[order] = np.arange(order.size)
    e = np.flatnonzero(pos[t.src] >= 0)
    k = needer[pos[t.src[e]]]
    keep = k >= 0
    src = t.dst[e][keep]
    return src, tx[k[keep]], np.full(src.size, t.credit_ns, dtype=np.int64)


def retime_with_credits(
    t: Timed, lane: np.ndarray, start: np.ndarray, rounds: int = MAX_ROUNDS
) -> np.ndarray:
    """Start times (ns) of the same per-lane orders as `start` (each lane in start order) with
    every transfer held back until the receiver has room for it (see the module docstring).

    Raises `CreditDeadlock` when the orders cannot honour the buffer (a wait for room that only
    a later task of the same order could free)."""
    floor = credit_floor(t, start)
    if floor is None or bool((start >= floor).all()):
        return start  # the buffer never filled: nothing changes
    a, b = lane_chain(lane, start)
    c_src, c_dst, c_w = credit_edges(t, start)
    src = np.concatenate([t.src, a, c_src])
    dst = np.concatenate([t.dst, b, c_dst])
    w = np.concatenate([t.w, np.zeros(a.size, dtype=np.int64), c_w])
    try:
        start = longest_path(t.n, t.dur, src, dst, w)
    except CycleError:
        raise CreditDeadlock(
            f"the plan's order needs more than the {t.recv_buffer_bytes / 2**20:.2f} MiB receive "
            "buffer (recv_buffer_bytes): a transfer would wait for room only a later task frees"
        ) from None
    # the subset edges hold each RX exactly; TX waits for the readers of older transfers too
    total = np.zeros(t.n, dtype=np.int64)
    for _ in range(rounds):
        floor = credit_floor(t, start)
        assert floor is not None
        if bool((start >= floor).all()):
            return start
        np.maximum(total, floor, out=total)
        start = longest_path(t.n, t.dur, src, dst, w, floor=total)
    raise CreditDeadlock(f"credit timing did not settle in {rounds} rounds")
