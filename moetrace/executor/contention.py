"""Shared HBM bandwidth: stretch the memory time of tasks by the oversubscription they run in.

Every core streams HBM at most at `hbm_core_rate`, and all of a device's traffic together at
most at `hbm_bw`. A task's durations are first computed uncontended; after the schedule is timed,
the device's HBM demand over time is the sum of each running task's average rate (its HBM bytes
over its duration), including the transfers' DMA reads (sender) and writes (receiver). Where the
demand exceeds `hbm_bw`, every task running then gets the same fraction `hbm_bw / demand` of its
rate (processor sharing), so its HBM time is multiplied by the mean oversubscription over its
interval. This is one correction step (the timings are then recomputed with the same per-core
orders), not an iteration to a fixed point: `residual_oversubscription` reports what is left.
"""

from __future__ import annotations

import numpy as np

_PACK_LIMIT = 2**62


def lex_order(*keys: np.ndarray) -> np.ndarray:
    """`np.lexsort(keys)` (last key primary, ties by index) for integer keys: one key is a
    stable argsort (fast on the nearly sorted keys here); several are packed with the index into
    one int64 and quicksorted (1.5-7x faster than lexsort on 1M rows); lexsort if that could
    overflow."""
    n = keys[0].size
    if len(keys) == 1:
        return np.argsort(keys[0], kind="stable")
    if n == 0 or not all(np.issubdtype(k.dtype, np.integer) for k in keys):
        return np.lexsort(keys)
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - low + 1 for k, low in zip(keys, lows, strict=True)]
    total = n
    for span in spans:
        total *= span
    if total >= _PACK_LIMIT:
        return np.lexsort(keys)
    packed = np.zeros(n, dtype=np.int64)
    for k, low, span in zip(reversed(keys), reversed(lows), reversed(spans), strict=True):
        packed *= span
        packed += k
        if low:
            packed -= low
    packed *= n
    packed += np.arange(n)
    return np.argsort(packed)


def demand_profile(
    rank: np.ndarray, start: np.ndarray, end: np.ndarray, rate: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-rank piecewise-constant total rate (bytes/ns) of the intervals [start, end).

    Returns (order key rank, boundary time, demand on [t_j, t_j+1), position of each interval's
    start and end boundary in that sorted list): boundaries sorted by (rank, time).
    """
    m = start.size
    b_rank = np.concatenate([rank, rank])
    b_time = np.concatenate([start, end])
    b_delta = np.concatenate([rate, -rate])
    order = lex_order(b_time, b_rank)
    demand = np.cumsum(b_delta[order])
    pos = np.empty(2 * m, dtype=np.int64)
    pos[order] = np.arange(2 * m)
    return b_rank[order], b_time[order], demand, pos


def mean_oversubscription(
    rank: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    rate: np.ndarray,
    capacity: float,
    query: np.ndarray,
) -> np.ndarray:
    """Mean of max(1, demand / capacity) over each interval `query` selects (time-weighted)."""
    s_rank, s_time, demand, pos = demand_profile(rank, start, end, rate)
    over = np.maximum(1.0, demand / capacity)
    span = np.zeros(s_time.size)
    same = s_rank[1:] == s_rank[:-1]
    span[:-1] = np.where(same, s_time[1:] - s_time[:-1], 0)
    integral = np.zeros(s_time.size + 1)
    np.cumsum(over * span, out=integral[1:])
    m = start.size
    q = np.flatnonzero(query)
    lo, hi = pos[q], pos[q + m]
    # boundaries tied at one (rank, time) are joined by zero-length spans: same integral
    length = (end[q] - start[q]).astype(np.float64)
    out = np.ones(m)
    ok = length > 0
    out[q[ok]] = (integral[hi[ok]] - integral[lo[ok]]) / length[ok]
    return np.maximum(out, 1.0)
