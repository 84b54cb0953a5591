"""Credit-based flow control between senders and receivers (the receive window of each rank).

A one-sided write lands in the receiver's receive buffer (`Hardware.recv_buffer_bytes`, the
HCCL window on Ascend) and stays there until the tasks that read those rows have finished; then
the receiver returns the credit, which reaches the sender one link latency later. A sender
cannot send (so cannot complete) a transfer for which the receiver has no room: when its TX
starts, the bytes the receiver's window holds for other transfers (admitted earlier, their
credits not yet back) plus its own must fit the window (space freed by any transfer is reused:
the receiver hands out offsets). `retime_with_credits` adds that constraint to a plan's timing
with its per-lane orders kept on the cores and the ports serving transfers as they become ready.

Rank-local copies do not use the window. The operator-level schedules' HCCL collectives and the
two-sided ablation copy out of the window as data arrives (the receive is posted into its
destination), so their credits are returned at the link's own rate and never bind: the limit is
applied to the one-sided tile schedule, where the GEMM reads its rows from the window.
"""

from __future__ import annotations

import math

import numpy as np

from moetrace.executor.contention import lex_order
from moetrace.executor.dag import DataEdges, chain_longest_path, chain_starts, lane_order
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.schedules import POOL_RX, POOL_TX, Timed

_RANK_OFFSET = 1 << 40  # ns: separates ranks in one running maximum (runs are far shorter)
MAX_ROUNDS = 24


class CreditDeadlock(ExecutorInputError):
    """A plan's fixed order needs more receive buffer than the hardware has."""


def _transfers(t: Timed) -> tuple[np.ndarray, np.ndarray] | None:
    """(remote RX tasks, the TX task of each), or None when no window limit applies."""
    buffer = t.recv_buffer_bytes
    if not math.isfinite(buffer):
        return None
    rx = np.flatnonzero((t.pool == POOL_RX) & t.remote)
    if not rx.size:
        return None
    too_big = t.traffic_bytes[rx] > buffer
    if too_big.any():
        raise CreditDeadlock(
            f"a transfer tile of {t.traffic_bytes[rx][too_big].max() / 2**20:.2f} MiB does not "
            f"fit the {buffer / 2**20:.2f} MiB window (recv_buffer_bytes): use smaller tiles"
        )
    sender = np.zeros(t.n, dtype=np.int64)
    into_rx = (t.pool[t.dst] == POOL_RX) & (t.pool[t.src] == POOL_TX)
    sender[t.dst[into_rx]] = t.src[into_rx]
    return rx, sender[rx]


def window_use(t: Timed, start: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Per remote transfer under the timing `start`: (RX id, TX id, bytes, admitted ns (its TX
    start), freed ns (its readers' last end + the credit's delay), bytes other transfers hold in
    the receiver's window when it is admitted). None when no window limit applies."""
    pair = _transfers(t)
    if pair is None:
        return None
    rx, tx = pair
    end = start + t.dur
    release = np.zeros(t.n, dtype=np.int64)
    release[rx] = end[rx]
    is_rx = np.zeros(t.n, dtype=bool)
    is_rx[rx] = True
    out_of_rx = is_rx[t.src]
    np.maximum.at(release, t.src[out_of_rx], end[t.dst[out_of_rx]])  # its readers finish
    nbytes = t.traffic_bytes[rx]
    admit = start[tx]
    freed = release[rx] + t.credit_ns
    offset = t.rank[rx] * _RANK_OFFSET  # earlier receivers sort first in both orders: cancel
    by_admit = lex_order(admit + offset)
    admitted_before = np.empty(rx.size)
    admitted_before[by_admit] = np.cumsum(nbytes[by_admit]) - nbytes[by_admit]
    by_free = np.argsort(freed + offset, kind="stable")
    free_keys = (freed + offset)[by_free]
    cum_freed = np.r_[0.0, np.cumsum(nbytes[by_free])]
    freed_by = cum_freed[np.searchsorted(free_keys, admit + offset, side="right")]
    return rx, tx, nbytes, admit, freed, admitted_before - freed_by


def credit_floor(t: Timed, start: np.ndarray) -> np.ndarray | None:
    """A lower bound (ns) of the start of every transfer's TX that the receive window allows
    under the timing `start` (0 where it has room), or None when no window limit applies.

    A transfer admitted when the other transfers hold more than window - its bytes waits until
    enough of them are freed (the receiver's frees in time order from its admission on)."""
    use = window_use(t, start)
    if use is None:
        return None
    rx, tx, nbytes, admit, freed, held = use
    need = held + nbytes - t.recv_buffer_bytes
    floor = np.zeros(t.n, dtype=np.int64)
    late = np.flatnonzero(need > 0)
    if not late.size:
        return floor
    offset = t.rank[rx] * _RANK_OFFSET
    by_free = np.argsort(freed + offset, kind="stable")
    free_keys = (freed + offset)[by_free]
    cum_freed = np.r_[0.0, np.cumsum(nbytes[by_free])]
    base = cum_freed[np.searchsorted(free_keys, admit[late] + offset[late], side="right")]
    at = np.searchsorted(cum_freed, base + need[late], side="left") - 1
    at = np.clip(at, 0, free_keys.size - 1)
    # past the receiver's last free: the window never has room under this timing (the next
    # round's timing decides); wait for that last free at least
    last = np.searchsorted(free_keys, offset[late] + _RANK_OFFSET, side="left") - 1
    floor[tx[late]] = np.minimum(free_keys[at], free_keys[last]) - offset[late]
    return floor


def _timed(
    t: Timed, edges: DataEdges, lane: np.ndarray, key: np.ndarray, floor: np.ndarray
) -> np.ndarray:
    """Starts (ns) of the data edges + each lane in `key` order, no task before `floor`."""
    chains = lane_order(lane, key)
    return chain_longest_path(t.dur, edges, chains, chain_starts(lane, chains), floor=floor)


def retime_with_credits(
    t: Timed,
    lane: np.ndarray,
    start: np.ndarray,
    rounds: int = MAX_ROUNDS,
    edges: DataEdges | None = None,
) -> np.ndarray:
    """Start times (ns) of the plan `start` (cores keep their order) with every transfer held
    back until its receiver has room for it (see the module docstring).

    Each round: every sender's TX gets the earliest start the window allows under the current
    timing (the floors only grow); the cores keep their order and the link ports take their
    transfers in the order they become ready, so a transfer that waits for room goes behind
    the ones that can land (a port does not stall on it). Repeated until the timing honours the
    window it was computed from: the result is then checked, not assumed. Raises
    `CreditDeadlock` if it does not settle in `rounds` rounds."""
    floor = credit_floor(t, start)
    if floor is None or bool((start >= floor).all()):
        return start  # the window never filled: nothing changes
    if edges is None:
        edges = DataEdges.build(t.n, t.src, t.dst, t.w)
    port = np.isin(t.pool, [POOL_TX, POOL_RX])
    total = np.zeros(t.n, dtype=np.int64)
    for _ in range(rounds):
        np.maximum(total, floor, out=total)
        # the current orders with the floors (no cycle: each lane in start order), then the
        # ports re-ordered by ready time as `engine.arrival_order_ports` does
        held = _timed(t, edges, lane, start, total)
        ready = total.copy()
        np.maximum.at(ready, t.dst, held[t.src] + t.dur[t.src] + t.w)
        start = _timed(t, edges, lane, np.where(port, ready, held), total)
        floor = credit_floor(t, start)
        assert floor is not None
        if bool((start >= floor).all()):
            return start
    raise CreditDeadlock(
        f"the plan's order needs more than the {t.recv_buffer_bytes / 2**20:.2f} MiB receive "
        f"buffer (recv_buffer_bytes): the waits for room did not settle in {rounds} rounds"
    )
